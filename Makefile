# chatlab: what CI does, and what a user runs. Every target that needs
# PostgreSQL starts it when nothing answers at DATABASE_URL (a private
# cluster in .pgdata/, see scripts/ensure-postgres.sh), and every target
# installs the tools it needs when they are missing (Debian packages by
# scripts/ensure-debian.sh, cargo tools by scripts/ensure-tool.sh, tansu by
# scripts/ensure-tansu.sh), so a fresh machine needs only Rust and make.

SHELL := /bin/bash
.DEFAULT_GOAL := help

# The server the tests and tools use; tests create one database per test on it.
DATABASE_ADMIN_URL ?= postgres://postgres@127.0.0.1:5432/postgres
# The database `make run` serves from.
DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/chatlab
# The Kafka-protocol broker the tests use (tansu, started and installed if needed).
KAFKA_TEST_BROKERS ?= 127.0.0.1:9092
HTTP_ADDR ?= 127.0.0.1:8080
CARGO ?= cargo
# The blocking driver (diesel's PgConnection) links libpq: every build needs
# its headers.
LIBPQ := scripts/ensure-debian.sh libpq-dev

# Load tests. QUICK=1 shrinks every target to a few seconds (CI's smoke test).
# Each load target starts from a fresh database, LOAD_DATABASE_URL, so a run
# does not measure the tables earlier runs grew.
#
# What they run: the release build (target/release), or, with QUICK=1,
# whose figures measure nothing and only show that a target works, the
# debug build `make test` already made (target/debug), so CI builds the
# workspace once rather than twice. Under QUICK=1 the scripts and
# chatlab-load find the debug binaries through CHATLAB_BIN_DIR and
# CHATLAB_BIN; without it they run target/release, and `make test` and
# dashboard-check the debug build the tests made, as they always do.
ifeq ($(QUICK),1)
  BIN_DIR := target/debug
  BUILD_PROFILE := dev
  export CHATLAB_BIN_DIR := $(BIN_DIR)
  export CHATLAB_BIN := $(BIN_DIR)/chatlab
  export LOAD_DELAY_BIN := $(BIN_DIR)/chatlab-delay
else
  BIN_DIR := target/release
  BUILD_PROFILE := release
endif

# The database at a distance: DB_RTT=1ms (and DB_JITTER=200us) puts a delay
# hop (chatlab-delay) between PostgreSQL and everything a target connects
# to it, servers and pgbench alike; every run measures and reports the
# distance it ran at. Empty: straight, over loopback.
DB_RTT ?=
DB_JITTER ?=
ifneq ($(DB_RTT),)
  export DB_RTT
endif
ifneq ($(DB_JITTER),)
  export DB_JITTER
endif
LOAD := ./$(BIN_DIR)/chatlab-load
LOAD_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/chatlab_load
# Extra flags of load-build's cargo build: `--timings` says where a build's
# time goes (scripts/time-cold.sh --timings passes it).
LOAD_BUILD_FLAGS ?=
MEMBERS ?= 50
VUS ?= 60
DURATION ?= 30s
STRATEGY ?= batch
PUBLISH_MODE ?= off
ifeq ($(QUICK),1)
  DEMO_ARGS := --vus 10 --duration 1s --warmup 1s --rounds 2 --seed-users 300
  LOADTEST_ARGS := --vus 8 --duration 2s --seed-users 300
  CREATE_ARGS := --members $(MEMBERS) --vus 8 --duration 2s --seed-users 300
  SEED001_ARGS := --members 20,50 --vus 6,12 --duration 2s --warmup 1s --seed-users 300
  RAMP_ARGS := --stages 5:1s,10:1s,15:1s,20:1s --seed-users 300
  BASELINE_ARGS := --clients 4 --duration 2s --seed-users 300
  CROSSCHECK_ARGS := --vus 8 --duration 2s --tolerance 100
  POOL_ARGS := --vus 10,40 --duration 2s --warmup 1s --seed-users 300
  POOLSIZE_ARGS := --pool-sizes 5,10 --vus 5,20 --duration 2s --warmup 1s --seed-users 300
  DRIVER_ARGS := --vus 5,20 --duration 2s --warmup 1s --seed-users 300
  BULK_ARGS := --pool-sizes 10 --scenario import:1000:500:1,import:1000:500:4 --duration 2s --warmup 0s --seed-users 300
  CONCURRENCY_ARGS := --vus 10,100 --duration 2s --warmup 1s --seed-users 300
  TRACING_ARGS := --vus 8 --duration 1s --warmup 0s --rounds 2 --seed-users 300 --trace-fraction 0.05
  BROKER_CHECK_ARGS := --events 200 --producers 2 --rounds 1
  COLLECTOR_FAULT_DURATION := 4s
  DELIVERY_ARGS := --chats 5 --members 4 --rate 20 --duration 3s --drain 10s --strict
  DELIVERY_KILL_ARGS := --chats 5 --members 4 --rate 20 --duration 8s --kill-broker-at 2s --broker-down 2s --drain 30s --strict
  DELIVERY_BUSY_ARGS := --quiet 3s --busy 4s --drain 3s --db-rtts 0,blackhole --calibrate-for 1s --max-gap 1s --strict
  LIVE_FLEET_ARGS := --instances 3 --chats 4 --members 50 --client-processes 2 --rate 5 --duration 10s --kill-at 4s --drain 10s --p99-target 30s --strict
  HOLD_CHATS := 10
  LAYOUT_ARGS := --vus 10 --duration 2s --warmup 1s --rounds 1 --seed-users 300
  LAYOUT_RATE_ARGS := --vus 100 --duration 2s --warmup 1s --rounds 1 --seed-users 300
  LAYOUT_RATES := single:200
  LAYOUT_IMBALANCE_ARGS := --vus 3 --duration 2s --warmup 1s --rounds 1 --seed-users 300
  SYNCS_ARGS := --duration 2s --rounds 1 --seed-users 300
  FANOUT_ARGS := --members 10,50 --vus 4 --duration 1s --warmup 0s --rounds 1 --seed-users 300
  MARKERS_ARGS := --members 50 --messages 10 --rate 200 --duration 1s --rounds 1 --flush-ms 200
  CROSSOVER_ARGS := --rows 10,1000 --duration 200ms --min-transactions 2 --rounds 1
  READ_SIDE_ARGS := --members 10,50 --rate 50 --vus 8 --duration 1s --warmup 0s --rounds 1 --seed-users 300
  READ_MIXED_ARGS := --members 10,50 --rate 50 --vus 8 --duration 1s --warmup 0s --rounds 1 --seed-users 300
  DISTANCE_RTTS := 0,1ms
  DISTANCE_STRATEGIES := per_row,single
  DISTANCE_ARGS := --members 10 --vus 4 --duration 1s --warmup 0s --rounds 1 --seed-users 300 --calibrate-for 1s
  DISTANCE_MODEL_ARGS := --members 10 --vus 1 --duration 1s --warmup 0s --rounds 1 --seed-users 300 --calibrate-for 1s
  DISTANCE_DRIVERS_RTTS := 0,1ms
  DISTANCE_DRIVERS_ARGS := --members 10 --vus 4 --duration 1s --warmup 0s --rounds 1 --seed-users 300 --calibrate-for 1s
  DISTANCE_POOL_ARGS := --members 10 --rate 50 --vus 50 --duration 1s --warmup 0s --rounds 1 --seed-users 300 --calibrate-for 1s
  DISTANCE_POOLS := single:1,2
  KAFKA_DISTANCE_BROKER_RTTS := 0 5
  KAFKA_DISTANCE_DB_RTTS := 0,1ms
  KAFKA_DISTANCE_ARGS := --vus 4 --duration 1s --warmup 0s --rounds 1 --seed-users 300 --calibrate-for 1s
  KAFKA_TANSU_RTTS := 5ms
  PGBOUNCER_RTTS := 0,1ms
  PGBOUNCER_ARGS := --members 10 --vus 6 --duration 1s --warmup 0s --rounds 1 --seed-users 300 --calibrate-for 1s
else
  DEMO_ARGS := --vus 20 --duration 2s --warmup 3s --rounds 6
  LOADTEST_ARGS := --vus 40 --duration 20s
  CREATE_ARGS := --members $(MEMBERS) --vus $(VUS) --duration $(DURATION)
  SEED001_ARGS := --members 20,50 --vus 30,60,100 --duration 10s --warmup 5s --rounds 3 --baseline
  RAMP_ARGS := --stages 85:30s,200:30s,300:30s,400:30s
  BASELINE_ARGS := --clients 8,20 --duration 15s
  CROSSCHECK_ARGS := --vus 32 --duration 10s
  POOL_ARGS := --vus 50,400 --duration 8s --warmup 3s --rounds 3
  POOLSIZE_ARGS := --pool-sizes 5,10,20,40 --vus 10,25,50,100,200 --duration 5s --warmup 3s --rounds 3
  DRIVER_ARGS := --vus 10,50,200 --duration 6s --warmup 3s --rounds 3
  BULK_ARGS := --pool-sizes 10,30,60 --duration 5s --warmup 0s \
      --scenario $(shell for n in 1000 10000 100000; do for p in 1 4 8; do printf 'import:%s:1000:%s,' $$n $$p; done; done | sed 's/,$$//')
  CONCURRENCY_ARGS := --vus 10,100,1000 --duration 5s --warmup 3s --rounds 3
  TRACING_ARGS := --vus 20 --duration 15s --warmup 3s --rounds 8
  BROKER_CHECK_ARGS := --events 500 --producers 4 --in-flight 32 --rounds 10 --busy-threads 1
  COLLECTOR_FAULT_DURATION := 15s
  DELIVERY_ARGS := --chats 50 --members 20 --rate 100 --duration 30s --drain 15s
  DELIVERY_KILL_ARGS := --chats 50 --members 20 --rate 100 --duration 30s --kill-broker-at 10s --broker-down 5s --drain 30s
  DELIVERY_BUSY_ARGS :=
  LIVE_FLEET_STEADY_ARGS := --instances 6 --chats 100 --members 1000 --client-processes 8 --rate 5 --duration 60s --drain 30s
  LIVE_FLEET_ARGS := --instances 7 --chats 100 --members 1000 --client-processes 8 --rate 5 --duration 60s --kill-at 30s --drain 30s
  HOLD_CHATS := 300
  LAYOUT_ARGS := --vus 20 --duration 5s --warmup 3s --rounds 5 --baseline
  LAYOUT_RATE_ARGS := --vus 200 --duration 15s --warmup 3s --rounds 3
  LAYOUT_RATES := single:500 unnest:400 pipeline:400 batch:400 per_row:100
  LAYOUT_IMBALANCE_ARGS := --vus 2,3,4,5,8,20 --duration 10s --warmup 3s --rounds 3
  SYNCS_ARGS := --duration 10s --rounds 3
  CROSSOVER_ARGS := --duration 3s --rounds 5
  READ_SIDE_ARGS := --members 10,200,1000 --rate 100 --vus 32 --duration 10s --warmup 2s --rounds 2
  READ_MIXED_ARGS := --members 10,200,1000 --rate 200 --vus 64 --duration 10s --warmup 2s --rounds 2
  FANOUT_ARGS := --members 10,50,200,1000,5000 --vus 8 --duration 6s --warmup 2s --rounds 2
  MARKERS_ARGS := --members 1000 --messages 100 --rate 2000 --duration 10s --rounds 2 --flush-ms 500
  DISTANCE_RTTS := 0,200us,500us,1ms,2ms,5ms
  DISTANCE_STRATEGIES := per_row,batch,batch_prepared,unnest,single,pipeline
  DISTANCE_ARGS := --members 1,10,50,1000 --vus 8 --duration 3s --warmup 2s --rounds 2
  DISTANCE_MODEL_ARGS := --members 50 --vus 1 --duration 3s --warmup 2s --rounds 3
  DISTANCE_DRIVERS_RTTS := 0,500us,1ms,2ms,5ms
  DISTANCE_DRIVERS_ARGS := --members 50 --vus 20 --duration 3s --warmup 2s --rounds 2
  DISTANCE_POOL_ARGS := --members 50 --rate 500 --vus 600 --duration 6s --warmup 2s --rounds 2
  DISTANCE_POOLS := single:1,2,4 unnest:2,4,8 per_row:16,32,48
  KAFKA_DISTANCE_BROKER_RTTS := 0 1 5 20
  KAFKA_DISTANCE_DB_RTTS := 0,1ms,5ms
  KAFKA_DISTANCE_ARGS := --vus 8 --duration 3s --warmup 2s --rounds 2
  KAFKA_TANSU_RTTS := 1ms 5ms
  PGBOUNCER_RTTS := 0,1ms
  PGBOUNCER_ARGS := --members 50 --vus 60 --duration 4s --warmup 2s --rounds 3
endif
# The pool's layouts (DB_POOL_LAYOUT), one server of each, restarted and
# alternated round by round.
LAYOUT_VARIANTS := --variant shared:DB_POOL_LAYOUT=shared --variant per_worker:DB_POOL_LAYOUT=per_worker
# Fan-out on write against fan-out on read (MESSAGE_FANOUT), one server of
# each, restarted and alternated round by round.
FANOUT_VARIANTS := --variant none:MESSAGE_FANOUT=none --variant inbox:MESSAGE_FANOUT=inbox
# COPY against the INSERTs for inbox rows: the blocking driver (the only one
# that can send COPY) for every strategy, so the driver is no variable.
FANOUT_COPY_VARIANTS := --variant inbox-blocking:MESSAGE_FANOUT=inbox+DB_DRIVER=blocking
# The cost of tracing: the server as it is, and exporting spans over OTLP at
# 1% and 100% (parent-based ratio sampling), to chatlab-load's own OTLP/HTTP
# sink (the `sink` placeholder). QUICK=1 also sends a traceparent on 5% of
# requests, to exercise that path; the measured run sends none, so the
# sampler alone decides what is exported.
OTEL_SAMPLED := OTEL_EXPORTER_OTLP_ENDPOINT=sink+OTEL_TRACES_SAMPLER=parentbased_traceidratio+OTEL_TRACES_SAMPLER_ARG
TRACING_VARIANTS := --variant off --variant otlp-1pct:$(OTEL_SAMPLED)=0.01 --variant otlp-100pct:$(OTEL_SAMPLED)=1.0
# Fault experiments (scripts/fault.sh): real faults under an open-model load
# of createChat and sendMessage, on a private PostgreSQL cluster of their own
# (FAULT_PG_PORT, default 55432). Acquire timeout 2 s and statement timeout
# 5 s, so no request may wait past 8 s (7 s and a margin); 12 s where the
# broker's send timeout (3 s) adds to it. QUICK=1 is CI's form: shorter, and
# it fails when an invariant breaks.
FAULT_ENV := --env DB_POOL_ACQUIRE_TIMEOUT_MS=2000 --env DB_STATEMENT_TIMEOUT_MS=5000 \
    --env KAFKA_SEND_TIMEOUT_MS=3000 --env HTTP_SHUTDOWN_TIMEOUT_SECS=10
# A fifth of fault-db's requests move read markers (READ_MARKER_MODE=direct
# unless a variant names log or coalesced, both with inbox rows to flag).
FAULT_DB_ALL := async-pool:DB_DRIVER=async,async-shared:DB_DRIVER=async+DB_POOL_LAYOUT=shared,async-nopool:DB_DRIVER=async+DB_POOL=off,blocking-pool:DB_DRIVER=blocking,blocking-nopool:DB_DRIVER=blocking+DB_POOL=off,async-inbox:DB_DRIVER=async+MESSAGE_FANOUT=inbox,blocking-inbox-copy:DB_DRIVER=blocking+MESSAGE_FANOUT=inbox+CHAT_INSERT_STRATEGY=copy,markers-log:DB_DRIVER=async+MESSAGE_FANOUT=inbox+READ_MARKER_MODE=log,markers-coalesced:DB_DRIVER=async+MESSAGE_FANOUT=inbox+READ_MARKER_MODE=coalesced
# CI's short form keeps one variant per code path a fault can break: the
# async pool, the blocking driver, a connection per request, inbox rows and
# the coalesced markers (which hold acknowledged moves in memory). The
# shared layout, the blocking driver without a pool, COPY into inboxes and
# the marker log run in the full `make fault-db`.
ifeq ($(QUICK),1)
  FAULT_DB_VARIANTS ?= async-pool:DB_DRIVER=async,blocking-pool:DB_DRIVER=blocking,async-nopool:DB_DRIVER=async+DB_POOL=off,async-inbox:DB_DRIVER=async+MESSAGE_FANOUT=inbox,markers-coalesced:DB_DRIVER=async+MESSAGE_FANOUT=inbox+READ_MARKER_MODE=coalesced
else
  FAULT_DB_VARIANTS ?= $(FAULT_DB_ALL)
endif
FAULT_DB_MARK_SHARE ?= 0.2
# The server faults, with messages fanned out to inbox rows and without.
FAULT_SERVER_VARIANTS := async-pool:DB_DRIVER=async,async-inbox:DB_DRIVER=async+MESSAGE_FANOUT=inbox
FAULT_MODES := in_tx_await,in_tx_enqueue,after_commit,outbox
ifeq ($(QUICK),1)
  FAULT_ARGS := --rate 40 --duration 10s --fault-at 3s --strict
  FAULT_DOWN := --down 3s
  CANCEL_ARGS := --rate 30 --duration 10s --strict
  SOAK_ARGS := --rate 40 --duration 30s --strict
else
  FAULT_ARGS := --rate 150 --duration 40s --fault-at 10s
  FAULT_DOWN := --down 10s
  CANCEL_ARGS := --rate 40 --duration 120s
  SOAK_ARGS := --rate 100 --duration 600s
endif
# Runs of the event tests for `make events-stress`.
RUNS ?= 50

.PHONY: demo demo-plan loadtest loadtest-create loadtest-hold loadtest-seed001 loadtest-ramp bench-baseline \
        loadtest-crosscheck loadtest-pool loadtest-poolsize loadtest-driver loadtest-concurrency \
        loadtest-tracing loadtest-layout loadtest-syncs loadtest-fanout loadtest-fanout-copy loadtest-read-side loadtest-read-mixed loadtest-markers loadtest-crossover loadtest-distance loadtest-distance-drivers loadtest-distance-pool loadtest-kafka-distance loadtest-pgbouncer pgbouncer-matrix profile loadtest-delivery loadtest-delivery-body loadtest-delivery-broker-kill loadtest-delivery-mixed loadtest-delivery-busy loadtest-live-fleet loadtest-smoke load-build delay-build load-db broker-check events-stress \
        fault-db fault-broker fault-server fault-cancel fault-retry fault-collector fault-slow-clients soak faults
.PHONY: help run build release profiling-build test browser-test fuzz fmt fmt-check lint layering docs settings-docs schema-check deps-check \
        openapi docker-check k6-check db db-stop broker broker-stop ci clean-testdbs up down loadtest-docker dashboard-check

# UNTIL_WITHIN=5% keeps adding rounds to the demo (or any matrix target that
# passes $(PRECISION)) until every ratio its verdict uses has a 95% interval
# within ±5% of its estimate, or BUDGET runs out.
UNTIL_WITHIN ?=
BUDGET ?= 10m
PRECISION := $(if $(UNTIL_WITHIN),--until-within $(UNTIL_WITHIN) --budget $(BUDGET))
demo: demo-plan load-build load-db ## @seeds The main job: per_row vs batch vs batch_prepared vs unnest vs single vs pipeline at 50 members on embedded defaults, each beside pgbench on its SQL: a short table with 95% intervals, ties called, and the verdict
	$(LOAD) matrix --name demo --spawn 1 --database-url $(LOAD_DATABASE_URL) \
	    --strategies per_row,batch,batch_prepared,unnest,single,pipeline --members 50 --baseline --compact $(DEMO_ARGS) $(PRECISION)

demo-plan:
	@echo "make demo: 1. builds chatlab and chatlab-load (release: about 5 minutes the first time on 2 cores, results/cold-20261207T214926Z; seconds after);"
	@echo "  2. starts PostgreSQL if nothing answers at $(LOAD_DATABASE_URL), and drops and recreates that database;"
	@echo "  3. runs one chatlab server on embedded defaults (pool of cores x 2 + 1, Kafka's mock cluster in-process)"
	@echo "     and writes chats of 50 members by each of the six strategies in turn, six rounds, each run beside"
	@echo "     pgbench on its SQL; 4. prints a short table with 95% intervals and the verdict (ties called ties)."
	@echo "     Everything lands in results/demo-<UTC time>/ (UNTIL_WITHIN=5% adds rounds until the intervals are that narrow)."

# `make help` is read from this file: a `##@ <group> <title>` line names a
# group of targets by the question they answer, in the order shown, and a
# target joins a group with `## @<group> <what it does>` after its
# prerequisites. A target with `## ` but no known group is listed at the end
# under "Not grouped", so nothing drops out of the map.
##@ seeds The seeds' questions: which write strategy, pool, driver and layout, and at what cost
##@ write The write path after the chat: events, live delivery, fan-out into inboxes, the read side, read markers
##@ distance The database at a distance: what changes when PostgreSQL (and the broker) is milliseconds away
##@ faults Faults: what breaks, what is lost and what comes back
##@ dev Development and CI: build, run, test, check, render the docs, the Docker lab
help: ## @dev List the targets, grouped by the question each answers
	@awk '/^##@ / { key = $$2; line = $$0; sub(/^##@ [^ ]+ +/, "", line); order[++n] = key; title[key] = line; next } \
	    /^[a-z0-9-]+:.*## / { target = $$0; sub(/:.*/, "", target); what = $$0; sub(/^[^#]*## /, "", what); group = ""; \
	        if (what ~ /^@[a-z]+ /) { group = substr(what, 2, index(what, " ") - 2); what = substr(what, index(what, " ") + 1) } \
	        listed[group] = listed[group] sprintf("  make %-30s %s\n", target, what) } \
	    END { for (i = 1; i <= n; i++) { printf "%s%s\n%s", (i > 1 ? "\n" : ""), title[order[i]], listed[order[i]]; delete listed[order[i]] } \
	        for (group in listed) printf "\nNot grouped (%s):\n%s", (group == "" ? "no group" : "@" group), listed[group] }' $(MAKEFILE_LIST)

run: release db ## @dev Build (release) and run the server on embedded defaults, starting PostgreSQL if needed
	DATABASE_URL=$(DATABASE_URL) HTTP_ADDR=$(HTTP_ADDR) ./target/release/chatlab serve

build: ## @dev Debug build of every crate
	@$(LIBPQ)
	$(CARGO) build --workspace --all-targets

release: ## @dev Release build of the server
	@$(LIBPQ)
	$(CARGO) build --release --bin chatlab

load-build: ## @dev Release build of the server and the load tool (what the demo and every experiment run; QUICK=1: the debug build); the delay hop too when DB_RTT is set
	@$(LIBPQ)
	$(CARGO) build --profile $(BUILD_PROFILE) --bin chatlab --bin chatlab-load $(if $(DB_RTT),--bin chatlab-delay,) $(LOAD_BUILD_FLAGS)

# The delay hop, built only for the targets that put PostgreSQL (or the
# broker) at a distance (and by load-build under DB_RTT): a newcomer's
# `make demo` does not wait for it.
delay-build: load-build ## @dev The delay hop (chatlab-delay), for the targets that put PostgreSQL or the broker at a distance
	$(CARGO) build --profile $(BUILD_PROFILE) --bin chatlab-delay

profiling-build: ## @dev The server and the load tool as measured, with full debug info for perf (target/profiling/)
	@$(LIBPQ)
	$(CARGO) build --profile profiling --bin chatlab --bin chatlab-load

load-db: ## @dev (Re)create the load tests' database, empty
	@DATABASE_URL=$(LOAD_DATABASE_URL) scripts/ensure-postgres.sh
	@url='$(LOAD_DATABASE_URL)'; db=$${url##*/}; db=$${db%%\?*}; \
	  PGOPTIONS='-c client_min_messages=warning' psql "$${url%/*}/postgres" -Xq \
	    -c "DROP DATABASE IF EXISTS \"$$db\" WITH (FORCE)" -c "CREATE DATABASE \"$$db\""

loadtest: load-build load-db ## @dev A short mixed run (create/send/read) against one server
	$(LOAD) run --name loadtest --spawn 1 --database-url $(LOAD_DATABASE_URL) \
	    --scenario mix --members 20 $(LOADTEST_ARGS) --threshold 'errors<0.01'

loadtest-create: load-build load-db ## @seeds createChat: MEMBERS= VUS= DURATION= STRATEGY= PUBLISH_MODE=
	$(LOAD) run --name create-$(STRATEGY)-m$(MEMBERS) --spawn 1 --database-url $(LOAD_DATABASE_URL) \
	    --scenario create-chat --strategy $(STRATEGY) --publish-mode $(PUBLISH_MODE) $(CREATE_ARGS)

loadtest-seed001: load-build load-db ## @seeds Seed 001's grid: MEMBERS {20,50} x VUS {30,60,100} x {per_row,batch}, pool 20, 3 servers, with pgbench
	$(LOAD) matrix --name seed001 --spawn 3 --database-url $(LOAD_DATABASE_URL) \
	    --strategies per_row,batch --pool-sizes 20 $(SEED001_ARGS)

loadtest-ramp: load-build load-db ## @seeds Seed 000's ramp 85 -> 200 -> 300 -> 400 VUs on createChat (batch), with server RSS
	$(LOAD) run --name ramp --spawn 1 --database-url $(LOAD_DATABASE_URL) --scenario create-chat \
	    --members 50 --strategy batch --publish-mode off $(RAMP_ARGS)

loadtest-hold: load-build load-db ## @write Connection hold of createChat per publish mode at a broker RTT of 0, 5 and 50 ms (one client, batch, 50 members)
	LOAD_DATABASE_URL=$(LOAD_DATABASE_URL) CHATS=$(HOLD_CHATS) scripts/hold-time.sh

bench-baseline: load-build load-db ## @seeds pgbench on each strategy's createChat SQL
	$(LOAD) baseline --spawn 1 --database-url $(LOAD_DATABASE_URL) --members 50 $(BASELINE_ARGS)

loadtest-crosscheck: load-build load-db ## @dev wrk and chatlab-load on the same GET: throughputs must agree within 5%
	@scripts/ensure-debian.sh wrk --command wrk
	$(LOAD) crosscheck --spawn 1 --database-url $(LOAD_DATABASE_URL) $(CROSSCHECK_ARGS)

loadtest-pool: load-build load-db ## @seeds Seed 000: pooled vs DB_POOL=off at 50 and 400 VUs, with think time 1 s and without
	$(LOAD) matrix --name pool --spawn 1 --database-url $(LOAD_DATABASE_URL) --scenario mix \
	    --strategies - --variant pooled --variant unpooled:DB_POOL=off --think-time 1s $(POOL_ARGS)
	$(MAKE) --no-print-directory load-db
	$(LOAD) matrix --name pool-stress --spawn 1 --database-url $(LOAD_DATABASE_URL) --scenario mix \
	    --strategies - --variant pooled --variant unpooled:DB_POOL=off $(POOL_ARGS)

loadtest-poolsize: load-build load-db ## @seeds Pool size 5/10/20/40 x VUs 10..200 on createChat (batch, 50 members): where pending appears
	$(LOAD) matrix --name poolsize --spawn 1 --database-url $(LOAD_DATABASE_URL) --scenario create-chat \
	    --members 50 --strategies batch $(POOLSIZE_ARGS)

loadtest-driver: load-build load-db ## @seeds Seed 003/004: async vs blocking driver on createChat, then on bulk import jobs (dataSize x pool x parallelism)
	$(LOAD) matrix --name driver --spawn 1 --database-url $(LOAD_DATABASE_URL) --scenario create-chat \
	    --members 50 --strategies batch --variant async:DB_DRIVER=async --variant blocking:DB_DRIVER=blocking $(DRIVER_ARGS)
	$(MAKE) --no-print-directory load-db
	$(LOAD) matrix --name driver-bulk --spawn 1 --database-url $(LOAD_DATABASE_URL) --vus 1 \
	    --strategies batch --variant async:DB_DRIVER=async --variant blocking:DB_DRIVER=blocking $(BULK_ARGS)

loadtest-concurrency: load-build load-db ## @seeds Seed 002: 10, 100, 1000 concurrent connections on a read, per driver
	$(LOAD) matrix --name concurrency --spawn 1 --database-url $(LOAD_DATABASE_URL) --scenario read-messages \
	    --strategies - --variant async:DB_DRIVER=async --variant blocking:DB_DRIVER=blocking $(CONCURRENCY_ARGS)

loadtest-tracing: load-build load-db ## @seeds What tracing costs on createChat (batch, 50 members): off vs OTLP export at 1% and 100%, rounds interleaved, spans counted by a built-in sink
	$(LOAD) matrix --name tracing --spawn 1 --database-url $(LOAD_DATABASE_URL) --scenario create-chat \
	    --members 50 --strategies batch --publish-modes off $(TRACING_VARIANTS) $(TRACING_ARGS)

# Commit-to-screen latency: three instances sharing a tansu broker of the
# run's own; members connected live to instances 2 and 3, messages written
# on instance 1 at a fixed rate, once per publish mode (and the outbox with
# a 10 ms relay poll). tansu answers a fetch only when the consumer's
# fetch.wait.max.ms expires, which would put up to that much (50 ms by
# default) on every delivery whatever the mode: the run sets 10 ms, so the
# modes' own differences show. QUICK=1 (CI) fails when a delivery is lost
# or repeated.
LIVE_FETCH_WAIT_MS ?= 10
loadtest-delivery: load-build load-db ## @write Per publish mode: the writer's latency and pooled connection time beside delivery latency to live members on other instances, lost and repeated deliveries
	$(LOAD) delivery --database-url $(LOAD_DATABASE_URL) --tansu-bin $$(scripts/ensure-tansu.sh --print-bin) \
	    --env LIVE_FETCH_WAIT_MS=$(LIVE_FETCH_WAIT_MS) --out results/delivery-$$(date -u +%Y%m%dT%H%M%SZ) $(DELIVERY_ARGS)

# What the message text costs the live feed: `message.sent` carrying the
# text (LIVE_FRAME_BODY=true, the default) or only its length, with texts
# of 140 characters, under after_commit and the outbox.
DELIVERY_BODY_VARIANTS := after_commit-text:KAFKA_PUBLISH_MODE=after_commit+LIVE_FRAME_BODY=true,after_commit-length:KAFKA_PUBLISH_MODE=after_commit+LIVE_FRAME_BODY=false,outbox-text:KAFKA_PUBLISH_MODE=outbox+LIVE_FRAME_BODY=true,outbox-length:KAFKA_PUBLISH_MODE=outbox+LIVE_FRAME_BODY=false
loadtest-delivery-body: load-build load-db ## @write What carrying the text costs the live feed: frame bytes, the writer's latency and delivery p99 with LIVE_FRAME_BODY=true and false, 140-character messages
	$(LOAD) delivery --database-url $(LOAD_DATABASE_URL) --tansu-bin $$(scripts/ensure-tansu.sh --print-bin) \
	    --env LIVE_FETCH_WAIT_MS=$(LIVE_FETCH_WAIT_MS) --out results/delivery-body-$$(date -u +%Y%m%dT%H%M%SZ) \
	    --variants $(DELIVERY_BODY_VARIANTS) --body-chars 140 $(DELIVERY_ARGS)

# The live feed through a broker kill: tansu SIGKILLed while messages are
# written, and started again on its SQLite storage, the members connected
# to their instances throughout. Every message whose event reached the
# topic must reach every member once; after_commit's events that never
# reached the broker are counted apart. QUICK=1 (CI) fails otherwise. The
# send timeout outlasts the outage, as in fault-broker's kill: a timed-out
# delivery bumps the producer's epoch, which tansu's SQLite engine panics on.
DELIVERY_KILL_VARIANTS := in_tx_await:KAFKA_PUBLISH_MODE=in_tx_await,after_commit:KAFKA_PUBLISH_MODE=after_commit,outbox:KAFKA_PUBLISH_MODE=outbox
loadtest-delivery-broker-kill: load-build load-db ## @write Live delivery through a broker kill: what reached the topic reaches every member once, per publish mode
	$(LOAD) delivery --database-url $(LOAD_DATABASE_URL) --tansu-bin $$(scripts/ensure-tansu.sh --print-bin) \
	    --variants $(DELIVERY_KILL_VARIANTS) --env LIVE_FETCH_WAIT_MS=$(LIVE_FETCH_WAIT_MS) --env KAFKA_SEND_TIMEOUT_MS=15000 \
	    --out results/delivery-broker-kill-$$(date -u +%Y%m%dT%H%M%SZ) $(DELIVERY_KILL_ARGS)

# Commit-to-screen latency under a mixed load: loadtest-delivery's run
# while 8 clients create chats of other users flat out on the writers'
# instance, so what the fan-out does with each new chat shows.
loadtest-delivery-mixed: load-build load-db ## @write Commit-to-screen latency per publish mode while 8 clients create chats flat out beside the messages
	$(LOAD) delivery --database-url $(LOAD_DATABASE_URL) --tansu-bin $$(scripts/ensure-tansu.sh --print-bin) \
	    --env LIVE_FETCH_WAIT_MS=$(LIVE_FETCH_WAIT_MS) --creators 8 --out results/delivery-mixed-$$(date -u +%Y%m%dT%H%M%SZ) $(DELIVERY_ARGS)

LIVE_FLEET_FETCH_WAIT_MS ?= 50

# The live tier at fleet scale: 100,000 streams (100 chats of 1,000) from
# eight client processes through HAProxy (one process per ~9,900 streams,
# sharing the port; /readyz checked every 500 ms) on one tansu broker,
# 5 messages a second for 60 s, twice: on six instances, then on seven
# with the last killed (SIGKILL) 30 s in, which leaves the 100,000 on six
# (five cannot hold them: a process may hold 20,000 descriptors). Delivery
# p99 against 200 ms, RSS per instance, the balancer's and the broker's
# load, and what the killed instance's clients missed or got twice through
# their reconnection and how long until all were back. The instances'
# fetch wait is the server's default (50 ms; LIVE_FLEET_FETCH_WAIT_MS). QUICK=1: 200 streams on
# three instances, fails when a delivery is missing or repeated or a cut
# stream never comes back.
loadtest-live-fleet: load-build load-db ## @write The live tier at fleet scale: 100,000 streams through HAProxy to six instances, then seven with one killed mid-run
	@scripts/ensure-debian.sh haproxy --command haproxy --stop-service
	$(if $(LIVE_FLEET_STEADY_ARGS),$(LOAD) live-fleet --database-url $(LOAD_DATABASE_URL) --tansu-bin $$(scripts/ensure-tansu.sh --print-bin) \
	    --haproxy-bin $$(command -v haproxy) --env LIVE_FETCH_WAIT_MS=$(LIVE_FLEET_FETCH_WAIT_MS) \
	    --out results/live-fleet-steady-$$(date -u +%Y%m%dT%H%M%SZ) $(LIVE_FLEET_STEADY_ARGS))
	$(LOAD) live-fleet --database-url $(LOAD_DATABASE_URL) --tansu-bin $$(scripts/ensure-tansu.sh --print-bin) \
	    --haproxy-bin $$(command -v haproxy) --env LIVE_FETCH_WAIT_MS=$(LIVE_FLEET_FETCH_WAIT_MS) \
	    --out results/live-fleet-$$(date -u +%Y%m%dT%H%M%SZ) $(LIVE_FLEET_ARGS)

# Does live delivery wait on the database? A member listens on one
# instance while a sender posts to their chat every 500 ms: its latency
# from the POST's answer to the frame, quiet and then while 8 clients
# create chats flat out, per publish mode, with that instance's database
# straight, 5 ms and 20 ms away, and blackholed for the busy phase (the
# writes then go to a second instance whose database is straight). Each
# cell renders busy p99 − quiet p99 and whether it is within 100 ms.
# QUICK=1 (CI, on the debug build beside everything else): straight and
# blackholed only, fails when a message is missing or repeated or a gap
# exceeds 1 s (a wait on the dead database would never end); the 100 ms
# verdict is the release run's.
loadtest-delivery-busy: delay-build load-db ## @write Does live delivery wait on the database? A member's message latency quiet and while chats are created flat out, per publish mode, DB straight, 5 ms, 20 ms away and blackholed
	$(LOAD) delivery-busy --database-url $(LOAD_DATABASE_URL) --tansu-bin $$(scripts/ensure-tansu.sh --print-bin) \
	    --env LIVE_FETCH_WAIT_MS=$(LIVE_FETCH_WAIT_MS) --out results/delivery-busy-$$(date -u +%Y%m%dT%H%M%SZ) $(DELIVERY_BUSY_ARGS)

# What the pool's layout does, per strategy: at saturation (20 VUs) beside
# pgbench on the same SQL; at a fixed open-model rate per strategy
# (LAYOUT_RATES: strategy:req/s), where CPU and context switches per request
# compare like with like; and per_worker's price, the waits in one worker's
# slice while another's has a free connection, as the clients (and so the
# keep-alive connections per worker) get fewer.
loadtest-layout: load-build load-db ## @seeds shared vs per_worker pool layout per strategy: saturation beside pgbench, fixed rates, CPU and context switches per request, imbalanced waits
	$(LOAD) matrix --name layout --spawn 1 --database-url $(LOAD_DATABASE_URL) --scenario create-chat --members 50 \
	    --strategies per_row,batch,unnest,single,pipeline $(LAYOUT_VARIANTS) $(LAYOUT_ARGS)
	@for pair in $(LAYOUT_RATES); do \
	    $(MAKE) --no-print-directory load-db && \
	    $(LOAD) matrix --name layout-at-$${pair#*:}-$${pair%%:*} --spawn 1 --database-url $(LOAD_DATABASE_URL) \
	        --scenario create-chat --members 50 --strategies $${pair%%:*} --rate $${pair#*:} \
	        $(LAYOUT_VARIANTS) $(LAYOUT_RATE_ARGS) || exit 1; \
	done
	$(MAKE) --no-print-directory load-db
	$(LOAD) matrix --name layout-imbalance --spawn 1 --database-url $(LOAD_DATABASE_URL) --scenario create-chat --members 50 \
	    --strategies single $(LAYOUT_VARIANTS) $(LAYOUT_IMBALANCE_ARGS)

loadtest-syncs: load-build load-db ## @seeds What one Sync is worth: pipeline's transaction straight to PostgreSQL, one Sync (pgbench) against one per statement (tokio-postgres), and as one simple query
	$(LOAD) syncs --spawn 1 --database-url $(LOAD_DATABASE_URL) $(SYNCS_ARGS)

loadtest-fanout: load-build load-db ## @write sendMessage with inbox rows (one per recipient, by each strategy) against none, per chat size: req/s, p95, connection hold, rows/s, WAL per message
	$(LOAD) matrix --name fanout --spawn 1 --database-url $(LOAD_DATABASE_URL) --scenario send-message \
	    --strategies per_row,batch,unnest,single,pipeline $(FANOUT_VARIANTS) $(FANOUT_ARGS)

loadtest-fanout-copy: load-build load-db ## @write sendMessage's inbox rows by COPY against batch, unnest and single, per chat size, all on the blocking driver (the only one that can send COPY)
	$(LOAD) matrix --name fanout-copy --spawn 1 --database-url $(LOAD_DATABASE_URL) --scenario send-message \
	    --strategies batch,unnest,single,copy $(FANOUT_COPY_VARIANTS) $(FANOUT_ARGS)

# The read side of fan-out: GET /v1/me/chats (each chat's unread count and
# newest message) as members of the chats the send load of the same server
# has just written, with inbox rows and without. Sends and reads arrive at
# one fixed rate, so both fan-outs read chats of as many messages.
loadtest-read-side: load-build load-db ## @write GET /v1/me/chats with and without inbox rows, on the chats a sendMessage load just wrote, per chat size: req/s, p95, connection held
	$(LOAD) matrix --name read-side --spawn 1 --database-url $(LOAD_DATABASE_URL) --scenario send-message,my-chats \
	    --strategies unnest $(FANOUT_VARIANTS) $(READ_SIDE_ARGS)

# Reads under the writes: half the requests of one cell send into the
# chats the other half list (mix:0:1:0:1, 200 a second in all), so each
# operation's latency is the one it gets beside the other (the results'
# "By operation" table); the server-side figures are the cell's.
loadtest-read-mixed: load-build load-db ## @write GET /v1/me/chats while sendMessage writes into the same chats, 100/s each in one cell, with and without inbox rows, per chat size: each operation's latency
	$(LOAD) matrix --name read-mixed --spawn 1 --database-url $(LOAD_DATABASE_URL) --scenario mix:0:1:0:1 \
	    --strategies unnest $(FANOUT_VARIANTS) $(READ_MIXED_ARGS)

loadtest-markers: load-build load-db ## @write Read markers at 2,000 moves/s on one chat of 1,000, per READ_MARKER_MODE and fan-out: p99, row writes, HOT updates, dead tuples, deadlocks, and what a SIGKILL loses
	$(LOAD) markers --spawn 1 --database-url $(LOAD_DATABASE_URL) $(MARKERS_ARGS)

loadtest-crossover: load-build load-db ## @write Where COPY beats INSERT: one message's inbox rows by binary COPY, unnest, multi-row INSERT and INSERT ... SELECT at 10 to 25,000 rows per transaction, straight to PostgreSQL
	$(LOAD) crossover --database-url $(LOAD_DATABASE_URL) $(CROSSOVER_ARGS)

profile: load-build load-db ## @seeds Where the server's CPU goes per createChat, by function (perf on the CPU clock), per pool layout: top entries to results/profile-*/
	LOAD_DATABASE_URL=$(LOAD_DATABASE_URL) scripts/profile-server.sh

# The database at a distance: every strategy × members × RTT (a delay hop
# per distance, its own calibration), beside pgbench through the same hop;
# copy on the blocking driver (the only one that can send it); then one
# client at 50 members, where latency is the round trips and nothing
# queues: the round-trip model checked cell by cell.
loadtest-distance: delay-build load-db ## @distance The verdicts at a distance: every strategy x members {1,10,50,1000} x DB RTT {0,0.2,0.5,1,2,5 ms} beside pgbench through the same delay hop; the round-trip model checked with one client
	$(LOAD) matrix --name distance --spawn 1 --database-url $(LOAD_DATABASE_URL) --scenario create-chat \
	    --strategies $(DISTANCE_STRATEGIES) --db-rtts $(DISTANCE_RTTS) --baseline $(DISTANCE_ARGS)
	$(MAKE) --no-print-directory load-db
	$(LOAD) matrix --name distance-copy --spawn 1 --database-url $(LOAD_DATABASE_URL) --scenario create-chat \
	    --strategies copy --variant blocking:DB_DRIVER=blocking --db-rtts $(DISTANCE_RTTS) $(DISTANCE_ARGS)
	$(MAKE) --no-print-directory load-db
	$(LOAD) matrix --name distance-model --spawn 1 --database-url $(LOAD_DATABASE_URL) --scenario create-chat \
	    --strategies $(DISTANCE_STRATEGIES) --db-rtts $(DISTANCE_RTTS) $(DISTANCE_MODEL_ARGS)

# The drivers and a connection per request at a distance: single at 50
# members, 20 VUs, on the async driver, the blocking one, and DB_POOL=off
# (whose connect, startup and session SETs are round trips too).
DISTANCE_DRIVER_VARIANTS := --variant async:DB_DRIVER=async --variant blocking:DB_DRIVER=blocking --variant unpooled:DB_POOL=off
loadtest-distance-drivers: delay-build load-db ## @distance Async vs blocking driver vs a connection per request (DB_POOL=off) at a DB RTT of 0 to 5 ms: createChat (single, 50 members, 20 VUs)
	$(LOAD) matrix --name distance-drivers --spawn 1 --database-url $(LOAD_DATABASE_URL) --scenario create-chat \
	    --strategies single $(DISTANCE_DRIVER_VARIANTS) --db-rtts $(DISTANCE_DRIVERS_RTTS) $(DISTANCE_DRIVERS_ARGS)

# The pool a rate needs at a distance (Little's law: connections = rate x
# hold): 500 createChat/s (open model) at a DB RTT of 1 ms, each strategy
# on pools around what its hold predicts (DISTANCE_POOLS: strategy:sizes).
loadtest-distance-pool: delay-build load-db ## @distance The pool 500 createChat/s needs 1 ms from PostgreSQL, per strategy: pending waiters and p95 below, at and above Little's law
	@for pair in $(DISTANCE_POOLS); do \
	    $(MAKE) --no-print-directory load-db && \
	    $(LOAD) matrix --name distance-pool-$${pair%%:*} --spawn 1 --database-url $(LOAD_DATABASE_URL) \
	        --scenario create-chat --strategies $${pair%%:*} --pool-sizes $${pair#*:} --db-rtt 1ms $(DISTANCE_POOL_ARGS) || exit 1; \
	done

# Kafka at both distances: createChat publishing inside the transaction
# (in_tx_await), through the outbox or after the commit, at a database RTT
# of 0, 1 and 5 ms and a broker RTT of 0 to 20 ms (the mock cluster's
# KAFKA_MOCK_BROKER_RTT_MS); then on tansu behind a hop of its own
# (scripts/tansu-at-distance.sh) at 1 and 5 ms.
loadtest-kafka-distance: delay-build load-db ## @distance in_tx_await vs outbox vs after_commit at a DB RTT of 0-5 ms x a broker RTT of 0-20 ms (mock cluster), then on tansu behind a hop: connection hold and throughput
	$(LOAD) matrix --name kafka-distance --spawn 1 --database-url $(LOAD_DATABASE_URL) --scenario create-chat --members 50 \
	    --strategies unnest,single --publish-modes in_tx_await,outbox,after_commit \
	    $(foreach r,$(KAFKA_DISTANCE_BROKER_RTTS),--variant broker-$(r)ms:KAFKA_MOCK_BROKER_RTT_MS=$(r)) \
	    --db-rtts $(KAFKA_DISTANCE_DB_RTTS) $(KAFKA_DISTANCE_ARGS)
	@for rtt in $(KAFKA_TANSU_RTTS); do \
	    $(MAKE) --no-print-directory load-db && \
	    brokers=$$(scripts/tansu-at-distance.sh start $$rtt) && \
	    $(LOAD) matrix --name kafka-tansu-$$rtt --spawn 1 --database-url $(LOAD_DATABASE_URL) --scenario create-chat \
	        --members 50 --strategies unnest,single --publish-modes in_tx_await,outbox,after_commit \
	        --server-env KAFKA_BROKERS=$$brokers --broker "tansu (memory storage) behind a chatlab-delay hop at RTT $$rtt (scripts/tansu-at-distance.sh); that hop is not calibrated" \
	        --db-rtts $(KAFKA_DISTANCE_DB_RTTS) $(KAFKA_DISTANCE_ARGS); \
	    status=$$?; scripts/tansu-at-distance.sh stop; [ $$status -eq 0 ] || exit $$status; \
	done

# PgBouncer in transaction mode between three servers and PostgreSQL, on
# the blocking driver (the async one cannot run behind Debian's 1.18): each
# server's pool of 10 (30 client connections) shares PGBOUNCER_POOL server
# connections, against the same fleet straight to PostgreSQL with pools of
# 10 (30 server connections) and of 4 (12), and straight with the statement
# cache off, which PgBouncer requires, to tell its cost from the hop's.
# The delay hop sits in front of PgBouncer, which runs beside PostgreSQL.
PGBOUNCER_POOL ?= 12
PGBOUNCER_VARIANTS = --variant direct-10:DB_DRIVER=blocking+DB_POOL_MAX_SIZE=10 \
    --variant direct-4:DB_DRIVER=blocking+DB_POOL_MAX_SIZE=4 \
    --variant uncached-10:DB_DRIVER=blocking+DB_POOL_MAX_SIZE=10+DB_STATEMENT_CACHE=false \
    --variant pgbouncer-10:DB_DRIVER=blocking+DB_POOL_MAX_SIZE=10+DB_STATEMENT_CACHE=false+DB_SESSION_SETTINGS=false+DATABASE_URL=$(PGBOUNCER_URL)+DB_MIGRATION_URL=$(LOAD_DATABASE_URL)
loadtest-pgbouncer: delay-build load-db ## @distance Three servers through PgBouncer (transaction mode, 12 server connections) vs straight (pools of 10 and 4) at a DB RTT of 0 and 1 ms: createChat (single, per_row)
	@port=$$(scripts/pgbouncer.sh start 0 --mode transaction --pool $(PGBOUNCER_POOL)) || exit 1; \
	pooler=$$(printf '%s' '$(LOAD_DATABASE_URL)' | sed -E "s#^([a-z]+://([^@/]*@)?)[^/]+#\1127.0.0.1:$$port#"); \
	$(MAKE) --no-print-directory pgbouncer-matrix PGBOUNCER_URL="$$pooler"; \
	status=$$?; scripts/pgbouncer.sh stop $$port; exit $$status

pgbouncer-matrix: # loadtest-pgbouncer's matrix, once its PgBouncer listens at PGBOUNCER_URL
	@[ -n "$(PGBOUNCER_URL)" ] || { echo "pgbouncer-matrix: run make loadtest-pgbouncer" >&2; exit 2; }
	$(LOAD) matrix --name pgbouncer --spawn 3 --database-url $(LOAD_DATABASE_URL) --scenario create-chat \
	    --strategies single,per_row $(PGBOUNCER_VARIANTS) --db-rtts $(PGBOUNCER_RTTS) $(PGBOUNCER_ARGS)

loadtest-smoke: ## @dev Every load target but the delivery ones (which need tansu) once, a few seconds each (CI)
	$(MAKE) QUICK=1 demo loadtest loadtest-create loadtest-hold loadtest-seed001 loadtest-ramp bench-baseline loadtest-crosscheck \
	    loadtest-pool loadtest-poolsize loadtest-driver loadtest-concurrency loadtest-tracing loadtest-layout loadtest-syncs \
	    loadtest-fanout loadtest-fanout-copy loadtest-read-side loadtest-read-mixed loadtest-markers loadtest-crossover \
	    loadtest-distance loadtest-distance-drivers loadtest-distance-pool loadtest-kafka-distance loadtest-pgbouncer

broker-check: load-build ## @write Does the broker keep what it acknowledges? tansu's memory and sqlite engines under pipelined produce
	scripts/broker-check.sh $(BROKER_CHECK_ARGS)

events-stress: ## @write The event tests RUNS= times (default 50) beside a busy core and a concurrent producer
	@DATABASE_URL=$(DATABASE_ADMIN_URL) scripts/ensure-postgres.sh
	@KAFKA_TEST_BROKERS=$(KAFKA_TEST_BROKERS) scripts/ensure-tansu.sh
	DATABASE_URL=$(DATABASE_ADMIN_URL) KAFKA_TEST_BROKERS=$(KAFKA_TEST_BROKERS) RUNS=$(RUNS) BUSY=1 PRODUCE=1 \
	    TANSU_BIN=$$(scripts/ensure-tansu.sh --print-bin) scripts/stress-event-tests.sh

# The network to PostgreSQL dead (db-blackhole): the delay hop in front of
# it stops forwarding for the down time, closing nothing, then forwards
# again. Per driver and pooling, with marker moves. A connection per request
# (DB_POOL=off) fails requests after the network is back: the connects it
# gave up on reach PostgreSQL all at once and fill max_connections
# (docs/findings/faults.md). That is the configuration's
# nature, not a recovery chatlab owes, so CI's strict form leaves it out.
ifeq ($(QUICK),1)
  FAULT_BLACKHOLE_VARIANTS := async-pool:DB_DRIVER=async,blocking-pool:DB_DRIVER=blocking
else
  FAULT_BLACKHOLE_VARIANTS := async-pool:DB_DRIVER=async,blocking-pool:DB_DRIVER=blocking,async-nopool:DB_DRIVER=async+DB_POOL=off
endif
fault-db: delay-build ## @faults PostgreSQL restarted, its sessions terminated, stopped for a while, and the network to it dead: per driver, pooling, pool layout, fan-out and read-marker mode
	scripts/fault.sh fault-db --faults db-restart,db-terminate,db-stop --variants $(FAULT_DB_VARIANTS) \
	    --mark-share $(FAULT_DB_MARK_SHARE) $(FAULT_ENV) --latency-bound 8s $(FAULT_ARGS) $(FAULT_DOWN)
	scripts/fault.sh fault-db-blackhole --faults db-blackhole --variants $(FAULT_BLACKHOLE_VARIANTS) \
	    --mark-share $(FAULT_DB_MARK_SHARE) $(FAULT_ENV) --latency-bound 8s $(FAULT_ARGS) $(FAULT_DOWN)

# When deliveries time out, librdkafka bumps its producer epoch, and tansu
# 0.6's SQLite engine panics on the first produce with the bumped epoch
# (docs/findings/faults.md). So the kill (SQLite storage, which survives
# it) runs with a send timeout longer than the outage, and the freeze runs on
# tansu's memory engine with the 3 s timeout, so events do time out there and
# the table shows which modes lose them (the audit keeps the memory engine's
# own losses apart).
fault-broker: load-build ## @faults tansu killed (SIGKILL) and frozen (SIGSTOP) under load: per publish mode, events lost, outbox drain
	scripts/fault.sh fault-broker --faults broker-kill --tansu-bin $$(scripts/ensure-tansu.sh --print-bin) \
	    --publish-modes $(FAULT_MODES) $(FAULT_ENV) --env KAFKA_SEND_TIMEOUT_MS=15000 --latency-bound 20s $(FAULT_ARGS) $(FAULT_DOWN)
	scripts/fault.sh fault-broker --faults broker-freeze --tansu-bin $$(scripts/ensure-tansu.sh --print-bin) --tansu-storage memory \
	    --publish-modes $(FAULT_MODES) $(FAULT_ENV) --latency-bound 12s $(FAULT_ARGS) $(FAULT_DOWN)

fault-server: load-build ## @faults chatlab killed (SIGKILL) in outbox mode, and stopped (SIGTERM) under load, then started again
	scripts/fault.sh fault-server --faults server-kill --tansu-bin $$(scripts/ensure-tansu.sh --print-bin) \
	    --variants $(FAULT_SERVER_VARIANTS) --publish-modes outbox $(FAULT_ENV) --latency-bound 12s $(FAULT_ARGS) --down 1s
	scripts/fault.sh fault-server --faults server-term --tansu-bin $$(scripts/ensure-tansu.sh --print-bin) \
	    --variants $(FAULT_SERVER_VARIANTS) --publish-modes $(FAULT_MODES) $(FAULT_ENV) --latency-bound 12s $(FAULT_ARGS) --down 1s

fault-collector: load-build load-db ## @faults The OTLP collector frozen, then gone, under load at 100% sampling: requests unharmed, drops and failed exports counted, SIGTERM still prompt
	LOAD_DATABASE_URL=$(LOAD_DATABASE_URL) DURATION=$(COLLECTOR_FAULT_DURATION) scripts/fault-collector.sh

# QUICK=1 runs the debug build, which answers a burst of a thousand timed-out
# bodies more slowly: its sockets must be closed within the body timeout plus
# 3 s; the full run (release) keeps the bound of one second.
fault-slow-clients: load-build ## @faults 15,000 sockets send headers and one body byte, then nothing: 408s, descriptors bounded, no pooled connection held (QUICK: 2,000)
	python3 scripts/fault-slow-clients.py --database-url $(DATABASE_ADMIN_URL) $(if $(QUICK),--sockets 2000 --body-timeout-ms 3000 --hold 7 --close-slack 3)

fault-cancel: load-build ## @faults Clients hang up at random points (per_row, 200 members): nothing left open, nothing half written
	scripts/fault.sh fault-cancel --faults cancel --publish-modes $(FAULT_MODES) --members 200 --deadline 2ms..60ms \
	    --env CHAT_INSERT_STRATEGY=per_row --env KAFKA_MOCK_BROKER_RTT_MS=5 $(FAULT_ENV) $(CANCEL_ARGS)

# Clients that give up (deadline 20-150 ms against per_row writes of 200
# members) and retry up to 4 times: without a key some chats are written
# twice (counted, by creator and member set); with an Idempotency-Key none
# may be (an invariant). Then the server killed under keyed retries: a write
# whose answer the kill cut is answered from the stored key after restart.
fault-retry: load-build ## @faults Retried createChat after client timeouts, without and with Idempotency-Key, and across a server kill: chats written twice
	scripts/fault.sh fault-retry --faults cancel --publish-modes $(FAULT_MODES) --members 200 --deadline 20ms..150ms \
	    --retries 4 --env CHAT_INSERT_STRATEGY=per_row --env KAFKA_MOCK_BROKER_RTT_MS=5 $(FAULT_ENV) $(CANCEL_ARGS)
	scripts/fault.sh fault-retry-keyed --faults cancel --publish-modes $(FAULT_MODES) --members 200 --deadline 20ms..150ms \
	    --retries 4 --idempotency-keys --env CHAT_INSERT_STRATEGY=per_row --env KAFKA_MOCK_BROKER_RTT_MS=5 $(FAULT_ENV) $(CANCEL_ARGS)
	scripts/fault.sh fault-retry-keyed --faults server-kill --tansu-bin $$(scripts/ensure-tansu.sh --print-bin) \
	    --retries 8 --idempotency-keys --publish-modes outbox $(FAULT_ENV) --latency-bound 12s $(FAULT_ARGS) --down 1s

# The soak publishes to the embedded broker: its audit reads the whole
# topic (60,000 events), which tansu's SQLite engine does not serve within a
# minute.
soak: load-build ## @faults The mixed write load at a steady rate (10 min; QUICK: 30 s): slopes of RSS, connections, waiters, outbox
	scripts/fault.sh soak --faults soak \
	    --publish-modes $(FAULT_MODES) $(FAULT_ENV) --latency-bound 8s $(SOAK_ARGS)

faults: fault-db fault-broker fault-server fault-cancel fault-retry fault-collector fault-slow-clients soak ## @faults Every fault experiment, the soak included

db: ## @dev Start PostgreSQL if nothing answers, and create the chatlab database
	@DATABASE_URL=$(DATABASE_URL) scripts/ensure-postgres.sh $(notdir $(firstword $(subst ?, ,$(DATABASE_URL))))

db-stop: ## @dev Stop a private PostgreSQL cluster started by `make db` or `make test`
	scripts/stop-postgres.sh

# The dashboard check runs even when a cargo test failed (it uses the debug
# binary the tests built); either failing fails the target.
test: ## @dev Run every test against real PostgreSQL and a real Kafka-protocol broker (both started if needed), fuzz the API against its spec (schemathesis), drive the web client in Chromium, then the dashboard's queries against a real Prometheus
	@$(LIBPQ)
	@scripts/ensure-debian.sh prometheus --command prometheus --stop-service
	@DATABASE_URL=$(DATABASE_ADMIN_URL) scripts/ensure-postgres.sh
	@DATABASE_URL=$(DATABASE_ADMIN_URL) scripts/ensure-german-messages.sh
	@KAFKA_TEST_BROKERS=$(KAFKA_TEST_BROKERS) scripts/ensure-tansu.sh
	DATABASE_URL=$(DATABASE_ADMIN_URL) KAFKA_TEST_BROKERS=$(KAFKA_TEST_BROKERS) \
	    TANSU_BIN=$$(scripts/ensure-tansu.sh --print-bin) scripts/run-tests.sh; status=$$?; \
	DATABASE_URL=$(DATABASE_ADMIN_URL) scripts/fuzz-api.sh || status=1; \
	DATABASE_URL=$(DATABASE_ADMIN_URL) BROWSER_TEST_SCREENSHOT=.run/web-client.png scripts/browser-test.sh || status=1; \
	DATABASE_ADMIN_URL=$(DATABASE_ADMIN_URL) python3 scripts/dashboard-check.py || status=1; \
	exit $$status

browser-test: ## @dev The web client (web/) in Debian's Chromium against the debug server: two users, SSE and WebSocket, unread counts, a refused origin, no secret in the log (installs chromium and playwright-core once; writes docs/web-client.png)
	@DATABASE_URL=$(DATABASE_ADMIN_URL) scripts/ensure-postgres.sh
	DATABASE_URL=$(DATABASE_ADMIN_URL) scripts/browser-test.sh

fuzz: ## @dev schemathesis against the committed spec, every operation and check, seed 1 then a random one (FUZZ_SEED=, FUZZ_MAX_EXAMPLES=)
	@DATABASE_URL=$(DATABASE_ADMIN_URL) scripts/ensure-postgres.sh
	DATABASE_URL=$(DATABASE_ADMIN_URL) scripts/fuzz-api.sh

broker: ## @dev Start tansu (a Kafka-protocol broker) on KAFKA_TEST_BROKERS if nothing answers there
	@KAFKA_TEST_BROKERS=$(KAFKA_TEST_BROKERS) scripts/ensure-tansu.sh

broker-stop: ## @dev Stop the tansu started by `make broker` or `make test`
	scripts/stop-tansu.sh

fmt: ## @dev Format the code
	$(CARGO) fmt --all

fmt-check: ## @dev Fail when the code is not formatted
	$(CARGO) fmt --all -- --check

lint: layering ## @dev Clippy on every target, warnings are errors
	$(CARGO) clippy --workspace --all-targets -- -D warnings

layering: ## @dev Fail when a crate depends on a layer above it (the domain on any I/O crate, persistence or Kafka on the web)
	@scripts/layering.sh

schema-check: ## @dev Fail when crates/persistence/src/schema.rs is not what diesel print-schema generates from migrations/
	@DATABASE_URL=$(DATABASE_ADMIN_URL) scripts/ensure-postgres.sh
	@DATABASE_URL=$(DATABASE_ADMIN_URL) scripts/schema-check.sh

deps-check: ## @dev Fail on an unused dependency (cargo machete) or a licence or ban deny.toml refuses (cargo deny, offline)
	$$(scripts/ensure-tool.sh machete) --with-metadata
	$$(scripts/ensure-tool.sh deny) --offline check licenses bans

docs: settings-docs ## @dev Render every generated part of the docs: the settings, and each table of results from its committed run
	$(CARGO) run -q --bin chatlab-load -- docs

settings-docs: ## @dev Regenerate .env.example and the settings table of docs/operations.md from the declared settings
	$(CARGO) run -q --bin chatlab -- settings env > .env.example.tmp && mv .env.example.tmp .env.example
	$(CARGO) run -q --bin chatlab -- settings doc < docs/operations.md > docs/operations.md.tmp && mv docs/operations.md.tmp docs/operations.md

openapi: ## @dev Regenerate openapi/openapi.json from the code
	$(CARGO) run -q --bin chatlab -- openapi > openapi/openapi.json.tmp && mv openapi/openapi.json.tmp openapi/openapi.json

docker-check: ## @dev Check docker/ offline (no Docker engine needed): compose, the configs it mounts, the dashboard, promtool check config
	@scripts/ensure-debian.sh prometheus --command promtool --stop-service
	@python3 -c 'import yaml' 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check pyyaml
	python3 docker/check.py

# The lab of docker/compose.yaml (needs Docker): three chatlab instances
# behind nginx on DOCKER_PORT, PostgreSQL, Kafka, the OpenTelemetry
# Collector, Jaeger (16686), Prometheus (9090) and Grafana (3000).
COMPOSE ?= docker compose -f docker/compose.yaml
DOCKER_PORT ?= 8080
# The lab's operator listeners (chatlab-1..3's OPS_ADDR, published on
# loopback) and the JWT secret the three share (compose.yaml's default).
DOCKER_OPS_URLS ?= http://127.0.0.1:9464,http://127.0.0.1:9465,http://127.0.0.1:9466
DOCKER_JWT_SECRET ?= chatlab-docker-lab-secret-loopback-only-0123456789

up: ## @dev Start the Docker lab (docker/compose.yaml, built), wait until every chatlab is healthy
	CHATLAB_JWT_SECRET='$(DOCKER_JWT_SECRET)' $(COMPOSE) up --build --detach --wait

down: ## @dev Stop the Docker lab and drop its volumes
	$(COMPOSE) down --volumes --remove-orphans

loadtest-docker: load-build ## @dev The mixed run of `make loadtest` against the Docker lab's port (make up first); no servers spawned
	CHATLAB_JWT_SECRET='$(DOCKER_JWT_SECRET)' $(LOAD) run --name loadtest-docker \
	    --target http://127.0.0.1:$(DOCKER_PORT) --ops-url $(DOCKER_OPS_URLS) \
	    --scenario mix --members 20 $(LOADTEST_ARGS) --threshold 'errors<0.01'

dashboard-check: ## @dev Every query of docker/'s Grafana dashboard against Debian's Prometheus scraping a live chatlab under a short load
	@scripts/ensure-debian.sh prometheus --command prometheus --stop-service
	@DATABASE_URL=$(DATABASE_ADMIN_URL) scripts/ensure-postgres.sh
	DATABASE_ADMIN_URL=$(DATABASE_ADMIN_URL) python3 scripts/dashboard-check.py

k6-check: ## @dev Run the k6 scripts under node against stubs of k6's modules: scenarios, thresholds, tags, headers (no k6 needed)
	@scripts/ensure-debian.sh nodejs --command node
	@node loadtest/k6/check.mjs

clean-testdbs: ## @dev Drop test databases (and the connection-limit roles of the unpooled test) left behind
	@psql "$(DATABASE_ADMIN_URL)" -XtAc "SELECT datname FROM pg_database WHERE datname LIKE 'chatlab\_test\_%' OR datname LIKE 'chatlab\_template\_%'" \
	    | while read -r db; do [ -n "$$db" ] && psql "$(DATABASE_ADMIN_URL)" -Xqc "DROP DATABASE \"$$db\" WITH (FORCE)"; done; true
	@psql "$(DATABASE_ADMIN_URL)" -XtAc "SELECT rolname FROM pg_roles WHERE rolname LIKE 'chatlab\_test\_%\_role'" \
	    | while read -r r; do [ -n "$$r" ] && psql "$(DATABASE_ADMIN_URL)" -Xqc "DROP ROLE \"$$r\""; done; true

ci: fmt-check lint docker-check k6-check test schema-check deps-check ## @dev The checks CI runs (CI also runs the QUICK load and fault targets)
