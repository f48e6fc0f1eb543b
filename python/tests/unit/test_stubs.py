"""The extensions' type stubs are current (tools/dev/gen_stubs.py --check) and typed (py.typed
ships beside them), every public name of each extension is in its stub, and the stub of each
public native type lists every method the live type has, the Python-side ones included."""

import ast
import importlib
import pathlib
import subprocess
import sys
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
PKG = ROOT / "python" / "mooncake"


def test_stubs_are_generated_from_the_current_extensions():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "dev" / "gen_stubs.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_public_name_is_stubbed():
    assert (PKG / "py.typed").exists()
    # The stubs describe the types as users get them: the facades add the Python-side methods
    # (mooncake/store/_methods.py), so this passes alone as well as after other tests.
    importlib.import_module("mooncake.store")
    importlib.import_module("mooncake.engine")
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


def _stubbed_members(mod, cls_name):
    tree = ast.parse((PKG / f"{mod}.pyi").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name)
    return ({f.name for f in cls.body if isinstance(f, ast.FunctionDef)}
            | {f.target.id for f in cls.body if isinstance(f, ast.AnnAssign)})


@pytest.mark.parametrize("facade, mod, cls_name", [
    ("mooncake.store", "_store", "MooncakeDistributedStore"),
    ("mooncake.engine", "_engine", "TransferEngine"),
])
def test_type_stub_matches_dir_of_the_live_type(facade, mod, cls_name):
    # The type as users get it: its facade has added the Python-side methods.
    cls = getattr(importlib.import_module(facade), cls_name)
    stubbed = _stubbed_members(mod, cls_name)
    live = {n for n in dir(cls) if not n.startswith("__")}
    assert live == {n for n in stubbed if not n.startswith("__")}
    for name in stubbed:
        assert hasattr(cls, name), f"{cls_name}.{name}"


def test_store_methods_written_in_python_all_come_from_one_module():
    from mooncake.store import MooncakeDistributedStore, _methods

    python_side = {n for n, v in vars(MooncakeDistributedStore).items()
                   if isinstance(v, types.FunctionType)}
    assert python_side == {f.__name__ for f in _methods.METHODS}
    assert len(_methods.METHODS) == len(python_side)  # no name attached twice
