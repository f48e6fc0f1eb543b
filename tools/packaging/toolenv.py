"""Find or make the Python environment holding the dev extra's tools (build, twine, auditwheel...).

The current interpreter is used when it has them all (e.g. a venv with `.[dev]` installed);
otherwise a cached venv is created from the dev extra in pyproject.toml, keyed by its pins.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
MODULES = ["build", "twine", "check_wheel_contents", "abi3audit", "auditwheel", "packaging", "pytest"]
EXECUTABLES = ["patchelf", "actionlint"]


def dev_requirements(pyproject: Path = REPO_ROOT / "pyproject.toml") -> list[str]:
    import tomllib

    with open(pyproject, "rb") as f:
        return list(tomllib.load(f)["project"]["optional-dependencies"]["dev"])


class Tools:
    def __init__(self, python: str):
        self.python = python
        self.bindir = str(Path(python).parent)

    def env(self, base: dict | None = None) -> dict:
        e = dict(os.environ if base is None else base)
        e["PATH"] = self.bindir + os.pathsep + e.get("PATH", "")
        return e

    def exe(self, name: str) -> str:
        p = Path(self.bindir) / name
        if p.exists():
            return str(p)
        found = shutil.which(name)
        if not found:
            raise FileNotFoundError(f"{name} not found next to {self.python} or on PATH")
        return found


def _have_all_here() -> bool:
    if any(importlib.util.find_spec(m) is None for m in MODULES):
        return False
    here = Path(sys.executable).parent
    return all((here / e).exists() or shutil.which(e) for e in EXECUTABLES)


def ensure(quiet: bool = False) -> Tools:
    if os.environ.get("MC_GATE_TOOLS_PYTHON"):
        return Tools(os.environ["MC_GATE_TOOLS_PYTHON"])
    if _have_all_here():
        return Tools(sys.executable)
    reqs = dev_requirements()
    key = hashlib.sha256(json.dumps([sys.version, reqs]).encode()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mooncake-c"
    root = cache / f"gate-tools-{key}"
    py = root / "bin" / "python"
    stamp = root / ".complete"
    if not stamp.exists():
        if root.exists():
            shutil.rmtree(root)
        if not quiet:
            print(f"toolenv: creating {root} from the dev extra", flush=True)
        venv.create(root, with_pip=True, clear=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *reqs], check=True)
        stamp.write_text("\n".join(reqs) + "\n")
    return Tools(str(py))
