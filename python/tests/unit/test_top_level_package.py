"""The top-level package and the reference's pure-Python modules: names as the reference's
__init__ exports them, and imports that stay lazy (no native module, no torch or numpy)."""

import json
import subprocess
import sys

import pytest

import mooncake


def loaded_after(stmt, native_only=False):
    """The mooncake, torch, numpy and aiohttp modules a fresh interpreter holds after stmt
    (native_only: only mooncake's extension modules)."""
    pick = ("m.startswith('mooncake') and (getattr(v, '__file__', None) or '').endswith('.so')"
            if native_only else
            "m.startswith('mooncake') or m.split('.')[0] in ('torch', 'numpy', 'aiohttp')")
    code = (f"import sys\n{stmt}\nimport json\n"
            f"print(json.dumps(sorted(m for m, v in list(sys.modules.items()) if {pick})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_top_level_names():
    assert {"BufferPool", "RegisteredBufferPool"} <= set(mooncake.__all__)
    from mooncake import BufferPool, RegisteredBufferPool

    assert BufferPool is RegisteredBufferPool
    assert "BufferPool" in dir(mooncake) and "RegisteredBufferPool" in dir(mooncake)
    for name in mooncake.__all__:
        assert hasattr(mooncake, name), name
    with pytest.raises(AttributeError, match="no_such_name"):
        mooncake.no_such_name
    with pytest.raises(ImportError):
        from mooncake import no_such_name  # noqa: F401


@pytest.mark.parametrize("stmt,want", [
    ("import mooncake", ["mooncake"]),
    ("from mooncake import BufferPool", ["mooncake", "mooncake.buffer_pool"]),
    ("import mooncake.mooncake_config", ["mooncake", "mooncake.mooncake_config"]),
    ("import mooncake.http_metadata_server", ["mooncake", "mooncake.http_metadata_server"]),
    ("import mooncake.buffer_pool", ["mooncake", "mooncake.buffer_pool"]),
])
def test_pure_modules_load_nothing_native(stmt, want):
    assert loaded_after(stmt) == want


def test_async_store_loads_only_the_store():
    got = loaded_after("import mooncake.async_store")
    assert "mooncake._store" in got and "mooncake.async_store" in got
    assert not [m for m in got if m.split(".")[0] in ("torch", "numpy", "aiohttp")]
    natives = loaded_after("import mooncake.async_store", native_only=True)
    assert set(natives) <= {"mooncake._store", "mooncake._engine"}
