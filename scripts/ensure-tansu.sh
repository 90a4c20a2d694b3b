#!/usr/bin/env bash
# Makes sure a Kafka-protocol broker answers at $KAFKA_TEST_BROKERS (default
# 127.0.0.1:9092). If nothing answers there, starts tansu (Apache-2.0,
# crates.io) on loopback, installing it first when it is missing:
#
#   cargo install tansu@0.6.0 --locked --features dynostore,libsql
#
# into $TANSU_ROOT (default ~/.cache/chatlab/tansu-0.6.0-dynostore-libsql),
# so an install with other features is never mistaken for this one: about
# 13 minutes once on 2 cores, reused afterwards.
#
# TANSU_STORAGE picks the storage engine:
#   sqlite (default)  SQLite in .run/tansu-<port>.db: keeps every record it
#                     acknowledged, and survives a restart (fault tests kill
#                     and restart it). A fresh start (no tansu running) begins
#                     with an empty file unless TANSU_KEEP=1.
#   memory            in-memory object store: forgets everything when it
#                     stops, and under pipelined produce acknowledges records
#                     that it then does not serve (README, "The broker under
#                     test"); kept for `make broker-check` to show it.
#
# `scripts/stop-tansu.sh` stops the one started here. `--print-bin` prints
# the binary's path (installing it when missing) and starts nothing.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
brokers=${KAFKA_TEST_BROKERS:-127.0.0.1:9092}
first=${brokers%%,*}
host=${first%:*}
port=${first##*:}
storage=${TANSU_STORAGE:-sqlite}
version=0.6.0
features=dynostore,libsql
profile=${TANSU_PROFILE:-o1}
case "$profile" in
    o1) profile_env=(CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_LTO=off); suffix=-o1 ;;
    release) profile_env=(); suffix="" ;;
    *) printf 'ensure-tansu: TANSU_PROFILE=%s: expected o1 or release\n' "$profile" >&2; exit 2 ;;
esac
tansu_root=${TANSU_ROOT:-$HOME/.cache/chatlab/tansu-$version-${features//,/-}$suffix}
tansu=$tansu_root/bin/tansu
say() { printf 'ensure-tansu: %s\n' "$*" >&2; }

answers() { (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; }

# Installed even when another broker answers: the broker-fault tests start
# tansu instances of their own (TANSU_BIN).
if [[ ! -x "$tansu" ]]; then
    say "installing tansu $version with $features into $tansu_root (cargo install, once; ten minutes or more on 2 cores)"
    env "${profile_env[@]}" cargo install "tansu@$version" --locked --features "$features" --root "$tansu_root" >&2
fi

if [[ "${1:-}" == --print-bin ]]; then
    echo "$tansu"
    exit 0
fi
if answers; then
    exit 0
fi
case "$host" in
    127.0.0.1|localhost) ;;
    *) say "nothing answers at $first and it is not this machine"; exit 1 ;;
esac

mkdir -p "$root/.run"
case "$storage" in
    sqlite)
        db="tansu-$port.db"
        if [[ "${TANSU_KEEP:-0}" != 1 ]]; then
            rm -f "$root/.run/$db" "$root/.run/$db-wal" "$root/.run/$db-shm"
        fi
        # The engine opens the file relative to its working directory.
        engine="sqlite://$db"
        ;;
    memory) engine="memory://tansu/" ;;
    *) say "TANSU_STORAGE=$storage: expected sqlite or memory"; exit 1 ;;
esac
say "starting tansu on $host:$port ($storage storage)"
cd "$root/.run"
nohup "$tansu" broker \
    --listener-url "tcp://$host:$port" \
    --advertised-listener-url "tcp://$host:$port" \
    --storage-engine "$engine" \
    >>"$root/.run/tansu-$port.log" 2>&1 &
echo $! >"$root/.run/tansu-$port.pid"
for _ in $(seq 1 100); do
    if answers; then
        exit 0
    fi
    sleep 0.2
done
say "tansu did not come up; see $root/.run/tansu-$port.log"
exit 1
