#!/usr/bin/env bash
# Makes sure a PostgreSQL server answers at the host and port of
# $DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres), and
# that the database named by the first argument exists on it.
#
# If nothing answers and the host is this machine, it starts a private
# cluster in .pgdata/ of the project with the machine's PostgreSQL binaries
# (installing Debian's postgresql package with apt-get when there are none),
# trust auth, listening on 127.0.0.1 only. `make db-stop` stops it.
#
# Prints nothing on success but progress lines on stderr; exits non-zero
# with a message when it cannot get a server.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
want_db=${1:-}

# postgres://user[:pass]@host[:port]/db[?query]
rest=${url#*://}
authority=${rest%%/*}
hostport=${authority##*@}
userinfo=""
[[ "$authority" == *@* ]] && userinfo=${authority%@*}
user=${userinfo%%:*}
user=${user:-postgres}
host=${hostport%%:*}
port=5432
[[ "$hostport" == *:* ]] && port=${hostport##*:}
host=${host:-127.0.0.1}

say() { printf 'ensure-postgres: %s\n' "$*" >&2; }

find_bin() {
    local name=$1 dir
    if command -v "$name" >/dev/null 2>&1 && [[ "$name" != initdb && "$name" != pg_ctl ]]; then
        command -v "$name"
        return 0
    fi
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [[ -x "$dir/$name" ]]; then
            echo "$dir/$name"
            return 0
        fi
    done
    return 1
}

install_postgres() {
    say "no PostgreSQL binaries found; installing Debian's postgresql package"
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql postgresql-client >&2
}

ready() {
    local isready
    isready=$(find_bin pg_isready) || return 1
    "$isready" -q -h "$host" -p "$port" -t 2
}

if ! find_bin pg_isready >/dev/null || ! find_bin initdb >/dev/null; then
    if ! ready 2>/dev/null; then
        install_postgres
    fi
fi

if ! ready; then
    case "$host" in
        127.0.0.1|localhost|::1) ;;
        *) say "nothing answers at $host:$port and it is not this machine; start it or fix DATABASE_URL"; exit 1 ;;
    esac
    initdb=$(find_bin initdb) || { install_postgres; initdb=$(find_bin initdb); }
    pg_ctl=$(find_bin pg_ctl)
    mkdir -p "$root/.pgdata"
    # PostgreSQL refuses to run as root: run the cluster as the postgres user.
    run_as=()
    if [[ $(id -u) -eq 0 ]]; then
        id postgres >/dev/null 2>&1 || useradd --system --home-dir /nonexistent postgres
        if ! runuser -u postgres -- test -x "$(readlink -f "$root/.pgdata")/"; then
            # A clone the postgres user cannot reach (under /root, or in a
            # private temporary folder): the clusters live under /var/tmp,
            # and .pgdata points there.
            away=/var/tmp/chatlab-pgdata-$(printf '%s' "$root" | sha256sum | cut -c1-12)
            mkdir -p "$away"
            rmdir "$root/.pgdata" 2>/dev/null || true
            ln -sfn "$away" "$root/.pgdata"
            say "postgres cannot reach $root: private clusters go to $away"
        fi
        chown -R postgres "$(readlink -f "$root/.pgdata")"
        run_as=(runuser -u postgres --)
    fi
    # The real path: the postgres user may not pass through $root.
    data="$(readlink -f "$root/.pgdata")/$port"
    mkdir -p "$data"
    [[ ${#run_as[@]} -eq 0 ]] || chown postgres "$data"
    # Commands run as postgres start from a folder it may enter.
    cd /
    if [[ ! -f "$data/PG_VERSION" ]]; then
        say "initialising a private cluster in $data"
        "${run_as[@]}" "$initdb" -D "$data" -U "$user" -A trust -E UTF8 >/dev/null
    fi
    say "starting the private cluster on $host:$port"
    "${run_as[@]}" "$pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 \
        -o "-p $port -c listen_addresses=127.0.0.1 -k /tmp -c max_connections=500 -c shared_buffers=256MB -c fsync=on" \
        start >/dev/null
    ready || { say "the private cluster did not come up; see $data/server.log"; exit 1; }
fi

if [[ -n "$want_db" ]]; then
    psql=$(find_bin psql)
    admin_url="${url%%\?*}"
    admin_url="${admin_url%/*}/postgres"
    exists=$("$psql" "$admin_url" -XtAc "SELECT 1 FROM pg_database WHERE datname = '$want_db'")
    if [[ "$exists" != 1 ]]; then
        say "creating database $want_db"
        "$psql" "$admin_url" -Xqc "CREATE DATABASE \"$want_db\"" >/dev/null
    fi
fi
