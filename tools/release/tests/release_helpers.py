import os
import subprocess
import sys
from pathlib import Path

RELEASE_DIR = Path(__file__).resolve().parents[1]
SHA = "0123456789abcdef0123456789abcdef01234567"


def run_tool(name, *args, env=None):
    e = dict(os.environ)
    e.pop("GITHUB_OUTPUT", None)
    e.pop("GITHUB_SHA", None)
    e.update(env or {})
    return subprocess.run([sys.executable, str(RELEASE_DIR / name), *map(str, args)],
                          capture_output=True, text=True, env=e, timeout=60)


def write_pyproject(path: Path, version: str) -> Path:
    path.write_text(f'[project]\nname = "mooncake-c"\nversion = "{version}"\n')
    return path


def make_dist(directory: Path, version: str, wheels=("cp311-abi3-manylinux_2_28_x86_64", "cp310-cp310-manylinux_2_28_x86_64")):
    """Distribution files with distinct, real contents (the tools only read their bytes)."""
    directory.mkdir(parents=True, exist_ok=True)
    names = [f"mooncake_c-{version}.tar.gz"] + [f"mooncake_c-{version}-{w}.whl" for w in wheels]
    for i, n in enumerate(names):
        (directory / n).write_bytes(os.urandom(1000 + i * 17))
    return names
