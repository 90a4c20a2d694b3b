#!/usr/bin/env python3
"""Where a cargo build's time went, from the report `cargo build --timings`
wrote (target/cargo-timings/cargo-timing-*.html): its wall time, the sum of
its units' times (on N cores at most N run at once), the units that took
longest, and the share of our own crates. Prints Markdown.

    scripts/build-timings.py target/cargo-timings/cargo-timing-<stamp>.html
"""
import json
import re
import sys

OURS = ("chatlab-",)


def main(path: str) -> int:
    text = open(path, encoding="utf-8").read()
    found = re.search(r"const UNIT_DATA = (\[.*?\]);\n", text, re.S)
    if not found:
        print(f"build-timings: no unit data in {path}", file=sys.stderr)
        return 1
    units = json.loads(found.group(1))
    wall = max(u["start"] + u["duration"] for u in units)
    by_name: dict[str, float] = {}
    for u in units:
        by_name[u["name"]] = by_name.get(u["name"], 0.0) + u["duration"]
    total = sum(by_name.values())
    ours = sum(t for n, t in by_name.items() if n.startswith(OURS))
    print(f"The build's units ({len(units)}, of {len(by_name)} packages) took {total:.0f} s "
          f"in all over {wall:.0f} s of wall time; chatlab's own crates {ours:.0f} s of them "
          f"({ours / total * 100:.0f}%). A unit's time is its wall time, so units that "
          f"shared the cores count the time they waited for them too.")
    print()
    print("| package | s | share |")
    print("|---|---|---|")
    for name, secs in sorted(by_name.items(), key=lambda kv: -kv[1])[:20]:
        print(f"| {name} | {secs:.1f} | {secs / total * 100:.1f}% |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
