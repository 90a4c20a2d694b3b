#!/usr/bin/env bash
# Stops the private clusters that ensure-postgres.sh started in .pgdata/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# The real path (.pgdata may point elsewhere; see ensure-postgres.sh).
pgdata=$(readlink -f "$root/.pgdata" 2>/dev/null) || exit 0
cd /
for data in "$pgdata"/*/; do
    [[ -f "$data/postmaster.pid" ]] || continue
    pg_ctl=$(ls -d /usr/lib/postgresql/*/bin/pg_ctl 2>/dev/null | sort -V -r | head -n 1)
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$pg_ctl" -D "$data" -m fast stop
    else
        "$pg_ctl" -D "$data" -m fast stop
    fi
done
