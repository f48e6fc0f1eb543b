#!/usr/bin/env python3
"""The version of a nightly snapshot: pyproject's version as a dev release numbered by the
commit's time, X.Y.Z.devYYYYMMDDHHMM (UTC), so every commit's snapshot sorts after the last and
below the release it leads to, and the same commit always gets the same number.

    python tools/release/snapshot_version.py            # prints it
    python tools/release/snapshot_version.py --write    # and writes it into pyproject.toml

A version that is already a pre-release or dev release is refused: snapshots are cut from a
main whose version names the next release. --commit-time (seconds since the epoch) replaces
the commit's time (tests).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from relcommon import REPO_ROOT, ReleaseError, parse_canonical, pyproject_version  # noqa: E402


def snapshot_version(base: str, commit_time: int) -> str:
    v = parse_canonical(base)
    if v.is_prerelease or v.is_devrelease or v.is_postrelease:
        raise ReleaseError(f"{base} is not a plain release version; a snapshot needs X.Y.Z")
    stamp = time.strftime("%Y%m%d%H%M", time.gmtime(commit_time))
    out = f"{base}.dev{stamp}"
    parse_canonical(out)
    return out


def write_version(pyproject: Path, version: str) -> None:
    text = pyproject.read_text()
    new, n = re.subn(r'(?m)^version = "[^"]+"$', f'version = "{version}"', text, count=1)
    if n != 1:
        raise ReleaseError(f"no version line in {pyproject}")
    pyproject.write_text(new)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write it into pyproject.toml")
    ap.add_argument("--pyproject", type=Path, default=REPO_ROOT / "pyproject.toml")
    ap.add_argument("--commit-time", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        t = args.commit_time
        if t is None:
            t = int(subprocess.run(["git", "-C", str(args.pyproject.parent), "log", "-1",
                                    "--format=%ct"], check=True, capture_output=True,
                                   text=True).stdout.strip())
        version = snapshot_version(pyproject_version(args.pyproject), t)
        if args.write:
            write_version(args.pyproject, version)
    except (ReleaseError, OSError, subprocess.CalledProcessError, ValueError) as exc:
        print(f"snapshot_version: FAIL: {exc}", file=sys.stderr)
        return 1
    print(version)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
