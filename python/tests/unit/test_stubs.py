"""The extensions' type stubs are current (tools/dev/gen_stubs.py --check) and typed (py.typed
ships beside them), and every public name of each extension is in its stub."""

import ast
import importlib
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
PKG = ROOT / "python" / "mooncake"


def test_stubs_are_generated_from_the_current_extensions():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "dev" / "gen_stubs.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_public_name_is_stubbed():
    assert (PKG / "py.typed").exists()
    for mod in ("_store", "_engine"):
        tree = ast.parse((PKG / f"{mod}.pyi").read_text())
        stubbed = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        stubbed |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign)}
        real = {n for n in dir(importlib.import_module(f"mooncake.{mod}"))
                if not n.startswith("__")}
        assert real == stubbed
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            obj = getattr(importlib.import_module(f"mooncake.{mod}"), cls.name)
            methods = {f.name for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AnnAssign))
                       and hasattr(f, "name")}
            for name in methods:
                assert hasattr(obj, name), f"{mod}.{cls.name}.{name}"
