#!/usr/bin/env python3
"""Offline checks of docker/ (no Docker engine needed).

- compose.yaml parses, every service has an image or a build whose context
  and Dockerfile exist, images are pinned (no `latest`), published ports bind
  to loopback, and every env var given to chatlab is one chatlab reads
  (taken from .env.example, which is generated from the declared settings
  and checked by a test), so a typo fails here and not at `docker compose
  up`.
- The Dockerfile's COPY sources exist, its bases are pinned, the last stage
  runs as a non-root user and exposes the port HTTP_ADDR names.
"""
import pathlib
import re
import sys

import yaml

here = pathlib.Path(__file__).resolve().parent
root = here.parent
errors = []


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


def check_compose(path):
    doc = yaml.safe_load(path.read_text())
    services = doc.get("services") or {}
    if "chatlab" not in services:
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
        if name == "chatlab":
            for var in (svc.get("environment") or {}):
                if var not in known:
                    fail(f"{path.name}: chatlab does not read {var}")


def check_dockerfile(path):
    lines = [l.strip() for l in path.read_text().splitlines()]
    stages = [l for l in lines if l.upper().startswith("FROM ")]
    if not stages:
        fail(f"{path.name}: no FROM")
    for line in stages:
        image = line.split()[1]
        if ":" not in image or image.endswith(":latest"):
            fail(f"{path.name}: base {image} is not pinned")
    for line in lines:
        if line.upper().startswith("COPY ") and "--from=" not in line:
            for src in line.split()[1:-1]:
                if not (root / src).exists():
                    fail(f"{path.name}: COPY source {src} does not exist")
    last = max(i for i, l in enumerate(lines) if l.upper().startswith("FROM "))
    tail = lines[last:]
    if not any(l.upper().startswith("USER ") and "root" not in l for l in tail):
        fail(f"{path.name}: the final stage runs as root")
    addr = next((re.search(r"HTTP_ADDR=\S+:(\d+)", l) for l in tail if "HTTP_ADDR=" in l), None)
    exposed = {m for l in tail for m in re.findall(r"^EXPOSE\s+(\d+)", l)}
    if addr and addr.group(1) not in exposed:
        fail(f"{path.name}: HTTP_ADDR port {addr.group(1)} is not EXPOSEd")


for compose in sorted(here.glob("*compose*.y*ml")):
    check_compose(compose)
for dockerfile in sorted(here.glob("Dockerfile*")):
    check_dockerfile(dockerfile)

if errors:
    print("docker/ check failed:", *errors, sep="\n  ")
    sys.exit(1)
print("docker/ ok:", ", ".join(p.name for p in sorted(here.iterdir()) if p.is_file()))
