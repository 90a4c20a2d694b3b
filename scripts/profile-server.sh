#!/usr/bin/env bash
# `make profile`: where the server's CPU goes per createChat, by function.
# For each pool layout in LAYOUTS (default "shared per_worker") a release
# server starts on its embedded defaults but that layout, chatlab-load puts
# VUS clients (default 20) of createChat (STRATEGY, default single, 50
# members, PUBLISH_MODE default off, as in the demo) on it for DURATION
# seconds (default 20), and `perf record`
# samples the server's threads on the CPU clock meanwhile (the machine has
# no hardware counters to sample on; the CPU clock works everywhere). The
# flat profile (self time by function, every thread together) goes to
# results/profile-<UTC time>/<layout>.txt, its top TOP entries (default 25)
# to results.md, with the run's throughput and the server's CPU and context
# switches per request (from /proc) beside them.
#
# Needs the release build (make load-build: symbols are kept, debug info
# is not, so functions resolve and inlined ones count in their callers) and
# an empty database at LOAD_DATABASE_URL (make load-db); installs Debian's
# linux-perf when perf is missing. Traffic to 127.0.0.1 only; each server
# is stopped after its run.
set -euo pipefail
cd "$(dirname "$0")/.."
db=${LOAD_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/chatlab_load}
layouts=${LAYOUTS:-shared per_worker}
strategy=${STRATEGY:-single}
mode=${PUBLISH_MODE:-off}
vus=${VUS:-20}
duration=${DURATION:-20}
top=${TOP:-25}
out=${OUT:-results/profile-$(date -u +%Y%m%dT%H%M%SZ)}
command -v perf >/dev/null || scripts/ensure-debian.sh linux-perf --command perf
mkdir -p "$out/logs"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
secret=$(python3 -c 'import secrets; print(secrets.token_hex(32))')
switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {n += $2} END {print n + 0}'; }
cpu_ticks() { awk '{print $14 + $15}' /proc/"$1"/stat; }

{
    echo "# profile"
    echo
    echo "Where the server's CPU goes: \`perf record -e cpu-clock\` on a release chatlab (embedded defaults, \`DB_POOL_LAYOUT\` as named) while chatlab-load runs createChat ($strategy, 50 members, publish mode $mode) with $vus VUs for $duration s; self time by function over every thread of the server. $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC'). \`scripts/profile-server.sh\` (LAYOUTS=\"$layouts\" STRATEGY=$strategy PUBLISH_MODE=$mode VUS=$vus DURATION=$duration)."
    echo
    # Where it ran, in the words of every results.md.
    ./target/release/chatlab-load setting --database-url "$db"
    echo
} >"$out/results.md"

for layout in $layouts; do
    port=$(free_port) ops=$(free_port)
    DATABASE_URL=$db HTTP_ADDR=127.0.0.1:$port OPS_ADDR=127.0.0.1:$ops DB_POOL_LAYOUT=$layout \
        CHATLAB_JWT_SECRET=$secret CHATLAB_ALLOW_OVERRIDES=true RUST_LOG=warn \
        ./target/release/chatlab serve >"$out/logs/server-$layout.log" 2>&1 &
    pid=$!
    trap 'kill $pid 2>/dev/null || true' EXIT
    for _ in $(seq 1 100); do
        curl -fsS "http://127.0.0.1:$ops/readyz" >/dev/null 2>&1 && break
        sleep 0.2
    done
    echo "profile: $layout" >&2
    # A warm-up, then the measured run with perf attached for its length.
    ./target/release/chatlab-load run --name "profile-warmup-$layout" --results-dir "$out/logs" \
        --target "http://127.0.0.1:$port" --ops-url "http://127.0.0.1:$ops" --jwt-secret "$secret" \
        --scenario create-chat --members 50 --strategy "$strategy" --publish-mode "$mode" --vus "$vus" --duration 3s \
        --seed-users 2000 >"$out/logs/warmup-$layout.txt" 2>&1
    s0=$(switches "$pid") c0=$(cpu_ticks "$pid")
    perf record -q -e cpu-clock -F 999 -p "$pid" -o "$out/logs/perf-$layout.data" -- sleep "$duration" &
    perf_pid=$!
    ./target/release/chatlab-load run --name "profile-$layout" --results-dir "$out/logs" \
        --target "http://127.0.0.1:$port" --ops-url "http://127.0.0.1:$ops" --jwt-secret "$secret" \
        --scenario create-chat --members 50 --strategy "$strategy" --publish-mode "$mode" --vus "$vus" --duration "${duration}s" \
        --seed-users 2000 >"$out/logs/run-$layout.txt" 2>&1
    wait "$perf_pid"
    s1=$(switches "$pid") c1=$(cpu_ticks "$pid")
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    trap - EXIT
    perf report -i "$out/logs/perf-$layout.data" --no-children --sort sym --stdio 2>/dev/null \
        | grep -v '^#' | grep -v '^$' >"$out/$layout.txt"
    rm -f "$out/logs/perf-$layout.data"
    rps=$(awk -F'|' '/create-chat/ && $12 ~ /[0-9]/ {gsub(/ /, "", $12); print $12; exit}' "$out/logs/run-$layout.txt")
    requests=$(python3 -c "print(round(float('${rps:-0}') * $duration))")
    {
        echo "## $layout"
        echo
        echo "$rps createChats/s; server CPU $(python3 -c "print(round(($c1 - $c0) / 100 * 1e6 / max(1, $requests)))") µs and $(python3 -c "print(round(($s1 - $s0) / max(1, $requests), 1))") context switches per request."
        echo
        echo "| share of samples | function |"
        echo "|---|---|"
        head -n "$top" "$out/$layout.txt" | awk '{share = $1; $1 = ""; sub(/^ +/, ""); sub(/^\[\.\] +/, ""); sub(/^\[k\] +/, "[kernel] "); gsub(/\|/, "\\|"); printf "| %s | `%s` |\n", share, $0}'
        echo
    } >>"$out/results.md"
done
cat "$out/results.md"
echo "results: $out/results.md"
