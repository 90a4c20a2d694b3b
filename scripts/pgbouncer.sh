#!/usr/bin/env bash
# A private PgBouncer (Debian's pgbouncer, 1.18 here) in front of
# PostgreSQL, for the experiments and the test pass that go through one, as
# most fleets run it:
#
#   scripts/pgbouncer.sh start PORT [--mode transaction|session] [--pool N]
#                                   [--upstream HOST:PORT]
#   scripts/pgbouncer.sh stop PORT
#
# Every database of the upstream server is served (`* = host= port=`),
# with trust authentication on 127.0.0.1 only; PORT 0 picks a free port.
# `start` prints the port it listens on. Its config, log and pid are in
# .run/pgbouncer-PORT/. PgBouncer refuses to run as root, so as root it
# runs as the postgres user, as the private PostgreSQL clusters do; where
# that user cannot reach into the checkout (a clone in a folder private to
# root, as `mktemp -d` makes them), they are in /tmp/chatlab-pgbouncer-PORT/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
say() { printf 'pgbouncer: %s\n' "$*" >&2; }

action=${1:-}
port=${2:-}
[[ -n "$action" && -n "$port" ]] || { say "usage: $0 start|stop PORT [options]"; exit 2; }
shift 2
mode=transaction
pool=15
upstream=127.0.0.1:5432
while [[ $# -gt 0 ]]; do
    case "$1" in
        --mode) mode=${2:?}; shift 2 ;;
        --pool) pool=${2:?}; shift 2 ;;
        --upstream) upstream=${2:?}; shift 2 ;;
        *) say "unknown option $1"; exit 2 ;;
    esac
done
case "$mode" in transaction | session) ;; *) say "--mode transaction or session, not $mode"; exit 2 ;; esac

run_as=()
[[ $(id -u) -eq 0 ]] && run_as=(runuser -u postgres --)

# The folder of PORT's config, log and pid (see above).
dir_of() {
    mkdir -p "$root/.run"
    if [[ ${#run_as[@]} -gt 0 ]] && ! "${run_as[@]}" test -x "$root/.run" 2>/dev/null; then
        echo "/tmp/chatlab-pgbouncer-$1"
    else
        echo "$root/.run/pgbouncer-$1"
    fi
}

stop() {
    local dir
    dir=$(dir_of "$1")
    if [[ -f $dir/pgbouncer.pid ]]; then
        kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true
        for _ in $(seq 50); do
            kill -0 "$(cat "$dir/pgbouncer.pid" 2>/dev/null)" 2>/dev/null || break
            sleep 0.1
        done
        rm -f "$dir/pgbouncer.pid"
    fi
    # Outside the checkout nothing is kept for later reading.
    [[ "$dir" == /tmp/chatlab-pgbouncer-* ]] && rm -rf "$dir"
    return 0
}

case "$action" in
    stop) stop "$port"; exit 0 ;;
    start) ;;
    *) say "usage: $0 start|stop PORT [options]"; exit 2 ;;
esac

scripts/ensure-debian.sh pgbouncer --command pgbouncer --stop-service >&2
if [[ "$port" == 0 ]]; then
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fi
stop "$port"
dir=$(dir_of "$port")
mkdir -p "$dir"
printf '"postgres" ""\n' >"$dir/userlist.txt"
cat >"$dir/pgbouncer.ini" <<EOF
[databases]
* = host=${upstream%:*} port=${upstream##*:}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = $mode
default_pool_size = $pool
max_client_conn = 2000
; tokio-postgres and libpq send no other startup parameter PgBouncer does
; not know, but JDBC-era clients send this one.
ignore_startup_parameters = extra_float_digits
admin_users = postgres
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
EOF
[[ ${#run_as[@]} -gt 0 ]] && chown -R postgres "$dir"
(cd "$dir" && "${run_as[@]}" pgbouncer -d "$dir/pgbouncer.ini")
for _ in $(seq 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        say "listening on 127.0.0.1:$port, $mode pooling, $pool server connections per database and user, upstream $upstream"
        echo "$port"
        exit 0
    fi
    sleep 0.1
done
say "did not listen on $port; see $dir/pgbouncer.log"
exit 1
