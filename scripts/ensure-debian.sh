#!/usr/bin/env bash
# Installs a Debian package the make targets need when this machine lacks
# it, once, so a target works on a fresh machine with nothing but Rust and
# make (the README's quick start):
#
#   scripts/ensure-debian.sh prometheus --command prometheus --stop-service
#   scripts/ensure-debian.sh libpq-dev
#   scripts/ensure-debian.sh wrk --command wrk
#
# With --command, the package counts as there when that command is on
# PATH (it may have come from elsewhere); without, when dpkg has it.
# --stop-service stops the service the package starts on install (Debian's
# prometheus listens on 9090 otherwise). Runs apt-get as root, or through
# sudo.
set -euo pipefail
say() { printf 'ensure-debian: %s\n' "$*" >&2; }

package=${1:?usage: $0 PACKAGE [--command NAME] [--stop-service]}
shift
command=""
stop_service=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --command) command=${2:?--command needs a name}; shift 2 ;;
        --stop-service) stop_service=1; shift ;;
        *) say "unknown argument $1"; exit 2 ;;
    esac
done

if [[ -n "$command" ]]; then
    command -v "$command" >/dev/null 2>&1 && exit 0
elif dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
    exit 0
fi

sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
say "installing Debian's $package (apt-get, once)"
$sudo apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$package" >&2
if [[ $stop_service == 1 ]]; then
    $sudo service "$package" stop >/dev/null 2>&1 || true
fi
