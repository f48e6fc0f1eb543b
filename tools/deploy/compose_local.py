#!/usr/bin/env python3
"""Run a docker-compose topology as plain processes on this host, with each service's command,
flags and environment exactly as the compose file writes them.

    python tools/deploy/compose_local.py deploy/docker/docker-compose.yml [--run demo]

What changes on the way, and only this: every `${VAR:-default}` port gets a free loopback port
(so the topology runs beside anything else), every service's host name and 0.0.0.0 become
127.0.0.1, paths under /var/lib become directories of a temporary root, and a service's program
is its `entrypoint`, else the ENTRYPOINT of the Dockerfile that builds its image (the package's
programs from PATH or the running Python's environment). Services start in `depends_on` order; a
`service_healthy` condition waits for the service's health check: MOONCAKE_HEALTH_URL (what the
images' HEALTHCHECK fetches) or, for etcd, its client URL's /health. Without --run every service
is started and kept until Ctrl-C; with --run NAME, that service runs to its end and its exit code
is ours.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def interpolate(text: str, values: dict[str, str]) -> str:
    """Compose's ${VAR} / ${VAR:-default}: every variable named *_PORT gets a free port."""

    def sub(m: re.Match) -> str:
        name, default = m.group(1), m.group(2)
        if name not in values:
            if name.endswith("_PORT"):
                values[name] = str(free_port())
            elif name in os.environ:
                values[name] = os.environ[name]
            elif default is not None:
                values[name] = default
            else:
                raise ValueError(f"${{{name}}} has no value and no default")
        return values[name]

    return _VAR.sub(sub, text)


def load(path: Path, values: dict[str, str]) -> dict:
    import yaml

    return yaml.safe_load(interpolate(path.read_text(), values))


def dockerfile_entrypoint(dockerfile: Path) -> list[str]:
    for line in dockerfile.read_text().splitlines():
        if line.startswith("ENTRYPOINT"):
            return json.loads(line[len("ENTRYPOINT"):].strip())
    raise ValueError(f"{dockerfile} has no ENTRYPOINT")


def dockerfile_of(base: Path, build: dict) -> Path:
    """The Dockerfile of a service's build: section (base: the compose file's directory)."""
    ctx = base / build.get("context", ".")
    # normpath: the context (dist/) exists only once a wheel was built into it
    return Path(os.path.normpath(ctx / build.get("dockerfile", "Dockerfile")))


def image_entrypoints(compose: dict, base: Path) -> dict[str, list[str]]:
    """image name -> the ENTRYPOINT of the Dockerfile a service builds it with."""
    return {svc["image"]: dockerfile_entrypoint(dockerfile_of(base, svc["build"]))
            for svc in compose["services"].values() if svc.get("build")}


def program(name: str) -> str:
    """A program of the package (next to this Python) or any other on PATH."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        raise FileNotFoundError(f"{name}: not installed (the package's programs, or etcd-server)")
    return found


class Topology:
    def __init__(self, compose_file: Path, root: Path):
        self.file = compose_file
        self.values: dict[str, str] = {}
        self.compose = load(compose_file, self.values)
        self.services: dict = self.compose["services"]
        self.entrypoints = image_entrypoints(self.compose, compose_file.parent)
        self.root = root
        self.procs: dict[str, subprocess.Popen] = {}
        names = "|".join(re.escape(n) for n in sorted(self.services, key=len, reverse=True))
        # A host name: a service name or 0.0.0.0 before ":port", or a flag's whole value (but
        # --name=etcd-1, a member's name, stays).
        self._host_port = re.compile(rf"(?<![\w.-])(?:{names}|0\.0\.0\.0)(?=:\d)")
        self._host_flag = re.compile(rf"^(--(?!name=)[\w-]+=)(?:{names}|0\.0\.0\.0)$")

    def localize(self, service: str, arg: str) -> str:
        arg = self._host_flag.sub(r"\g<1>127.0.0.1", self._host_port.sub("127.0.0.1", arg))
        return re.sub(r"/var/lib/([\w./-]*)",
                      lambda m: str(self.root / service / m.group(1)), arg)

    def argv(self, name: str) -> list[str]:
        svc = self.services[name]
        entry = svc.get("entrypoint") or self.entrypoints[svc["image"]]
        entry = [entry] if isinstance(entry, str) else list(entry)
        args = [self.localize(name, str(a)) for a in svc.get("command") or []]
        return [program(entry[0])] + entry[1:] + args

    def own_env(self, name: str) -> dict[str, str]:
        """The environment the compose file gives the service, localized."""
        return {k: self.localize(name, str(v))
                for k, v in (self.services[name].get("environment") or {}).items()}

    def env(self, name: str) -> dict[str, str]:
        return {**os.environ, **self.own_env(name)}

    def order(self) -> list[str]:
        done: list[str] = []

        def visit(n: str, path: tuple = ()) -> None:
            if n in done:
                return
            if n in path:
                raise ValueError(f"depends_on loop through {n}")
            for d in self.depends(n):
                visit(d, path + (n,))
            done.append(n)

        for n in self.services:
            visit(n)
        return done

    def depends(self, name: str) -> dict[str, str]:
        dep = self.services[name].get("depends_on") or {}
        if isinstance(dep, list):
            return {d: "service_started" for d in dep}
        return {d: (c or {}).get("condition", "service_started") for d, c in dep.items()}

    def healthy(self, name: str) -> bool:
        # the service's own settings only (not this process's environment)
        own = self.own_env(name)
        url = own.get("MOONCAKE_HEALTH_URL")
        if url is None and "ETCDCTL_ENDPOINTS" in own:
            url = own["ETCDCTL_ENDPOINTS"].split(",")[0] + "/health"
        if url is None:
            return self.procs[name].poll() is None
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def wait_healthy(self, name: str, deadline_s: float) -> None:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if self.procs[name].poll() is not None:
                raise RuntimeError(f"{name} exited with {self.procs[name].returncode} "
                                   f"(log: {self.root / name / 'log'})")
            if self.healthy(name):
                return
            time.sleep(0.2)
        raise TimeoutError(f"{name} not healthy in {deadline_s:.0f} s (log: {self.root / name / 'log'})")

    def start(self, name: str) -> subprocess.Popen:
        (self.root / name).mkdir(parents=True, exist_ok=True)
        log = open(self.root / name / "log", "wb")
        proc = subprocess.Popen(self.argv(name), env=self.env(name), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[name] = proc
        return proc

    def up(self, skip: tuple[str, ...] = (), deadline_s: float = 90) -> None:
        """Starts every service but those in skip, each after its dependencies are ready."""
        for name in self.order():
            if name in skip:
                continue
            for dep, cond in self.depends(name).items():
                if cond == "service_healthy":
                    self.wait_healthy(dep, deadline_s)
            self.start(name)
        for name in self.procs:
            self.wait_healthy(name, deadline_s)

    def run(self, name: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
        for dep, cond in self.depends(name).items():
            if cond == "service_healthy":
                self.wait_healthy(dep, timeout_s)
        return subprocess.run(self.argv(name), env=self.env(name), capture_output=True,
                              text=True, timeout=timeout_s)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(name)
        if proc.poll() is None:
            os.killpg(proc.pid, sig)
        proc.wait(timeout=30)

    def down(self) -> None:
        for name in reversed(list(self.procs)):
            proc = self.procs[name]
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for name, proc in list(self.procs.items()):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs.clear()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("compose_file", type=Path)
    ap.add_argument("--run", metavar="SERVICE",
                    help="start the others, run this one to its end, stop everything")
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="mc-compose-"))
    topo = Topology(args.compose_file, root)
    print(f"logs and state under {root}; ports: "
          + ", ".join(f"{k}={v}" for k, v in sorted(topo.values.items())), flush=True)
    try:
        topo.up(skip=(args.run,) if args.run else ())
        print("every service is healthy: " + ", ".join(topo.procs), flush=True)
        if args.run:
            res = topo.run(args.run)
            sys.stdout.write(res.stdout)
            sys.stderr.write(res.stderr)
            return res.returncode
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
        return 0
    finally:
        topo.down()


if __name__ == "__main__":
    raise SystemExit(main())
