#!/usr/bin/env bash
# The OTLP collector frozen (it accepts connections and never answers), then
# gone (nothing listens), under createChat load with every request sampled:
# requests must not notice, spans beyond the queue are dropped and counted
# on /metrics, failed exports are counted, and the server still stops
# promptly on SIGTERM. Prints a table; fails when an invariant breaks.
#
# Everything runs on 127.0.0.1, bounded in time: DURATION of load per case
# (default 15s), a server that does not stop within STOP_BOUND seconds
# (default 15) counts as a failure and is killed. The server's operator
# listener (OPS_ADDR: /metrics, POST /v1/users/bulk) is on
# COLLECTOR_FAULT_OPS_PORT (default 18092), and it gets a CHATLAB_JWT_SECRET
# made up for the run, which chatlab-load signs its users' tokens with.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
url=${LOAD_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/chatlab_load}
duration=${DURATION:-15s}
stop_bound=${STOP_BOUND:-15}
http_port=${COLLECTOR_FAULT_HTTP_PORT:-18091}
ops_port=${COLLECTOR_FAULT_OPS_PORT:-18092}
frozen_port=${COLLECTOR_FROZEN_PORT:-14318}
gone_port=${COLLECTOR_GONE_PORT:-14319}
out="results/fault-collector-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
say() { printf 'fault-collector: %s\n' "$*" >&2; }

if (exec 3<>"/dev/tcp/127.0.0.1/$gone_port") 2>/dev/null; then
    say "something listens on $gone_port, which must stay closed; set COLLECTOR_GONE_PORT"
    exit 1
fi

# The frozen collector: accepts every connection, reads nothing, answers
# nothing, for at most ten minutes.
python3 - "$frozen_port" <<'EOF' &
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(1024)
s.settimeout(1)
held, deadline = [], time.time() + 600
while time.time() < deadline:
    try:
        held.append(s.accept()[0])
    except socket.timeout:
        pass
EOF
collector=$!
server=
cleanup() {
    [[ -n "$server" ]] && kill -9 "$server" 2>/dev/null || true
    kill "$collector" 2>/dev/null || true
}
trap cleanup EXIT

fetch() { # URL: its body on stdout (python3's, since curl may be missing)
    python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1" 2>/dev/null
}
metric() { # NAME: the value of a counter or gauge on /metrics, 0 when absent
    { fetch "http://127.0.0.1:$ops_port/metrics" || true; } | awk -v n="$1" '$1 == n || index($1, n "{") == 1 { v = $2 } END { print (v == "" ? 0 : v) }'
}

# The server's and chatlab-load's shared secret (env only: not on a
# command line, where ps would show it).
CHATLAB_JWT_SECRET=$(python3 -c 'import secrets; print(secrets.token_hex(32))')
export CHATLAB_JWT_SECRET

failed=0
check() { # CONDITION MESSAGE: records a broken invariant of the current case
    if ! eval "$1"; then say "$case: $2"; failed=1; fi
}
{
    # Where it ran, in the words of every results.md.
    "./${CHATLAB_BIN_DIR:-target/release}/chatlab-load" setting --database-url "$url"
    echo
    printf '| collector | throughput (req/s) | p99 ms | errors | spans exported | spans dropped | export failures | stop s |\n|---|---|---|---|---|---|---|---|\n'
} > "$out/results.md"
for case in off frozen gone; do
    env=(HTTP_ADDR="127.0.0.1:$http_port" OPS_ADDR="127.0.0.1:$ops_port" DATABASE_URL="$url" RUST_LOG=warn)
    case $case in
        frozen) env+=(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$frozen_port") ;;
        gone) env+=(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$gone_port") ;;
    esac
    env+=(OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf OTEL_TRACES_SAMPLER=always_on)
    env "${env[@]}" "./${CHATLAB_BIN_DIR:-target/release}/chatlab" serve > "$out/server-$case.log" 2>&1 &
    server=$!
    for _ in $(seq 1 100); do
        fetch "http://127.0.0.1:$http_port/readyz" >/dev/null \
            && fetch "http://127.0.0.1:$ops_port/readyz" >/dev/null && break
        sleep 0.1
    done
    "./${CHATLAB_BIN_DIR:-target/release}/chatlab-load" run --target "http://127.0.0.1:$http_port" \
        --ops-url "http://127.0.0.1:$ops_port" --database-url "$url" \
        --scenario create-chat --members 50 --vus 20 --duration "$duration" --seed-users 500 \
        --results-dir "$out/load-$case" > "$out/load-$case.txt" 2>&1 || true
    # The run's table row: throughput, p99 and errors by column.
    row=$(grep -E '^\| +\| - \| create-chat' "$out/load-$case.txt" | tail -1 || true)
    rps=$(awk -F'|' '{ gsub(/ /, "", $12); print $12 }' <<<"$row")
    p99=$(awk -F'|' '{ gsub(/ /, "", $15); print $15 }' <<<"$row")
    errors=$(awk -F'|' '{ gsub(/ /, "", $20); print $20 }' <<<"$row")
    exported=$(metric chatlab_otel_spans_exported_total)
    dropped=$(metric chatlab_otel_spans_dropped_total)
    failures=$(metric chatlab_otel_export_failures_total)
    started=$(date +%s.%N)
    kill -TERM "$server"
    stopped=no
    for _ in $(seq 1 $((stop_bound * 10))); do
        if ! kill -0 "$server" 2>/dev/null; then stopped=yes; break; fi
        sleep 0.1
    done
    stop_s=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
    [[ $stopped == no ]] && kill -9 "$server" 2>/dev/null
    wait "$server" 2>/dev/null || true
    server=
    printf '| %s | %s | %s | %s | %s | %s | %s | %.1f |\n' "$case" "${rps:-?}" "${p99:-?}" "${errors:-?}" \
        "$exported" "$dropped" "$failures" "$stop_s" >> "$out/results.md"
    check '[[ -n "$rps" && "${errors:-1}" == 0 ]]' "requests failed or no run (see $out/load-$case.txt)"
    check '[[ $stopped == yes ]]' "the server did not stop within ${stop_bound}s of SIGTERM"
    case $case in
        frozen) check '[[ ${dropped%.*} -gt 0 ]]' "no span was dropped although the collector never answered" ;;
        gone) check '[[ ${failures%.*} -gt 0 ]]' "no failed export was counted although nothing listened" ;;
    esac
done
cat "$out/results.md"
say "results in $out"
exit "$failed"
