#!/usr/bin/env python3
"""Slow clients against a real chatlab: many sockets that send a request's
headers (Content-Length: 1000) and one byte of its body, then nothing.

Issue 13 found a server that waited on such sockets forever: with 20,000 of
them it ran out of file descriptors, stopped accepting, /healthz timed out
and memory doubled. This experiment opens SOCKETS of them against a release
build, holds them HOLD seconds, and samples every half second the server's
RSS, open descriptors and pooled connections in use, and /healthz's latency
on a fresh connection. It fails when an invariant breaks:

- the server stays up, and /healthz answers within 2 s once the attack ends;
- every socket the server accepted is answered 408 (or closed) within the
  body timeout plus its sweep (HTTP_BODY_TIMEOUT_MS + 3 s);
- no pooled database connection is in use while bodies trickle;
- open descriptors never exceed workers x HTTP_MAX_CONNECTIONS_PER_WORKER
  plus a fixed margin, and fall back near where they started.

Traffic goes to 127.0.0.1 only (from 127.0.0.2, so the attack's ephemeral
ports never take one another experiment listens on); every loop is bounded
in count and time.

  scripts/fault-slow-clients.py --database-url postgres://postgres@127.0.0.1:5432/postgres
"""

import argparse
import asyncio
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

MARGIN_FDS = 256

# The attack's sockets take their ephemeral ports on 127.0.0.2 (all of
# 127/8 is loopback): thousands of them on 127.0.0.1 would hold ports that
# the next experiment may want to listen on (seen: the private PostgreSQL
# cluster on 55432 could not start right after this one).
CLIENT_ADDR = "127.0.0.2"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def metric(ops, name):
    try:
        with urllib.request.urlopen(f"{ops}/metrics", timeout=2) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name):
                    return float(line.rsplit(" ", 1)[1])
    except OSError:
        return None
    return None


async def healthz_ms(port, timeout=2.0):
    """Latency of GET /healthz on a fresh connection, or None on timeout."""
    started = time.monotonic()
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port), timeout
        )
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout)
        writer.close()
        if not line.startswith(b"HTTP/1.1 200"):
            return None
        return (time.monotonic() - started) * 1000
    except (OSError, asyncio.TimeoutError):
        return None


async def slow_client(port, outcomes, deadline, gate):
    """One socket: headers, one body byte, then wait for the server's answer."""
    try:
        async with gate:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, local_addr=(CLIENT_ADDR, 0)), 5
            )
    except (OSError, asyncio.TimeoutError):
        outcomes["not accepted"] += 1
        return
    opened = time.monotonic()
    writer.write(
        b"POST /v1/users HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    )
    try:
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), max(0.1, deadline - time.monotonic()))
        status = line.split(b" ")[1].decode() if line.startswith(b"HTTP/") else "closed"
        outcomes[status] = outcomes.get(status, 0) + 1
        outcomes["answered after s"].append(time.monotonic() - opened)
    except asyncio.TimeoutError:
        outcomes["still open"] += 1
    except OSError:
        outcomes["closed"] = outcomes.get("closed", 0) + 1
    finally:
        writer.close()


async def attack(args, port, ops, ops_port, pid):
    samples = []
    outcomes = {"not accepted": 0, "still open": 0, "answered after s": []}
    started = time.monotonic()
    deadline = started + args.hold
    stop = asyncio.Event()

    async def sampler():
        while not stop.is_set():
            samples.append(
                {
                    "t": time.monotonic() - started,
                    "rss": rss_mib(pid),
                    "fds": open_fds(pid),
                    "used": metric(ops, 'db_client_connection_count{db_client_connection_state="used"}'),
                    "healthz": await healthz_ms(port),
                    "ops_healthz": await healthz_ms(ops_port),
                }
            )
            await asyncio.sleep(0.5)

    sampling = asyncio.create_task(sampler())
    # At most 500 connects in flight at once; the sockets stay open.
    gate = asyncio.Semaphore(500)
    await asyncio.gather(*(slow_client(port, outcomes, deadline, gate) for _ in range(args.sockets)))
    stop.set()
    await sampling
    return samples, outcomes, time.monotonic() - started


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server-bin", default="target/release/chatlab")
    p.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    p.add_argument("--sockets", type=int, default=int(os.environ.get("SOCKETS", 15000)))
    p.add_argument("--hold", type=float, default=float(os.environ.get("HOLD", 25)))
    p.add_argument("--body-timeout-ms", type=int, default=int(os.environ.get("BODY_TIMEOUT_MS", 10000)))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--max-connections-per-worker", type=int, default=2048)
    p.add_argument("--out", default=None)
    args = p.parse_args()

    admin = args.database_url
    db = f"chatlab_slow_{os.getpid()}"
    subprocess.run(["psql", admin, "-qc", f"CREATE DATABASE {db}"], check=True)
    port, ops_port = free_port(), free_port()
    out = Path(args.out or f"results/slow-clients-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / "server.log", "w")
    env = dict(
        os.environ,
        DATABASE_URL=admin.rsplit("/", 1)[0] + "/" + db,
        HTTP_ADDR=f"127.0.0.1:{port}",
        OPS_ADDR=f"127.0.0.1:{ops_port}",
        HTTP_WORKERS=str(args.workers),
        HTTP_MAX_CONNECTIONS_PER_WORKER=str(args.max_connections_per_worker),
        HTTP_BODY_TIMEOUT_MS=str(args.body_timeout_ms),
        CHATLAB_JWT_SECRET=secrets.token_hex(32),
        KAFKA_BROKERS="",
        RUST_LOG="warn",
    )
    server = subprocess.Popen([args.server_bin, "serve"], env=env, stdout=log, stderr=log)
    ops = f"http://127.0.0.1:{ops_port}"
    failures = []
    try:
        for _ in range(150):
            if asyncio.run(healthz_ms(port, 1.0)) is not None:
                break
            if server.poll() is not None:
                sys.exit(f"the server exited; see {out / 'server.log'}")
            time.sleep(0.2)
        before = {"rss": rss_mib(server.pid), "fds": open_fds(server.pid)}
        # The server holds workers x limit sockets at a time; the rest wait
        # in the kernel's accept queue for the next wave. Hold long enough
        # for every wave to be answered.
        capacity = args.workers * args.max_connections_per_worker
        waves = -(-args.sockets // capacity)
        hold = max(args.hold, waves * args.body_timeout_ms / 1000 + 5)
        args.hold = hold
        samples, outcomes, took = asyncio.run(attack(args, port, ops, ops_port, server.pid))
        time.sleep(1)
        after_healthz = asyncio.run(healthz_ms(port))
        after = {"rss": rss_mib(server.pid), "fds": open_fds(server.pid)}
        alive = server.poll() is None

        answered = outcomes.pop("answered after s")
        fd_bound = args.workers * args.max_connections_per_worker + MARGIN_FDS
        peak_fds = max(s["fds"] for s in samples)
        peak_rss = max(s["rss"] for s in samples)
        used = [s["used"] for s in samples if s["used"] is not None]
        def probe_figures(key):
            values = [s[key] for s in samples]
            ok = sorted(v for v in values if v is not None)
            p50 = ok[len(ok) // 2] if ok else float("nan")
            worst = ok[-1] if ok else float("nan")
            missed = len(values) - len(ok)
            return f"{p50:.1f} / {worst:.1f}, {missed} of {len(values)}"
        if not alive:
            failures.append("the server died")
        if after_healthz is None or after_healthz > 2000:
            failures.append(f"/healthz after the attack: {after_healthz}")
        if outcomes["still open"]:
            failures.append(f"{outcomes['still open']} accepted sockets still open after {hold:.0f} s")
        if any(u > 0 for u in used):
            failures.append(f"pooled connections in use while bodies trickled: max {max(used)}")
        if peak_fds > fd_bound:
            failures.append(f"open descriptors peaked at {peak_fds} > {fd_bound}")
        if after["fds"] > before["fds"] + 64:
            failures.append(f"descriptors did not come back: {before['fds']} -> {after['fds']}")
        late = [a for a in answered if a > args.body_timeout_ms / 1000 + 3]

        lines = [
            f"# Slow clients: {args.sockets} sockets, headers and one body byte each",
            "",
            f"Server: `{args.server_bin}`, {args.workers} workers, "
            f"HTTP_MAX_CONNECTIONS_PER_WORKER={args.max_connections_per_worker}, "
            f"HTTP_BODY_TIMEOUT_MS={args.body_timeout_ms}; held {hold:.0f} s (took {took:.1f} s). "
            "Command: `make fault-slow-clients`.",
            "",
            "| figure | value |",
            "|---|---|",
            f"| sockets answered 408 | {outcomes.get('408', 0)} |",
            f"| sockets closed without an answer | {outcomes.get('closed', 0)} |",
            f"| sockets not accepted within 5 s (kernel backlog full) | {outcomes['not accepted']} |",
            f"| accepted sockets still open at the end | {outcomes['still open']} |",
            f"| slowest answer after connect, s | {max(answered, default=0):.1f} |",
            f"| answers later than the body timeout + 3 s (queued in the kernel for a later wave) | {len(late)} |",
            f"| open descriptors: before, peak, after (bound {fd_bound}) | {before['fds']}, {peak_fds}, {after['fds']} |",
            f"| RSS MiB: before, peak, after | {before['rss']:.1f}, {peak_rss:.1f}, {after['rss']:.1f} |",
            f"| pooled connections in use during the attack (max) | {max(used, default=0):.0f} |",
            f"| public /healthz during the attack: p50 / max ms, timeouts (2 s) of samples | {probe_figures('healthz')} |",
            f"| operator /healthz (OPS_ADDR) during the attack: p50 / max ms, timeouts | {probe_figures('ops_healthz')} |",
            f"| /healthz after the attack, ms | {after_healthz if after_healthz is None else round(after_healthz, 1)} |",
            "",
            "Invariants: " + ("all held" if not failures else "BROKEN: " + "; ".join(failures)),
            "",
        ]
        other = {k: v for k, v in outcomes.items() if k not in ("408", "closed", "not accepted", "still open")}
        if other:
            lines.insert(-2, f"Other answers: {other}")
        (out / "results.md").write_text("\n".join(lines))
        with open(out / "samples.csv", "w") as f:
            f.write("t_s,rss_mib,open_fds,pool_used,healthz_ms,ops_healthz_ms\n")
            for s in samples:
                f.write(
                    f"{s['t']:.2f},{s['rss']:.1f},{s['fds']},{s['used']},{s['healthz']},{s['ops_healthz']}\n"
                )
        print("\n".join(lines))
        print(f"results: {out}")
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {db}"], check=False)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
