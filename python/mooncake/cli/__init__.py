"""Console scripts: each one execs a C binary bundled in ``mooncake/bin`` (or runs a Python tool).

The launcher is the only place that knows where the binaries live, so tests and tools call
``binary_path(name)`` instead of guessing. Every console script answers ``--version`` with
``"<name> <package version>"``: the C binaries print it themselves, the Python tools here.
"""

import os
import sys
from pathlib import Path

__all__ = ["binary_path", "mooncake_master", "mooncake_client", "mooncake_conductor", "mooncake_http_metadata_server",
           "mooncake_transfer_bench", "mooncake_store_bench"]

_PKG_DIR = Path(__file__).resolve().parent.parent


def _bin_dirs() -> list:
    override = os.environ.get("MOONCAKE_BIN_DIR")
    if override:
        return [Path(override)]
    import mooncake

    # mooncake.__path__ lists the installed package; an editable install (redirect mode) also lists
    # the source tree, while the binaries are installed beside the extensions in site-packages.
    dirs = [Path(p) / "bin" for p in getattr(mooncake, "__path__", [])]
    return dirs or [_PKG_DIR / "bin"]


def binary_path(name: str) -> str:
    """Absolute path of a bundled binary.

    MOONCAKE_BIN_DIR, when set, replaces the bundled directory (no fallback), so a developer can
    point the console scripts at a build tree and be sure which binary runs.
    """
    if os.sep in name or name in ("", ".", ".."):
        raise ValueError(f"not a binary name: {name!r}")
    dirs = _bin_dirs()
    for d in dirs:
        p = d / name
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    raise FileNotFoundError(f"bundled binary {name!r} not found in {', '.join(map(str, dirs))}")


def _version() -> str:
    from mooncake import __version__

    return __version__


def _exec(name: str) -> None:
    try:
        path = binary_path(name)
    except FileNotFoundError as exc:
        print(f"mooncake: {exc}", file=sys.stderr)
        raise SystemExit(127)
    os.execv(path, [name, *sys.argv[1:]])


def mooncake_master() -> None:
    _exec("mooncake_master")


def mooncake_client() -> None:
    _exec("mooncake_client")


def mooncake_conductor() -> None:
    _exec("mooncake_conductor")


def mooncake_http_metadata_server() -> None:
    _exec("mooncake_http_metadata_server")


def mooncake_transfer_bench() -> None:
    _exec("mooncake_transfer_bench")


def mc_limits() -> None:
    """The machine's own limits (single-thread memcpy, one loopback TCP stream) the benchmarks
    print their ratios against."""
    _exec("mc_limits")


def mooncake_store_bench() -> None:
    if sys.argv[1:] == ["--version"]:
        print(f"mooncake_store_bench {_version()}")
        raise SystemExit(0)
    from mooncake.cli import store_bench  # pure Python over the mooncake.store facade

    raise SystemExit(store_bench.main(sys.argv[1:]))
