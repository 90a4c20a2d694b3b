#!/usr/bin/env bash
# Runs the workspace's tests and closes with one total line,
# "tests: N passed, N failed, N skipped" (ignored tests count as skipped), summed over every test binary.
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace --all-targets "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
awk '/^test result:/ {
        for (i = 1; i <= NF; i++) {
            if ($(i+1) ~ /^passed/) p += $i
            if ($(i+1) ~ /^failed/) f += $i
            if ($(i+1) ~ /^ignored/) g += $i
        }
     }
     END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, g }' "$log"
exit "$status"
