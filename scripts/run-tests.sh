#!/usr/bin/env bash
# Runs the workspace's tests on the async driver (and the default pool
# layout, per_worker), then the repository and HTTP suites again on the
# blocking driver and the shared layout (CHATLAB_TEST_DB_DRIVER=blocking,
# CHATLAB_TEST_POOL_LAYOUT=shared), then the repository suite once through
# PgBouncer in transaction mode (CHATLAB_TEST_POOLER);
# every test binary runs even after one fails. Closes with one total line,
# "tests: N passed, N failed, N skipped" (ignored tests count as skipped),
# summed over every test binary of both runs.
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
echo "== tests on the async driver (diesel-async, bb8)" | tee -a "$log"
CHATLAB_TEST_DB_DRIVER=async cargo test --workspace --all-targets --no-fail-fast "$@" 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "== repository and HTTP suites on the blocking driver (diesel PgConnection, r2d2) and the shared pool layout" | tee -a "$log"
# The test binaries the first run built, run again: asking cargo for the two
# packages alone would unify their dependencies' features anew and rebuild
# half the workspace. Each runs in its package's folder, as cargo runs it.
suites=$(cargo test --workspace --all-targets --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys, os
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m["profile"]["test"]:
        continue
    # package_id: path+file:///…/crates/api#chatlab-api@0.1.0
    if m["package_id"].rsplit("#", 1)[-1].split("@")[0] in ("chatlab-persistence", "chatlab-api"):
        print(os.path.dirname(m["manifest_path"]), m["executable"])
')
[ -n "$suites" ] || { echo "no test binaries of chatlab-persistence and chatlab-api found" | tee -a "$log"; status=1; }
while read -r dir exe; do
    [ -n "$exe" ] || continue
    echo "     Running $exe (blocking driver)" | tee -a "$log"
    (cd "$dir" && CHATLAB_TEST_DB_DRIVER=blocking CHATLAB_TEST_POOL_LAYOUT=shared "$exe" "$@") 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done <<<"$suites"
echo "== the repository suite through PgBouncer (transaction pooling): blocking driver, no statement cache, no session SETs" | tee -a "$log"
# What a fleet behind a transaction pooler runs (docs/operations.md,
# "PgBouncer"): Debian's PgBouncer (1.18) in front of the test server, the
# suite's pools connecting through it, its databases made and checked
# straight. The async driver cannot run behind 1.18 in transaction mode (it
# prepares named statements in a Sync of their own), which the docs say.
pooler_port=$(scripts/pgbouncer.sh start 0 --mode transaction --pool 20) || status=1
if [[ -n "${pooler_port:-}" ]]; then
    while read -r dir exe; do
        [[ "$exe" == */repository-* ]] || continue
        echo "     Running $exe (through PgBouncer on $pooler_port)" | tee -a "$log"
        (cd "$dir" && CHATLAB_TEST_DB_DRIVER=blocking CHATLAB_TEST_POOLER="127.0.0.1:$pooler_port" "$exe" "$@") 2>&1 | tee -a "$log"
        [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    done <<<"$suites"
    scripts/pgbouncer.sh stop "$pooler_port"
fi
awk '/^test result:/ {
        for (i = 1; i <= NF; i++) {
            if ($(i+1) ~ /^passed/) p += $i
            if ($(i+1) ~ /^failed/) f += $i
            if ($(i+1) ~ /^ignored/) g += $i
        }
     }
     END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, g }' "$log"
exit "$status"
