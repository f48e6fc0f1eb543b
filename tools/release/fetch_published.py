#!/usr/bin/env python3
"""List the files an index already holds for one version of this distribution (for re-runs).

    python tools/release/fetch_published.py --version 0.2.0 --out published.json [--index-url URL]

Reads the index's simple API in its JSON form (PEP 691) and writes a JSON object name -> sha256
of the files of that version; an unknown project writes {}. The index defaults to pip's configured
index (`pip config get global.index-url`), else pip's built-in default, so no host is hard-coded.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from relcommon import DIST_NAME, ReleaseError, artifact_version  # noqa: E402

_ACCEPT = "application/vnd.pypi.simple.v1+json"


def default_index_url() -> str:
    r = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.index-url"],
                       capture_output=True, text=True)
    if r.returncode == 0 and r.stdout.strip():
        return r.stdout.strip()
    from pip._internal.models.index import PyPI  # pip's own default index, not spelled out here

    return PyPI.simple_url


def published_files(index_url: str, version: str) -> dict[str, str]:
    url = index_url.rstrip("/") + f"/{DIST_NAME}/"
    req = urllib.request.Request(url, headers={"Accept": _ACCEPT})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            data = json.load(resp)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return {}
        raise ReleaseError(f"{url}: HTTP {exc.code}") from None
    except (urllib.error.URLError, json.JSONDecodeError, TimeoutError) as exc:
        raise ReleaseError(f"{url}: {exc}") from None
    out = {}
    for f in data.get("files", []):
        name = f.get("filename", "")
        try:
            _kind, fver = artifact_version(name)
        except ReleaseError:
            continue
        if fver == version:
            digest = (f.get("hashes") or {}).get("sha256")
            if not digest:
                raise ReleaseError(f"{url}: {name} has no sha256")
            out[name] = digest
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--index-url")
    args = ap.parse_args(argv)
    try:
        files = published_files(args.index_url or default_index_url(), args.version)
    except ReleaseError as exc:
        print(f"fetch_published: FAIL: {exc}", file=sys.stderr)
        return 1
    args.out.write_text(json.dumps(files, indent=2, sort_keys=True) + "\n")
    print(f"fetch_published: {len(files)} file(s) of {DIST_NAME} {args.version} already published")
    return 0


if __name__ == "__main__":
    sys.exit(main())
