#!/usr/bin/env bash
# `make loadtest-hold`: how long createChat holds its pooled connection per
# publish mode, as the broker's round-trip time grows. For each RTT in
# RTTS (default "0 5 50" ms) a release server starts on the embedded mock
# broker with that round-trip time injected (KAFKA_MOCK_BROKER_RTT_MS),
# and scripts/hold_time.py creates CHATS chats of MEMBERS members (batch)
# per publish mode, one request at a time with the modes interleaved, and
# reads the hold-time histogram of /metrics. One table, one row per RTT
# and mode, in results/hold-time-<UTC time>/results.md.
#
# Needs the release server (make load-build) and an empty database at
# LOAD_DATABASE_URL (make load-db). Traffic to 127.0.0.1 only; the server
# is stopped after each RTT.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -n "${DB_RTT:-}" ]]; then
    echo "hold-time: DB_RTT is not honoured here (this script's server reaches PostgreSQL straight);" \
        "make loadtest-kafka-distance measures the hold at a database distance" >&2
    exit 2
fi
db=${LOAD_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/chatlab_load}
rtts=${RTTS:-0 5 50}
export MEMBERS=${MEMBERS:-50} CHATS=${CHATS:-300}
export STRATEGIES=batch MODES=off,in_tx_await,in_tx_enqueue,after_commit,outbox
out=${OUT:-results/hold-time-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out/logs"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
secret=$(python3 -c 'import secrets; print(secrets.token_hex(32))')

{
    echo "# hold-time"
    echo
    echo "Connection hold of createChat (batch, $MEMBERS members) per publish mode, one client, $CHATS chats per mode with the modes interleaved, on the embedded mock broker with a round-trip time injected. $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M UTC')."
    echo
    # Where it ran, in the words of every results.md.
    "./${CHATLAB_BIN_DIR:-target/release}/chatlab-load" setting --database-url "$db" \
        --broker "Kafka's mock cluster inside the server, KAFKA_MOCK_BROKER_RTT_MS=${rtts// /, } ms injected in turn"
    echo
    echo "| broker RTT ms | strategy | publish mode | INSERTs per chat | mean hold ms | p95 hold ms (bucket bound) |"
    echo "|---|---|---|---|---|---|"
} >"$out/results.md"

for rtt in $rtts; do
    port=$(free_port) ops=$(free_port)
    log="$out/logs/server-rtt-$rtt.log"
    DATABASE_URL=$db HTTP_ADDR=127.0.0.1:$port OPS_ADDR=127.0.0.1:$ops \
        CHATLAB_JWT_SECRET=$secret CHATLAB_ALLOW_OVERRIDES=true KAFKA_MOCK_BROKER_RTT_MS=$rtt \
        RUST_LOG=warn "./${CHATLAB_BIN_DIR:-target/release}/chatlab" serve >"$log" 2>&1 &
    pid=$!
    trap 'kill $pid 2>/dev/null || true' EXIT
    for _ in $(seq 1 100); do
        curl -fsS "http://127.0.0.1:$ops/readyz" >/dev/null 2>&1 && break
        sleep 0.2
    done
    echo "hold-time: broker RTT $rtt ms" >&2
    BASE_URL=http://127.0.0.1:$port OPS_URL=http://127.0.0.1:$ops BROKER_RTT_MS=$rtt HEADER=0 \
        python3 scripts/hold_time.py >>"$out/results.md"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    trap - EXIT
done
cat "$out/results.md"
echo "results: $out/results.md"
