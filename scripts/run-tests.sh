#!/usr/bin/env bash
# Runs the workspace's tests on the async driver, then the repository and
# HTTP suites again on the blocking driver (CHATLAB_TEST_DB_DRIVER=blocking);
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
echo "== repository and HTTP suites on the blocking driver (diesel PgConnection, r2d2)" | tee -a "$log"
CHATLAB_TEST_DB_DRIVER=blocking cargo test -p chatlab-persistence -p chatlab-api --tests --no-fail-fast "$@" 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
awk '/^test result:/ {
        for (i = 1; i <= NF; i++) {
            if ($(i+1) ~ /^passed/) p += $i
            if ($(i+1) ~ /^failed/) f += $i
            if ($(i+1) ~ /^ignored/) g += $i
        }
     }
     END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, g }' "$log"
exit "$status"
