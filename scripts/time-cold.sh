#!/usr/bin/env bash
# How long the README's commands take on a fresh machine, measured: clones
# the committed HEAD into a scratch folder and runs each COMMAND there in
# turn, as a newcomer would, with a HOME and a CARGO_HOME of its own (so no
# crate is downloaded or built yet, and ~/.cache/chatlab, where tansu and
# the cargo tools go, is empty). The machine's Rust toolchain
# (RUSTUP_HOME) and its running services are used as they are.
#
#   scripts/time-cold.sh 'make demo' 'make demo'
#   scripts/time-cold.sh --timings 'make demo'
#   scripts/time-cold.sh --forget-installed 'make test' 'make test'
#   scripts/time-cold.sh --forget-installed 'bash .ci/run'
#
# --timings has make's load-build pass `--timings` to cargo
# (LOAD_BUILD_FLAGS), and adds where each build's time went to the
# results (scripts/build-timings.py on the report cargo wrote).
# --forget-installed first removes what the targets install system-wide,
# so they must install it again: Debian's prometheus and wrk, and
# schemathesis from PyPI. (The fresh HOME already takes care of tansu and
# the cargo tools.) Commands after the first find what the first left: run
# one command twice to get its cold and warm time.
#
# Writes results/cold-<UTC time>/results.md (one row per command: exit
# status and wall time) with each command's log beside it, and copies the
# results folders the commands wrote (a demo's run, say) into results/.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
forget=0
timings=0
while [[ "${1:-}" == --* ]]; do
    case "$1" in
        --forget-installed) forget=1 ;;
        --timings) timings=1 ;;
        *) echo "time-cold: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
[[ $# -gt 0 ]] || { echo "usage: $0 [--forget-installed] COMMAND..." >&2; exit 2; }

stamp=$(date -u +%Y%m%dT%H%M%SZ)
out="$root/results/cold-$stamp"
mkdir -p "$out"
scratch=$(mktemp -d /tmp/chatlab-cold-XXXXXX)
git clone --quiet "$root" "$scratch/repo"
# The project's shared folder (the seeds, the stack notes) beside it, as CI has it.
[[ -d "$root/../shared" ]] && cp -r "$root/../shared" "$scratch/shared"
mkdir -p "$scratch/home" "$scratch/cargo"
rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin

if [[ $forget == 1 ]]; then
    echo "time-cold: removing prometheus, wrk (Debian) and schemathesis (PyPI)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq prometheus wrk >/dev/null 2>&1 || true
    python3 -m pip uninstall -y -q schemathesis >/dev/null 2>&1 || true
fi

{
    echo "# Cold start: the README's commands on a fresh clone"
    echo
    echo "Commit $(git -C "$root" rev-parse --short HEAD), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(free -g | awk '/Mem:/ {print $2}') GiB, $(date -u '+%Y-%m-%d %H:%M UTC'). \`scripts/time-cold.sh$([[ $forget == 1 ]] && echo ' --forget-installed')$([[ $timings == 1 ]] && echo ' --timings') $*\`: a fresh clone, a HOME and CARGO_HOME of its own (no crate downloaded, nothing built, no tool installed by an earlier run)$([[ $forget == 1 ]] && echo ', and prometheus, wrk and schemathesis removed first'); the commands run one after the other, each finding what the earlier ones left."
    echo
    echo "PostgreSQL: not measured by this run, which times the commands; the runs they wrote (listed at the end) state its version and distance."
    echo
    echo "| # | command | exit | wall time | min:s |"
    echo "|---|---|---|---|---|"
} >"$out/results.md"

# The steps .ci/run announced ("== [MmSSs] step"), with the time since it
# began, from each log that has them: where a cold run's minutes went.
steps() {
    local log
    for log in "$1"/*.log; do
        grep -q '^== \[' "$log" || continue
        echo
        echo "Steps of $(basename "$log"), as it printed them (time since it began):"
        echo
        grep -h '^== \[' "$log" | sed 's/^== /- /'
    done
}

status=0
n=0
for command in "$@"; do
    n=$((n + 1))
    log="$out/$n.log"
    echo "time-cold: [$n] $command (log: $log)" >&2
    start=$(date +%s)
    extra=()
    [[ $timings == 1 ]] && extra=(LOAD_BUILD_FLAGS=--timings)
    (cd "$scratch/repo" && env HOME="$scratch/home" CARGO_HOME="$scratch/cargo" \
        RUSTUP_HOME="$rustup_home" PATH="$cargo_bin:$PATH" "${extra[@]}" bash -c "$command") >"$log" 2>&1
    code=$?
    secs=$(( $(date +%s) - start ))
    [[ $code -eq 0 ]] || status=1
    printf '| %d | `%s` | %d | %d s | %d:%02d |\n' "$n" "$command" "$code" "$secs" $((secs / 60)) $((secs % 60)) >>"$out/results.md"
    echo "time-cold: [$n] exit $code after ${secs}s" >&2
done

# What cargo said each build took, from the logs.
{
    echo
    echo "Builds, as cargo reported them in each log:"
    echo
    for log in "$out"/*.log; do
        grep -h 'Finished `' "$log" | sed "s|^ *|- $(basename "$log"): |"
    done
} >>"$out/results.md"
steps "$out" >>"$out/results.md"

# Where each build's time went, from cargo's own reports (--timings).
for report in "$scratch"/repo/target/cargo-timings/cargo-timing-2*.html; do
    [[ -e "$report" ]] || continue
    {
        echo
        echo "Where the time of the build $(basename "$report" .html) went (\`scripts/build-timings.py\`, $(nproc) cores):"
        echo
        "$root/scripts/build-timings.py" "$report"
    } >>"$out/results.md"
done

# The runs the commands wrote, kept with the rest.
for run in "$scratch"/repo/results/*/; do
    name=$(basename "$run")
    [[ -e "$root/results/$name" ]] || cp -r "$run" "$root/results/$name"
done
echo >>"$out/results.md"
echo "Runs the commands wrote: $(cd "$scratch/repo/results" && comm -13 <(git -C "$scratch/repo" ls-tree --name-only HEAD results/ | sed 's|results/||' | sort) <(ls | sort) | tr '\n' ' ')" >>"$out/results.md"
cat "$out/results.md"
# The scratch clone holds a target/ of gigabytes: removed unless KEEP=1.
[[ "${KEEP:-0}" == 1 ]] || rm -rf "$scratch"
exit $status
