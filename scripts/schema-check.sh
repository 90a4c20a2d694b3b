#!/usr/bin/env bash
# crates/persistence/src/schema.rs is kept by hand in `diesel print-schema`'s
# layout; this fails when it is not exactly what diesel_cli generates from
# migrations/ (its module doc comment aside). It migrates a scratch
# database on the PostgreSQL at DATABASE_URL (the server's admin URL,
# default postgres://postgres@127.0.0.1:5432/postgres) and drops it after.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
admin=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
diesel=$(scripts/ensure-tool.sh diesel)
db="chatlab_schema_check_$$"
base=${admin%%\?*}
url="${base%/*}/$db"
psql "$admin" -Xqc "CREATE DATABASE $db" >/dev/null
trap 'psql "$admin" -Xqc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null' EXIT
"$diesel" migration run --database-url "$url" --migration-dir migrations >/dev/null
generated=$(mktemp)
"$diesel" print-schema --database-url "$url" >"$generated"
if diff -u --label "diesel print-schema" --label "crates/persistence/src/schema.rs" \
    "$generated" <(grep -v '^//!' crates/persistence/src/schema.rs); then
    echo "schema ok: crates/persistence/src/schema.rs is what diesel print-schema generates"
    rm -f "$generated"
else
    rm -f "$generated"
    echo "schema.rs differs from the migrated database (above); regenerate it with diesel print-schema" >&2
    exit 1
fi
