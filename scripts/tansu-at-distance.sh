#!/usr/bin/env bash
# A Kafka-protocol broker at a distance: tansu (memory storage) behind a
# chatlab-delay hop at RTT, for the experiments that put the broker as far
# away as a real cluster is.
#
#   scripts/tansu-at-distance.sh start 5ms   # prints KAFKA_BROKERS (the hop)
#   scripts/tansu-at-distance.sh stop
#
# tansu listens on a free port and advertises the hop's, so a client that
# bootstraps through the hop keeps going through it for every request (a
# Kafka client otherwise connects to the address the broker advertises).
# State in .run/tansu-at-distance/; traffic on 127.0.0.1 only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dir=.run/tansu-at-distance
say() { printf 'tansu-at-distance: %s\n' "$*" >&2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

stop() {
    for f in "$dir"/hop.pid "$dir"/tansu.pid; do
        [[ -f $f ]] && kill "$(cat "$f")" 2>/dev/null || true
        rm -f "$f"
    done
}

case "${1:-}" in
    start)
        rtt=${2:?usage: $0 start RTT}
        stop
        mkdir -p "$dir"
        tansu=$(scripts/ensure-tansu.sh --print-bin)
        delay=${LOAD_DELAY_BIN:-target/release/chatlab-delay}
        broker_port=$(free_port)
        hop_port=$(free_port)
        "$tansu" broker --listener-url "tcp://127.0.0.1:$broker_port" \
            --advertised-listener-url "tcp://127.0.0.1:$hop_port" \
            --storage-engine memory://tansu/ >"$dir/tansu.log" 2>&1 &
        echo $! >"$dir/tansu.pid"
        "$delay" --listen "127.0.0.1:$hop_port" --upstream "127.0.0.1:$broker_port" --rtt "$rtt" \
            >"$dir/hop.out" 2>"$dir/hop.log" &
        echo $! >"$dir/hop.pid"
        for _ in $(seq 100); do
            if (exec 3<>"/dev/tcp/127.0.0.1/$broker_port") 2>/dev/null && grep -q listening "$dir/hop.out"; then
                say "tansu on $broker_port behind a hop at $rtt on $hop_port"
                echo "127.0.0.1:$hop_port"
                exit 0
            fi
            sleep 0.2
        done
        say "tansu or the hop did not start; see $dir"
        stop
        exit 1
        ;;
    stop) stop ;;
    *) say "usage: $0 start RTT | stop"; exit 2 ;;
esac
