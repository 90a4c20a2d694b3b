#!/usr/bin/env bash
# Makes sure a Kafka-protocol broker answers at $KAFKA_TEST_BROKERS (default
# 127.0.0.1:9092). If nothing answers there, starts tansu (Apache-2.0,
# crates.io) with in-memory storage on loopback, installing it first with
# `cargo install tansu --locked --features dynostore` when it is missing
# (about 13 minutes on 2 cores; an installed one is reused). tansu forgets
# everything when it stops. `scripts/stop-tansu.sh` stops the one started here.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
brokers=${KAFKA_TEST_BROKERS:-127.0.0.1:9092}
first=${brokers%%,*}
host=${first%:*}
port=${first##*:}
say() { printf 'ensure-tansu: %s\n' "$*" >&2; }

answers() { (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; }

if answers; then
    exit 0
fi
case "$host" in
    127.0.0.1|localhost) ;;
    *) say "nothing answers at $first and it is not this machine"; exit 1 ;;
esac

if ! command -v tansu >/dev/null 2>&1; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v tansu >/dev/null 2>&1; then
    say "installing tansu (cargo install tansu --locked --features dynostore); this takes a while"
    cargo install tansu --locked --features dynostore >&2
fi

mkdir -p "$root/.run"
say "starting tansu on $host:$port (in-memory storage)"
nohup tansu broker \
    --listener-url "tcp://$host:$port" \
    --advertised-listener-url "tcp://$host:$port" \
    --storage-engine memory://tansu/ \
    >"$root/.run/tansu-$port.log" 2>&1 &
echo $! >"$root/.run/tansu-$port.pid"
for _ in $(seq 1 100); do
    if answers; then
        exit 0
    fi
    sleep 0.2
done
say "tansu did not come up; see $root/.run/tansu-$port.log"
exit 1
