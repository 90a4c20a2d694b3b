#!/usr/bin/env python3
"""Live connections against a release chatlab: what an idle stream costs,
and how long one message takes to reach every stream.

Opens CONNECTIONS `GET /v1/events` streams (ten per user, every user a
member of one chat), samples the server's RSS before and after, then posts
MESSAGES messages to the chat one at a time and times, for each, the
delivery to every stream (from the POST's start to the frame's arrival).
Prints and writes results/live-idle-<UTC>/results.md.

Traffic goes to 127.0.0.1 only, from 127.0.0.2 (so thousands of client
ports never take one another experiment listens on); every loop is bounded
in count and time.

  scripts/live-idle.py --connections 10000 --messages 20
"""

import argparse
import asyncio
import importlib.util
import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path

# The slow-clients experiment's probes: free ports, RSS, descriptors,
# metrics, /healthz, tokens.
_spec = importlib.util.spec_from_file_location(
    "slow_clients", Path(__file__).with_name("fault-slow-clients.py")
)
probes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probes)

CLIENT_ADDR = probes.CLIENT_ADDR
MESSAGE_ID = re.compile(rb'"message_id":"([0-9a-f-]{36})"')


# HS256 tokens as the server's own, and a JSON POST.
token = probes.token
post = probes.post


class Stream:
    """One open `GET /v1/events`, recording when each message arrived."""

    def __init__(self):
        self.arrivals = {}
        self.ok = False

    async def run(self, port, bearer, gate, opened, stop):
        try:
            async with gate:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", port, local_addr=(CLIENT_ADDR, 0)), 10
                )
                writer.write(
                    f"GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    f"Authorization: Bearer {bearer}\r\n\r\n".encode()
                )
                await writer.drain()
                status = await asyncio.wait_for(reader.readline(), 10)
                self.ok = status.startswith(b"HTTP/1.1 200")
                await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            opened.release()
            return
        opened.release()
        try:
            while not stop.is_set():
                try:
                    chunk = await asyncio.wait_for(reader.read(65536), 1.0)
                except asyncio.TimeoutError:
                    continue
                if not chunk:
                    break
                now = time.monotonic()
                for m in MESSAGE_ID.finditer(chunk):
                    self.arrivals.setdefault(m.group(1).decode(), now)
        except OSError:
            pass
        finally:
            writer.close()


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


async def experiment(args, port, ops, pid, secret):
    users = post(f"{ops}/v1/users/bulk", {"count": max(1, args.connections // 10)})["ids"]
    bearers = {u: token(secret, u) for u in users}
    base = f"http://127.0.0.1:{port}"
    chat = post(f"{base}/v1/chats", {"name": "live idle", "member_ids": users[1:]}, bearers[users[0]])
    rss_before = probes.rss_mib(pid)
    fds_before = probes.open_fds(pid)
    stop = asyncio.Event()
    gate = asyncio.Semaphore(500)
    opened = asyncio.Semaphore(0)
    streams = [Stream() for _ in range(args.connections)]
    tasks = [
        asyncio.create_task(s.run(port, bearers[users[i % len(users)]], gate, opened, stop))
        for i, s in enumerate(streams)
    ]
    started = time.monotonic()
    for _ in streams:
        await asyncio.wait_for(opened.acquire(), 120)
    open_took = time.monotonic() - started
    await asyncio.sleep(3)
    connected = sum(s.ok for s in streams)
    rss_open = probes.rss_mib(pid)
    fds_open = probes.open_fds(pid)
    gauge = probes.metric(ops, "chatlab_live_connections")
    sent = []
    for i in range(args.messages):
        t0 = time.monotonic()
        m = await asyncio.to_thread(
            post, f"{base}/v1/chats/{chat['id']}/messages", {"body": f"live {i}"}, bearers[users[0]]
        )
        sent.append((m["id"], t0))
        # Wait until every stream has it, or 10 s.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(
            m["id"] not in s.arrivals for s in streams if s.ok
        ):
            await asyncio.sleep(0.01)
        await asyncio.sleep(args.gap)
    latencies = []
    complete = []
    missing = 0
    for message_id, t0 in sent:
        arrived = [s.arrivals[message_id] - t0 for s in streams if s.ok and message_id in s.arrivals]
        missing += connected - len(arrived)
        latencies.extend(arrived)
        if arrived:
            complete.append(max(arrived))
    rss_after = probes.rss_mib(pid)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {
        "connections asked": args.connections,
        "connections open (client)": connected,
        "chatlab_live_connections": gauge,
        "users": len(users),
        "seconds to open them": round(open_took, 1),
        "RSS before, MiB": round(rss_before, 1),
        "RSS with them open, MiB": round(rss_open, 1),
        "RSS per open connection, KiB": round((rss_open - rss_before) * 1024 / max(1, connected), 1),
        "descriptors before / open": f"{fds_before} / {fds_open}",
        "messages": args.messages,
        "deliveries": len(latencies),
        "deliveries missing": missing,
        "delivery p50 ms": round(percentile(latencies, 50) * 1000, 1),
        "delivery p99 ms": round(percentile(latencies, 99) * 1000, 1),
        "delivery max ms": round(max(latencies, default=float("nan")) * 1000, 1),
        "one message to every stream, median ms": round(percentile(complete, 50) * 1000, 1),
        "one message to every stream, max ms": round(max(complete, default=float("nan")) * 1000, 1),
        "RSS after the messages, MiB": round(rss_after, 1),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server-bin", default=os.environ.get("CHATLAB_BIN", "target/release/chatlab"))
    p.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    p.add_argument("--connections", type=int, default=10000)
    p.add_argument("--messages", type=int, default=20)
    p.add_argument("--gap", type=float, default=0.2, help="seconds between messages")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", default=None)
    args = p.parse_args()

    admin = args.database_url
    db = f"chatlab_live_{os.getpid()}"
    subprocess.run(["psql", admin, "-qc", f"CREATE DATABASE {db}"], check=True)
    port, ops_port = probes.free_port(), probes.free_port()
    out = Path(args.out or f"results/live-idle-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    out.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_hex(32)
    log = open(out / "server.log", "w")
    env = dict(
        os.environ,
        DATABASE_URL=admin.rsplit("/", 1)[0] + "/" + db,
        HTTP_ADDR=f"127.0.0.1:{port}",
        OPS_ADDR=f"127.0.0.1:{ops_port}",
        HTTP_WORKERS=str(args.workers),
        HTTP_MAX_CONNECTIONS_PER_WORKER=str(args.connections),
        CHAT_MAX_MEMBERS=str(max(10000, args.connections)),
        CHATLAB_JWT_SECRET=secret,
        KAFKA_BROKERS="",
        RUST_LOG="warn",
    )
    server = subprocess.Popen([args.server_bin, "serve"], env=env, stdout=log, stderr=log)
    ops = f"http://127.0.0.1:{ops_port}"
    try:
        for _ in range(150):
            if asyncio.run(probes.healthz_ms(port, 1.0)) is not None:
                break
            if server.poll() is not None:
                sys.exit(f"the server exited; see {out / 'server.log'}")
            time.sleep(0.2)
        figures = asyncio.run(experiment(args, port, ops, server.pid, secret))
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {db} WITH (FORCE)"], check=False)
    table = "| figure | value |\n|---|---|\n" + "".join(f"| {k} | {v} |\n" for k, v in figures.items())
    where = probes.setting(admin, "Kafka's mock cluster inside the server (KAFKA_BROKERS empty)")
    text = (
        f"# live-idle\n\n{where}\n\n"
        f"Live connections: `scripts/live-idle.py --connections {args.connections} "
        f"--messages {args.messages}` against a release build, {args.workers} workers, "
        f"the embedded broker, outbox mode.\n\n{table}"
    )
    (out / "results.md").write_text(text)
    print(text)
    print(f"written to {out}")


if __name__ == "__main__":
    main()
