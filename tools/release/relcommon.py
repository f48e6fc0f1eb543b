"""Shared pieces of the release tools: the project's version fact, tags, digests, manifests.

Stdlib plus `packaging` (the dev extra). Every failure is a ReleaseError with a message that says
what was expected and what was found; the command-line tools print it and exit 1.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path

from packaging.utils import (InvalidSdistFilename, InvalidWheelFilename, canonicalize_name,
                             parse_sdist_filename, parse_wheel_filename)
from packaging.version import InvalidVersion, Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the release tools run on 3.11+, tomli is the 3.10 fallback
    import tomli as tomllib

REPO_ROOT = Path(__file__).resolve().parents[2]
DIST_NAME = "mooncake-c"
MANIFEST_SCHEMA = 1
_SHA1_RE = re.compile(r"^[0-9a-f]{40}$")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


class ReleaseError(Exception):
    """A release check failed; the message is shown to the person cutting the release."""


def pyproject_version(pyproject: Path | None = None) -> str:
    path = pyproject or REPO_ROOT / "pyproject.toml"
    with open(path, "rb") as f:
        data = tomllib.load(f)
    try:
        return data["project"]["version"]
    except KeyError:
        raise ReleaseError(f"{path}: no static [project].version") from None


def known_profiles(pyproject: Path | None = None) -> list[str]:
    """'default' plus every MOONCAKE_PROFILE value that a scikit-build override selects."""
    path = pyproject or REPO_ROOT / "pyproject.toml"
    with open(path, "rb") as f:
        data = tomllib.load(f)
    names = ["default"]
    for ov in data.get("tool", {}).get("scikit-build", {}).get("overrides", []):
        name = ov.get("if", {}).get("env", {}).get("MOONCAKE_PROFILE")
        if isinstance(name, str) and name not in names:
            names.append(name)
    return names


def parse_canonical(version: str) -> Version:
    """Parse a PEP 440 version and insist it is written in its canonical form."""
    try:
        v = Version(version)
    except InvalidVersion:
        raise ReleaseError(f"{version!r} is not a PEP 440 version") from None
    if str(v) != version:
        raise ReleaseError(f"{version!r} is not canonical: PEP 440 writes it {str(v)!r}")
    if v.local is not None:
        raise ReleaseError(f"{version!r} has a local part (+{v.local}); indexes refuse local versions")
    return v


def classify(v: Version) -> str:
    """'dev', 'pre-release' or 'stable', as the parser decides (a post-release is stable)."""
    if v.is_devrelease:
        return "dev"
    if v.is_prerelease:
        return "pre-release"
    return "stable"


def version_from_tag(tag: str) -> str:
    """The version a tag names: 'vX' or 'X' (a 'refs/tags/' prefix is allowed)."""
    t = tag.strip()
    if t.startswith("refs/tags/"):
        t = t[len("refs/tags/"):]
    if t.startswith("v"):
        t = t[1:]
    if not t:
        raise ReleaseError(f"tag {tag!r} names no version")
    return t


def check_tag(tag: str, version: str) -> Version:
    """The tag must name exactly the (canonical) version; returns the parsed version."""
    v = parse_canonical(version)
    tv = version_from_tag(tag)
    if tv != version:
        try:
            same = Version(tv) == v
        except InvalidVersion:
            same = False
        hint = " (the same version written differently: tag it canonically)" if same else ""
        raise ReleaseError(f"tag {tag!r} names {tv!r} but pyproject.toml says {version!r}{hint}")
    return v


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def artifact_version(name: str) -> tuple[str, str]:
    """(kind, version) of a distribution file name; ReleaseError for anything else."""
    try:
        if name.endswith(".whl"):
            dist, ver, _build, _tags = parse_wheel_filename(name)
            kind = "wheel"
        elif name.endswith(".tar.gz"):
            dist, ver = parse_sdist_filename(name)
            kind = "sdist"
        else:
            raise ReleaseError(f"{name}: neither a wheel nor an sdist")
    except (InvalidWheelFilename, InvalidSdistFilename) as exc:
        raise ReleaseError(f"{name}: {exc}") from None
    if dist != canonicalize_name(DIST_NAME):
        raise ReleaseError(f"{name}: distribution {dist!r} is not {DIST_NAME!r}")
    return kind, str(ver)


def dist_files(directory: Path, exclude: tuple[Path, ...] = ()) -> list[Path]:
    excl = {p.resolve() for p in exclude}
    return sorted((p for p in directory.iterdir() if p.is_file() and p.resolve() not in excl),
                  key=lambda p: p.name)


def load_manifest(path: Path) -> dict:
    try:
        m = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ReleaseError(f"manifest {path}: {exc}") from None
    problems = []
    if not isinstance(m, dict):
        raise ReleaseError(f"manifest {path}: not a JSON object")
    if m.get("schema") != MANIFEST_SCHEMA:
        problems.append(f"schema {m.get('schema')!r} != {MANIFEST_SCHEMA}")
    if m.get("name") != DIST_NAME:
        problems.append(f"name {m.get('name')!r} != {DIST_NAME!r}")
    if not isinstance(m.get("version"), str):
        problems.append("no version")
    if not isinstance(m.get("profile"), str):
        problems.append("no profile")
    if not isinstance(m.get("source_sha"), str) or not _SHA1_RE.match(m["source_sha"]):
        problems.append(f"source_sha {m.get('source_sha')!r} is not a 40-hex commit id")
    files = m.get("files")
    if not isinstance(files, list) or not files:
        problems.append("no files")
        files = []
    seen = set()
    for i, f in enumerate(files):
        if not (isinstance(f, dict) and isinstance(f.get("name"), str) and isinstance(f.get("size"), int)
                and isinstance(f.get("sha256"), str) and _SHA256_RE.match(f["sha256"])):
            problems.append(f"files[{i}] is not {{name, size, sha256}}: {f!r}")
            continue
        if "/" in f["name"] or f["name"] in (".", ".."):
            problems.append(f"files[{i}]: {f['name']!r} is not a plain file name")
        if f["name"] in seen:
            problems.append(f"files[{i}]: {f['name']} listed twice")
        seen.add(f["name"])
    if problems:
        raise ReleaseError(f"manifest {path}: " + "; ".join(problems))
    return m


def github_output(**values) -> None:
    """Appends name=value lines for the workflow's later steps to $GITHUB_OUTPUT, when it is set
    (outside GitHub Actions nothing is written)."""
    out = os.environ.get("GITHUB_OUTPUT")
    if out:
        with open(out, "a") as f:
            f.write("".join(f"{k}={v}\n" for k, v in values.items()))
