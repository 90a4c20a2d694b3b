#!/usr/bin/env python3
"""Offline checks of docker/ (no Docker engine needed).

- compose.yaml parses, every service has an image or a build whose context
  and Dockerfile exist, images are pinned (no `latest`), published ports bind
  to loopback, every bind-mounted file or folder exists, and every env var
  given to a chatlab service is one chatlab reads (taken from .env.example,
  which is generated from the declared settings and checked by a test), so
  a typo fails here and not at `docker compose up`. Names starting with
  OTEL_ are allowed too: they are the OpenTelemetry SDK's standard
  variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME, ...), read by
  the SDK rather than declared as chatlab settings, so .env.example does
  not list them; chatlab's typo check ignores that prefix for the same
  reason.
- The Dockerfile's COPY sources exist and .dockerignore does not drop them,
  its bases are pinned, the last stage runs as a non-root user, exposes the
  port HTTP_ADDR names, and has a HEALTHCHECK through `chatlab probe` with
  a start period; dependency builds are cached (cache mounts or cargo-chef).
  .dockerignore keeps target/, results/ and .git out of the context.
- The configs compose mounts: every `--config` path a service is given is
  mounted; the OpenTelemetry Collector's pipelines use only components it
  defines and export to a compose service, and chatlab's
  OTEL_EXPORTER_OTLP_ENDPOINT reaches the collector's receiver; nginx's
  upstreams are compose services; Prometheus scrapes compose services (and
  keeps exemplars), and `promtool check config` passes on its file
  (Debian's `prometheus` package); Grafana's datasources point at compose
  services, exemplar links name a provisioned datasource, the dashboard
  provider's folder is mounted, and every dashboard JSON parses, uses only
  provisioned datasources and Grafana's built-in variables, and shows
  exemplars on its histogram panels.
"""
import json
import pathlib
import re
import shutil
import subprocess
import sys
from fnmatch import fnmatch
from urllib.parse import urlparse

import yaml

here = pathlib.Path(__file__).resolve().parent
root = here.parent
errors = []
# Variables the OpenTelemetry SDK reads itself (see the docstring).
STANDARD_PREFIXES = ("OTEL_",)
# Grafana's own variables; scripts/dashboard-check.py substitutes these.
GRAFANA_BUILTINS = {"__rate_interval", "__interval", "__range", "__interval_ms", "__range_s"}


def fail(msg):
    errors.append(msg)


def known_settings():
    # Every declared variable is a line `NAME=default`, or `# NAME=` when
    # its default is computed at startup.
    text = (root / ".env.example").read_text()
    names = set(re.findall(r"^(?:# )?([A-Z][A-Z0-9_]*)=", text, re.M))
    if not names:
        fail(".env.example lists no settings")
    return names


def is_chatlab(name, svc):
    build = svc.get("build") or {}
    return name == "chatlab" or name.startswith("chatlab-") or \
        str(build.get("dockerfile", "")).endswith("docker/Dockerfile")


def mounts(compose_dir, svc):
    """{container path: host path} of a service's bind mounts."""
    out = {}
    for vol in svc.get("volumes") or []:
        if isinstance(vol, dict):
            src, dst = vol.get("source"), vol.get("target")
        else:
            parts = str(vol).split(":")
            src, dst = parts[0], parts[1] if len(parts) > 1 else None
        if src and dst and src.startswith((".", "/")):
            out[dst] = (compose_dir / src).resolve()
    return out


def host_path(mounted, container_path):
    """The host file behind a container path, through the deepest mount."""
    for dst in sorted(mounted, key=len, reverse=True):
        if container_path == dst or container_path.startswith(dst.rstrip("/") + "/"):
            return mounted[dst] / container_path[len(dst):].lstrip("/")
    return None


def load_yaml(path, what):
    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        fail(f"{what}: {path} does not parse: {e}")
        return None


def host_port(addr):
    """(host, port) of `host:port` or a URL."""
    if "//" in addr:
        u = urlparse(addr)
        return u.hostname, u.port
    host, _, port = addr.rpartition(":")
    return host, int(port) if port.isdigit() else None


def check_compose(path):
    doc = yaml.safe_load(path.read_text())
    services = doc.get("services") or {}
    chatlabs = {n: s for n, s in services.items() if is_chatlab(n, s)}
    if not chatlabs:
        fail(f"{path.name}: no chatlab service")
    known = known_settings()
    for name, svc in services.items():
        image, build = svc.get("image"), svc.get("build")
        if not image and not build:
            fail(f"{path.name}: service {name} has neither image nor build")
        if image and (":" not in image or image.endswith(":latest")):
            fail(f"{path.name}: service {name} image {image!r} is not pinned")
        if build:
            context = (path.parent / build.get("context", ".")).resolve()
            dockerfile = context / build.get("dockerfile", "Dockerfile")
            if not context.is_dir():
                fail(f"{path.name}: {name} build context {context} missing")
            if not dockerfile.is_file():
                fail(f"{path.name}: {name} Dockerfile {dockerfile} missing")
        for port in svc.get("ports", []):
            if not str(port).startswith("127.0.0.1:"):
                fail(f"{path.name}: {name} publishes {port} beyond loopback")
        for dep in (svc.get("depends_on") or {}):
            if dep not in services:
                fail(f"{path.name}: {name} depends on unknown service {dep}")
        mounted = mounts(path.parent, svc)
        for dst, src in mounted.items():
            if not src.exists():
                fail(f"{path.name}: {name} mounts {src} (at {dst}), which does not exist")
        command = svc.get("command") or []
        for arg in command if isinstance(command, list) else str(command).split():
            m = re.match(r"--config(?:\.file)?=(/\S+)$", str(arg))
            if m:
                src = host_path(mounted, m.group(1))
                if src is None or not src.is_file():
                    fail(f"{path.name}: {name} reads {m.group(1)}, which no mount provides")
        if name in chatlabs:
            for var in (svc.get("environment") or {}):
                if var not in known and not var.startswith(STANDARD_PREFIXES):
                    fail(f"{path.name}: chatlab does not read {var}")
    return services


def services_of(services, prefix, what):
    """The services running an image whose name starts with prefix."""
    found = {n: s for n, s in services.items() if str(s.get("image", "")).startswith(prefix)}
    if not found:
        fail(f"compose: no {what} service")
    return found


def mounted_config(compose, name, svc, flag):
    """The host file behind a service's `flag=PATH` argument, if mounted."""
    args = [str(a) for a in svc.get("command") or []]
    value = next((a.split("=", 1)[1] for a in args if a.startswith(flag + "=")), None)
    src = host_path(mounts(compose.parent, svc), value) if value else None
    if src is None or not src.is_file():
        fail(f"compose: {name} has no mounted {flag}")
        return None
    return src


def check_collector(compose, services):
    for name, svc in services_of(services, "otel/opentelemetry-collector", "OpenTelemetry Collector").items():
        src = mounted_config(compose, name, svc, "--config")
        if src is None:
            continue
        cfg = load_yaml(src, "collector")
        if not isinstance(cfg, dict):
            continue
        pipelines = (cfg.get("service") or {}).get("pipelines") or {}
        if "traces" not in pipelines:
            fail(f"collector {src.name}: no traces pipeline")
        for pname, p in pipelines.items():
            for kind in ("receivers", "processors", "exporters"):
                for comp in p.get(kind) or []:
                    if comp not in (cfg.get(kind) or {}):
                        fail(f"collector {src.name}: pipeline {pname} uses {kind[:-1]} {comp}, not defined")
        for ext in (cfg.get("service") or {}).get("extensions") or []:
            if ext not in (cfg.get("extensions") or {}):
                fail(f"collector {src.name}: extension {ext} not defined")
        for ename, exp in (cfg.get("exporters") or {}).items():
            endpoint = (exp or {}).get("endpoint")
            if endpoint:
                host, _ = host_port(endpoint)
                if host not in services:
                    fail(f"collector {src.name}: exporter {ename} sends to {host}, not a compose service")
        protocols = (((cfg.get("receivers") or {}).get("otlp") or {}).get("protocols") or {})
        ports = {proto: host_port(p.get("endpoint", ""))[1] for proto, p in protocols.items() if p}
        for cname, csvc in services.items():
            env = csvc.get("environment") or {}
            endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") if isinstance(env, dict) else None
            if not endpoint or not is_chatlab(cname, csvc):
                continue
            host, port = host_port(endpoint)
            proto = "http" if str(env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")).startswith("http") else "grpc"
            if host != name or ports.get(proto) != port:
                fail(f"compose: {cname} sends OTLP/{proto} to {host}:{port}; "
                     f"the collector {name} listens for it on {ports.get(proto)}")


def check_nginx(compose, services):
    for name, svc in services_of(services, "nginx:", "nginx (in front of the chatlab instances)").items():
        src = host_path(mounts(compose.parent, svc), "/etc/nginx/nginx.conf")
        if src is None or not src.is_file():
            fail(f"compose: {name} has no mounted nginx.conf")
            continue
        text = src.read_text()
        upstreams = re.findall(r"^\s*server\s+([\w.-]+):(\d+)", text, re.M)
        chatlabs = {n for n, s in services.items() if is_chatlab(n, s)}
        if {h for h, _ in upstreams} != chatlabs:
            fail(f"{src.name}: upstreams {sorted(h for h, _ in upstreams)} are not the chatlab services {sorted(chatlabs)}")
        # GET /v1/ws is a WebSocket: the handshake's Upgrade and Connection
        # must reach chatlab, or the live client gets no socket.
        if not re.search(r"^\s*proxy_set_header\s+Upgrade\s+\$http_upgrade;", text, re.M) \
                or re.search(r'^\s*proxy_set_header\s+Connection\s+"";', text, re.M):
            fail(f"{src.name}: a WebSocket upgrade is not passed on (proxy_set_header Upgrade/Connection)")
        listen = set(re.findall(r"^\s*listen\s+(\d+)", text, re.M))
        published = {str(p).rsplit(":", 1)[-1] for p in svc.get("ports", [])}
        if not published <= listen:
            fail(f"{src.name}: {name} publishes {sorted(published)} but nginx listens on {sorted(listen)}")


def check_prometheus(compose, services):
    for name, svc in services_of(services, "prom/prometheus", "Prometheus").items():
        if "--enable-feature=exemplar-storage" not in [str(a) for a in svc.get("command") or []]:
            fail(f"compose: {name} runs without --enable-feature=exemplar-storage")
        src = mounted_config(compose, name, svc, "--config.file")
        if src is None:
            continue
        cfg = load_yaml(src, "prometheus") or {}
        scraped = set()
        for job in cfg.get("scrape_configs") or []:
            for sc in job.get("static_configs") or []:
                for target in sc.get("targets") or []:
                    host, _ = host_port(target)
                    if host not in services and host != "localhost":
                        fail(f"{src.name}: job {job.get('job_name')} scrapes {target}, not a compose service")
                    scraped.add(host)
        for cname, csvc in services.items():
            if is_chatlab(cname, csvc) and cname not in scraped:
                fail(f"{src.name}: chatlab service {cname} is not scraped")
        promtool = shutil.which("promtool")
        if not promtool:
            fail("promtool not found: apt-get install --no-install-recommends prometheus (Debian)")
            continue
        run = subprocess.run([promtool, "check", "config", str(src)], capture_output=True, text=True)
        if run.returncode != 0:
            fail(f"promtool check config {src.name}:\n{run.stdout}{run.stderr}")


def check_grafana(compose, services):
    for name, svc in services_of(services, "grafana/grafana", "Grafana").items():
        mounted = mounts(compose.parent, svc)
        prov = host_path(mounted, "/etc/grafana/provisioning")
        if prov is None or not prov.is_dir():
            fail(f"compose: {name} has no provisioning folder mounted")
            continue
        uids = {}
        for f in sorted((prov / "datasources").glob("*.y*ml")):
            for ds in (load_yaml(f, "grafana datasources") or {}).get("datasources") or []:
                uids[ds.get("uid")] = ds
                host, _ = host_port(ds.get("url", ""))
                if host not in services:
                    fail(f"{f.name}: datasource {ds.get('name')} points at {host}, not a compose service")
        for ds in uids.values():
            for link in (ds.get("jsonData") or {}).get("exemplarTraceIdDestinations") or []:
                if link.get("datasourceUid") not in uids:
                    fail(f"datasources: {ds.get('name')} links exemplars to unknown uid {link.get('datasourceUid')}")
        if not any((ds.get("jsonData") or {}).get("exemplarTraceIdDestinations") for ds in uids.values()):
            fail("datasources: no exemplar links to traces")
        dash_files = []
        providers = list((prov / "dashboards").glob("*.y*ml"))
        if not providers:
            fail(f"{prov}: no dashboard provider")
        for f in providers:
            for p in (load_yaml(f, "grafana dashboards") or {}).get("providers") or []:
                folder = host_path(mounted, (p.get("options") or {}).get("path", ""))
                if folder is None or not folder.is_dir():
                    fail(f"{f.name}: provider {p.get('name')} reads a folder no mount provides")
                    continue
                dash_files += sorted(folder.glob("*.json"))
        home = (svc.get("environment") or {}).get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
        if home and not (host_path(mounted, home) or pathlib.Path("/nonexistent")).is_file():
            fail(f"compose: {name}'s home dashboard {home} is not mounted")
        if not dash_files:
            fail("grafana: no dashboard JSON provisioned")
        for f in dash_files:
            check_dashboard(f, uids)


def dashboard_targets(dash):
    """(panel title, target) of every query, rows' nested panels included."""
    for panel in dash.get("panels") or []:
        for p in [panel] + list(panel.get("panels") or []):
            for t in p.get("targets") or []:
                yield p, t


def check_dashboard(path, uids):
    try:
        dash = json.loads(path.read_text())
    except ValueError as e:
        fail(f"{path.name}: does not parse: {e}")
        return
    count = 0
    for panel, target in dashboard_targets(dash):
        count += 1
        title = panel.get("title")
        expr = target.get("expr", "")
        if not expr.strip():
            fail(f"{path.name}: panel {title!r} has an empty query")
        for ds in (panel.get("datasource"), target.get("datasource")):
            if isinstance(ds, dict) and ds.get("uid") not in uids:
                fail(f"{path.name}: panel {title!r} uses datasource {ds.get('uid')}, not provisioned")
        for var in re.findall(r"\$\{?(\w+)", expr):
            if var not in GRAFANA_BUILTINS:
                fail(f"{path.name}: panel {title!r} uses ${var}, which the live check cannot substitute")
        if "histogram_quantile" in expr and not target.get("exemplar"):
            fail(f"{path.name}: panel {title!r} shows a histogram without exemplars")
    if count == 0:
        fail(f"{path.name}: no queries")


def check_dockerfile(path):
    # One line per instruction: continuation lines joined.
    lines = [l.strip() for l in re.sub(r"\\\n\s*", " ", path.read_text()).splitlines()]
    stages = [l for l in lines if l.upper().startswith("FROM ")]
    if not stages:
        fail(f"{path.name}: no FROM")
    for line in stages:
        image = line.split()[1]
        if ":" not in image or image.endswith(":latest"):
            fail(f"{path.name}: base {image} is not pinned")
    ignore = root / ".dockerignore"
    patterns = []
    if not ignore.is_file():
        fail(".dockerignore is missing: target/ would be sent as build context")
    else:
        patterns = [p.strip().rstrip("/") for p in ignore.read_text().splitlines()
                    if p.strip() and not p.startswith("#")]
        for needed in ("target", "results", ".git"):
            if needed not in patterns:
                fail(f".dockerignore does not keep {needed}/ out of the context")
    for line in lines:
        if line.upper().startswith("COPY ") and "--from=" not in line:
            for src in line.split()[1:-1]:
                if not (root / src).exists():
                    fail(f"{path.name}: COPY source {src} does not exist")
                parts = pathlib.PurePosixPath(src).parts
                if any(fnmatch("/".join(parts[:i + 1]), p) for p in patterns for i in range(len(parts))):
                    fail(f"{path.name}: COPY source {src} is excluded by .dockerignore")
    if not any(l.upper().startswith("RUN ") and ("--mount=type=cache" in l or "cargo chef" in l)
               for l in lines):
        fail(f"{path.name}: dependency builds are not cached (cache mounts or cargo-chef)")
    last = max(i for i, l in enumerate(lines) if l.upper().startswith("FROM "))
    tail = lines[last:]
    if not any(l.upper().startswith("USER ") and "root" not in l for l in tail):
        fail(f"{path.name}: the final stage runs as root")
    addr = next((re.search(r"HTTP_ADDR=\S+:(\d+)", l) for l in tail if "HTTP_ADDR=" in l), None)
    exposed = {m for l in tail for m in re.findall(r"^EXPOSE\s+(\d+)", l)}
    if addr and addr.group(1) not in exposed:
        fail(f"{path.name}: HTTP_ADDR port {addr.group(1)} is not EXPOSEd")
    health = [l for l in tail if l.upper().startswith("HEALTHCHECK ")]
    if not health:
        fail(f"{path.name}: the final stage has no HEALTHCHECK")
    for line in health:
        if " probe" not in line and '"probe"' not in line:
            fail(f"{path.name}: HEALTHCHECK does not run `chatlab probe`")
        if "--start-period=" not in line:
            fail(f"{path.name}: HEALTHCHECK has no --start-period")


for compose in sorted(here.glob("*compose*.y*ml")):
    services = check_compose(compose)
    check_collector(compose, services)
    check_nginx(compose, services)
    check_prometheus(compose, services)
    check_grafana(compose, services)
for dockerfile in sorted(here.glob("Dockerfile*")):
    check_dockerfile(dockerfile)

if errors:
    print("docker/ check failed:", *errors, sep="\n  ")
    sys.exit(1)
print("docker/ ok:", ", ".join(str(p.relative_to(here)) for p in sorted(here.rglob("*")) if p.is_file()))
