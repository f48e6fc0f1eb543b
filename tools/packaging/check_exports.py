#!/usr/bin/env python3
"""The link surface of the libraries we ship, read from a build directory with nm.

Each shipped library may export (nm -D --defined-only) only:

- libmooncake_common.so: public API (mc_ names, MC_API in mooncake/error.h) and the internal mc__
  names its version script lists (mooncake-common/mooncake_common.map);
- libmooncake_core.so: public API only (mc_ names; hidden by default, MC_API exports);
- libtransfer_engine.so: the reference's C names its version script lists;
- the Python extension modules: their PyInit_ function only.

And every internal name the common library's list allows must still be exported and needed by an
artifact of the build: some ELF file there (a library, a binary, a test) whose dynamic undefined
symbols (nm -D --undefined-only) name it. A name nothing uses any more fails, so the list shrinks
with the code instead of growing stale.

    python3 tools/packaging/check_exports.py --build build/ctest
"""

import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMON_MAP = os.path.join(ROOT, "mooncake-common", "mooncake_common.map")
COMPAT_MAP = os.path.join(ROOT, "mooncake-transfer-engine", "compat", "transfer_engine.map")
PUBLIC = re.compile(r"^mc_[a-z0-9]")
EXTENSION = re.compile(r"^_[a-z_]+\..*\.so$")  # _engine.abi3.so, _fast_copy.abi3.so, _store.cpython-312-....so


def map_names(path: str) -> list[str]:
    """The names a version script's global: section lists (comments and globs left out)."""
    text = re.sub(r"/\*.*?\*/", "", open(path, encoding="utf-8").read(), flags=re.S)
    body = text.split("global:", 1)[1].split("local:", 1)[0]
    return [n.strip() for n in body.split(";") if n.strip() and "*" not in n]


def nm(path: str, *flags: str) -> set[str]:
    out = subprocess.run(["nm", "-D", *flags, path], check=True, capture_output=True, text=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


def is_elf_program(path: str) -> bool:
    """An ELF executable or shared object (not a relocatable .o)."""
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except OSError:
        return False
    return len(head) == 18 and head[:4] == b"\x7fELF" and int.from_bytes(head[16:18], "little") in (2, 3)


def elf_files(build: str) -> list[str]:
    found = []
    for d, dirs, files in os.walk(build):
        # CMakeFiles: objects; prefix: the install_consumer test's scratch install, copies of the
        # same files that it may be rewriting while this runs
        dirs[:] = [x for x in dirs if x not in ("CMakeFiles", "prefix")]
        for name in files:
            p = os.path.join(d, name)
            if not os.path.islink(p) and is_elf_program(p):
                found.append(p)
    return sorted(found)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True, help="a built CMake directory")
    a = ap.parse_args()
    allowed_internal = set(n for n in map_names(COMMON_MAP) if n.startswith("mc__"))
    compat_names = set(map_names(COMPAT_MAP))
    elves = elf_files(a.build)

    def find(name: str) -> list[str]:
        return [p for p in elves if os.path.basename(p) == name]

    rules = {
        "libmooncake_common.so": lambda s: bool(PUBLIC.match(s)) or s in allowed_internal,
        "libmooncake_core.so": lambda s: bool(PUBLIC.match(s)),
        "libtransfer_engine.so": lambda s: s in compat_names,
    }
    bad: list[str] = []
    counts: list[str] = []
    common_exports: set[str] = set()
    for lib, ok in rules.items():
        paths = find(lib)
        if not paths:
            bad.append(f"{lib}: not found under {a.build}")
        for p in paths:
            exp = nm(p, "--defined-only")
            if lib == "libmooncake_common.so":
                common_exports |= exp
            internal = sorted(s for s in exp if s.startswith("mc__"))
            counts.append(f"{os.path.relpath(p, a.build)}: {len(exp)} exported, {len(internal)} internal")
            bad += [f"{os.path.relpath(p, a.build)} exports {s}, neither public API nor listed" for s in sorted(exp) if not ok(s)]
    for p in elves:
        if EXTENSION.match(os.path.basename(p)):
            exp = nm(p, "--defined-only")
            counts.append(f"{os.path.relpath(p, a.build)}: {len(exp)} exported")
            bad += [f"{os.path.relpath(p, a.build)} exports {s}, not its PyInit_" for s in sorted(exp) if not s.startswith("PyInit_")]

    # Who needs the listed names: every other ELF file of the build.
    needed: set[str] = set()
    for p in elves:
        if os.path.basename(p) != "libmooncake_common.so":
            needed |= nm(p, "--undefined-only")
    for s in sorted(allowed_internal):
        if s not in common_exports:
            bad.append(f"{s} is listed in {os.path.relpath(COMMON_MAP, ROOT)} but not exported (gone?)")
        elif s not in needed:
            bad.append(f"{s} is listed in {os.path.relpath(COMMON_MAP, ROOT)} but no artifact of the build uses it: take it out")
    print("\n".join(counts))
    if bad:
        print("link surface broken:\n  " + "\n  ".join(bad), file=sys.stderr)
        return 1
    print(f"ok: {len(allowed_internal)} internal names listed, each exported and used")
    return 0


if __name__ == "__main__":
    sys.exit(main())
