#!/usr/bin/env bash
# The crates are layered: the domain at the bottom with no I/O crate, the
# persistence and Kafka adapters above it and never on the web stack or on
# each other, the API on top. The trace-context helpers (chatlab-telemetry)
# sit beside the domain: no I/O, no exporter (only the API exports); so do
# the bearer tokens (chatlab-auth): keys and claims, no web stack, no
# database, so the load harness signs with them too. Fails, naming the crate and the dependency,
# when a crate's normal dependencies (direct or not) reach a layer it must
# not know.
set -euo pipefail
cargo=${CARGO:-cargo}
io='diesel|diesel-async|diesel_migrations|actix-web|actix-http|rdkafka|rdkafka-sys|tokio-postgres|bb8|r2d2|pq-sys|reqwest|tokio|hyper'
web='actix-web|actix-http|actix-server|utoipa-actix-web|utoipa-swagger-ui|tracing-actix-web|chatlab-api'
declare -A forbidden=(
    [chatlab-domain]="$io|chatlab-persistence|chatlab-kafka|chatlab-api"
    [chatlab-persistence]="$web|rdkafka|rdkafka-sys|chatlab-kafka"
    [chatlab-kafka]="$web|diesel|diesel-async|bb8|r2d2|pq-sys|tokio-postgres|chatlab-persistence"
    [chatlab-telemetry]="$io|chatlab-domain|chatlab-persistence|chatlab-kafka|chatlab-api|opentelemetry-otlp|tonic"
    [chatlab-auth]="$io|chatlab-persistence|chatlab-kafka|chatlab-api"
)
status=0
for crate in chatlab-domain chatlab-persistence chatlab-kafka chatlab-telemetry chatlab-auth; do
    bad=$("$cargo" tree -p "$crate" -e normal --prefix none 2>/dev/null \
        | awk '{print $1}' | sort -u | grep -xE "${forbidden[$crate]}" || true)
    if [ -n "$bad" ]; then
        echo "layering: $crate must not depend on: $(echo "$bad" | tr '\n' ' ')"
        status=1
    else
        echo "layering ok: $crate"
    fi
done
exit $status
