"""The optional capabilities: ``import mooncake`` pulls none of them, each subpackage that needs an
extra says which one when its dependency is missing, and mooncake.integrations' convention
(discovery without import, load, require_extra)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

# A fresh interpreter in which the named top-level packages cannot be imported (as if their extra
# were not installed), whatever this environment has.
HIDE = textwrap.dedent("""
    import sys
    class _Hide:
        def __init__(self, names): self.names = set(names)
        def find_spec(self, name, path=None, target=None):
            if name.split('.')[0] in self.names:
                raise ModuleNotFoundError("No module named %r (hidden)" % name, name=name)
            return None
    sys.meta_path.insert(0, _Hide(NAMES))
""")


def run_py(code, hide=(), env=None):
    full = HIDE.replace("NAMES", repr(list(hide))) + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", full], capture_output=True, text=True,
                          timeout=120, env=env)


def test_import_mooncake_pulls_no_extra_and_no_integration():
    out = run_py("""
        import json, mooncake
        heavy = ('torch', 'safetensors', 'starlette', 'uvicorn', 'fastapi', 'vllm', 'numpy')
        print(json.dumps(sorted(m for m in sys.modules
                                if m.split('.')[0] in heavy or m.startswith('mooncake.'))))
    """)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


def test_core_imports_with_every_extra_hidden():
    out = run_py("""
        import mooncake, mooncake.store, mooncake.engine, mooncake.mooncake_config
        import mooncake.reshard, mooncake.reshard.geometry, mooncake.integrations
        print("ok")
    """, hide=("torch", "safetensors", "starlette", "uvicorn"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


@pytest.mark.parametrize("hidden", ["starlette", "uvicorn"])
def test_service_without_its_extra_names_the_extra(hidden):
    out = run_py("""
        try:
            import mooncake.mooncake_store_service
        except ImportError as e:
            print(type(e).__name__, "|", e, "|", e.name)
        else:
            print("imported")
    """, hide=(hidden,))
    assert out.returncode == 0, out.stderr
    kind, msg, name = (p.strip() for p in out.stdout.split("|"))
    assert kind == "ImportError" and name == hidden
    assert "'service' extra" in msg and f"missing: {hidden}" in msg
    assert "pip install 'mooncake-c[service]'" in msg


def test_console_script_without_the_extra_says_so():
    out = run_py("""
        sys.argv = ["mc_store_rest_server", "--help"]
        from mooncake._service.cli import main
        main()
    """, hide=("starlette", "uvicorn"))
    assert out.returncode == 2
    assert "mc_store_rest_server:" in out.stderr and "'service' extra" in out.stderr
    assert "Traceback" not in out.stderr


def test_the_service_imports_with_its_extra():
    # The dev extra installs the service extra: here a missing one is a failure, not a skip.
    import mooncake.mooncake_store_service as svc

    assert callable(svc.sync_main) and svc.MooncakeStoreService


# ---- mooncake.integrations -----------------------------------------------------------------------

def test_integrations_registry_and_errors():
    from mooncake import integrations

    assert all(a.origin in ("builtin", "entry-point") for a in integrations.available().values())
    with pytest.raises(KeyError, match="no Mooncake integration 'nothing_here'"):
        integrations.load("nothing_here")
    for bad in ("", "a-b", "1x", None):
        with pytest.raises(ValueError, match="identifier"):
            integrations.register(bad, "json")
    with pytest.raises(ValueError, match="dotted module name"):
        integrations.register("ok", "not a module")
    integrations.register("jsonish", "json")
    try:
        assert integrations.available()["jsonish"] == integrations.Adapter(
            "jsonish", "json", "registered")
        assert integrations.load("jsonish") is json
    finally:
        integrations._registered.pop("jsonish")


def test_require_extra_message():
    from mooncake.integrations import require_extra

    require_extra("x", "service", "json", "os")  # present: nothing happens
    with pytest.raises(ImportError) as ei:
        require_extra("mooncake.integrations.demo", "demo", "json", "no_such_module_mc")
    assert ei.value.name == "no_such_module_mc"
    assert "mooncake.integrations.demo needs the 'demo' extra" in str(ei.value)
    assert "pip install 'mooncake-c[demo]'" in str(ei.value)
    with pytest.raises(ImportError, match=r"pip install 'other\[gpu\]'"):
        require_extra("y", "other[gpu]", "no_such_module_mc")


def test_entry_point_adapter_is_found_without_import_and_loads(tmp_path):
    """A distribution that announces an adapter under the entry-point group is listed without
    being imported; loading it runs its require_extra, which names its extra."""
    (tmp_path / "fakefw_adapter.py").write_text(textwrap.dedent("""
        from mooncake.integrations import require_extra
        require_extra(__name__, "fakefw", "fakefw_framework")
        READY = True
    """))
    (tmp_path / "fakefw_framework.py").write_text("")
    dist = tmp_path / "mc_fakefw-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mc-fakefw\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[mooncake.integrations]\nfakefw = fakefw_adapter\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    code = """
        from mooncake import integrations
        a = integrations.available()["fakefw"]
        print(a.origin, a.module, "fakefw_adapter" in sys.modules)
        try:
            m = integrations.load("fakefw")
            print("loaded", m.READY)
        except ImportError as e:
            print("missing", e)
    """
    out = run_py(code, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["entry-point fakefw_adapter False", "loaded True"]
    out = run_py(code, hide=("fakefw_framework",), env=env)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert first == "entry-point fakefw_adapter False"
    assert second.startswith("missing fakefw_adapter needs the 'fakefw' extra")


@pytest.mark.parametrize("hidden,msg", [("torch", "the tensor methods need torch"),
                                        ("safetensors", "safetensors files need")])
def test_tensor_methods_without_their_extra_name_it(hidden, msg):
    out = run_py("""
        from mooncake.store import _tensor
        try:
            _tensor._t() if HIDDEN == "torch" else _tensor._safetensors()
        except ImportError as e:
            print(e)
        else:
            print("imported")
    """.replace("HIDDEN", repr(hidden)), hide=(hidden,))
    assert out.returncode == 0, out.stderr
    assert msg in out.stdout and "pip install 'mooncake-c[tensor]'" in out.stdout
