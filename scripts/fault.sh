#!/usr/bin/env bash
# Runs one fault experiment: `scripts/fault.sh NAME [chatlab-load fault args]`.
#
# The database faults stop and restart PostgreSQL, so the experiments never
# use the machine's own server: they run on a private cluster of their own
# on FAULT_PG_PORT (default 55432, in .pgdata/55432, made with the machine's
# PostgreSQL binaries by scripts/ensure-postgres.sh), in a database made
# afresh for each run. Results go to results/NAME-<UTC timestamp>/.
# FAULT_KEEP_PG=1 leaves the cluster running afterwards.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
name=${1:?usage: fault.sh NAME [chatlab-load fault args]}
shift
port=${FAULT_PG_PORT:-55432}
admin="postgres://postgres@127.0.0.1:$port/postgres"
url="postgres://postgres@127.0.0.1:$port/chatlab_fault"
say() { printf 'fault: %s\n' "$*" >&2; }

if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && [[ ! -f .pgdata/$port/PG_VERSION ]]; then
    say "something that is not chatlab's private cluster answers on $port; set FAULT_PG_PORT"
    exit 1
fi
DATABASE_URL=$admin scripts/ensure-postgres.sh
# A cluster an earlier run left stopped (killed mid-experiment) is started.
if ! psql -Xqtc 'SELECT 1' "$admin" >/dev/null 2>&1; then
    scripts/pg-private.sh start "$port"
fi
psql -Xq "$admin" -c 'DROP DATABASE IF EXISTS chatlab_fault WITH (FORCE)' -c 'CREATE DATABASE chatlab_fault'
stop_cluster() {
    if [[ "${FAULT_KEEP_PG:-0}" != 1 ]]; then
        scripts/pg-private.sh stop "$port" 2>/dev/null || true
    fi
}
trap stop_cluster EXIT

out="results/$name-$(date -u +%Y%m%dT%H%M%SZ)"
bin=${CHATLAB_BIN_DIR:-target/release}
"./$bin/chatlab-load" fault --binary "./$bin/chatlab" \
    --database-url "$url" --pg-script scripts/pg-private.sh --out "$out" "$@"
