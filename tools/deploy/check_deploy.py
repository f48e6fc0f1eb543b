#!/usr/bin/env python3
"""The deployment files' static checks, none of which needs a container engine or a cluster:

  dockerfiles   hadolint on deploy/docker/Dockerfile.*
  manifests     every deploy/k8s manifest against the Kubernetes API schemas (kubernetes-validate,
                strict: an unknown field fails), and monitoring.yaml current with monitoring/
  security      checkov over the Dockerfiles and the manifests (a skip needs a reason in the
                manifest), and `systemd-analyze security` of each unit (exposure at most 5.0)
  units         `systemd-analyze verify` (a warning fails too) of deploy/systemd/*.service, their ExecStart pointed at
                this environment's programs and EnvironmentFile at the example flags files
  compose       deploy/docker/docker-compose.yml parses, every service has an image, and every
                image's Dockerfile exists (its processes are started by test_compose_topology.py)

    python tools/deploy/check_deploy.py [--only NAME ...]

The linters come from the `deploy` extra of pyproject.toml, installed once into a cached
environment (build/deploy-tools/<hash of the pins>) unless this interpreter has them.
Exit status 1 when any check fails; each prints what it ran and what it found.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compose_local  # noqa: E402  (the same reading of the compose file)

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S_VERSION = "1.33.0"
MAX_UNIT_EXPOSURE = 5.0  # systemd-analyze shows 0.0-10.0 and takes the threshold x10


def deploy_requirements() -> list[str]:
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["project"]["optional-dependencies"]["deploy"])


def tools_bindir() -> Path:
    here = Path(sys.executable).parent
    if all((here / t).exists() for t in ("hadolint", "kubernetes-validate", "checkov")):
        return here
    reqs = deploy_requirements()
    key = hashlib.sha256("\n".join(reqs).encode()).hexdigest()[:12]
    env = ROOT / "build" / "deploy-tools" / key
    bindir = env / "bin"
    if not (bindir / ".complete").exists():
        print(f"installing the deploy checks' tools into {env.relative_to(ROOT)}", flush=True)
        venv.create(env, with_pip=True, clear=True)
        res = subprocess.run([str(bindir / "python"), "-m", "pip", "install", "-q", *reqs],
                             capture_output=True, text=True)
        if res.returncode != 0:
            sys.stderr.write(res.stdout + res.stderr)
            raise SystemExit(f"cannot install the deploy checks' tools: {' '.join(reqs)}")
        (bindir / ".complete").write_text("\n".join(reqs))
    return bindir


def run(label: str, argv: list[str], silent: bool = False) -> bool:
    """Runs one check; with silent, any output (a warning) fails it too."""
    res = subprocess.run(argv, capture_output=True, text=True)
    out = (res.stdout + res.stderr).strip()
    ok = res.returncode == 0 and not (silent and out)
    print(f"[{'ok' if ok else 'FAIL'}] {label}")
    if not ok and out:
        print("    " + out.replace("\n", "\n    "))
    return ok


def manifests() -> list[Path]:
    return sorted(p for p in (DEPLOY / "k8s").glob("*.yaml") if p.name != "kustomization.yaml")


def check_dockerfiles(bindir: Path) -> bool:
    files = sorted((DEPLOY / "docker").glob("Dockerfile.*"))
    return run(f"hadolint: {len(files)} Dockerfiles",
               [str(bindir / "hadolint"), *map(str, files)])


def check_manifests(bindir: Path) -> bool:
    import yaml

    ok = True
    files = manifests()
    listed = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())["resources"]
    if sorted(listed) != [p.name for p in files]:
        print(f"[FAIL] kustomization.yaml lists {sorted(listed)}, deploy/k8s has "
              f"{[p.name for p in files]}")
        ok = False
    ok &= run(f"kubernetes-validate --strict (Kubernetes {K8S_VERSION}): {len(files)} manifests",
              [str(bindir / "kubernetes-validate"), "--strict", "--quiet", "-k", K8S_VERSION,
               *map(str, files)])
    ok &= run("monitoring.yaml is current (tools/deploy/render_monitoring.py --check)",
              [sys.executable, str(ROOT / "tools" / "deploy" / "render_monitoring.py"), "--check",
               "--out", str(DEPLOY / "k8s" / "monitoring.yaml")])
    return ok


def check_security(bindir: Path) -> bool:
    ok = True
    for framework, where in (("kubernetes", "k8s"), ("dockerfile", "docker")):
        # --skip-download: no policy metadata from the network; the checks are in the package
        ok &= run(f"checkov --framework {framework} deploy/{where}",
                  [str(bindir / "checkov"), "--quiet", "--compact", "--skip-download",
                   "--framework", framework, "-d", str(DEPLOY / where)])
    with tempfile.TemporaryDirectory() as tmp:
        for unit in units_for_verify(Path(tmp)):
            ok &= run(f"systemd-analyze security {unit.name} (exposure <= {MAX_UNIT_EXPOSURE})",
                      ["systemd-analyze", "security", "--offline=yes",
                       f"--threshold={int(MAX_UNIT_EXPOSURE * 10)}", "--no-pager", str(unit)])
    return ok


def units_for_verify(tmp: Path) -> list[Path]:
    """The units, rewritten only where this host differs from an installed one."""
    out = []
    bindir = Path(sys.executable).parent
    for unit in sorted((DEPLOY / "systemd").glob("*.service")):
        text = unit.read_text()
        for line in text.splitlines():
            if line.startswith("ExecStart="):
                prog = Path(line.split("=", 1)[1].split()[0]).name
                found = bindir / prog if (bindir / prog).exists() else shutil.which(prog)
                if not found:
                    raise FileNotFoundError(f"{unit.name}: {prog} is not installed here")
                text = text.replace(f"/opt/mooncake/bin/{prog}", str(found))
        text = text.replace("EnvironmentFile=/etc/mooncake/",
                            f"EnvironmentFile={DEPLOY / 'systemd'}/")
        dst = tmp / unit.name
        dst.write_text(text)
        out.append(dst)
    return out


def check_units(_bindir: Path) -> bool:
    if not shutil.which("systemd-analyze"):
        print("[FAIL] systemd-analyze is not installed (systemd)")
        return False
    with tempfile.TemporaryDirectory() as tmp:
        units = units_for_verify(Path(tmp))
        return run(f"systemd-analyze verify: {', '.join(u.name for u in units)}",
                   ["systemd-analyze", "verify", *map(str, units)], silent=True)


def check_compose(_bindir: Path) -> bool:
    import yaml

    compose = yaml.safe_load((DEPLOY / "docker" / "docker-compose.yml").read_text())
    problems = []
    built = {}
    for name, svc in compose["services"].items():
        if "image" not in svc:
            problems.append(f"{name}: no image")
        if "build" in svc:
            dockerfile = compose_local.dockerfile_of(DEPLOY / "docker", svc["build"])
            if not dockerfile.exists():
                problems.append(f"{name}: {dockerfile} does not exist")
            built[svc["image"]] = name
    for name, svc in compose["services"].items():
        if svc.get("image") not in built:
            problems.append(f"{name}: image {svc.get('image')} is built by no service")
    for p in problems:
        print(f"    {p}")
    print(f"[{'FAIL' if problems else 'ok'}] compose: {len(compose['services'])} services, "
          f"images built from {len(built)} Dockerfiles")
    return not problems


CHECKS = {"dockerfiles": check_dockerfiles, "manifests": check_manifests,
          "security": check_security, "units": check_units, "compose": check_compose}


def main(argv: list[str] | None = None) -> int:
    global DEPLOY
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=sorted(CHECKS), help="run only these checks")
    ap.add_argument("--deploy-dir", type=Path, default=DEPLOY,
                    help="check this copy of deploy/ instead (the tests plant defects in one)")
    args = ap.parse_args(argv)
    DEPLOY = args.deploy_dir.resolve()
    bindir = tools_bindir()
    failed = [n for n in (args.only or CHECKS) if not CHECKS[n](bindir)]
    print(f"deploy checks: {len(args.only or CHECKS) - len(failed)} passed"
          + (f", failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
