#!/usr/bin/env python3
"""Packaging checks in one command.

    python tools/packaging/check_all.py --quick   # actionlint on .github/workflows + the tools' own tests (< 1 min)
    python tools/packaging/check_all.py           # the above, then the full wheel gate (wheel_gate.py)

Tools come from the dev extra (the current interpreter if it has them, else a cached venv).
Prints PASS/FAIL per step and a closing 'packaging: N passed, N failed' line; exit 1 on any failure.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import toolenv  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the wheel gate")
    ap.add_argument("--release", action="store_true", help="pass --release to the wheel gate")
    args = ap.parse_args(argv)
    tools = toolenv.ensure()
    results: list[tuple[str, bool]] = []

    def step(name: str, cmd: list[str]) -> None:
        t = time.monotonic()
        print(f"--- {name}: {' '.join(cmd)}", flush=True)
        r = subprocess.run(cmd, cwd=REPO_ROOT, env=tools.env())
        ok = r.returncode == 0
        print(f"{'PASS' if ok else 'FAIL'} {name} ({time.monotonic() - t:.1f} s)", flush=True)
        results.append((name, ok))

    workflows = sorted(str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / ".github" / "workflows").glob("*.y*ml"))
    if not workflows:
        print("FAIL actionlint: no workflow files in .github/workflows")
        results.append(("actionlint", False))
    else:
        # shellcheck, when installed, also checks every run: script; without it actionlint checks the rest.
        sc = [] if shutil.which("shellcheck") else ["-shellcheck="]
        step("actionlint", [tools.exe("actionlint"), "-no-color", *sc, *workflows])
    step("release and gate tool tests",
         [tools.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tools/release/tests", "tools/packaging/tests"])
    if not args.quick:
        step("wheel gate", [tools.python, "tools/packaging/wheel_gate.py", *(["--release"] if args.release else [])])
    failed = [n for n, ok in results if not ok]
    print(f"packaging: {len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
