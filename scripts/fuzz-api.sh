#!/usr/bin/env bash
# Fuzzes the public API against the committed spec (openapi/openapi.json)
# with schemathesis: a chatlab server on free loopback ports and a fresh
# database, an authenticated user, every operation, every check
# (no 5xx, responses and statuses and content types as documented, schema-
# valid data accepted, schema-invalid data refused, undocumented methods
# refused), FUZZ_MAX_EXAMPLES cases per operation (default 60), run twice:
# with the fixed seed 1, then with a random seed printed for reproduction
# (FUZZ_SEED=N replays it). Write overrides are allowed, so the insert
# strategies and publish modes are fuzzed too. Ids of users the API needs
# to exist are mapped to 500 users seeded first, and about half the chat
# ids of the read side (and a marker's message) to a chat of the fuzzing
# user's (scripts/fuzz_hooks.py).
# Fails on any failure.
#
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres scripts/fuzz-api.sh
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'fuzz-api: %s\n' "$*" >&2; }

st_version=4.32.5
if ! st --version 2>/dev/null | grep -q "$st_version"; then
    say "installing schemathesis $st_version (PyPI, once)"
    python3 -m pip install --quiet --disable-pip-version-check "schemathesis==$st_version"
fi

admin=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
db=chatlab_fuzz_$$
fuzz_url=${admin%/*}/$db
examples=${FUZZ_MAX_EXAMPLES:-60}
random_seed=${FUZZ_SEED:-$(( (RANDOM << 15) | RANDOM ))}

cargo build -q --bin chatlab
read -r port ops_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')
log=$(mktemp)
server=
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    psql "$admin" -qc "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
    rm -f "$log"
}
trap cleanup EXIT
psql "$admin" -qc "CREATE DATABASE $db" >/dev/null

secret=$(python3 -c 'import secrets; print(secrets.token_hex(32))')
DATABASE_URL=$fuzz_url HTTP_ADDR=127.0.0.1:$port OPS_ADDR=127.0.0.1:$ops_port \
    CHATLAB_JWT_SECRET=$secret CHATLAB_ALLOW_OVERRIDES=true KAFKA_BROKERS= \
    RUST_LOG=warn LOG_FORMAT=json target/debug/chatlab serve >"$log" 2>&1 &
server=$!
base=http://127.0.0.1:$port
for _ in $(seq 1 100); do
    curl -sf "$base/readyz" >/dev/null && break
    kill -0 "$server" 2>/dev/null || { say "the server exited:"; cat "$log" >&2; exit 1; }
    sleep 0.2
done
read -r token self_id < <(curl -sf -X POST "$base/v1/users" -H 'content-type: application/json' \
    -d '{"name":"fuzzer"}' | python3 -c 'import json, sys; u = json.load(sys.stdin); print(u["token"], u["id"])')
# Real users for the ids the fuzzer sends (scripts/fuzz_hooks.py).
FUZZ_USER_IDS=$(curl -sf -X POST "http://127.0.0.1:$ops_port/v1/users/bulk" -H 'content-type: application/json' \
    -d '{"count":500,"name_prefix":"fuzzed-"}' | python3 -c 'import json, sys; print(",".join(json.load(sys.stdin)["ids"]))')
# A chat of the fuzzing user's with one message, for the read side's ids.
read -r FUZZ_CHAT_ID < <(curl -sf -X POST "$base/v1/chats" -H "Authorization: Bearer $token" \
    -H 'content-type: application/json' -d "{\"name\":\"fuzzed\",\"member_ids\":[\"${FUZZ_USER_IDS%%,*}\"]}" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
read -r FUZZ_MESSAGE_ID < <(curl -sf -X POST "$base/v1/chats/$FUZZ_CHAT_ID/messages" -H "Authorization: Bearer $token" \
    -H 'content-type: application/json' -d '{"body":"fuzzed"}' |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
export FUZZ_CHAT_ID FUZZ_MESSAGE_ID
export FUZZ_USER_IDS FUZZ_SELF_ID=$self_id SCHEMATHESIS_HOOKS=fuzz_hooks PYTHONPATH="$PWD/scripts${PYTHONPATH:+:$PYTHONPATH}"

status=0
for seed in 1 "$random_seed"; do
    say "schemathesis, $examples cases per operation, seed $seed (replay: FUZZ_SEED=$seed $0)"
    # GET /v1/events is a stream that does not end while the client
    # listens: schemathesis would wait on it until its timeout, per case;
    # GET /v1/ws is a WebSocket handshake, which schemathesis cannot make.
    # The live tests check both instead (crates/api/tests/api/live.rs).
    st --config-file scripts/schemathesis.toml run openapi/openapi.json --url "$base" \
        --exclude-path /v1/events --exclude-path /v1/ws \
        -H "Authorization: Bearer $token" --checks all --max-examples "$examples" \
        --seed "$seed" --no-color || status=1
done
# A request actix cannot parse (a header schemathesis mangled on purpose)
# is the client's error, answered 400, though actix logs it at ERROR;
# anything else logged at ERROR is the server's.
errors=$(grep '"level":"ERROR"' "$log" | grep -v '"message":"stream error: request parse error' || true)
if [ -n "$errors" ]; then
    say "the server logged errors while fuzzed:"
    head -20 <<<"$errors" >&2
    status=1
fi
exit "$status"
