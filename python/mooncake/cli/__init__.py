"""Console scripts: each one execs a C binary bundled in ``mooncake/bin`` (or runs a Python tool).

The launcher is the only place that knows where the binaries live, so tests and tools call
``binary_path(name)`` instead of guessing.
"""

import os
import sys
from pathlib import Path

__all__ = ["binary_path", "mooncake_master", "mooncake_http_metadata_server",
           "mooncake_transfer_bench", "mooncake_store_bench"]

_PKG_DIR = Path(__file__).resolve().parent.parent


def binary_path(name: str) -> str:
    """Absolute path of a bundled binary; MOONCAKE_BIN_DIR overrides the directory."""
    override = os.environ.get("MOONCAKE_BIN_DIR")
    candidates = [Path(override)] if override else []
    candidates.append(_PKG_DIR / "bin")
    for d in candidates:
        p = d / name
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    raise FileNotFoundError(f"bundled binary {name!r} not found in {', '.join(map(str, candidates))}")


def _exec(name: str) -> None:
    try:
        path = binary_path(name)
    except FileNotFoundError as exc:
        print(f"mooncake: {exc}", file=sys.stderr)
        raise SystemExit(127)
    os.execv(path, [name, *sys.argv[1:]])


def mooncake_master() -> None:
    _exec("mooncake_master")


def mooncake_http_metadata_server() -> None:
    _exec("mooncake_http_metadata_server")


def mooncake_transfer_bench() -> None:
    _exec("mooncake_transfer_bench")


def mooncake_store_bench() -> None:
    from mooncake.cli import store_bench  # pure Python over the mooncake.store facade

    raise SystemExit(store_bench.main(sys.argv[1:]))
