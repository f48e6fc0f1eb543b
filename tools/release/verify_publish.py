#!/usr/bin/env python3
"""Verify, right before publishing, that the files to publish are exactly the validated candidate.

    python tools/release/verify_publish.py --tag "$GITHUB_REF_NAME" --manifest manifest.json \
        --dist dist/ [--source-sha "$GITHUB_SHA"] [--published published.json | DIR] [--upload-dir up/]

Fails when: the tag does not name pyproject's (canonical) version or the manifest's version; the
manifest was built from another commit; a manifest file is missing, has another size or sha256, or
an extra file is present. For re-runs, --published names what the index already holds for this
version (a directory of those files, a JSON object name->sha256, or the index's JSON file list as
written by fetch_published.py): a published file whose digest differs from the manifest fails, and so
does a published file the manifest does not list. Files already published with the same digest are
not uploaded again; --upload-dir receives exactly the files still to upload.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from relcommon import (ReleaseError, check_tag, dist_files, github_output,  # noqa: E402
                       load_manifest, pyproject_version, sha256_file)


def load_published(src: Path) -> dict[str, str]:
    """name -> sha256 of files already on the index, from a directory or a JSON document."""
    if src.is_dir():
        return {p.name: sha256_file(p) for p in dist_files(src)}
    try:
        data = json.loads(src.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ReleaseError(f"published list {src}: {exc}") from None
    if isinstance(data, dict) and "files" in data and isinstance(data["files"], list):
        data = data["files"]  # PEP 691 JSON: {"files": [{"filename", "hashes": {"sha256"}}]}
    out: dict[str, str] = {}
    if isinstance(data, dict):
        items = list(data.items())
    elif isinstance(data, list):
        items = []
        for f in data:
            if not isinstance(f, dict):
                raise ReleaseError(f"published list {src}: entry {f!r} is not an object")
            name = f.get("name") or f.get("filename")
            digest = f.get("sha256") or (f.get("hashes") or {}).get("sha256") or (f.get("digests") or {}).get("sha256")
            items.append((name, digest))
    else:
        raise ReleaseError(f"published list {src}: expected an object or a list")
    for name, digest in items:
        if not isinstance(name, str) or not isinstance(digest, str) or len(digest) != 64:
            raise ReleaseError(f"published list {src}: bad entry {name!r}: {digest!r}")
        out[name] = digest.lower()
    return out


def verify(tag: str, manifest_path: Path, dist: Path, source_sha: str | None,
           published: dict[str, str] | None, pyproject: Path | None = None) -> tuple[list[str], list[str]]:
    """Returns (to_upload, already_published); raises ReleaseError listing every problem found."""
    m = load_manifest(manifest_path)
    problems: list[str] = []
    version = pyproject_version(pyproject)
    try:
        check_tag(tag, version)
    except ReleaseError as exc:
        problems.append(str(exc))
    if m["version"] != version:
        problems.append(f"manifest version {m['version']} is not pyproject's {version}")
    if source_sha and m["source_sha"] != source_sha:
        problems.append(f"manifest was built from {m['source_sha']}, this run is at {source_sha}")
    want = {f["name"]: f for f in m["files"]}
    have = {p.name: p for p in dist_files(dist, exclude=(manifest_path,))}
    for name in sorted(want.keys() - have.keys()):
        problems.append(f"missing: {name} is in the manifest but not in {dist}")
    for name in sorted(have.keys() - want.keys()):
        problems.append(f"extra: {name} is in {dist} but not in the manifest")
    for name in sorted(want.keys() & have.keys()):
        f, p = want[name], have[name]
        size = p.stat().st_size
        if size != f["size"]:
            problems.append(f"size: {name} is {size} bytes, the manifest says {f['size']}")
        digest = sha256_file(p)
        if digest != f["sha256"]:
            problems.append(f"digest: {name} has sha256 {digest}, the manifest says {f['sha256']}")
    already: list[str] = []
    for name, digest in sorted((published or {}).items()):
        if name not in want:
            problems.append(f"published: {name} is already on the index but not in this manifest")
        elif digest != want[name]["sha256"]:
            problems.append(f"published: {name} on the index has sha256 {digest}, "
                            f"the manifest says {want[name]['sha256']} (a re-run must not change a release)")
        else:
            already.append(name)
    if problems:
        raise ReleaseError("\n  ".join([f"{len(problems)} problem(s):"] + problems))
    return sorted(set(want) - set(already)), already


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tag", required=True)
    ap.add_argument("--manifest", type=Path, required=True)
    ap.add_argument("--dist", type=Path, required=True)
    ap.add_argument("--source-sha", default=os.environ.get("GITHUB_SHA"))
    ap.add_argument("--published", type=Path, help="directory or JSON of files already on the index")
    ap.add_argument("--pyproject", type=Path)
    ap.add_argument("--upload-dir", type=Path, help="copy the files still to upload here")
    args = ap.parse_args(argv)
    try:
        published = load_published(args.published) if args.published else None
        to_upload, already = verify(args.tag, args.manifest, args.dist, args.source_sha, published, args.pyproject)
        if args.upload_dir:
            args.upload_dir.mkdir(parents=True, exist_ok=True)
            if any(args.upload_dir.iterdir()):
                raise ReleaseError(f"upload dir {args.upload_dir} is not empty")
            for name in to_upload:
                shutil.copy2(args.dist / name, args.upload_dir / name)
    except (ReleaseError, OSError) as exc:
        print(f"verify_publish: FAIL: {exc}", file=sys.stderr)
        return 1
    print(f"verify_publish: PASS: {len(to_upload) + len(already)} files match the manifest; "
          f"{len(already)} already published with the same digest, {len(to_upload)} to upload")
    for name in to_upload:
        print(f"  upload  {name}")
    for name in already:
        print(f"  present {name}")
    github_output(upload_count=len(to_upload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
