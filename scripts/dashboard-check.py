#!/usr/bin/env python3
"""Every query of the Grafana dashboard, against a real Prometheus scraping a
live chatlab: fails when a query returns no series.

A query that names a metric or a label chatlab does not export returns an
empty result, not an error, so Grafana would show "No data" and nobody
would notice. This script catches that, with the real programs:

1. starts chatlab (the debug binary; embedded defaults, so no Kafka; its
   own fresh database on DATABASE_ADMIN_URL; CHATLAB_ALLOW_OVERRIDES=true)
   on a free loopback port, its operator listener (OPS_ADDR: /metrics,
   POST /v1/users/bulk) on another, with a CHATLAB_JWT_SECRET made up for
   the check;
2. starts Debian's Prometheus server (`prometheus`, the package that also
   brings promtool) on another free loopback port, with a generated config
   scraping that chatlab's operator listener every second (job "chatlab",
   as in docker/prometheus/prometheus.yml) and exemplar storage on, its
   storage in a temporary folder;
3. puts a short bounded load on chatlab, only to 127.0.0.1: users seeded
   through the operator listener, then, with a token signed for one of
   them (HS256, the made-up secret), createChat for every insert strategy
   x every publish mode (override headers, outbox included), messages sent
   and read, a few hundred requests;
4. waits for a few scrapes after the load, then evaluates every target of
   every panel through /api/v1/query, Grafana's variables substituted
   ($__rate_interval -> 15s, ...), and lists each query with its series
   count; a query fails when it returns no series, or when no series
   carries a label it groups by or its legend names (`sum by (publish_mode)`
   over a metric labelled `mode` returns one series with no publish_mode);
   exemplar-enabled queries of the HTTP duration and connection use-time
   histograms must find exemplars (/api/v1/query_exemplars) carrying the
   label Grafana's Prometheus datasource links to Jaeger (trace_id): chatlab
   runs with every trace sampled and an OTLP endpoint on a closed loopback
   port, so spans exist and their export fails quietly;
5. stops what it started (SIGTERM, bounded wait, then SIGKILL) and drops
   the database, whatever happened.

Exit status 0 when every query returned a series, 1 otherwise (each empty
or failing query printed), 2 when the setup failed.

Environment: DATABASE_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres),
CHATLAB_BIN (default: target/debug/chatlab under CARGO_TARGET_DIR or the
repository's target/, built when missing), PROMETHEUS_BIN (default
`prometheus` on PATH). `--dashboard PATH` checks another dashboard file.
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import pathlib
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

root = pathlib.Path(__file__).resolve().parent.parent
STRATEGIES = ["per_row", "batch", "batch_prepared", "unnest", "single", "pipeline"]
PUBLISH_MODES = ["off", "in_tx_await", "in_tx_enqueue", "after_commit", "outbox"]
STRATEGY_HEADER = "x-chatlab-insert-strategy"
PUBLISH_MODE_HEADER = "x-chatlab-publish-mode"
# Grafana's built-in variables, as a 1 s scrape and a short run make them.
GRAFANA_VARS = {
    "$__rate_interval": "15s",
    "${__rate_interval}": "15s",
    "$__interval_ms": "1000",
    "$__interval": "1s",
    "${__interval}": "1s",
    "$__range_s": "60",
    "$__range": "1m",
}
SCRAPE_INTERVAL = 1.0
# The histograms whose observations carry their trace's id as an OpenMetrics
# exemplar: every exemplar-enabled query of them must find some.
EXEMPLAR_METRICS = ("http_server_request_duration_seconds", "db_client_connection_use_time_seconds")
DATASOURCES = root / "docker/grafana/provisioning/datasources/datasources.yaml"


class SetupError(Exception):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def distinct_free_ports(n):
    """n free loopback ports, all held until all are found (no repeats)."""
    held = [socket.socket() for _ in range(n)]
    try:
        for s in held:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def http(method, url, body=None, headers=None, timeout=10):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={
        "content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def b64url(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def token(secret, user, issuer="chatlab", ttl=3600):
    """An HS256 JWT for `user`, as chatlab verifies it (the secret's bytes
    as written are the key)."""
    now = int(time.time())
    compact = {"separators": (",", ":")}
    head = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, **compact).encode())
    claims = b64url(json.dumps({"sub": user, "iss": issuer, "iat": now, "exp": now + ttl},
                               **compact).encode())
    signed = f"{head}.{claims}"
    sig = hmac.new(secret.encode(), signed.encode(), hashlib.sha256).digest()
    return f"{signed}.{b64url(sig)}"


def wait_until(what, check, timeout, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SetupError(f"{what}: the process exited with {proc.returncode}")
        try:
            if check():
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    raise SetupError(f"{what}: not within {timeout} s")


def stop(proc, name, timeout=10):
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"dashboard-check: {name} ignored SIGTERM for {timeout} s; killing it")
        proc.kill()
        proc.wait(timeout=5)


def psql(admin_url, sql):
    subprocess.run(["psql", admin_url, "-Xq", "-v", "ON_ERROR_STOP=1", "-c", sql],
                   check=True, capture_output=True, text=True, timeout=60,
                   env={**os.environ, "PGOPTIONS": "-c client_min_messages=warning"})


def chatlab_binary():
    if os.environ.get("CHATLAB_BIN"):
        return pathlib.Path(os.environ["CHATLAB_BIN"])
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR") or root / "target")
    binary = target / "debug" / "chatlab"
    if not binary.is_file():
        print("dashboard-check: building the debug chatlab binary")
        subprocess.run(["cargo", "build", "-q", "--bin", "chatlab"], cwd=root, check=True)
    return binary


def dashboard_queries(path):
    """(panel title, refId, expr, legend, exemplar) of every target, rows' nested panels included."""
    dash = json.loads(path.read_text())
    out = []
    for panel in dash.get("panels") or []:
        for p in [panel] + list(panel.get("panels") or []):
            for t in p.get("targets") or []:
                if t.get("expr", "").strip():
                    out.append((p.get("title", "?"), t.get("refId", "?"), t["expr"],
                                t.get("legendFormat", ""), bool(t.get("exemplar"))))
    return out


def grouping_labels(expr, legend):
    """Labels a query's result must carry: those it groups by (`by (...)`,
    `le` aside, which histogram_quantile consumes) and those its legend
    names. Grouping by a label no series has still returns series (with
    the label empty), so this is checked apart from "no series"."""
    labels = set()
    for group in re.findall(r"\bby\s*\(([^)]*)\)", expr):
        labels |= {label.strip() for label in group.split(",") if label.strip()}
    labels |= set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend or ""))
    return sorted(labels - {"le"})


def substitute(expr):
    for var in sorted(GRAFANA_VARS, key=len, reverse=True):
        expr = expr.replace(var, GRAFANA_VARS[var])
    return expr


def load(base, ops, secret):
    """A few hundred requests: every strategy x publish mode, messages; all
    as the first seeded user (the creator of every chat)."""
    status, body = http("POST", f"{ops}/v1/users/bulk", {"count": 60})
    if status != 201:
        raise SetupError(f"POST {ops}/v1/users/bulk answered {status}: {body[:200]!r}")
    users = json.loads(body)["ids"]
    auth = {"authorization": f"Bearer {token(secret, users[0])}"}
    chats, errors, lock = [], [], threading.Lock()

    def create(i, strategy, mode):
        members = users[1 + i % 40: 1 + i % 40 + 12]
        status, body = http("POST", f"{base}/v1/chats",
                            {"name": f"room {i}", "member_ids": members},
                            {STRATEGY_HEADER: strategy, PUBLISH_MODE_HEADER: mode, **auth})
        with lock:
            if status == 201:
                chats.append(json.loads(body)["id"])
            else:
                errors.append(f"createChat {strategy}/{mode}: {status} {body[:200]!r}")

    def chatter(i):
        chat = chats[i % len(chats)]
        status, _ = http("POST", f"{base}/v1/chats/{chat}/messages",
                         {"body": f"message {i}"}, auth)
        if status != 201:
            with lock:
                errors.append(f"sendMessage: {status}")
        http("GET", f"{base}/v1/chats/{chat}/messages", headers=auth)

    jobs = [(i, s, m) for i, (s, m) in
            enumerate((s, m) for _ in range(4) for s in STRATEGIES for m in PUBLISH_MODES)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda job: create(*job), jobs))
        if chats:
            list(pool.map(chatter, range(100)))
        # A miss, so a 404 shows in the request rate by status.
        http("GET", f"{base}/v1/chats/00000000-0000-0000-0000-000000000000/messages",
             headers=auth)
    if errors:
        raise SetupError("the load failed: " + "; ".join(errors[:5]))
    return len(jobs) + 2 * 100 + 2


def query(prom, expr):
    status, body = http("GET", f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    doc = json.loads(body)
    if status != 200 or doc.get("status") != "success":
        return None, doc.get("error", f"HTTP {status}")
    return doc["data"]["result"], None


def trace_id_label():
    """The exemplar label Grafana's datasource turns into a Jaeger link."""
    import yaml  # pyyaml, installed by .ci/run

    doc = yaml.safe_load(DATASOURCES.read_text())
    for ds in doc.get("datasources") or []:
        for link in (ds.get("jsonData") or {}).get("exemplarTraceIdDestinations") or []:
            return link["name"]
    raise SetupError(f"{DATASOURCES} links no exemplars to traces")


def exemplars(prom, expr, since):
    status, body = http("GET", f"{prom}/api/v1/query_exemplars?" + urllib.parse.urlencode(
        {"query": expr, "start": f"{since:.3f}", "end": f"{time.time():.3f}"}))
    doc = json.loads(body)
    if status != 200 or doc.get("status") != "success":
        return None, doc.get("error", f"HTTP {status}")
    return [e for series in doc["data"] for e in series.get("exemplars") or []], None


def print_scrape_health(prom):
    """What Prometheus says of its last scrape of chatlab: a failing scrape
    (a timeout, a parse error) leaves gauges stale and so empty."""
    status, body = http("GET", f"{prom}/api/v1/targets")
    if status != 200:
        print(f"dashboard-check: /api/v1/targets answered {status}")
        return
    for target in json.loads(body).get("data", {}).get("activeTargets", []):
        print(f"dashboard-check: target {target.get('scrapeUrl')}: health {target.get('health')}, "
              f"last scrape {target.get('lastScrapeDuration', 0):.3f} s, "
              f"last error {target.get('lastError') or 'none'}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dashboard", type=pathlib.Path,
                        default=root / "docker/grafana/dashboards/chatlab.json")
    args = parser.parse_args()
    queries = dashboard_queries(args.dashboard)
    if not queries:
        print(f"dashboard-check: {args.dashboard} has no queries")
        return 1
    admin_url = os.environ.get("DATABASE_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    prometheus = os.environ.get("PROMETHEUS_BIN") or shutil.which("prometheus")
    if not prometheus:
        print("dashboard-check: no prometheus binary "
              "(apt-get install --no-install-recommends prometheus)")
        return 2
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="chatlab-dashboard-check-"))
    db = f"chatlab_dashboard_check_{os.getpid()}"
    db_url = admin_url.rsplit("/", 1)[0] + "/" + db
    server = prom = None
    try:
        binary = chatlab_binary()
        psql(admin_url, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        psql(admin_url, f'CREATE DATABASE "{db}"')
        port, ops_port, prom_port = distinct_free_ports(3)
        base, prom_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{prom_port}"
        ops = f"http://127.0.0.1:{ops_port}"
        secret = secrets.token_hex(32)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("KAFKA_", "OTEL_", "DB_", "HTTP_", "OPS_", "CHAT"))}
        env.update({"DATABASE_URL": db_url, "HTTP_ADDR": f"127.0.0.1:{port}",
                    "OPS_ADDR": f"127.0.0.1:{ops_port}", "CHATLAB_JWT_SECRET": secret,
                    "CHATLAB_ALLOW_OVERRIDES": "true", "RUST_LOG": "warn",
                    "DB_POOL_MAX_SIZE": "4", "HTTP_WORKERS": "2",
                    # Every trace sampled, so observations carry exemplars;
                    # nothing listens there, so the export fails quietly.
                    "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}",
                    "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                    "OTEL_SERVICE_NAME": "chatlab-dashboard-check",
                    "OTEL_TRACES_SAMPLER": "always_on"})
        server_log = open(tmp / "chatlab.log", "wb")
        server = subprocess.Popen([str(binary), "serve"], env=env, stdout=server_log,
                                  stderr=subprocess.STDOUT)
        wait_until("chatlab /readyz", lambda: http("GET", f"{base}/readyz", timeout=3)[0] == 200,
                   60, server)
        wait_until(f"chatlab's operator listener (OPS_ADDR) /readyz on {ops}",
                   lambda: http("GET", f"{ops}/readyz", timeout=3)[0] == 200, 30, server)

        (tmp / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n  - job_name: chatlab\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{ops_port}']\n")
        prom_log = open(tmp / "prometheus.log", "wb")
        prom = subprocess.Popen(
            [prometheus, f"--config.file={tmp / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp / 'data'}", f"--web.listen-address=127.0.0.1:{prom_port}",
             "--enable-feature=exemplar-storage", "--storage.tsdb.retention.time=1h"],
            stdout=prom_log, stderr=subprocess.STDOUT)
        wait_until("Prometheus ready", lambda: http("GET", f"{prom_url}/-/ready", timeout=3)[0] == 200,
                   60, prom)
        wait_until("Prometheus scraping chatlab",
                   lambda: any(r["value"][1] == "1" for r in query(prom_url, 'up{job="chatlab"}')[0] or []),
                   30, prom)

        trace_label = trace_id_label()
        since = time.time() - 1
        started = time.monotonic()
        requests = load(base, ops, secret)
        print(f"dashboard-check: {requests} requests to chatlab in {time.monotonic() - started:.1f} s")
        # Enough scrapes after the load for rate() over 15 s to see it.
        time.sleep(5 * SCRAPE_INTERVAL)
        # A scrape that failed (over its timeout on a busy machine) marks
        # every gauge stale, and an instant query then finds none: query
        # after a scrape that succeeded.
        try:
            wait_until("a successful scrape of chatlab after the load",
                       lambda: any(r["value"][1] == "1"
                                   for r in query(prom_url, 'up{job="chatlab"}')[0] or []),
                       30, prom)
        except SetupError as e:
            print_scrape_health(prom_url)
            raise e

        failed = []
        for title, ref, expr, legend, exemplar in queries:
            result, error = query(prom_url, substitute(expr))
            missing = [label for label in grouping_labels(expr, legend)
                       if not any(r["metric"].get(label) for r in result or [])]
            if error:
                failed.append((title, ref, expr, f"error: {error}"))
                print(f"  ERROR  {title} [{ref}]: {error}")
            elif not result:
                failed.append((title, ref, expr, "no series"))
                print(f"  EMPTY  {title} [{ref}]: {expr}")
            elif missing:
                failed.append((title, ref, expr, f"no series has label {', '.join(missing)}"))
                print(f"  LABEL  {title} [{ref}]: no series has {', '.join(missing)}")
            else:
                print(f"  ok {len(result):3d}  {title} [{ref}]")
            if not (exemplar and any(m in expr for m in EXEMPLAR_METRICS)):
                continue
            found, error = exemplars(prom_url, substitute(expr), since)
            linked = [e for e in found or [] if e.get("labels", {}).get(trace_label)]
            if error or not linked:
                why = f"error: {error}" if error else f"no exemplar with a {trace_label} label"
                failed.append((title, ref, expr, why))
                print(f"  NOEXM  {title} [{ref}]: {why}")
            else:
                print(f"  ok {len(linked):3d}  {title} [{ref}] exemplars with {trace_label}")
        if failed:
            print(f"dashboard-check: {len(failed)} of {len(queries)} queries of {args.dashboard.name} "
                  "returned no series, lack a label they group by, or lack exemplars (a metric or label chatlab does not export?):")
            for title, ref, expr, why in failed:
                print(f"  {title} [{ref}] ({why}): {expr}")
            print_scrape_health(prom_url)
            print(f"dashboard-check: chatlab {'is running' if server.poll() is None else f'exited with {server.returncode}'}; "
                  "last lines of its log:")
            print("\n".join((tmp / "chatlab.log").read_text(errors="replace").splitlines()[-15:]))
            return 1
        print_scrape_health(prom_url)
        print(f"dashboard-check: all {len(queries)} queries of {args.dashboard.name} returned series")
        return 0
    except (SetupError, subprocess.CalledProcessError, OSError) as e:
        detail = getattr(e, "stderr", None) or ""
        print(f"dashboard-check: setup failed: {e} {detail}".rstrip())
        for log in ("chatlab.log", "prometheus.log"):
            if (tmp / log).is_file():
                print(f"--- last lines of {log}:")
                print("\n".join((tmp / log).read_text(errors="replace").splitlines()[-15:]))
        return 2
    finally:
        stop(server, "chatlab")
        stop(prom, "prometheus")
        try:
            psql(admin_url, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        except (subprocess.CalledProcessError, OSError) as e:
            print(f"dashboard-check: could not drop {db}: {e}")
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    # SIGTERM (make interrupted, a CI timeout) unwinds through main's
    # `finally`, so chatlab and Prometheus are stopped and the database dropped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
