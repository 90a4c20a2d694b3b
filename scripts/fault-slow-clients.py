#!/usr/bin/env python3
"""Hostile clients against a real chatlab (a release build on its defaults),
one fresh server per mode:

- content-length: SOCKETS sockets send a request's headers
  (Content-Length: 1000) and one byte of its body, then nothing. An
  earlier server waited on such sockets forever.
- chunked: FLOOD sockets (default min(SOCKETS, 4200)) send a request with
  `Transfer-Encoding: chunked` and one chunk, then stall (even sockets) or
  trickle a chunk a second (odd ones), spread over four routes: GET /healthz
  (200), a protected GET without a token (401), no such route (404) and
  POST /v1/users (408 once the body timeout passes). An earlier server
  answered each and then held it open for good: 4,200 of them filled
  every connection slot.
- stream-flood: FLOOD `GET /v1/events` with one user's token (an earlier
  server accepted 4,095, and its public port stopped answering), then FLOOD spread over
  many users, past the instance's stream limit (LIVE_MAX_STREAMS, its
  default or FLOOD/2, whichever is lower).

Every half second it samples the server's RSS, open descriptors, pooled
connections in use and open live streams, and /healthz on a fresh
connection, on both listeners; meanwhile a normal client sends 20 rounds of
POST /v1/users and GET /healthz, each on a fresh connection. A mode fails
when an invariant breaks:

- all modes: the server stays up, and /healthz answers within 2 s after;
  open descriptors never exceed workers x HTTP_MAX_CONNECTIONS_PER_WORKER
  plus a margin, and fall back near where they started; no pooled database
  connection is in use while bodies trickle; nothing a hostile request sent
  is written.
- content-length: every socket the server accepted is answered 408 (or
  closed) within the body timeout plus its sweep (HTTP_BODY_TIMEOUT_MS + 3 s).
- chunked and stream-flood: every hostile socket is answered and closed
  within HTTP_BODY_TIMEOUT_MS + 1 s of its connect (a stream the server
  admitted is the client's to close); the normal client gets 20 of 20
  answers to each request within 1 s; the attack runs ROUNDS times on one
  server and memory is reused: RSS does not fall back to where it started
  (glibc's allocator keeps what it freed for the next allocations), so
  each later round must add less than half of what the first one did.
- stream-flood: one user holds at most LIVE_MAX_STREAMS_PER_USER streams and
  the instance at most LIVE_MAX_STREAMS, every other stream is answered 429
  with Retry-After; another user's stream still opens under the one-user
  flood; the admitted streams are freed once their clients leave.

Traffic goes to 127.0.0.1 only (from 127.0.0.2, so the attack's ephemeral
ports never take one another experiment listens on); every loop is bounded
in count and time. Figures go to results/slow-clients-<UTC>/ (results.md,
and per mode samples-<mode>.csv and server-<mode>.log).

  scripts/fault-slow-clients.py --database-url postgres://postgres@127.0.0.1:5432/postgres
"""

import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

MARGIN_FDS = 256

MODES = ("content-length", "chunked", "stream-flood")

# The attack's sockets take their ephemeral ports on 127.0.0.2 and up (all
# of 127/8 is loopback): thousands of them on 127.0.0.1 would hold ports
# that the next experiment may want to listen on (seen: the private
# PostgreSQL cluster on 55432 could not start right after this one). Each
# mode has an address of its own: the 15,000 sockets of content-length
# leave about 13,000 of that address's ports in TIME_WAIT for a minute, and
# a bind to port 0 then searches the few free ones, so long that the next
# mode's client (seen: chunked's first round) opened its sockets too slowly
# to see them answered before its deadline.
CLIENT_ADDRS = {mode: f"127.0.0.{2 + i}" for i, mode in enumerate(MODES)}

# The server's defaults these modes measure against.
STREAMS_PER_USER = 16
HEARTBEAT_S = 15

# How long after the attack RSS may take to fall back. It does not fall
# back to where it started: glibc's allocator keeps pages it freed, in its
# arenas, for the next allocations. So the chunked and stream modes run
# their attack ROUNDS times (2 by default), and a later round must not take
# more memory than the first.
RSS_SETTLE_S = 10


def setting(database_url, broker):
    """Where a run ran, as every results.md opens with it: the lines of
    `chatlab-load setting` (the machine, PostgreSQL's version and its
    distance, the broker), so a script states it in the commands' words;
    a sentence saying it is not recorded when that tool cannot run."""
    load = os.environ.get("CHATLAB_LOAD_BIN", "target/release/chatlab-load")
    command = [load, "setting", "--database-url", database_url, "--broker", broker]
    try:
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        return done.stdout.strip()
    except (OSError, subprocess.CalledProcessError) as e:
        return (f"Machine, PostgreSQL's version and its distance: not recorded (`{load} setting` "
                f"failed: {e}; build it with `cargo build --release --bin chatlab-load`).")


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


def listen_overflows():
    """The kernel's count, machine-wide, of handshakes dropped because a
    listener's queue was full (TcpExt ListenOverflows): each such client
    retries a second later. None where /proc/net/netstat does not say."""
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return None
    for names, values in zip(lines, lines[1:]):
        if names.startswith("TcpExt:") and values.startswith("TcpExt:"):
            table = dict(zip(names.split()[1:], values.split()[1:]))
            return int(table["ListenOverflows"]) if "ListenOverflows" in table else None
    return None


def metrics(ops, *names):
    """The values of `names` on the operator listener's /metrics (None
    for one that is absent, or all when it does not answer)."""
    values = dict.fromkeys(names)
    try:
        with urllib.request.urlopen(f"{ops}/metrics", timeout=2) as r:
            for line in r.read().decode().splitlines():
                for name in names:
                    if values[name] is None and line.startswith(name + " "):
                        values[name] = float(line.rsplit(" ", 1)[1])
    except OSError:
        pass
    return values


def metric(ops, name):
    return metrics(ops, name)[name]


def token(secret, user):
    """An HS256 token for `user`, as the server's own would be."""
    def b64(raw):
        return base64.urlsafe_b64encode(raw).rstrip(b"=")

    header = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = b64(
        json.dumps({"sub": user, "iss": "chatlab", "exp": int(time.time()) + 3600}).encode()
    )
    signature = hmac.new(secret.encode(), header + b"." + claims, hashlib.sha256).digest()
    return (header + b"." + claims + b"." + b64(signature)).decode()


def post(url, body, bearer=None):
    headers = {"content-type": "application/json"}
    if bearer:
        headers["authorization"] = f"Bearer {bearer}"
    request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    with urllib.request.urlopen(request, timeout=30) as r:
        return json.load(r)


async def answered_ms(port, request, expect, timeout, missed=None):
    """Latency of `request` on a fresh connection until its status line
    starts with `expect`, or None (another answer, or none in `timeout`);
    then, when `missed` is a list, what happened instead is appended to it."""
    started = time.monotonic()

    def miss(why):
        if missed is not None:
            missed.append(f"{why} after {(time.monotonic() - started) * 1000:.0f} ms")
        return None

    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
        writer.write(request)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), max(0.01, timeout - (time.monotonic() - started)))
        writer.close()
        if not line.startswith(expect):
            return miss(f"answered {line.decode(errors='replace').strip()[:40]!r}")
        return (time.monotonic() - started) * 1000
    except asyncio.TimeoutError:
        return miss("no answer")
    except OSError as e:
        return miss(f"{type(e).__name__}")


async def healthz_ms(port, timeout=2.0):
    """Latency of GET /healthz on a fresh connection, or None on timeout."""
    return await answered_ms(port, HEALTHZ_REQUEST, b"HTTP/1.1 200", timeout)


HEALTHZ_REQUEST = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"


def create_user_request(i):
    body = json.dumps({"name": f"normal {i}"}).encode()
    return (
        b"POST /v1/users HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )


class Writes:
    """The normal client's writes: how many it has begun and how many are
    unanswered. Only those may hold a pooled connection during an attack."""

    def __init__(self):
        self.begun = 0
        self.open = 0

    def now(self):
        return self.begun, self.open


async def normal_client(port, rounds, every, figures, writes):
    """`rounds` rounds, `every` seconds apart, of POST /v1/users and
    GET /healthz on fresh connections, each given 1 s."""
    for i in range(rounds):
        started = time.monotonic()
        writes.begun += 1
        writes.open += 1
        try:
            figures["create"].append(
                await answered_ms(port, create_user_request(i), b"HTTP/1.1 201", 1.0, figures["missed"])
            )
        finally:
            writes.open -= 1
        figures["healthz"].append(
            await answered_ms(port, HEALTHZ_REQUEST, b"HTTP/1.1 200", 1.0, figures["missed"])
        )
        await asyncio.sleep(max(0.0, every - (time.monotonic() - started)))


class Attack:
    """What one mode's hostile sockets saw: answers by status, when each
    was answered and closed (from its connect), and those still open."""

    def __init__(self):
        self.statuses = {}
        self.answered_after = []
        self.closed_after = []
        self.not_accepted = 0
        self.still_open = 0
        self.admitted = 0
        self.retry_after = set()

    def count(self, status):
        self.statuses[status] = self.statuses.get(status, 0) + 1

    def absorb(self, other):
        """Adds another round's figures to these."""
        for status, n in other.statuses.items():
            self.statuses[status] = self.statuses.get(status, 0) + n
        self.answered_after += other.answered_after
        self.closed_after += other.closed_after
        self.not_accepted += other.not_accepted
        self.still_open += other.still_open
        self.admitted += other.admitted
        self.retry_after |= other.retry_after


async def connect(server, gate):
    async with gate:
        return await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", server.port, local_addr=(server.client_addr, 0)), 5
        )


async def send(server, gate, attack, request):
    """A hostile socket that sent `request`: (reader, writer, when it was
    opened), or None, counted, when the server did not accept it."""
    try:
        reader, writer = await connect(server, gate)
    except (OSError, asyncio.TimeoutError):
        attack.not_accepted += 1
        return None
    writer.write(request)
    return reader, writer, time.monotonic()


async def until_closed(reader, deadline):
    """Reads until the server closes (True) or `deadline` (False)."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            chunk = await asyncio.wait_for(reader.read(65536), left)
        except asyncio.TimeoutError:
            return False
        except OSError:
            return True
        if not chunk:
            return True


async def content_length_client(server, attack, deadline, gate):
    """Headers, one body byte, then wait for the server's answer."""
    sent = await send(
        server,
        gate,
        attack,
        b"POST /v1/users HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
    )
    if not sent:
        return
    reader, writer, opened = sent
    try:
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), max(0.1, deadline - time.monotonic()))
        attack.count(line.split(b" ")[1].decode() if line.startswith(b"HTTP/") else "closed")
        attack.answered_after.append(time.monotonic() - opened)
    except asyncio.TimeoutError:
        attack.still_open += 1
    except OSError:
        attack.count("closed")
    finally:
        writer.close()


CHUNKED_ROUTES = (
    b"GET /healthz",
    b"GET /v1/users/0190f0d4-0000-7000-8000-000000000000",
    b"GET /v1/nowhere",
    b"POST /v1/users",
)


async def chunked_client(server, attack, deadline, gate, i):
    """A chunked request's head and first chunk; then nothing (even `i`)
    or a chunk a second (odd `i`); reads until the server closes."""
    route = CHUNKED_ROUTES[(i // 2) % len(CHUNKED_ROUTES)]
    sent = await send(
        server,
        gate,
        attack,
        route + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n",
    )
    if not sent:
        return
    reader, writer, opened = sent

    async def trickle():
        try:
            while time.monotonic() < deadline:
                await asyncio.sleep(1.0)
                writer.write(b"1\r\n \r\n")
                await writer.drain()
        except (OSError, ConnectionError):
            pass

    trickling = asyncio.create_task(trickle()) if i % 2 else None
    try:
        line = await asyncio.wait_for(reader.readline(), max(0.1, deadline - time.monotonic()))
        if line.startswith(b"HTTP/"):
            attack.count(line.split(b" ")[1].decode())
            attack.answered_after.append(time.monotonic() - opened)
        if line and await until_closed(reader, deadline):
            attack.closed_after.append(time.monotonic() - opened)
        elif line:
            attack.still_open += 1
        else:
            attack.count("closed")
            attack.closed_after.append(time.monotonic() - opened)
    except asyncio.TimeoutError:
        attack.still_open += 1
    except OSError:
        attack.count("closed")
        attack.closed_after.append(time.monotonic() - opened)
    finally:
        if trickling:
            trickling.cancel()
        writer.close()


async def stream_client(server, bearer, attack, deadline, gate, release):
    """GET /v1/events: an admitted stream is held until `release` is set;
    any other answer is read until the server closes the connection."""
    sent = await send(
        server,
        gate,
        attack,
        f"GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {bearer}\r\n\r\n".encode(),
    )
    if not sent:
        return
    reader, writer, opened = sent
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), max(0.1, deadline - time.monotonic()))
        status = head.split(b" ")[1].decode()
        attack.count(status)
        attack.answered_after.append(time.monotonic() - opened)
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"retry-after:"):
                attack.retry_after.add(line.split(b":", 1)[1].strip().decode())
        if status == "200":
            attack.admitted += 1
            await release.wait()
        elif await until_closed(reader, deadline):
            attack.closed_after.append(time.monotonic() - opened)
        else:
            attack.still_open += 1
    except asyncio.TimeoutError:
        attack.still_open += 1
    except (OSError, asyncio.IncompleteReadError):
        attack.count("closed")
        attack.closed_after.append(time.monotonic() - opened)
    finally:
        writer.close()


class Sampler:
    """Samples the server every half second while the attack runs."""

    def __init__(self, server, writes):
        self.server = server
        self.writes = writes
        self.samples = []
        self.stop = asyncio.Event()
        self.started = time.monotonic()

    async def run(self):
        s = self.server
        used, streams = 'db_client_connection_count{db_client_connection_state="used"}', "chatlab_live_connections"
        while not self.stop.is_set():
            t, rss, fds = time.monotonic() - self.started, rss_mib(s.pid), open_fds(s.pid)
            # Off the event loop: the attack's sockets are timed on it.
            # The normal client's writes unanswered when the read began or
            # begun while it ran may hold a pooled connection in it.
            begun, unanswered = self.writes.now()
            values = await asyncio.to_thread(metrics, s.ops, used, streams)
            normal_writes = unanswered + self.writes.begun - begun
            self.samples.append(
                {
                    "t": t,
                    "rss": rss,
                    "fds": fds,
                    "used": values[used],
                    "normal_writes": normal_writes,
                    "streams": values[streams],
                    "healthz": await healthz_ms(s.port),
                    "ops_healthz": await healthz_ms(s.ops_port),
                }
            )
            await asyncio.sleep(0.5)


class Server:
    """A release chatlab on a database of its own, its log in `out`."""

    def __init__(self, args, out, mode, env):
        self.admin = args.database_url
        self.db = f"chatlab_slow_{os.getpid()}_{mode.replace('-', '_')}"
        subprocess.run(["psql", self.admin, "-qc", f"CREATE DATABASE {self.db}"], check=True)
        self.port, self.ops_port = free_port(), free_port()
        self.ops = f"http://127.0.0.1:{self.ops_port}"
        self.client_addr = CLIENT_ADDRS[mode]  # where its hostile sockets connect from
        self.secret = secrets.token_hex(32)
        self.log_path = out / f"server-{mode}.log"
        self.url = self.admin.rsplit("/", 1)[0] + "/" + self.db
        full_env = dict(
            os.environ,
            DATABASE_URL=self.url,
            HTTP_ADDR=f"127.0.0.1:{self.port}",
            OPS_ADDR=f"127.0.0.1:{self.ops_port}",
            HTTP_WORKERS=str(args.workers),
            HTTP_MAX_CONNECTIONS_PER_WORKER=str(args.max_connections_per_worker),
            HTTP_BODY_TIMEOUT_MS=str(args.body_timeout_ms),
            CHATLAB_JWT_SECRET=self.secret,
            KAFKA_BROKERS="",
            RUST_LOG="warn",
            **env,
        )
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([args.server_bin, "serve"], env=full_env, stdout=self.log, stderr=self.log)
        self.pid = self.proc.pid
        for _ in range(150):
            if asyncio.run(healthz_ms(self.port, 1.0)) is not None:
                return
            if self.proc.poll() is not None:
                self.stop()
                sys.exit(f"the server exited; see {self.log_path}")
            time.sleep(0.2)

    def users_not_normal(self):
        """Users in the database that the normal client did not write
        (seeded ones included)."""
        out = subprocess.run(
            ["psql", self.url, "-XtAc", "SELECT count(*) FROM users WHERE name NOT LIKE 'normal %'"],
            capture_output=True,
            text=True,
        )
        return int(out.stdout.strip() or -1)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        subprocess.run(["psql", self.admin, "-qc", f"DROP DATABASE IF EXISTS {self.db} WITH (FORCE)"], check=False)


async def attack_with(server, hostile, window):
    """Runs `hostile` (a coroutine) beside the sampler and a normal client
    whose 20 rounds are spread over `window` seconds."""
    writes = Writes()
    sampler = Sampler(server, writes)
    sampling = asyncio.create_task(sampler.run())
    normal = {"create": [], "healthz": [], "missed": []}
    # The first round once the attack is under way. The normal client runs
    # on an event loop of its own, in a thread: on this one, its answers
    # would wait behind the callbacks of thousands of hostile sockets, and
    # the bound would time this script, not the server.
    await asyncio.sleep(0.5)
    normal_rounds = asyncio.create_task(
        asyncio.to_thread(asyncio.run, normal_client(server.port, 20, max(0.25, window / 20), normal, writes))
    )
    await hostile
    await normal_rounds
    sampler.stop.set()
    await sampling
    return sampler.samples, normal, time.monotonic() - sampler.started


def probe_figures(values):
    ok = sorted(v for v in values if v is not None)
    p50 = ok[len(ok) // 2] if ok else float("nan")
    worst = ok[-1] if ok else float("nan")
    return f"{p50:.1f} / {worst:.1f}, {len(values) - len(ok)} of {len(values)}"


def settle_rss(pid):
    """RSS once it stops falling (at most RSS_SETTLE_S)."""
    last = rss_mib(pid)
    for _ in range(RSS_SETTLE_S * 2):
        time.sleep(0.5)
        now = rss_mib(pid)
        if now >= last - 0.5:
            return now
        last = now
    return last


def within_1s(values):
    return sum(1 for v in values if v is not None and v <= 1000)


def common_figures(args, server, samples, before, failures, seeded=0):
    """The figures and invariants every mode shares; checks them into
    `failures`. `seeded`: users written other than by the normal client."""
    after_healthz = asyncio.run(healthz_ms(server.port))
    after = {"fds": open_fds(server.pid), "rss": settle_rss(server.pid)}
    fd_bound = args.workers * args.max_connections_per_worker + MARGIN_FDS
    peak_fds = max(s["fds"] for s in samples)
    peak_rss = max(s["rss"] for s in samples)
    used = [s["used"] for s in samples if s["used"] is not None]
    # Held by something else than the normal client's own writes.
    held = [s["used"] - s["normal_writes"] for s in samples if s["used"] is not None]
    if server.proc.poll() is not None:
        failures.append("the server died")
    if after_healthz is None or after_healthz > 2000:
        failures.append(f"/healthz after the attack: {after_healthz}")
    if any(h > 0 for h in held):
        failures.append(f"pooled connections in use while bodies trickled, beyond the normal client's writes: max {max(held)}")
    if peak_fds > fd_bound:
        failures.append(f"open descriptors peaked at {peak_fds} > {fd_bound}")
    if after["fds"] > before["fds"] + 64:
        failures.append(f"descriptors did not come back: {before['fds']} -> {after['fds']}")
    if seeded is not None:
        users = server.users_not_normal()
        if users != seeded:
            failures.append(f"{users} users in the database besides the normal client's, {seeded} seeded")
    rows = [
        f"| open descriptors: before, peak, after (bound {fd_bound}) | {before['fds']}, {peak_fds}, {after['fds']} |",
        f"| RSS MiB: before, peak, after (settled) | {before['rss']:.1f}, {peak_rss:.1f}, {after['rss']:.1f} |",
        f"| pooled connections in use during the attack (max; of them, beyond the normal client's writes) "
        f"| {max(used, default=0):.0f}; {max(max(held, default=0), 0):.0f} |",
        f"| public /healthz during the attack: p50 / max ms, timeouts (2 s) of samples | {probe_figures([s['healthz'] for s in samples])} |",
        f"| operator /healthz during the attack: p50 / max ms, timeouts | {probe_figures([s['ops_healthz'] for s in samples])} |",
        f"| /healthz after the attack, ms | {after_healthz if after_healthz is None else round(after_healthz, 1)} |",
    ]
    return rows, after, peak_rss


def rss_reused(before, peaks, failures):
    """The same attack again reuses the memory the first round took (and
    the allocator kept): each later round adds less than half of what the
    first one did, where a leak would add as much every round. `peaks`:
    the RSS peak of each round."""
    allowed = max(2.0, 0.5 * (peaks[0] - before))
    grown = [b - a for a, b in zip(peaks, peaks[1:])]
    if any(g > allowed for g in grown):
        failures.append(
            f"RSS grew as much again in a later round: peaks {', '.join(f'{p:.1f}' for p in peaks)} MiB "
            f"(from {before:.1f}; a later round may add {allowed:.1f})"
        )
    return (
        f"| RSS MiB: before, peak of each round (a later round may add {allowed:.1f}: half the first's growth) "
        f"| {before:.1f}, {', '.join(f'{p:.1f}' for p in peaks)} |"
    )


def normal_rows(normal, failures):
    for key, what in (("create", "POST /v1/users (201)"), ("healthz", "GET /healthz (200)")):
        got = within_1s(normal[key])
        if got != len(normal[key]):
            failures.append(
                f"normal client: {got} of {len(normal[key])} {what} within 1 s ({'; '.join(normal['missed'])})"
            )
    return [
        f"| normal client, POST /v1/users answered 201 within 1 s; p50 / max ms | {within_1s(normal['create'])} of {len(normal['create'])}; {probe_figures(normal['create'])} |",
        f"| normal client, GET /healthz answered 200 within 1 s; p50 / max ms | {within_1s(normal['healthz'])} of {len(normal['healthz'])}; {probe_figures(normal['healthz'])} |",
    ]


def closed_in_time(attack, bound, failures):
    late = [c for c in attack.closed_after if c > bound]
    if attack.still_open:
        failures.append(f"{attack.still_open} hostile sockets still open at the end")
    if late:
        failures.append(f"{len(late)} hostile sockets closed later than {bound:.1f} s after connect")
    if attack.not_accepted:
        failures.append(f"{attack.not_accepted} hostile sockets not accepted within 5 s")
    return [
        f"| hostile sockets answered, by status | {dict(sorted(attack.statuses.items()))} |",
        f"| hostile sockets not accepted within 5 s | {attack.not_accepted} |",
        f"| hostile sockets still open at the end | {attack.still_open} |",
        f"| slowest answer after connect, s | {max(attack.answered_after, default=0):.2f} |",
        f"| hostile sockets closed: count, slowest after connect s (bound {bound:.1f}) | {len(attack.closed_after)}, {max(attack.closed_after, default=0):.2f} |",
    ]


def write_samples(out, mode, samples):
    with open(out / f"samples-{mode}.csv", "w") as f:
        f.write("t_s,rss_mib,open_fds,pool_used,live_streams,healthz_ms,ops_healthz_ms\n")
        for s in samples:
            f.write(
                f"{s['t']:.2f},{s['rss']:.1f},{s['fds']},{s['used']},{s['streams']},{s['healthz']},{s['ops_healthz']}\n"
            )


def content_length(args, server, failures):
    """Headers and one body byte per socket, then nothing."""
    before = {"rss": rss_mib(server.pid), "fds": open_fds(server.pid)}
    # The server holds workers x limit sockets at a time; the rest wait
    # in the kernel's accept queue for the next wave. Hold long enough
    # for every wave to be answered.
    capacity = args.workers * args.max_connections_per_worker
    waves = -(-args.sockets // capacity)
    hold = max(args.hold, waves * args.body_timeout_ms / 1000 + 5)
    attack = Attack()

    async def hostile():
        deadline = time.monotonic() + hold
        gate = asyncio.Semaphore(500)
        await asyncio.gather(*(content_length_client(server, attack, deadline, gate) for _ in range(args.sockets)))

    samples, normal, took = asyncio.run(attack_with(server, hostile(), hold))
    time.sleep(1)
    rows, after, peak_rss = common_figures(args, server, samples, before, failures)
    if attack.still_open:
        failures.append(f"{attack.still_open} accepted sockets still open after {hold:.0f} s")
    late = [a for a in attack.answered_after if a > args.body_timeout_ms / 1000 + 3]
    lines = [
        f"## content-length: {args.sockets} sockets, headers and one body byte each",
        "",
        f"Held {hold:.0f} s (took {took:.1f} s).",
        "",
        "| figure | value |",
        "|---|---|",
        f"| sockets answered 408 | {attack.statuses.get('408', 0)} |",
        f"| sockets closed without an answer | {attack.statuses.get('closed', 0)} |",
        f"| sockets not accepted within 5 s (kernel backlog full) | {attack.not_accepted} |",
        f"| accepted sockets still open at the end | {attack.still_open} |",
        f"| slowest answer after connect, s | {max(attack.answered_after, default=0):.1f} |",
        f"| answers later than the body timeout + 3 s (queued in the kernel for a later wave) | {len(late)} |",
        *rows,
        *normal_rows(normal, []),
    ]
    other = {k: v for k, v in attack.statuses.items() if k not in ("408", "closed")}
    if other:
        lines.append(f"| other answers | {other} |")
    return lines, samples


def chunked(args, server, failures):
    """Chunked requests that stall or trickle, in rounds."""
    before = {"rss": rss_mib(server.pid), "fds": open_fds(server.pid)}
    bound = args.body_timeout_ms / 1000 + args.close_slack
    hold = args.body_timeout_ms / 1000 + 6
    attack, samples, normal, peaks, took = Attack(), [], {"create": [], "healthz": [], "missed": []}, [], 0.0
    # Twice on one server: the second round shows whether memory the
    # first one took is reused.
    for _ in range(args.rounds):
        round_attack = Attack()

        async def hostile():
            deadline = time.monotonic() + hold
            gate = asyncio.Semaphore(500)
            await asyncio.gather(
                *(chunked_client(server, round_attack, deadline, gate, i) for i in range(args.flood))
            )

        round_samples, round_normal, round_took = asyncio.run(attack_with(server, hostile(), hold - 1))
        peaks.append(max(s["rss"] for s in round_samples))
        settle_rss(server.pid)
        attack.absorb(round_attack)
        samples += round_samples
        for key in normal:
            normal[key] += round_normal[key]
        took += round_took
    rows, after, peak_rss = common_figures(args, server, samples, before, failures)
    lines = [
        f"## chunked: {args.rounds} rounds of {args.flood} sockets, a chunked request and one chunk each, "
        "then a stall or a chunk a second",
        "",
        "Routes in turn: GET /healthz, a protected GET without a token, no such route, POST /v1/users. "
        f"Each round held {hold:.0f} s at most (took {took:.1f} s in all). Figures of both rounds.",
        "",
        "| figure | value |",
        "|---|---|",
        *closed_in_time(attack, bound, failures),
        *rows,
        rss_reused(before["rss"], peaks, failures),
        *normal_rows(normal, failures),
    ]
    return lines, samples


def streams_left(server, timeout):
    """Waits until the server holds no stream; how long it took, or None."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if metric(server.ops, "chatlab_live_connections") == 0:
            return time.monotonic() - started
        time.sleep(0.5)
    return None


def stream_phase(args, server, name, bearers, failures, limit, limit_name):
    """FLOOD streams spread over `bearers` in turn; one admitted per place
    under `limit`, every other answered 429 and closed in time."""
    attack = Attack()
    bound = args.body_timeout_ms / 1000 + args.close_slack
    hold = args.body_timeout_ms / 1000 + 6
    bystander = {}

    async def hostile():
        release = asyncio.Event()
        deadline = time.monotonic() + hold
        gate = asyncio.Semaphore(500)
        clients = asyncio.gather(
            *(stream_client(server, bearers[i % len(bearers)], attack, deadline, gate, release) for i in range(args.flood))
        )
        # Another user's stream, once the flood is under way.
        await asyncio.sleep(2)
        bystander["status"] = await answered_ms(
            server.port,
            f"GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {server.bystander}\r\n\r\n".encode(),
            b"HTTP/1.1 200",
            2.0,
        )
        await asyncio.sleep(max(0.0, deadline - time.monotonic()))
        release.set()
        await clients

    samples, normal, took = asyncio.run(attack_with(server, hostile(), hold - 1))
    freed = streams_left(server, 2 * HEARTBEAT_S + 5)
    if attack.admitted > limit or attack.admitted == 0:
        failures.append(f"{name}: {attack.admitted} streams admitted, limit {limit} ({limit_name})")
    refused = attack.statuses.get("429", 0)
    if refused != args.flood - attack.admitted:
        failures.append(f"{name}: {refused} answered 429 of {args.flood - attack.admitted} not admitted")
    if not attack.retry_after:
        failures.append(f"{name}: no Retry-After on the 429s")
    if freed is None:
        failures.append(f"{name}: admitted streams not freed within {2 * HEARTBEAT_S + 5} s of their clients leaving")
    if limit_name == "LIVE_MAX_STREAMS_PER_USER" and bystander.get("status") is None:
        failures.append(f"{name}: another user's stream was not admitted during the flood")
    rows = [
        f"| streams admitted (limit {limit}, {limit_name}) | {attack.admitted} |",
        f"| Retry-After of the 429s, s | {', '.join(sorted(attack.retry_after)) or '-'} |",
        f"| another user's stream during the flood: admitted within, ms | {'not admitted' if bystander.get('status') is None else round(bystander['status'], 1)} |",
        f"| admitted streams freed after their clients left, s | {freed if freed is None else round(freed, 1)} |",
        *closed_in_time(attack, bound, failures),
        *normal_rows(normal, failures),
    ]
    return rows, samples, took


def stream_limits(args):
    """The instance's stream limit this flood meets, and the server's env
    for it: its default (half the connections), or half the flood when
    that is lower, so that a small flood meets it too."""
    default_limit = args.workers * args.max_connections_per_worker // 2
    limit = min(default_limit, args.flood // 2)
    return limit, ({"LIVE_MAX_STREAMS": str(limit)} if limit < default_limit else {})


def stream_flood(args, server, failures):
    """GET /v1/events floods: one user's, then many users', in rounds."""
    instance_limit, env = stream_limits(args)
    users = post(f"{server.ops}/v1/users/bulk", {"count": 2 + -(-args.flood // (STREAMS_PER_USER - 2))})["ids"]
    server.bystander = token(server.secret, users[0])
    flooder = [token(server.secret, users[1])]
    many = [token(server.secret, u) for u in users[2:]]
    before = {"rss": rss_mib(server.pid), "fds": open_fds(server.pid)}
    samples, peaks, tables, took = [], [], [], 0.0
    # Twice on one server: the second round shows whether memory the
    # first one took is reused.
    for r in range(1, args.rounds + 1):
        round_samples = []
        for name, bearers, limit, limit_name in (
            ("one user", flooder, STREAMS_PER_USER, "LIVE_MAX_STREAMS_PER_USER"),
            ("many users", many, instance_limit, "LIVE_MAX_STREAMS"),
        ):
            rows, phase_samples, phase_took = stream_phase(args, server, f"{name}, round {r}", bearers, failures, limit, limit_name)
            tables += ["", f"| figure ({name}, round {r}) | value |", "|---|---|", *rows]
            round_samples += phase_samples
            took += phase_took
        peaks.append(max(s["rss"] for s in round_samples))
        samples += round_samples
    rows, after, peak_rss = common_figures(args, server, samples, before, failures, seeded=len(users))
    lines = [
        f"## stream-flood: {args.rounds} rounds of {args.flood} `GET /v1/events` with one user's token, "
        f"then {args.flood} over {len(many)} users",
        "",
        f"LIVE_MAX_STREAMS={instance_limit}{'' if env else ' (its default)'}, "
        f"LIVE_MAX_STREAMS_PER_USER={STREAMS_PER_USER} (its default); the floods took {took:.1f} s in all, "
        "each followed by the wait until the server freed the admitted streams.",
        *tables,
        "",
        "| figure (every flood) | value |",
        "|---|---|",
        *rows,
        rss_reused(before["rss"], peaks, failures),
    ]
    return lines, samples


# Each mode: what it runs on its server, and the server's env beyond the
# defaults.
RUNS = {
    "content-length": (content_length, lambda args: {}),
    "chunked": (chunked, lambda args: {}),
    "stream-flood": (stream_flood, lambda args: stream_limits(args)[1]),
}


def run_mode(args, out, mode):
    """One mode on a fresh server: its report lines and failures."""
    run, env = RUNS[mode]
    server = Server(args, out, mode, env(args))
    failures = []
    try:
        dropped_before = listen_overflows()
        lines, samples = run(args, server, failures)
        dropped_after = listen_overflows()
        dropped = None if None in (dropped_before, dropped_after) else dropped_after - dropped_before
        lines.append(
            f"| handshakes the kernel dropped, a listen queue full (machine-wide, during the mode) "
            f"| {'not known' if dropped is None else dropped} |"
        )
        write_samples(out, mode, samples)
        return lines, failures
    finally:
        server.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server-bin", default=os.environ.get("CHATLAB_BIN", "target/release/chatlab"))
    p.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    p.add_argument("--modes", default=os.environ.get("MODES", ",".join(MODES)), help="comma-separated, of " + ", ".join(MODES))
    p.add_argument("--sockets", type=int, default=int(os.environ.get("SOCKETS", 15000)))
    p.add_argument("--flood", type=int, default=None, help="sockets of the chunked and stream modes [default: min(SOCKETS, 4200)]")
    p.add_argument("--rounds", type=int, default=2, help="attacks of the chunked and stream modes, on one server")
    p.add_argument("--hold", type=float, default=float(os.environ.get("HOLD", 25)))
    p.add_argument("--body-timeout-ms", type=int, default=int(os.environ.get("BODY_TIMEOUT_MS", 10000)))
    p.add_argument("--close-slack", type=float, default=1.0,
                   help="seconds past the body timeout by which every hostile socket must be closed")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--max-connections-per-worker", type=int, default=2048)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    args.flood = args.flood or min(args.sockets, 4200)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in RUNS]
    if unknown:
        sys.exit(f"unknown modes {unknown}; known: {', '.join(MODES)}")

    out = Path(args.out or f"results/slow-clients-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    out.mkdir(parents=True, exist_ok=True)
    command = " ".join(["scripts/fault-slow-clients.py", *sys.argv[1:]])
    report = [
        f"# Hostile clients: {', '.join(modes)}",
        "",
        f"Server: `{args.server_bin}` on its defaults but for {args.workers} workers, "
        f"HTTP_MAX_CONNECTIONS_PER_WORKER={args.max_connections_per_worker}, "
        f"HTTP_BODY_TIMEOUT_MS={args.body_timeout_ms}, "
        f"HTTP_BACKLOG={os.environ.get('HTTP_BACKLOG', 'its default')}; a fresh server and database per mode, "
        f"the hostile sockets of each from an address of its own ({', '.join(f'{m} {a}' for m, a in CLIENT_ADDRS.items())}). "
        f"Command: `{command}`.",
        "",
        setting(args.database_url, "Kafka's mock cluster inside each server (KAFKA_BROKERS empty)"),
        "",
    ]
    all_failures = []
    for mode in modes:
        lines, failures = run_mode(args, out, mode)
        report += lines + ["", "Invariants: " + ("all held" if not failures else "BROKEN: " + "; ".join(failures)), ""]
        all_failures += [f"{mode}: {f}" for f in failures]
        print("\n".join(lines), flush=True)
        print("failures:", failures or "none", flush=True)
    (out / "results.md").write_text("\n".join(report))
    # Every mode's failures again at the end, where a log's tail shows them.
    print("failures of every mode:", "; ".join(all_failures) or "none")
    print(f"results: {out}")
    sys.exit(1 if all_failures else 0)


if __name__ == "__main__":
    main()
