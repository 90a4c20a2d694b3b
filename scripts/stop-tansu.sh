#!/usr/bin/env bash
# Stops the tansu brokers that ensure-tansu.sh started.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
for pidfile in "$root"/.run/tansu-*.pid; do
    [[ -f "$pidfile" ]] || continue
    kill "$(cat "$pidfile")" 2>/dev/null || true
    rm -f "$pidfile"
done
