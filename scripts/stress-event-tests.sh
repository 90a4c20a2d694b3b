#!/usr/bin/env bash
# Runs the event tests RUNS times in a row (default 50) against the broker
# at KAFKA_TEST_BROKERS, each beside BUSY busy loops (default 1: one of the
# two cores taken) and, with PRODUCE=1, beside a concurrent producer
# (chatlab-load broker-check, 300 events, 4 in flight) writing to the
# same broker. Prints one line a
# run and the failure rate; keeps the output of failed runs in
# .run/stress-events/. Exits 1 when any run failed.
#
#   RUNS=50 BUSY=1 PRODUCE=1 scripts/stress-event-tests.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
runs=${RUNS:-50}
busy=${BUSY:-1}
produce=${PRODUCE:-0}
filter=${FILTER:-events::}
out="$root/.run/stress-events"
mkdir -p "$out"
rm -f "$out"/run-*.log

# Build once and run that binary, so the runs time only the tests (and an
# edit made meanwhile does not change what is measured).
bin=$(cargo test -p chatlab-api --test api --no-run --message-format=json 2>/dev/null \
    | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
    echo "could not build the API test binary" >&2
    exit 2
fi
if [ "$produce" = 1 ]; then
    cargo build -q --release --bin chatlab-load
fi

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; }
trap cleanup EXIT
for _ in $(seq 1 "$busy"); do
    # A bounded busy loop: it ends by itself after an hour at most.
    timeout 3600 sh -c 'while :; do :; done' &
    pids+=($!)
done

failed=0
started=$(date +%s)
for i in $(seq 1 "$runs"); do
    if [ "$produce" = 1 ]; then
        # One producer pipelining 4 sends to the same broker (the pattern
        # that made tansu's memory engine lose acknowledged records), not a
        # saturating one: tansu's SQLite engine serialises its requests,
        # and a flood starves the tests' own topic creation; its database
        # also grows with every run, and it slows as it grows.
        timeout 600 ./target/release/chatlab-load broker-check --events 300 --producers 1 \
            --in-flight 4 --rounds 1 >/dev/null 2>&1 &
        producer=$!
    fi
    t0=$(date +%s.%N)
    if (cd crates/api && "$bin" "$filter") >"$out/run-$i.log" 2>&1; then
        verdict=ok
        rm -f "$out/run-$i.log"
    else
        verdict=FAILED
        failed=$((failed + 1))
    fi
    if [ "$produce" = 1 ]; then
        kill "$producer" 2>/dev/null
        wait "$producer" 2>/dev/null
    fi
    printf 'run %d: %s (%s s)\n' "$i" "$verdict" \
        "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"
done
echo "event tests: $((runs - failed)) passed, $failed failed of $runs runs ($(( $(date +%s) - started )) s; busy loops: $busy, concurrent producer: $produce)"
[ "$failed" -eq 0 ]
