#!/usr/bin/env python3
"""Connection hold time of createChat per insert strategy and publish mode,
on a running server.

Creates CHATS chats of MEMBERS members with each combination of STRATEGIES
and MODES in turn (A B C A B C ..., so drift of a shared machine falls on
all alike), one request at a time, through the X-Chatlab-Insert-Strategy and
X-Chatlab-Publish-Mode headers (the server must run with
CHATLAB_ALLOW_OVERRIDES=true), then reads the server's
chatlab_create_chat_connection_hold_seconds histogram and prints, per
combination, the INSERT statements per chat and the mean and p95 hold time.

    BASE_URL=http://127.0.0.1:8080 OPS_URL=http://127.0.0.1:9464 MEMBERS=50 CHATS=300 python3 scripts/hold_time.py
    STRATEGIES=batch MODES=in_tx_await,after_commit,outbox python3 scripts/hold_time.py

BROKER_RTT_MS, when set, is the round-trip time the server's mock broker
was given (KAFKA_MOCK_BROKER_RTT_MS): the table gains a first column with
it. HEADER=0 prints the rows alone, so `scripts/hold-time.sh` (`make
loadtest-hold`) can put several servers' rows in one table.

BASE_URL is the server's public listener; OPS_URL its operator listener
(OPS_ADDR, default http://127.0.0.1:9464), where /metrics is read and the
members are seeded (POST /v1/users/bulk). The creator is made with
POST /v1/users, whose answer carries its token: every createChat goes with
it, so no secret is needed here.

Only the standard library; sends traffic to BASE_URL and OPS_URL only, a
bounded number of requests. This is a single-client probe of cost per
transaction, not a load test (that is the load harness's job).
"""
import json
import os
import re
import sys
import urllib.error
import urllib.request

BASE = os.environ.get("BASE_URL", "http://127.0.0.1:8080").rstrip("/")
OPS = os.environ.get("OPS_URL", "http://127.0.0.1:9464").rstrip("/")
MEMBERS = int(os.environ.get("MEMBERS", "50"))
CHATS = int(os.environ.get("CHATS", "300"))
STRATEGIES = os.environ.get("STRATEGIES", "per_row,batch,unnest").split(",")
MODES = os.environ.get("MODES", "off").split(",")
COMBOS = [(s, m) for s in STRATEGIES for m in MODES]


def call(method, path, body=None, headers=None, base=BASE):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("content-type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        hint = ""
        if e.code == 404 and base == OPS:
            hint = f" (is OPS_URL={OPS} the server's OPS_ADDR?)"
        sys.exit(f"{method} {base}{path} answered {e.code}{hint}: {e.read().decode()[:300]}")


def scrape():
    _, text = call("GET", "/metrics", base=OPS)
    hist = {}
    pattern = re.compile(
        r'^chatlab_create_chat_connection_hold_seconds_(bucket|sum|count)\{(.*?)\} (\S+)'
    )
    for line in text.splitlines():
        m = pattern.match(line)
        if not m:
            continue
        kind, labels, value = m.groups()
        strategy = re.search(r'strategy="([^"]+)"', labels).group(1)
        mode = re.search(r'publish_mode="([^"]+)"', labels).group(1)
        h = hist.setdefault((strategy, mode), {"buckets": []})
        if kind == "bucket":
            le = re.search(r'le="([^"]+)"', labels).group(1)
            h["buckets"].append((float("inf") if le == "+Inf" else float(le), float(value)))
        else:
            h[kind] = float(value)
    stmts = {}
    for line in text.splitlines():
        m = re.match(r'^chatlab_create_chat_statements_total\{strategy="([^"]+)"\} (\S+)', line)
        if m:
            stmts[m.group(1)] = float(m.group(2))
    return hist, stmts


def quantile(buckets, count, q):
    """Upper bound of the bucket holding the q-quantile."""
    target = q * count
    for le, cumulative in buckets:
        if cumulative >= target:
            return le
    return float("inf")


def main():
    # The creator, with its token; the other MEMBERS - 1 members in bulk.
    _, body = call("POST", "/v1/users", {"name": "hold-creator"})
    creator = json.loads(body)
    if not creator.get("token"):
        sys.exit("POST /v1/users answered no token: the server cannot issue tokens")
    auth = {"Authorization": f"Bearer {creator['token']}"}
    others = []
    if MEMBERS > 1:
        _, body = call("POST", "/v1/users/bulk", {"count": MEMBERS - 1, "name_prefix": "hold-"},
                       base=OPS)
        others = json.loads(body)["ids"]
    before, stmts_before = scrape()
    for i in range(CHATS):
        for strategy, mode in COMBOS:
            status, _ = call(
                "POST",
                "/v1/chats",
                {"name": f"hold {i}", "member_ids": others},
                {"X-Chatlab-Insert-Strategy": strategy, "X-Chatlab-Publish-Mode": mode, **auth},
            )
            if status != 201:
                sys.exit(f"createChat answered {status}")
    after, stmts_after = scrape()
    rtt = os.environ.get("BROKER_RTT_MS")
    lead = f"| {rtt} " if rtt is not None else ""
    if os.environ.get("HEADER", "1") != "0":
        print(f"members={MEMBERS} chats per combination={CHATS} (one client, interleaved)")
        print(("| broker RTT ms " if rtt is not None else "")
              + "| strategy | publish mode | INSERTs per chat | mean hold ms | p95 hold ms (bucket bound) |")
        print("|---" * (6 if rtt is not None else 5) + "|")
    for s, m in COMBOS:
        key = (s, m)
        a, b = after.get(key, {}), before.get(key, {"sum": 0, "count": 0, "buckets": []})
        count = a.get("count", 0) - b.get("count", 0)
        total = a.get("sum", 0) - b.get("sum", 0)
        prior = dict(b.get("buckets", []))
        buckets = [(le, c - prior.get(le, 0)) for le, c in a.get("buckets", [])]
        # Statements are counted per strategy; with several modes, per chat
        # of that strategy.
        per_strategy = count * len(MODES)
        stmts = (stmts_after.get(s, 0) - stmts_before.get(s, 0)) / max(per_strategy, 1)
        mean = 1000 * total / max(count, 1)
        p95 = 1000 * quantile(buckets, count, 0.95)
        print(f"{lead}| {s} | {m} | {stmts:.0f} | {mean:.2f} | {p95:.2f} |")


if __name__ == "__main__":
    main()
