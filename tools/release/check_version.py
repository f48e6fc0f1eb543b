#!/usr/bin/env python3
"""Check that a release tag names exactly the version in pyproject.toml.

    python tools/release/check_version.py --tag v0.2.0        # on a tag push: --tag "$GITHUB_REF_NAME"
    python tools/release/check_version.py                     # just validate and classify the version

The version must be PEP 440 and written canonically (str(Version(v)) == v); the tag is 'vX' or 'X'.
The release kind (stable, pre-release, dev) comes from the parser. With GITHUB_OUTPUT set, writes
version=, kind= and prerelease= for later workflow steps. Exit 0 when everything matches, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from relcommon import (ReleaseError, check_tag, classify, github_output,  # noqa: E402
                       parse_canonical, pyproject_version)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tag", help="the release tag (vX or X); omitted: only validate the version")
    ap.add_argument("--pyproject", type=Path, help="pyproject.toml to read (default: the repository's)")
    args = ap.parse_args(argv)
    try:
        version = pyproject_version(args.pyproject)
        v = check_tag(args.tag, version) if args.tag is not None else parse_canonical(version)
    except (ReleaseError, OSError) as exc:
        print(f"check_version: FAIL: {exc}", file=sys.stderr)
        return 1
    kind = classify(v)
    prerelease = "true" if kind != "stable" else "false"
    where = f"tag {args.tag!r} matches " if args.tag is not None else ""
    print(f"check_version: PASS: {where}version {version} ({kind})")
    github_output(version=version, kind=kind, prerelease=prerelease)
    return 0


if __name__ == "__main__":
    sys.exit(main())
