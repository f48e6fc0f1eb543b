"""What a user gets from `pip install mooncake-c`: the package, its metadata and its import rules."""

import importlib.metadata
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import mooncake


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def test_package_is_imported_from_the_environment(forbidden_roots):
    f = Path(mooncake.__file__)
    purelib = Path(sysconfig.get_path("purelib"))
    platlib = Path(sysconfig.get_path("platlib"))
    assert _inside(f, purelib) or _inside(f, platlib), f"{f} is not in this environment's site-packages"
    expect = os.environ.get("MC_PACKAGING_EXPECT_PREFIX")
    if expect:
        assert _inside(f, Path(expect)), f"{f} is not inside the venv {expect}"
        assert Path(sys.prefix).resolve() == Path(expect).resolve()
    for root in forbidden_roots:
        assert not _inside(f, root), f"{f} comes from the checkout {root}"
    assert not _inside(Path.cwd(), Path(mooncake.__file__).parents[1]) or not forbidden_roots


def test_version_is_the_distribution_version(dist_version):
    assert mooncake.__version__ == dist_version
    assert dist_version != "0+unknown"


def test_distribution_metadata(dist_version):
    meta = importlib.metadata.metadata("mooncake-c")
    assert meta["Name"] == "mooncake-c"
    assert meta["Requires-Python"].startswith(">=3.")
    # The base install needs nothing else: integrations are extras, never hard requirements.
    reqs = importlib.metadata.requires("mooncake-c") or []
    assert [r for r in reqs if "extra ==" not in r] == []


def test_no_source_or_build_tree_files_installed():
    files = importlib.metadata.files("mooncake-c")
    names = [str(f) for f in files]
    assert not [n for n in names if n.endswith((".c", ".h", "CMakeLists.txt", ".o", ".a"))
                and not n.startswith("mooncake/include/")]
    assert any(n.startswith("mooncake/") and n.endswith(".so") for n in names)


def _probe(code: str) -> dict:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


_NATIVE = """
import json, sys, importlib.machinery as m
{imports}
native = sorted(k for k, v in sys.modules.items()
                if k.startswith("mooncake") and getattr(getattr(v, "__spec__", None), "loader", None).__class__
                is m.ExtensionFileLoader)
print(json.dumps({{"native": native, "mooncake": sorted(k for k in sys.modules if k.startswith("mooncake"))}}))
"""


def test_import_mooncake_loads_no_native_module():
    got = _probe(_NATIVE.format(imports="import mooncake"))
    assert got["native"] == []
    assert got["mooncake"] == ["mooncake"]


def test_import_cli_loads_no_native_module():
    got = _probe(_NATIVE.format(imports="import mooncake.cli"))
    assert got["native"] == []


def test_engine_facade_loads_only_the_engine_extension():
    got = _probe(_NATIVE.format(imports="import mooncake.engine"))
    assert got["native"] == ["mooncake._engine"]


def test_store_facade_loads_only_what_it_needs():
    got = _probe(_NATIVE.format(imports="import mooncake.store"))
    assert "mooncake._store" in got["native"]
    assert set(got["native"]) <= {"mooncake._store", "mooncake._engine"}


@pytest.mark.parametrize("module,names", [
    ("mooncake.engine", ["TransferEngine"]),
    ("mooncake.store", ["MooncakeDistributedStore", "ReplicateConfig"]),
    ("mooncake.cli", ["binary_path"]),
])
def test_public_facades(module, names):
    mod = __import__(module, fromlist=["__all__"])
    assert isinstance(mod.__all__, (list, tuple)) and mod.__all__
    for n in mod.__all__:
        assert hasattr(mod, n), f"{module}.__all__ names {n}, which it lacks"
    for n in names:
        assert n in mod.__all__, f"{module}.__all__ lacks {n}"


def test_native_modules_are_private():
    import mooncake.engine
    import mooncake.store

    assert mooncake.engine.TransferEngine.__module__.startswith("mooncake")
    for mod in (mooncake.engine, mooncake.store):
        assert not [n for n in mod.__all__ if n.startswith("_")]


_ONE_COPY = """
import ctypes, json, os
import mooncake._engine, mooncake._store
pkg = os.path.dirname(os.path.realpath(mooncake._engine.__file__))  # where the native files are
ctypes.CDLL(os.path.join(pkg, "libtransfer_engine.so"))
mapped = set()
with open("/proc/self/maps") as f:
    for line in f:
        path = line.split()[-1]
        if os.path.basename(path).startswith(("libmooncake_", "libtransfer_engine")):
            mapped.add(os.path.realpath(path))
print(json.dumps({"pkg": pkg, "mapped": sorted(mapped)}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_one_copy_of_the_native_libraries_per_process():
    """Both extensions and the compat library in one process share one core and one common library
    (docs/build.md, link model): each is mapped from one file, the one inside the package."""
    got = _probe(_ONE_COPY)
    names = [os.path.basename(p) for p in got["mapped"]]
    assert sorted(names) == ["libmooncake_common.so", "libmooncake_core.so", "libtransfer_engine.so"], got
    assert all(os.path.dirname(p) == got["pkg"] for p in got["mapped"]), got
