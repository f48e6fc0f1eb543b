#!/usr/bin/env python3
"""The native code's use graph, and the layering rules it must keep (issue 25).

A file A *uses* a file B when A includes B (a quoted #include that resolves to B) or when A
refers to a non-static name that B alone defines (read from the compiled objects with `nm`, so
macros, static functions and names defined in two places never count). Nodes are the product's
.c and .h files; test, fuzz, benchmark and tool sources are left out.

For each checked directory the script prints the largest loop of mutual use (a strongly
connected component of the graph restricted to that directory's files) and, for each pair of
sibling directories named in TWO_WAY_FORBIDDEN, the uses in each direction.

    python3 tools/dev/code_graph.py --build build/ctest           # report
    python3 tools/dev/code_graph.py --build build/ctest --check   # exit 1 when a rule is broken

The build directory must hold compile_commands.json and the objects (the ctest build of
tools/run-tests.sh has both); the CMake test `code_graph` runs the check after every build.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections import defaultdict

# Directories whose largest loop of mutual use may hold at most MAX_LOOP files.
CHECKED_DIRS = (
    "mooncake-store/src/master",
    "mooncake-store/src/client",
    "mooncake-transfer-engine/src",
)
MAX_LOOP = 2
# Pairs of directories that may not use each other both ways.
TWO_WAY_FORBIDDEN = (("mooncake-store/src/client", "mooncake-store/src/node"),)
# Trees holding product code: a node of the graph is a .c/.h file below one of these.
PRODUCT_TREES = (
    "mooncake-common/src",
    "mooncake-common/include",
    "mooncake-transfer-engine/src",
    "mooncake-transfer-engine/include",
    "mooncake-transfer-engine/compat",
    "mooncake-transfer-engine/http_metadata_store",
    "mooncake-store/src",
    "mooncake-store/include",
)

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def product_file(rel: str) -> bool:
    return rel.endswith((".c", ".h")) and any(rel.startswith(t + "/") for t in PRODUCT_TREES)


def tracked_files(root: str) -> list[str]:
    """The product files git tracks; outside a checkout (an unpacked sdist), every file below
    the product trees."""
    out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True)
    if out.returncode == 0 and out.stdout:
        names = out.stdout.split("\n")
    else:
        names = [os.path.relpath(os.path.join(d, f), root)
                 for t in PRODUCT_TREES for d, _, fs in os.walk(os.path.join(root, t)) for f in fs]
    return sorted(f for f in names if f and product_file(f))


def include_edges(root: str, files: list[str], include_dirs: set[str]) -> dict[str, set[str]]:
    """A -> B for every quoted include of A that resolves to a product file B."""
    known = set(files)
    edges: dict[str, set[str]] = defaultdict(set)
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for inc in INCLUDE_RE.findall(text):
            candidates = [os.path.normpath(os.path.join(os.path.dirname(f), inc))]
            candidates += [os.path.normpath(os.path.join(d, inc)) for d in sorted(include_dirs)]
            for c in candidates:
                if c in known:
                    if c != f:
                        edges[f].add(c)
                    break
    return edges


def compile_units(build: str, root: str) -> tuple[dict[str, set[str]], set[str]]:
    """Objects per product source (a source may be compiled into several targets), and the
    repository-relative include directories the compile commands name."""
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as fh:
        commands = json.load(fh)
    objects: dict[str, set[str]] = defaultdict(set)
    include_dirs: set[str] = set()
    for c in commands:
        src = os.path.relpath(os.path.realpath(os.path.join(c["directory"], c["file"])), root)
        args = c.get("arguments") or c["command"].split()
        for i, a in enumerate(args):
            d = a[2:] if a.startswith("-I") and len(a) > 2 else (args[i + 1] if a in ("-I", "-isystem") else None)
            if d:
                rel = os.path.relpath(os.path.realpath(os.path.join(c["directory"], d)), root)
                if not rel.startswith(".."):
                    include_dirs.add(rel)
        if product_file(src):
            obj = os.path.join(c["directory"], c["output"])
            if os.path.exists(obj):
                objects[src].add(obj)
    return objects, include_dirs


def symbol_edges(objects: dict[str, set[str]]) -> dict[str, set[str]]:
    """A -> B when A's objects refer to a global name that B's objects alone define."""
    defined: dict[str, set[str]] = defaultdict(set)
    undefined: dict[str, set[str]] = defaultdict(set)
    for src, objs in objects.items():
        out = subprocess.run(["nm", "-P", *sorted(objs)], check=True, capture_output=True, text=True)
        for line in out.stdout.split("\n"):
            parts = line.split()
            if len(parts) < 2 or line.endswith(":"):
                continue
            name, kind = parts[0], parts[1]
            if kind == "U":
                undefined[src].add(name)
            elif kind in "TDBRCVWG" and kind.isupper():
                defined[name].add(src)
    edges: dict[str, set[str]] = defaultdict(set)
    for src, names in undefined.items():
        for n in names:
            owners = defined.get(n)
            if owners and len(owners) == 1:
                (b,) = owners
                if b != src:
                    edges[src].add(b)
    return edges


def strongly_connected(nodes: list[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the graph is small, but recursion depth is not ours to pick)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    comps: list[list[str]] = []
    counter = 0
    node_set = set(nodes)
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, set()) & node_set)))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, set()) & node_set))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(sorted(comp))
    return comps


def in_dir(f: str, d: str) -> bool:
    return f.startswith(d + "/")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True, help="a configured and built CMake directory")
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    ap.add_argument("--check", action="store_true", help="exit 1 when a layering rule is broken")
    ap.add_argument("--verbose", action="store_true", help="print every loop and every cross use")
    a = ap.parse_args()
    root = os.path.realpath(a.root)
    files = tracked_files(root)
    objects, include_dirs = compile_units(os.path.realpath(a.build), root)
    if not objects:
        print(f"no product objects found under {a.build}: build it first", file=sys.stderr)
        return 2
    edges: dict[str, set[str]] = defaultdict(set)
    for part in (include_edges(root, files, include_dirs), symbol_edges(objects)):
        for k, v in part.items():
            edges[k] |= v

    broken = []
    for d in CHECKED_DIRS:
        nodes = sorted(f for f in files if in_dir(f, d))
        comps = sorted(strongly_connected(nodes, edges), key=len, reverse=True)
        big = comps[0] if comps else []
        loops = [c for c in comps if len(c) > 1]
        print(f"{d}: {len(nodes)} files, largest loop of mutual use {len(big)} file(s), {len(loops)} loop(s)")
        for c in loops if a.verbose else loops[:1]:
            print("    loop: " + " ".join(os.path.relpath(f, d) for f in c))
        if len(big) > MAX_LOOP:
            broken.append(f"{d}: a loop of {len(big)} files (at most {MAX_LOOP})")
    for x, y in TWO_WAY_FORBIDDEN:
        xy = sorted((s, t) for s in edges for t in edges[s] if in_dir(s, x) and in_dir(t, y))
        yx = sorted((s, t) for s in edges for t in edges[s] if in_dir(s, y) and in_dir(t, x))
        print(f"{x} -> {y}: {len(xy)} use(s); {y} -> {x}: {len(yx)} use(s)")
        if a.verbose:
            for s, t in xy + yx:
                print(f"    {s} -> {t}")
        if xy and yx:
            broken.append(f"{x} and {y} use each other")
    if broken:
        print("layering rules broken:\n  " + "\n  ".join(broken), file=sys.stderr)
        return 1 if a.check else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
