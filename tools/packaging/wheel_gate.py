#!/usr/bin/env python3
"""The wheel gate: build the sdist and the wheel from a clean checkout and judge them as installed.

    python tools/packaging/wheel_gate.py             # clone HEAD into a temp dir, build, check, test
    python tools/packaging/wheel_gate.py --release   # also `auditwheel repair` and test the repaired wheel
    python tools/packaging/wheel_gate.py --source tree   # build the working tree as it is (uncommitted too)

One `python -m build` (sdist, then the wheel from the sdist), then: twine check --strict;
check-wheel-contents; sdist == `git ls-files`; wheel tag and native layout; auditwheel show (and
repair with --release): a manylinux tag and no unexpected external libraries; abi3audit --strict;
readelf -d on every ELF (NEEDED allowlist, $ORIGIN-only RUNPATH, no build paths in the bytes);
install with --no-deps into a fresh venv and run python/tests/packaging from a temp dir outside the
checkout (the core with no extra); then `pip install <wheel>[service]` into that venv and run
`mc_store_rest_server --help`; the checkout's `git status --porcelain` is unchanged. Every check prints PASS or FAIL with a
reason; the exit status is 1 if any failed. Tools come from the dev extra (toolenv.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gatechecks as gc  # noqa: E402
import toolenv  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]


class Gate:
    def __init__(self) -> None:
        self.passed = 0
        self.failed: list[str] = []
        self.t0 = time.monotonic()

    def report(self, name: str, ok: bool, reason: str) -> bool:
        print(f"{'PASS' if ok else 'FAIL'} {name}: {reason}", flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed.append(name)
        return ok

    def results(self, name: str, results: list[gc.Result]) -> bool:
        bad = [r for r in results if not r.ok]
        if bad:
            return self.report(name, False, "; ".join(r.reason for r in bad))
        return self.report(name, True, f"{len(results)} checks")

    def step(self, msg: str) -> None:
        print(f"--- [{time.monotonic() - self.t0:6.1f}s] {msg}", flush=True)


def run(cmd: list[str], *, log: Path | None = None, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("text", True)
    if log is not None:
        with open(log, "w") as f:
            return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, **kw)
    return subprocess.run(cmd, capture_output=True, **kw)


def tail(text: str, n: int = 40) -> str:
    lines = text.strip().splitlines()
    return "\n".join("    " + line for line in lines[-n:])


def tool_result(gate: Gate, name: str, r: subprocess.CompletedProcess, ok_msg: str) -> bool:
    if r.returncode == 0:
        return gate.report(name, True, ok_msg)
    print(tail((r.stdout or "") + (r.stderr or "")))
    return gate.report(name, False, f"exit {r.returncode}")


def make_source(args, work: Path) -> Path:
    if args.source == "tree":
        return REPO_ROOT
    src = work / "src"
    head = run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], check=True).stdout.strip()
    run(["git", "clone", "-q", "--no-checkout", str(REPO_ROOT), str(src)], check=True)
    run(["git", "-C", str(src), "checkout", "-q", "--detach", head], check=True)
    return src


def test_requirements() -> list[str]:
    with open(REPO_ROOT / "pyproject.toml", "rb") as f:
        cbw = tomllib.load(f).get("tool", {}).get("cibuildwheel", {})
    return list(cbw.get("test-requires") or ["pytest"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", choices=["clone", "tree"], default="clone",
                    help="clone: a clone of HEAD (default); tree: the working tree itself")
    ap.add_argument("--release", action="store_true", help="also repair with auditwheel and test the repaired wheel")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--dist-out", type=Path, help="copy the validated sdist and wheel(s) here when every check passed")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("MC_TEST_JOBS") or os.cpu_count() or 2))
    args = ap.parse_args(argv)

    gate = Gate()
    tools = toolenv.ensure()
    work = Path(tempfile.mkdtemp(prefix="mc-wheel-gate-")).resolve()
    (work / "tmp").mkdir()
    print(f"wheel gate: work dir {work}, tools {tools.python}", flush=True)
    try:
        return _gate(args, gate, tools, work)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _gate(args, gate: Gate, tools: toolenv.Tools, work: Path) -> int:
    gate.step(f"source ({args.source})")
    src = make_source(args, work)
    src_status = gc.git_status(src)

    gate.step("python -m build (sdist, then the wheel from the sdist)")
    dist = work / "dist"
    env = tools.env()
    env.update(TMPDIR=str(work / "tmp"), CMAKE_BUILD_PARALLEL_LEVEL=str(args.jobs))
    env.pop("SKBUILD_BUILD_DIR", None)
    r = run([tools.python, "-m", "build", "--outdir", str(dist), str(src)], log=work / "build.log", env=env)
    sdists = sorted(dist.glob("*.tar.gz")) if dist.exists() else []
    wheels = sorted(dist.glob("*.whl")) if dist.exists() else []
    if r.returncode != 0 or len(sdists) != 1 or len(wheels) != 1:
        print(tail((work / "build.log").read_text(), 60))
        gate.report("build", False, f"python -m build exit {r.returncode}, {len(sdists)} sdist, {len(wheels)} wheel")
        return finish(gate)
    sdist, wheel = sdists[0], wheels[0]
    gate.report("build", True, f"{sdist.name}, {wheel.name}")

    gate.step("metadata and archive contents")
    tool_result(gate, "twine check --strict",
                run([tools.python, "-m", "twine", "check", "--strict", str(sdist), str(wheel)], env=tools.env()),
                "sdist and wheel metadata render")
    tool_result(gate, "check-wheel-contents",
                run([tools.python, "-m", "check_wheel_contents", str(wheel)], env=tools.env()), "no findings")
    try:
        res = gc.compare_sdist(gc.sdist_members(sdist), gc.tracked_files(src))
    except Exception as exc:  # a corrupt archive is a failed check, not a crash
        res = gc.Result(False, f"cannot read the sdist: {exc}")
    gate.report("sdist == git ls-files", res.ok, res.reason)

    from packaging.utils import parse_wheel_filename

    _, version, _, tags = parse_wheel_filename(wheel.name)
    tag = sorted(tags, key=str)[0]
    abi3 = tag.abi == "abi3"
    want_abi3 = sys.version_info >= (3, 11) if tools.python == sys.executable else None
    if want_abi3 is None:
        want_abi3 = run([tools.python, "-c", "import sys; print(sys.version_info >= (3, 11))"]).stdout.strip() == "True"
    gate.report("wheel tag", abi3 == want_abi3 and (not abi3 or tag.interpreter == "cp311"),
                f"{tag} ({'abi3 expected' if want_abi3 else 'a version-specific wheel expected'} for this interpreter)")
    gate.results("native layout", gc.check_layout(wheel, abi3))

    gate.step("auditwheel")
    under_test = wheel
    r = run([tools.python, "-m", "auditwheel", "show", "--json", str(wheel)], env=tools.env())
    try:
        res = gc.check_auditwheel(json.loads(r.stdout), repaired=False)
    except json.JSONDecodeError:
        res = gc.Result(False, f"auditwheel show exit {r.returncode}: {tail(r.stderr, 5)}")
    gate.report("auditwheel show", res.ok, res.reason)
    if args.release:
        house = work / "wheelhouse"
        excl = [a for lib in gc.DRIVER_LIBS for a in ("--exclude", lib)]
        r = run([tools.python, "-m", "auditwheel", "repair", "-w", str(house), *excl, str(wheel)], env=tools.env())
        repaired = sorted(house.glob("*.whl")) if house.exists() else []
        if r.returncode != 0 or len(repaired) != 1:
            gate.report("auditwheel repair", False, f"exit {r.returncode}: {tail(r.stderr, 10)}")
        else:
            under_test = repaired[0]
            r = run([tools.python, "-m", "auditwheel", "show", "--json", str(under_test)], env=tools.env())
            try:
                res = gc.check_auditwheel(json.loads(r.stdout), repaired=True)
            except json.JSONDecodeError:
                res = gc.Result(False, f"auditwheel show exit {r.returncode}")
            gate.report("auditwheel repair", res.ok, f"{under_test.name}: {res.reason}")

    if abi3:
        tool_result(gate, "abi3audit --strict",
                    run([tools.python, "-m", "abi3audit", "--strict", "--verbose", str(under_test)], env=tools.env()),
                    "extensions use only the limited API of their abi3 tag")

    gate.step("readelf on every ELF")
    unpacked = work / "unpacked"
    with zipfile.ZipFile(under_test) as zf:
        zf.extractall(unpacked)
    forbidden = sorted({str(work), str(REPO_ROOT), str(src)})
    elf_results = gc.inspect_tree(unpacked, forbidden, repaired=under_test is not wheel)
    n_elf = len(gc.elf_files(unpacked))
    for kind, idx in (("NEEDED allowlist", 0), ("RUNPATH $ORIGIN-only", 1), ("no build paths", 2)):
        part = elf_results[idx::3]
        if not part:
            gate.report(f"ELF {kind}", False, "the wheel holds no ELF file")
        else:
            bad = [x.reason for x in part if not x.ok]
            gate.report(f"ELF {kind}", not bad, "; ".join(bad) if bad else f"{n_elf} ELF files")

    gate.step("install into a fresh venv and run python/tests/packaging outside the checkout")
    venv_dir = work / "venv"
    r = run([tools.python, "-m", "venv", str(venv_dir)])
    vpy = str(venv_dir / "bin" / "python")
    ok = r.returncode == 0
    if ok:
        r = run([vpy, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", str(under_test)])
        ok = r.returncode == 0
    if ok:
        r = run([vpy, "-m", "pip", "install", "-q", "--disable-pip-version-check", *test_requirements()])
        ok = r.returncode == 0
    if not tool_result(gate, "install wheel into fresh venv", r, f"{under_test.name} into {venv_dir}") or not ok:
        return finish(gate, src, src_status)
    tests = work / "tests" / "packaging"
    shutil.copytree(src / "python" / "tests" / "packaging", tests)
    rundir = work / "run"
    rundir.mkdir()
    tenv = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "MOONCAKE_BIN"))}
    tenv.update(PATH=str(venv_dir / "bin") + os.pathsep + tenv.get("PATH", ""), VIRTUAL_ENV=str(venv_dir),
                MC_PACKAGING_FORBIDDEN_ROOTS=os.pathsep.join(sorted({str(REPO_ROOT), str(src)})),
                MC_PACKAGING_EXPECT_PREFIX=str(venv_dir), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([vpy, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE", "--rootdir", str(tests),
                        str(tests)], cwd=rundir, env=tenv, capture_output=True, text=True, timeout=900)
    print(tail(r.stdout + r.stderr, 60 if r.returncode else 3))
    gate.report("packaging tests (installed wheel)", r.returncode == 0, f"pytest exit {r.returncode}")
    service_extra(gate, vpy, venv_dir, under_test, rundir, tenv)
    rc = finish(gate, src, src_status)
    if rc == 0 and args.dist_out:
        args.dist_out.mkdir(parents=True, exist_ok=True)
        for f in {sdist, wheel, under_test}:
            shutil.copy2(f, args.dist_out / f.name)
        print(f"validated distributions copied to {args.dist_out}")
    return rc


def service_extra(gate: Gate, vpy: str, venv_dir: Path, wheel: Path, rundir: Path, tenv: dict) -> None:
    """The same venv, which so far had the core wheel alone (the packaging tests proved that it
    imports with no extra): `pip install <wheel>[service]`, then the REST server's console script
    and module work."""
    gate.step("the service extra: pip install <wheel>[service], mc_store_rest_server --help")
    r = run([vpy, "-m", "pip", "install", "-q", "--disable-pip-version-check", f"{wheel}[service]"])
    if not tool_result(gate, "install <wheel>[service]", r, "the service extra's packages installed"):
        return
    r = run([str(venv_dir / "bin" / "mc_store_rest_server"), "--help"], cwd=rundir, env=tenv)
    ok = r.returncode == 0 and "--max-body-size" in r.stdout
    if not ok:
        print(tail(r.stdout + r.stderr, 20))
    gate.report("mc_store_rest_server --help (service extra)", ok, f"exit {r.returncode}")
    r = run([vpy, "-c", "import mooncake.mooncake_store_service as s; print(s.__file__)"], cwd=rundir, env=tenv)
    ok = r.returncode == 0 and r.stdout.strip().startswith(str(venv_dir))
    if not ok:
        print(tail(r.stdout + r.stderr, 20))
    gate.report("import mooncake.mooncake_store_service (service extra)", ok,
                r.stdout.strip() if ok else f"exit {r.returncode}")


def finish(gate: Gate, src: Path | None = None, src_status: str | None = None) -> int:
    if src is not None:
        after = gc.git_status(src)
        if src == REPO_ROOT:  # --source tree: the build must leave the tree as it found it
            ok, what = after == src_status, "as before" if after == src_status else f"changed:\n{after}"
        else:  # a clean clone must still be clean
            ok, what = not after, "empty" if not after else f"not empty:\n{after}"
        gate.report("checkout unchanged", ok, f"git status --porcelain of {src} is {what}")
    print(f"\nwheel gate took {time.monotonic() - gate.t0:.0f} s; failed: {', '.join(gate.failed) or 'none'}")
    print(f"gate: {gate.passed} passed, {len(gate.failed)} failed")
    return 1 if gate.failed else 0


if __name__ == "__main__":
    sys.exit(main())
