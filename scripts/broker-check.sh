#!/usr/bin/env bash
# Does the broker keep what it acknowledges? Starts tansu once per storage
# engine (STORAGES, default "memory sqlite") on its own loopback port, runs
# `chatlab-load broker-check` against it with the given flags, stops it, and
# writes the tables to results/broker-check-<timestamp>/results.md. Exits 1
# when an engine in MUST_KEEP (default "sqlite", the one the tests use) lost
# or misplaced an acknowledged record; the others are reported, not judged.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
storages=${STORAGES:-memory sqlite}
must_keep=${MUST_KEEP:-sqlite}
out="results/broker-check-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
port=19092
status=0
{
    echo "# Does the broker keep what it acknowledges?"
    echo
    echo "tansu 0.6.0 on loopback ($(scripts/ensure-tansu.sh --print-bin)); \`chatlab-load broker-check $*\`; $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC')."
    echo
    # Where it ran, in the words of every results.md (no database here).
    "./${CHATLAB_BIN_DIR:-target/release}/chatlab-load" setting \
        --broker "tansu 0.6.0 on loopback, started here per storage engine; its round trip not measured"
} >"$out/results.md"
for storage in $storages; do
    port=$((port + 1))
    export KAFKA_TEST_BROKERS=127.0.0.1:$port
    if ! TANSU_STORAGE=$storage scripts/ensure-tansu.sh; then
        echo "could not start tansu with $storage storage" >&2
        exit 2
    fi
    printf '\n## %s storage\n\n' "$storage" >>"$out/results.md"
    "./${CHATLAB_BIN_DIR:-target/release}/chatlab-load" broker-check --brokers "$KAFKA_TEST_BROKERS" "$@" \
        | tee -a "$out/results.md"
    verdict=${PIPESTATUS[0]}
    kill "$(cat ".run/tansu-$port.pid")" 2>/dev/null
    rm -f ".run/tansu-$port.pid"
    if [ "$verdict" -ne 0 ] && [[ " $must_keep " == *" $storage "* ]]; then
        echo "FAIL: tansu with $storage storage lost or misplaced acknowledged records" >&2
        status=1
    fi
done
echo "results: $out"
exit "$status"
