"""The installed wheel without any extra: the core and the pure-Python subpackages import, and the
REST service's console script says which extra it needs (or, where that extra is installed, runs).
The wheel gate then installs the ``service`` extra and runs ``mc_store_rest_server --help``."""

import importlib.util
import subprocess
import sys


def test_core_and_pure_subpackages_import_without_extras():
    code = ("import sys, mooncake, mooncake.store, mooncake.engine, mooncake.reshard, "
            "mooncake.reshard.contracts, mooncake.reshard.geometry, mooncake.integrations, mooncake.ep\n"
            "print(sorted(m for m in ('torch', 'starlette', 'uvicorn') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_rest_server_script_names_its_extra_or_runs(scripts_dir):
    r = subprocess.run([str(scripts_dir / "mc_store_rest_server"), "--help"], capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL)
    have = all(importlib.util.find_spec(m) for m in ("starlette", "uvicorn"))
    if have:
        assert r.returncode == 0 and "--max-body-size" in r.stdout, r.stderr
    else:
        assert r.returncode == 2, r.stderr
        assert "'service' extra" in r.stderr and "mooncake-c[service]" in r.stderr
        assert "Traceback" not in r.stderr
