#!/usr/bin/env bash
# Makes sure the PostgreSQL server at $DATABASE_URL can answer in German, for
# the tests that check a timeout is a timeout whatever language the server
# speaks (crates/persistence/tests/repository/error_language.rs).
#
# That takes the de_DE.UTF-8 locale on this machine, made with localedef
# (Debian's `locales` package) when it is missing, and a server started after
# the locale existed: when the server still answers in English, its local
# cluster is restarted once (the machine's Debian cluster with pg_ctlcluster,
# or the private one of scripts/ensure-postgres.sh).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
rest=${url#*://}
hostport=${rest%%/*}
hostport=${hostport##*@}
port=5432
[[ "$hostport" == *:* ]] && port=${hostport##*:}
say() { printf 'ensure-german-messages: %s\n' "$*" >&2; }
sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"

if ! locale -a 2>/dev/null | grep -qix 'de_DE.utf8'; then
    if ! command -v localedef >/dev/null || [[ ! -d /usr/share/i18n/locales ]]; then
        say "installing Debian's locales package for localedef"
        $sudo apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq locales >&2
    fi
    say "making the de_DE.UTF-8 locale"
    $sudo localedef -i de_DE -f UTF-8 de_DE.UTF-8
fi

speaks_german() {
    local out
    out=$(psql -X "$url" -c "SET lc_messages = 'de_DE.UTF-8'" -c "SET statement_timeout = 1" \
        -c "SELECT pg_sleep(0.2)" 2>&1 || true)
    [[ "$out" != *"canceling statement"* ]]
}

speaks_german && exit 0
say "the server on port $port answers in English: restarting it so it sees de_DE.UTF-8"
if [[ -f "$root/.pgdata/$port/PG_VERSION" ]]; then
    "$root/scripts/pg-private.sh" restart "$port"
elif command -v pg_lsclusters >/dev/null; then
    cluster=$(pg_lsclusters --no-header | awk -v p="$port" '$3 == p { print $1, $2; exit }')
    [[ -n "$cluster" ]] || { say "no local cluster on port $port; restart the server yourself"; exit 1; }
    # shellcheck disable=SC2086
    $sudo pg_ctlcluster --skip-systemctl-redirect $cluster restart
else
    say "cannot restart the server on port $port; restart it yourself"
    exit 1
fi
for _ in $(seq 1 50); do
    psql -X "$url" -qtAc 'SELECT 1' >/dev/null 2>&1 && break
    sleep 0.2
done
speaks_german || { say "the server still answers in English after a restart"; exit 1; }
