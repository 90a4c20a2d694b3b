# chatlab: what CI does, and what a user runs. Every target that needs
# PostgreSQL starts it when nothing answers at DATABASE_URL (a private
# cluster in .pgdata/, see scripts/ensure-postgres.sh).

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

.PHONY: help run build release test fmt fmt-check lint layering openapi openapi-check \
        docker-check k6-check db db-stop broker broker-stop ci clean-testdbs

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

run: release db ## Build (release) and run the server on embedded defaults, starting PostgreSQL if needed
	DATABASE_URL=$(DATABASE_URL) HTTP_ADDR=$(HTTP_ADDR) ./target/release/chatlab serve

build: ## Debug build of every crate
	$(CARGO) build --workspace --all-targets

release: ## Release build of the server
	$(CARGO) build --release --bin chatlab

db: ## Start PostgreSQL if nothing answers, and create the chatlab database
	@DATABASE_URL=$(DATABASE_URL) scripts/ensure-postgres.sh $(notdir $(firstword $(subst ?, ,$(DATABASE_URL))))

db-stop: ## Stop a private PostgreSQL cluster started by `make db` or `make test`
	scripts/stop-postgres.sh

test: ## Run every test against real PostgreSQL and a real Kafka-protocol broker (both started if needed)
	@DATABASE_URL=$(DATABASE_ADMIN_URL) scripts/ensure-postgres.sh
	@KAFKA_TEST_BROKERS=$(KAFKA_TEST_BROKERS) scripts/ensure-tansu.sh
	DATABASE_URL=$(DATABASE_ADMIN_URL) KAFKA_TEST_BROKERS=$(KAFKA_TEST_BROKERS) scripts/run-tests.sh

broker: ## Start tansu (a Kafka-protocol broker) on KAFKA_TEST_BROKERS if nothing answers there
	@KAFKA_TEST_BROKERS=$(KAFKA_TEST_BROKERS) scripts/ensure-tansu.sh

broker-stop: ## Stop the tansu started by `make broker` or `make test`
	scripts/stop-tansu.sh

fmt: ## Format the code
	$(CARGO) fmt --all

fmt-check: ## Fail when the code is not formatted
	$(CARGO) fmt --all -- --check

lint: layering ## Clippy on every target, warnings are errors
	$(CARGO) clippy --workspace --all-targets -- -D warnings

layering: ## Fail when the domain crate depends on an I/O crate
	@bad=$$($(CARGO) tree -p chatlab-domain -e normal --prefix none 2>/dev/null \
	    | grep -E '^(diesel|diesel-async|actix-web|actix-http|rdkafka|tokio-postgres|bb8|reqwest|tokio) ' || true); \
	if [ -n "$$bad" ]; then echo "chatlab-domain must not depend on: $$bad"; exit 1; fi; \
	echo "layering ok: chatlab-domain has no I/O dependencies"

openapi: ## Regenerate openapi/openapi.json from the code
	$(CARGO) run -q --bin chatlab -- openapi > openapi/openapi.json.tmp && mv openapi/openapi.json.tmp openapi/openapi.json

docker-check: ## Check docker/ offline (no Docker engine needed)
	python3 docker/check.py

k6-check: ## Check the k6 scripts' syntax with node (no k6 needed)
	@for f in loadtest/k6/*.js; do node --check "$$f" || exit 1; done; echo "k6 scripts ok"

clean-testdbs: ## Drop test databases left behind by interrupted test runs
	@psql "$(DATABASE_ADMIN_URL)" -XtAc "SELECT datname FROM pg_database WHERE datname LIKE 'chatlab\_test\_%' OR datname LIKE 'chatlab\_template\_%'" \
	    | while read -r db; do [ -n "$$db" ] && psql "$(DATABASE_ADMIN_URL)" -Xqc "DROP DATABASE \"$$db\" WITH (FORCE)"; done; true

ci: fmt-check lint docker-check k6-check test ## Everything CI runs
