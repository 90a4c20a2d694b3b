#!/usr/bin/env bash
# Stops, starts or restarts the private PostgreSQL cluster that
# `scripts/ensure-postgres.sh` made for PORT (in .pgdata/PORT), the way the
# fault experiments need it:
#
#   pg-private.sh stop PORT      fast shutdown (open transactions rolled back,
#                                sessions ended), as an operator's restart does
#   pg-private.sh start PORT     start again and wait until it accepts
#   pg-private.sh restart PORT   both, back to back
#
# It never touches a cluster it did not make: the machine's own PostgreSQL
# (on 5432, say) is left alone.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
action=${1:?usage: pg-private.sh stop|start|restart PORT}
port=${2:?usage: pg-private.sh stop|start|restart PORT}
# The real path (.pgdata may point elsewhere; see ensure-postgres.sh).
data="$(readlink -f "$root/.pgdata" 2>/dev/null || echo "$root/.pgdata")/$port"
say() { printf 'pg-private: %s\n' "$*" >&2; }

[[ -f "$data/PG_VERSION" ]] || { say "no private cluster in $data (scripts/ensure-postgres.sh makes it)"; exit 1; }
pg_ctl=""
for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [[ -x "$dir/pg_ctl" ]] && { pg_ctl="$dir/pg_ctl"; break; }
done
[[ -n "$pg_ctl" ]] || { say "pg_ctl not found under /usr/lib/postgresql"; exit 1; }
run_as=()
[[ $(id -u) -eq 0 ]] && run_as=(runuser -u postgres --)
# Commands run as postgres start from a folder it may enter.
cd /

opts="-p $port -c listen_addresses=127.0.0.1 -k /tmp -c max_connections=500 -c shared_buffers=256MB -c fsync=on"
case "$action" in
    stop) "${run_as[@]}" "$pg_ctl" -D "$data" -m fast -w -t 60 stop >/dev/null ;;
    start) "${run_as[@]}" "$pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 -o "$opts" start >/dev/null ;;
    restart) "${run_as[@]}" "$pg_ctl" -D "$data" -l "$data/server.log" -m fast -w -t 60 -o "$opts" restart >/dev/null ;;
    *) say "unknown action $action: stop, start or restart"; exit 1 ;;
esac
