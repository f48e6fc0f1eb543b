"""mooncake.engine in one process: the public surface, argument checking, return conventions,
the engine handle's lifetime, and loopback transfers into the engine's own segment."""

import ctypes
import hashlib
import os
import sys

import pytest

import mooncake.engine as me
from mooncake.engine import TransferEngine, TransferNotify, TransferOpcode

MiB = 1 << 20


def test_public_surface():
    for name in me.__all__:
        assert hasattr(me, name), name
    assert {"TransferEngine", "TransferOpcode", "TransferNotify"} <= set(me.__all__)
    assert TransferOpcode.Read == 0 and TransferOpcode.Write == 1
    assert TransferOpcode.READ is TransferOpcode.Read and TransferOpcode.WRITE is TransferOpcode.Write
    assert TransferEngine.TransferOpcode is TransferOpcode
    assert me.SUPPORT_CUDA is False
    assert me.err_name(-3) == "ADDRESS_NOT_REGISTERED"
    assert "registered" in me.strerror(-3)


def test_import_mooncake_loads_no_native_module():
    import subprocess

    code = "import sys, mooncake; print('mooncake._engine' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_notify_object():
    n = TransferNotify("name", "msg")
    assert (n.name, n.msg) == ("name", "msg")
    assert TransferNotify().name == "" and TransferNotify().msg == ""
    n.msg = b"\x00bytes"
    assert n.msg == b"\x00bytes"
    assert "TransferNotify" in repr(n)
    with pytest.raises(TypeError):
        TransferNotify(1, "x")
    with pytest.raises(TypeError):
        n.name = None
    with pytest.raises(TypeError):
        TransferNotify("a", 3.5)


def test_before_initialize_returns_codes_not_crashes():
    e = TransferEngine()
    assert e.get_engine() is None
    assert e.get_rpc_port() < 0
    assert e.allocate_managed_buffer(4096) == 0
    assert e.register_memory(4096, 4096) < 0
    assert e.transfer_sync_write("127.0.0.1:1", 4096, 4096, 16) < 0
    assert e.batch_transfer_async_read("127.0.0.1:1", [1], [2], [3]) == 0
    assert e.get_batch_transfer_status([1]) == -1
    assert e.transfer_check_status(1) == -1
    assert e.get_notifies() == []
    e.close()
    e.close()  # idempotent
    assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") < 0  # closed for good


def test_initialize_keywords_and_twice(engine):
    e = TransferEngine()
    try:
        assert e.initialize(local_hostname="127.0.0.1", metadata_server="P2PHANDSHAKE",
                            protocol="tcp", device_name="") == 0
        assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") < 0
        port = e.get_rpc_port()
        assert 0 < port < 65536
        assert e.get_local_segment_name() == f"127.0.0.1:{port}"
    finally:
        e.close()
    with pytest.raises(TypeError):
        TransferEngine().initialize(123)
    assert TransferEngine().initialize("127.0.0.1", "etcd://127.0.0.1:1", "tcp", "") < 0


def test_wrong_argument_types_and_values(engine):
    with pytest.raises(TypeError):
        engine.transfer_sync_write(b"peer", 1, 2, 3)
    with pytest.raises(TypeError):
        engine.transfer_sync_write("peer", "1", 2, 3)
    with pytest.raises(TypeError):
        engine.transfer_sync_write("peer", 1, 2.0, 3)
    with pytest.raises(ValueError):
        engine.transfer_sync_write("peer", -1, 2, 3)
    with pytest.raises(ValueError):
        engine.transfer_sync_write("peer", 1, 2, 1 << 64)
    with pytest.raises(ValueError):
        engine.transfer_sync("peer", 1, 2, 3, 7)
    with pytest.raises(TypeError):
        engine.transfer_sync("peer", 1, 2, 3, TransferOpcode.Write, notify=42)
    with pytest.raises(ValueError):
        engine.batch_transfer_sync_write("peer", [1, 2], [3], [4, 5])
    with pytest.raises(TypeError):
        engine.batch_transfer_sync_write("peer", "12", [3, 4], [4, 5])
    with pytest.raises(TypeError):
        engine.batch_transfer_sync_write("peer", [1, None], [3, 4], [4, 5])
    with pytest.raises(TypeError):
        engine.get_batch_transfer_status(5)
    with pytest.raises(TypeError):
        engine.register_memory(4096, 4096, location=7)
    with pytest.raises(ValueError):
        engine.batch_register_memory([4096], [1, 2])
    with pytest.raises(TypeError):
        engine.write_bytes_to_buffer(4096, "text", 4)
    with pytest.raises(ValueError):
        engine.write_bytes_to_buffer(4096, b"abc", 4)
    with pytest.raises(ValueError):
        engine.read_bytes_from_buffer(0, 4)
    with pytest.raises(TypeError):
        engine.get_notifies(1)
    with pytest.raises(TypeError):
        engine.transfer_sync_write("peer", 1, 2)  # missing length


def test_managed_buffer_bytes_roundtrip(engine):
    addr = engine.allocate_managed_buffer(MiB)
    assert addr != 0
    data = os.urandom(MiB)
    assert engine.write_bytes_to_buffer(addr, data, MiB) == 0
    assert engine.read_bytes_from_buffer(addr, MiB) == data
    assert engine.write_bytes_to_buffer(addr, memoryview(b"xyz"), 2) == 0
    assert engine.read_bytes_from_buffer(addr, 3) == b"xy" + data[2:3]
    assert engine.read_bytes_from_buffer(addr, 0) == b""
    assert engine.get_first_buffer_address(engine.get_local_segment_name()) == addr
    assert engine.free_managed_buffer(addr, MiB) == 0
    assert engine.free_managed_buffer(addr, MiB) < 0  # double free is a code, not a crash


def test_registration_codes(engine):
    buf = ctypes.create_string_buffer(2 * MiB)
    base = ctypes.addressof(buf)
    assert engine.register_memory(base, MiB) == 0
    assert engine.register_memory(base + 4096, 4096) == -7  # ADDRESS_OVERLAPPED
    assert engine.register_memory(base + MiB, 0) < 0
    assert engine.unregister_memory(base) == 0
    assert engine.unregister_memory(base) < 0
    # All or nothing: the overlapping second entry undoes the first.
    assert engine.batch_register_memory([base, base + 100], [MiB, 100]) == -7
    assert engine.register_memory(base, MiB) == 0  # would be -7 if the batch had left it behind
    assert engine.unregister_memory(base) == 0
    assert engine.batch_register_memory([base, base + MiB], [MiB, MiB], "cpu:0") == 0
    assert engine.batch_unregister_memory([base, base + MiB]) == 0
    assert engine.batch_unregister_memory([base]) < 0


def test_loopback_transfers_into_own_segment(engine):
    me_name = engine.get_local_segment_name()
    src = engine.allocate_managed_buffer(MiB)
    dst = engine.allocate_managed_buffer(MiB)
    data = os.urandom(MiB)
    engine.write_bytes_to_buffer(src, data, MiB)
    assert engine.transfer_sync_write(me_name, src, dst, MiB) == 0
    assert hashlib.sha256(engine.read_bytes_from_buffer(dst, MiB)).digest() == \
        hashlib.sha256(data).digest()
    engine.write_bytes_to_buffer(src, bytes(MiB), MiB)
    assert engine.transfer_sync(me_name, src, dst, MiB, TransferOpcode.Read) == 0
    assert engine.read_bytes_from_buffer(src, MiB) == data


def test_engine_handle_keeps_engine_alive():
    e = TransferEngine()
    assert e.get_engine() is None
    assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    h = e.get_engine()
    assert type(h).__name__ == "PyCapsule"
    assert me.ENGINE_HANDLE_CAPSULE == "mooncake.engine_handle"
    get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
    get_ptr.restype, get_ptr.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    assert get_ptr(h, b"mooncake.engine_handle")
    e.close()
    # Closed for Python callers, but the handle's holder may still use the C engine.
    assert e.get_engine() is None
    assert e.allocate_managed_buffer(4096) == 0
    del h  # the last handle destroys the engine


def test_context_manager():
    with TransferEngine() as e:
        assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
        port = e.get_rpc_port()
    assert e.get_rpc_port() < 0
    assert port > 0


def test_batch_registration_is_all_or_nothing(engine):
    buf = ctypes.create_string_buffer(4 * MiB)
    base = ctypes.addressof(buf)
    addrs = [base, base + MiB, base + 2 * MiB]
    lens = [MiB, MiB, MiB]
    assert engine.register_memory(base + 3 * MiB, MiB) == 0
    # the last entry overlaps the registration above: nothing of the batch stays
    assert engine.batch_register_memory(addrs + [base + 3 * MiB + 64], lens + [64]) == -7
    for a in addrs:
        assert engine.unregister_memory(a) < 0
    assert engine.batch_register_memory([base, base + MiB], [MiB, 0]) < 0
    assert engine.unregister_memory(base) < 0
    assert engine.batch_register_memory([], []) == 0
    assert engine.batch_unregister_memory([]) == 0

    assert engine.batch_register_memory(addrs, lens, "cpu:0") == 0
    # batch-registered memory moves data (loopback through the engine's own segment)
    data = os.urandom(MiB)
    ctypes.memmove(base, data, MiB)
    me = engine.get_local_segment_name()
    assert engine.transfer_sync_write(me, base, base + 2 * MiB, MiB) == 0
    assert ctypes.string_at(base + 2 * MiB, MiB) == data
    # one unknown address: nothing is removed
    assert engine.batch_unregister_memory([base, base + 100]) < 0
    assert engine.batch_unregister_memory([base, base]) < 0
    assert engine.transfer_sync_read(me, base + MiB, base, MiB) == 0
    assert ctypes.string_at(base + MiB, MiB) == data
    assert engine.batch_unregister_memory(addrs) == 0
    assert engine.transfer_sync_write(me, base, base + 2 * MiB, MiB) < 0
    assert engine.batch_unregister_memory(addrs) < 0
    assert engine.unregister_memory(base + 3 * MiB) == 0
    # the two successful loopback copies went through the local transport
    st = engine.get_transport_stats()
    assert st["local"] == (2, 2 * MiB) and st["tcp"] == (0, 0) and st["shm"] == (0, 0), st


def test_transport_stats_before_initialize():
    assert TransferEngine().get_transport_stats() == {}
