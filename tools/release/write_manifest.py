#!/usr/bin/env python3
"""Write the one immutable release manifest for a directory of built distributions.

    python tools/release/write_manifest.py --dist dist/ --out dist-manifest/manifest.json \
        --source-sha "$GITHUB_SHA" [--profile default] [--version X]

The manifest records the source commit, the build profile, the version and every file's name, size
and sha256. Every file in --dist must be a wheel or sdist of this distribution at this version.
An existing manifest is never overwritten (a re-run must produce a new candidate, not edit one).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from relcommon import (DIST_NAME, MANIFEST_SCHEMA, ReleaseError, artifact_version,  # noqa: E402
                       dist_files, known_profiles, parse_canonical, pyproject_version, sha256_file)


def build_manifest(dist: Path, version: str, profile: str, source_sha: str,
                   exclude: tuple[Path, ...] = ()) -> dict:
    parse_canonical(version)
    if not re.fullmatch(r"[0-9a-f]{40}", source_sha):
        raise ReleaseError(f"source sha {source_sha!r} is not a 40-hex commit id")
    profiles = known_profiles()
    if profile not in profiles:
        raise ReleaseError(f"profile {profile!r} is not one of {', '.join(profiles)}")
    files = []
    kinds = set()
    for p in dist_files(dist, exclude):
        kind, fver = artifact_version(p.name)
        if fver != version:
            raise ReleaseError(f"{p.name}: version {fver} is not the release version {version}")
        kinds.add(kind)
        files.append({"name": p.name, "size": p.stat().st_size, "sha256": sha256_file(p)})
    if not files:
        raise ReleaseError(f"{dist}: no distributions to record")
    if "sdist" not in kinds or "wheel" not in kinds:
        raise ReleaseError(f"{dist}: a release needs an sdist and at least one wheel, found {sorted(kinds)}")
    return {"schema": MANIFEST_SCHEMA, "name": DIST_NAME, "version": version, "profile": profile,
            "source_sha": source_sha, "files": files}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dist", type=Path, required=True, help="directory holding the wheels and the sdist")
    ap.add_argument("--out", type=Path, required=True, help="manifest file to create")
    ap.add_argument("--source-sha", default=os.environ.get("GITHUB_SHA"), help="commit built (default: $GITHUB_SHA)")
    ap.add_argument("--profile", default=os.environ.get("MOONCAKE_PROFILE") or "default")
    ap.add_argument("--version", help="release version (default: pyproject.toml's)")
    args = ap.parse_args(argv)
    try:
        if not args.source_sha:
            raise ReleaseError("no --source-sha and no $GITHUB_SHA")
        if args.out.exists():
            raise ReleaseError(f"{args.out} exists: a manifest is written once, never replaced")
        version = args.version or pyproject_version()
        m = build_manifest(args.dist, version, args.profile, args.source_sha, exclude=(args.out,))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "x") as f:  # "x": refuse to replace a file created meanwhile
            json.dump(m, f, indent=2, sort_keys=True)
            f.write("\n")
        os.chmod(args.out, 0o444)
    except (ReleaseError, OSError) as exc:
        print(f"write_manifest: FAIL: {exc}", file=sys.stderr)
        return 1
    print(f"write_manifest: PASS: {args.out}: {m['name']} {m['version']} ({m['profile']}) "
          f"at {m['source_sha'][:12]}, {len(m['files'])} files")
    for f in m["files"]:
        print(f"  {f['sha256']}  {f['size']:>10}  {f['name']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
