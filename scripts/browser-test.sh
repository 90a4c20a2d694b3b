#!/usr/bin/env bash
# The web client (web/) in a real browser: Debian's Chromium driven by
# playwright-core (npm, pinned in web/tests/package-lock.json; it downloads
# no browser), against the debug chatlab on a fresh database.
#
# Installs what it lacks, once: Debian's chromium (scripts/ensure-debian.sh)
# and web/tests/node_modules (npm ci). Starts PostgreSQL if nothing answers
# (scripts/ensure-postgres.sh), creates the database chatlab_browser_<pid>,
# serves web/ from two static origins on loopback (python3 -m http.server),
# one of them in CORS_ALLOWED_ORIGINS, and starts chatlab with
# CHATLAB_ALLOW_OVERRIDES=true, WEB_CLIENT=true and its log in a file. Then
# web/tests/browser.test.mjs: two users on two browser contexts of the
# allowed origin, one live over SSE and one over WebSocket (tickets), a
# chat by a non-default insert strategy named back, messages live both
# ways, unread 1 then 0, a page of the other origin refused (CORS); then
# every operation of /openapi.json (but the two streams) called by a page
# of the allowed origin with its own fetch, each answer's status, problem
# and exposed headers readable, and a preflighted request from the denied
# origin throwing. After it, the server stops and its log must hold none
# of the tokens and tickets the pages held (the sweep's too). Also checks
# chatlab serves web/ at /web/.
#
# Writes the screenshot (desktop and phone width) to
# BROWSER_TEST_SCREENSHOT (default docs/web-client.png; empty: none).
# Every wait is bounded; everything is on 127.0.0.1; exits non-zero on any
# failure; stops what it started.
#
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres scripts/browser-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
say() { printf 'browser-test: %s\n' "$*" >&2; }
die() { say "FAIL $*"; exit 1; }
started=$(date +%s)

# --- what it needs, once ---------------------------------------------------
scripts/ensure-debian.sh chromium --command chromium
chromium_bin=${CHROMIUM:-$(command -v chromium)}
command -v node >/dev/null || die "node (20 or later) is not on PATH"
command -v npm >/dev/null || die "npm is not on PATH"
pinned=$(node -p 'require("./web/tests/package.json").dependencies["playwright-core"]')
have=$(node -p 'try { require("./web/tests/node_modules/playwright-core/package.json").version } catch { "" }')
if [[ "$have" != "$pinned" ]]; then
    say "installing playwright-core $pinned (npm ci in web/tests, once)"
    (cd web/tests && timeout 300 npm ci --no-audit --no-fund --loglevel=error >&2)
fi

admin=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
DATABASE_URL=$admin scripts/ensure-postgres.sh
command -v psql >/dev/null || die "psql is not on PATH"

cargo build -q -p chatlab-api --bin chatlab
bin=$root/target/debug/chatlab

# --- processes, and their end ------------------------------------------------
db=chatlab_browser_$$
work=$(mktemp -d)
log=$work/chatlab.log
secrets=$work/held-secrets
pids=()
server=
cleanup() {
    local status=$?
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    timeout 10 psql "$admin" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
    if [[ $status -ne 0 && -s "$log" ]]; then
        say "the server's log (last 30 lines, $log kept):"
        tail -n 30 "$log" | grep -v -F -f "$secrets" 2>/dev/null >&2 || tail -n 30 "$log" >&2
        rm -f "$secrets"
    else
        rm -rf "$work"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
timeout 10 psql "$admin" -qc "CREATE DATABASE $db" >/dev/null
db_url=${admin%/*}/$db

read -r port ops_port allowed_port denied_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')
api=http://127.0.0.1:$port
allowed=http://127.0.0.1:$allowed_port
denied=http://127.0.0.1:$denied_port

for static_port in "$allowed_port" "$denied_port"; do
    python3 -m http.server --bind 127.0.0.1 --directory web "$static_port" >"$work/static-$static_port.log" 2>&1 &
    pids+=($!)
done

secret=$(python3 -c 'import secrets; print(secrets.token_hex(32))')
DATABASE_URL=$db_url HTTP_ADDR=127.0.0.1:$port OPS_ADDR=127.0.0.1:$ops_port \
    CHATLAB_JWT_SECRET=$secret CHATLAB_ALLOW_OVERRIDES=true CHAT_INSERT_STRATEGY=unnest \
    CORS_ALLOWED_ORIGINS=$allowed WEB_CLIENT=true KAFKA_BROKERS= \
    RUST_LOG=${BROWSER_TEST_RUST_LOG:-debug} "$bin" serve >"$log" 2>&1 &
server=$!
pids+=("$server")

wait_for() { # url, what
    for _ in $(seq 1 150); do
        curl -sf -o /dev/null --max-time 2 "$1" && return 0
        kill -0 "$server" 2>/dev/null || die "the server exited before $2 answered"
        sleep 0.2
    done
    die "$2 did not answer within 30 s ($1)"
}
wait_for "$api/readyz" "chatlab"
wait_for "$allowed/index.html" "the allowed origin"
wait_for "$denied/index.html" "the denied origin"

# --- chatlab serves the page itself ---------------------------------------
for file in index.html app.js app.css; do
    path=/web/$file
    [[ $file == index.html ]] && path=/web/
    curl -sf --max-time 5 "$api$path" -o "$work/served" || die "GET $path is not served with WEB_CLIENT=true"
    cmp -s "$work/served" "web/$file" || die "GET $path is not web/$file as committed (rebuild chatlab?)"
done
say "ok   chatlab serves web/ at /web/ (index.html, app.js, app.css)"

# --- the browser -------------------------------------------------------------
shot=${BROWSER_TEST_SCREENSHOT-docs/web-client.png}
[[ -n "$shot" && "$shot" != /* ]] && shot=$root/$shot
status=0
CHROMIUM=$chromium_bin API=$api ALLOWED_ORIGIN=$allowed DENIED_ORIGIN=$denied \
    SECRETS_OUT=$secrets SCREENSHOT=$shot \
    timeout 180 node web/tests/browser.test.mjs || status=$?
[[ $status -eq 124 ]] && say "FAIL the browser test did not end within 180 s"

# --- the log holds none of what the pages held ----------------------------
kill "$server" 2>/dev/null || true
for _ in $(seq 1 100); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
if [[ -s "$secrets" ]]; then
    held=$(grep -c . "$secrets")
    # grep -F -f: the secrets never reach a command line or the terminal.
    leaks=$(grep -c -F -f "$secrets" "$log" || true)
    # The check means something only if the live requests were logged.
    for path in /v1/live/tickets /v1/events /v1/ws; do
        grep -q -- "$path" "$log" || { say "FAIL the server's log has no request to $path"; status=1; }
    done
    if [[ "$leaks" -ne 0 ]]; then
        say "FAIL $leaks line(s) of the server's log hold a token or a ticket the pages held"
        status=1
    else
        say "ok   none of the $held tokens and tickets the pages held is in the server's log ($(wc -l <"$log") lines)"
    fi
else
    say "FAIL the test wrote no held tokens to look for"
    status=1
fi
[[ -n "$shot" && $status -eq 0 ]] && say "screenshot: ${shot#"$root"/}"
say "$( [[ $status -eq 0 ]] && echo passed || echo FAILED ) in $(( $(date +%s) - started )) s"
exit "$status"
