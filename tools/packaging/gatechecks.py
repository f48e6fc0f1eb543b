"""The wheel gate's checks as plain functions: each takes paths or tool output and returns a
Result(ok, reason). No subprocess here except readelf, so tests can feed them real ELF files,
real archives and real tool output.
"""

from __future__ import annotations

import os
import posixpath
import re
import subprocess
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Result:
    ok: bool
    reason: str


# Libraries every Linux wheel may need from the host (glibc and the GCC runtime).
SYSTEM_NEEDED = [
    r"libc\.so\.6", r"libm\.so\.6", r"libpthread\.so\.0", r"libdl\.so\.2", r"librt\.so\.1",
    r"ld-linux-x86-64\.so\.2", r"ld-linux-aarch64\.so\.1", r"libgcc_s\.so\.1",
]
# Third-party libraries allowed before repair (auditwheel bundles them) ...
BUNDLEABLE = [r"libcjson\.so\.1"]
# ... and the names auditwheel gives their bundled copies (name-<8 hex>.so.<version>).
BUNDLED = [r"libcjson-[0-9a-f]{8}\.so(\.[0-9]+)*"]
# Our own shared libraries, allowed only when the wheel ships them.
OWN_LIBS = [r"libmooncake_core\.so(\.[0-9]+)*", r"libmooncake_common\.so(\.[0-9]+)*",
            r"libtransfer_engine\.so(\.[0-9]+)*"]
# Driver and vendor runtimes: never bundled, never linked (loaded at run time if at all).
DRIVER_LIBS = ["libcuda.so.1", "libcudart.so.12", "libcudart.so.13", "libnvidia-ml.so.1",
               "libibverbs.so.1", "librdmacm.so.1", "libmlx5.so.1", "libefa.so.1", "libnuma.so.1"]


def _full(patterns: list[str], name: str) -> bool:
    return any(re.fullmatch(p, name) for p in patterns)


def is_elf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def elf_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and is_elf(p))


def readelf_dynamic(path: Path) -> tuple[list[str], list[str]]:
    """(NEEDED, RUNPATH+RPATH entries) of one ELF file, from `readelf -d`."""
    out = subprocess.run(["readelf", "-d", "-W", str(path)], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    paths: list[str] = []
    for m in re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]*)\]", out):
        paths.extend(e for e in m.split(":"))
    return needed, paths


def check_needed(rel: str, needed: list[str], shipped: set[str], repaired: bool) -> Result:
    """NEEDED entries within the allowlist; own libraries only when the wheel ships them."""
    bad = []
    for n in needed:
        if _full(SYSTEM_NEEDED, n):
            continue
        if _full(BUNDLEABLE, n) and not repaired:
            continue
        if (_full(BUNDLED, n) or _full(OWN_LIBS, n)) and n in shipped:
            continue
        bad.append(n)
    if bad:
        return Result(False, f"{rel}: NEEDED outside the allowlist: {', '.join(bad)}")
    return Result(True, f"{rel}: NEEDED {', '.join(needed) or '(none)'}")


def check_runpath(rel: str, entries: list[str], needed: list[str], files: set[str]) -> Result:
    """RUNPATH/RPATH only $ORIGIN-relative, staying inside the wheel, and finding every shipped NEEDED.

    rel: the ELF's path inside the wheel (posix); files: every file path in the wheel (posix).
    """
    here = posixpath.dirname(rel)
    dirs = []
    for e in entries:
        m = re.fullmatch(r"\$(?:ORIGIN|\{ORIGIN\})(/.*)?", e)
        if not m:
            return Result(False, f"{rel}: RUNPATH entry {e!r} is not $ORIGIN-relative")
        d = posixpath.normpath(posixpath.join(here, (m.group(1) or "").lstrip("/")))
        if d == ".." or d.startswith("../"):
            return Result(False, f"{rel}: RUNPATH entry {e!r} leaves the wheel ({d})")
        dirs.append("" if d == "." else d)
    basenames = {posixpath.basename(f) for f in files}
    for n in needed:
        if n in basenames:  # shipped in the wheel: must be found through the RUNPATH
            if not any(posixpath.join(d, n) in files for d in dirs):
                return Result(False, f"{rel}: NEEDED {n} is in the wheel but not on its RUNPATH {entries}")
    return Result(True, f"{rel}: RUNPATH {':'.join(entries) or '(none)'}")


def check_no_strings(rel: str, path: Path, forbidden: list[str]) -> Result:
    data = path.read_bytes()
    hits = [s for s in forbidden if s and s.encode() in data]
    if hits:
        return Result(False, f"{rel}: contains build path(s) {', '.join(hits)}")
    return Result(True, f"{rel}: no build paths")


def inspect_tree(root: Path, forbidden: list[str], repaired: bool) -> list[Result]:
    """Every check above on every ELF under an unpacked wheel."""
    files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    shipped = {posixpath.basename(f) for f in files}
    results = []
    for p in elf_files(root):
        rel = p.relative_to(root).as_posix()
        needed, runpath = readelf_dynamic(p)
        results.append(check_needed(rel, needed, shipped, repaired))
        results.append(check_runpath(rel, runpath, needed, files))
        results.append(check_no_strings(rel, p, forbidden))
    return results


def sdist_members(sdist: Path) -> set[str]:
    """File paths in an sdist, without the top directory and without the generated PKG-INFO."""
    out = set()
    with tarfile.open(sdist) as tf:
        for m in tf.getmembers():
            if m.isdir():
                continue
            parts = m.name.split("/", 1)
            if len(parts) != 2:
                out.add("/" + m.name)  # a file at the archive root: never valid
                continue
            if parts[1] == "PKG-INFO":
                continue
            out.add(parts[1])
    return out


def compare_sdist(members: set[str], tracked: set[str]) -> Result:
    missing = sorted(tracked - members)
    extra = sorted(members - tracked)
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"{len(missing)} tracked file(s) missing: {', '.join(missing[:8])}")
        if extra:
            parts.append(f"{len(extra)} untracked file(s) included: {', '.join(extra[:8])}")
        return Result(False, "; ".join(parts))
    return Result(True, f"sdist holds exactly the {len(tracked)} files of `git ls-files`")


_MANYLINUX = re.compile(r"manylinux_\d+_\d+_(x86_64|aarch64|i686|ppc64le|s390x|armv7l)")


def check_auditwheel(report: dict, repaired: bool) -> Result:
    """Judge `auditwheel show --json`: a manylinux tag, no unexpected external libraries."""
    ext = sorted(report.get("external_libs") or {})
    if repaired:
        tag = report.get("overall_tag", "")
        unexpected = [lib for lib in ext if lib not in DRIVER_LIBS]
        if not _MANYLINUX.fullmatch(tag):
            return Result(False, f"repaired wheel is {tag!r}, not manylinux (external: {ext})")
        if unexpected:
            return Result(False, f"repaired wheel still needs external {', '.join(unexpected)}")
        return Result(True, f"repaired wheel is {tag}, external libraries: {', '.join(ext) or 'none'}")
    tag = report.get("sym_tag", "")
    unexpected = [lib for lib in ext if not _full(BUNDLEABLE, lib) and lib not in DRIVER_LIBS]
    if not _MANYLINUX.fullmatch(tag):
        return Result(False, f"symbol versions allow only {tag!r}, not a manylinux tag")
    if unexpected:
        return Result(False, f"unexpected external libraries: {', '.join(unexpected)}")
    bundle = [lib for lib in ext if _full(BUNDLEABLE, lib)]
    return Result(True, f"{tag} once repair bundles {', '.join(bundle) or 'nothing'} "
                        f"(as built: {report.get('overall_tag')})")


# The wheel's native layout (docs/packaging.md): the shared core and the one internal library
# (docs/build.md), two abi3 extensions, the binaries, the public headers.
EXPECTED_NATIVE = [
    (r"mooncake/libmooncake_core\.so", "the shared native core"),
    (r"mooncake/libmooncake_common\.so", "the internal common library"),
    (r"mooncake/include/mooncake/transfer_engine\.h", "the public C headers"),
    (r"mooncake/_engine\.(abi3|cpython-3\d+-[^/]+)\.so", "the TE extension mooncake._engine"),
    (r"mooncake/_store\.(abi3|cpython-3\d+-[^/]+)\.so", "the Store extension mooncake._store"),
    (r"mooncake/bin/mooncake_master", "the master binary"),
    (r"mooncake/bin/mooncake_client", "the storage node binary"),
    (r"mooncake/bin/mooncake_conductor", "the KV-event indexer binary"),
    (r"mooncake/bin/mooncake_http_metadata_server", "the HTTP metadata server binary"),
]


def check_layout(wheel: Path, abi3: bool) -> list[Result]:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        infos = {i.filename: i for i in zf.infolist()}
    results = []
    for pattern, what in EXPECTED_NATIVE:
        hits = [n for n in names if re.fullmatch(pattern, n)]
        if not hits:
            results.append(Result(False, f"missing {what} ({pattern})"))
        else:
            results.append(Result(True, f"{what}: {hits[0]}"))
    for n in names:
        if n.startswith("mooncake/bin/") and not n.endswith("/"):
            mode = (infos[n].external_attr >> 16) & 0o777
            if not mode & 0o100:
                results.append(Result(False, f"{n} is not executable in the wheel (mode {mode:o})"))
    exts = [n for n in names if re.fullmatch(r"mooncake/_[a-z_]+\..*\.so", n)]
    if abi3:
        bad = [n for n in exts if not n.endswith(".abi3.so")]
        if bad:
            results.append(Result(False, f"abi3 wheel carries version-specific modules: {', '.join(bad)}"))
    roots = {n.split("/", 1)[0] for n in names}
    strays = sorted(r for r in roots if r != "mooncake" and not r.endswith((".dist-info", ".libs")))
    if strays:
        results.append(Result(False, f"files outside the package: {', '.join(strays)}"))
    return results


def git_status(path: Path) -> str:
    return subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--untracked-files=all"],
                          capture_output=True, text=True, check=True).stdout


def tracked_files(path: Path) -> set[str]:
    out = subprocess.run(["git", "-C", str(path), "ls-files", "-z"], capture_output=True, check=True).stdout
    return {f for f in out.decode().split("\0") if f and os.path.lexists(path / f)}
