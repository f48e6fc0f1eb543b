#!/usr/bin/env python3
"""The release flow end to end on this machine, publishing nothing: build a candidate once,
validate it, then promote exactly those files as the tag's publish step would.

    python tools/release/dry_run.py                      # build with the wheel gate, then promote
    python tools/release/dry_run.py --dist build/release-candidate   # a candidate the gate built

1. candidate   the wheel gate builds the sdist and wheel once from a clean clone of HEAD and
               validates them installed (its packaging tests); --dist takes a candidate it
               already validated (tools/run-tests.sh passes the one its gate run made)
2. manifest    write_manifest.py records the commit, the version and every file's size and
               sha256; printed in full
3. promotion   the candidate is copied as the tag's workflow downloads it, and verify_publish.py
               (tag, version, commit, every file against the manifest) fills the upload
               directory: its files' digests are printed beside the manifest's and must be equal
4. refusal     a candidate with one file rebuilt (one byte changed) must be refused by the same
               step: a release never publishes what was not validated

Exit status 1 when any step fails.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from relcommon import (ReleaseError, dist_files, pyproject_version,  # noqa: E402
                       sha256_file)


def step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def tool(name: str, *args: str) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, str(HERE / name), *args], capture_output=True, text=True)
    if res.stdout.strip():
        print(res.stdout.rstrip())
    if res.stderr.strip():
        print(res.stderr.rstrip())
    return res


def head_sha() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


def build_candidate(work: Path) -> Path:
    out = work / "candidate"
    res = subprocess.run([sys.executable, str(ROOT / "tools" / "packaging" / "wheel_gate.py"),
                          "--dist-out", str(out)])
    if res.returncode != 0:
        raise ReleaseError("the wheel gate did not validate the candidate (output above)")
    return out


def promote(candidate: Path, manifest: Path, tag: str, sha: str, work: Path) -> dict[str, str]:
    """What the tag's publish job uploads, name -> sha256."""
    downloaded = work / "downloaded"
    shutil.copytree(candidate, downloaded)  # files and manifest: one artifact, as CI keeps it
    manifest = downloaded / manifest.name
    upload = work / "upload"
    published = work / "published.json"
    published.write_text("{}")  # nothing of this version on the index yet
    res = tool("verify_publish.py", "--tag", tag, "--manifest", str(manifest), "--dist",
               str(downloaded), "--source-sha", sha, "--published", str(published),
               "--upload-dir", str(upload))
    if res.returncode != 0:
        raise ReleaseError("verify_publish.py refused the validated candidate")
    return {p.name: sha256_file(p) for p in dist_files(upload)}


def refused_when_rebuilt(candidate: Path, manifest: Path, tag: str, sha: str, work: Path) -> bool:
    rebuilt = work / "rebuilt"
    shutil.copytree(candidate, rebuilt)
    manifest = rebuilt / manifest.name
    victim = dist_files(rebuilt, exclude=(manifest,))[0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    print(f"(changed one byte of {victim.name})")
    res = tool("verify_publish.py", "--tag", tag, "--manifest", str(manifest), "--dist",
               str(rebuilt), "--source-sha", sha)
    return res.returncode != 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dist", type=Path,
                    help="a candidate the wheel gate already validated (default: build one)")
    ap.add_argument("--source-sha", help="commit the candidate was built from (default: HEAD)")
    args = ap.parse_args(argv)
    version = pyproject_version()
    tag = f"v{version}"
    sha = args.source_sha or head_sha()
    with tempfile.TemporaryDirectory(prefix="mc-release-dry-run-") as tmp:
        work = Path(tmp)
        try:
            step(f"1. candidate of {sha[:12]} (version {version})")
            if args.dist:
                candidate = work / "candidate"
                shutil.copytree(args.dist, candidate)
                print(f"taken from {args.dist} (validated by the wheel gate that wrote it)")
            else:
                candidate = build_candidate(work)
            step("2. manifest")
            manifest = candidate / "manifest.json"
            manifest.unlink(missing_ok=True)
            if tool("write_manifest.py", "--dist", str(candidate), "--out", str(manifest),
                    "--source-sha", sha, "--version", version).returncode != 0:
                raise ReleaseError("write_manifest.py failed")
            m = json.loads(manifest.read_text())
            print(json.dumps(m, indent=2))
            step(f"3. promotion on tag {tag}: what the publish step uploads")
            uploads = promote(candidate, manifest, tag, sha, work)
            want = {f["name"]: f["sha256"] for f in m["files"]}
            for name in sorted(want):
                same = "same digest" if uploads.get(name) == want[name] else "DIFFERENT"
                print(f"  {name}\n    manifest {want[name]}\n    upload   "
                      f"{uploads.get(name, '(missing)')}  {same}")
            if uploads != want:
                raise ReleaseError("the upload set is not exactly the manifest's files")
            print(f"the publish step uploads exactly the {len(want)} validated files")
            step("4. a rebuilt file is refused")
            if not refused_when_rebuilt(candidate, manifest, tag, sha, work):
                raise ReleaseError("a candidate with a changed file was not refused")
            print("refused, as it must be")
        except ReleaseError as exc:
            print(f"\nrelease dry run FAILED: {exc}", file=sys.stderr)
            return 1
    print(f"\nrelease dry run passed: {tag} would publish the candidate of {sha[:12]} unchanged")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
