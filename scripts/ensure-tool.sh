#!/usr/bin/env bash
# Prints the path of a cargo-installed tool the checks need, installing it
# first when it is missing, once, into ~/.cache/chatlab/<tool>-<version>
# (so an install with other features is never mistaken for this one):
#
#   scripts/ensure-tool.sh diesel      diesel_cli 2.3, PostgreSQL only (links libpq)
#   scripts/ensure-tool.sh machete     cargo-machete
#   scripts/ensure-tool.sh deny        cargo-deny
#
# The versions are pinned here, and installed with --locked and --debug:
# they run for seconds on this repository, and an unoptimised build takes
# a fraction of the time to compile on a fresh machine (CI's first run).
set -euo pipefail
say() { printf 'ensure-tool: %s\n' "$*" >&2; }
case "${1:-}" in
    diesel) crate=diesel_cli version=2.3.14 bin=diesel args=(--no-default-features --features postgres) ;;
    machete) crate=cargo-machete version=0.9.2 bin=cargo-machete args=() ;;
    deny) crate=cargo-deny version=0.20.2 bin=cargo-deny args=() ;;
    *) say "usage: $0 diesel|machete|deny"; exit 2 ;;
esac
root=${CHATLAB_TOOLS:-$HOME/.cache/chatlab}/$crate-$version-debug
if [[ ! -x "$root/bin/$bin" ]]; then
    say "installing $crate $version into $root (cargo install, once)"
    cargo install "$crate@$version" --locked --debug --root "$root" "${args[@]}" >&2
fi
echo "$root/bin/$bin"
