"""The reference's mooncake.engine names in one process: opcode aliases, feature flags,
get_engine_ptr, get_local_topology, warmup_efa_segment, initialize_ext's arguments, and the
RpcInterface family's signatures, return conventions and bad input (loopback only)."""

import ctypes
import inspect
import json
import threading

import pytest

import mooncake.engine as me
from mooncake.engine import (
    CoroRPCInterface,
    ReceivedData,
    ReceivedTensor,
    RpcInterface,
    TransferEngine,
    TransferOpcode,
    create_rpc_client,
    create_rpc_server,
)


def test_reference_names_present():
    for name in ["TransferEngine", "TransferOpcode", "TransferNotify", "Read", "Write",
                 "RpcInterface", "CoroRPCInterface", "ReceivedData", "ReceivedTensor",
                 "create_rpc_client", "create_rpc_server", "SUPPORT_CUDA", "SUPPORT_EFA",
                 "SUPPORT_HIP", "SUPPORT_MNNVL", "SUPPORT_MUSA", "SUPPORT_INTRA_NVLINK"]:
        assert name in me.__all__ and hasattr(me, name), name
    for method in ["initialize", "initialize_ext", "get_rpc_port", "allocate_managed_buffer",
                   "free_managed_buffer", "transfer_sync_write", "transfer_sync_read",
                   "batch_transfer_sync_write", "batch_transfer_sync_read",
                   "batch_transfer_async_write", "batch_transfer_async_read", "transfer_sync",
                   "batch_transfer_sync", "batch_transfer_async", "get_batch_transfer_status",
                   "transfer_submit_write", "transfer_check_status", "write_bytes_to_buffer",
                   "read_bytes_from_buffer", "register_memory", "unregister_memory",
                   "batch_register_memory", "batch_unregister_memory", "get_local_topology",
                   "get_first_buffer_address", "warmup_efa_segment", "get_notifies",
                   "send_probe", "get_engine", "get_engine_ptr"]:
        assert callable(getattr(TransferEngine, method)), method
    for method in ["initialize", "initialize_client", "initialize_server", "start_server",
                   "start_server_async", "stop_server", "send_data", "send_data_async",
                   "send_tensor", "send_tensor_async", "set_data_receive_callback",
                   "set_tensor_receive_callback"]:
        assert callable(getattr(RpcInterface, method)), method


def test_opcode_aliases_and_flags():
    # pybind11's export_values(): the members at module level, the same objects
    assert me.Read is TransferOpcode.Read and me.Write is TransferOpcode.Write
    assert me.Read == 0 and me.Write == 1
    assert TransferEngine.TransferOpcode.Write is me.Write
    assert me.SUPPORT_MUSA is False and me.SUPPORT_EFA is False
    assert CoroRPCInterface is RpcInterface


def test_get_engine_ptr_is_the_c_engine(engine):
    ptr = engine.get_engine_ptr()
    assert isinstance(ptr, int) and ptr != 0
    assert engine.get_engine_ptr() == ptr  # stable
    cap = engine.get_engine()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    assert get(cap, me.ENGINE_HANDLE_CAPSULE.encode()) == ptr
    with pytest.raises(TypeError):
        engine.get_engine_ptr(1)


def test_get_engine_ptr_zero_when_no_engine():
    e = TransferEngine()
    assert e.get_engine_ptr() == 0
    assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    assert e.get_engine_ptr() != 0
    e.close()
    assert e.get_engine_ptr() == 0


def test_local_topology_shape():
    e = TransferEngine()  # the reference's method needs no initialized engine either
    for topo in (e.get_local_topology(), e.get_local_topology(None),
                 e.get_local_topology(device_name="mlx5_0")):
        d = json.loads(topo)
        assert d and all(k.startswith("cpu:") for k in d)
        assert all(v == [[], []] for v in d.values())
    with pytest.raises(TypeError):
        e.get_local_topology(3)


def test_warmup_efa_segment_is_a_noop(engine):
    assert engine.warmup_efa_segment("127.0.0.1:1") == 0
    assert engine.warmup_efa_segment(segment_name="anything") == 0
    with pytest.raises(TypeError):
        engine.warmup_efa_segment(None)


def test_initialize_ext_arguments():
    e = TransferEngine()
    with pytest.raises(TypeError):
        e.initialize_ext("127.0.0.1", "P2PHANDSHAKE", "tcp", "")  # all five are required
    with pytest.raises(TypeError):
        e.initialize_ext("127.0.0.1", "P2PHANDSHAKE", "tcp", "", 5)
    assert e.initialize_ext(local_hostname="127.0.0.1", metadata_server="P2PHANDSHAKE",
                            protocol="tcp", device_name="", metadata_type="p2p") == 0
    assert e.initialize_ext("127.0.0.1", "P2PHANDSHAKE", "tcp", "", "p2p") < 0  # once only
    e.close()


def test_transfer_submit_write_failure_is_zero(engine):
    assert engine.transfer_submit_write("unreachable_peer:9", 0, 0, 16) == 0
    assert TransferEngine().transfer_submit_write("127.0.0.1:1", 4096, 4096, 16) == 0


def test_send_probe_self_and_bad_input(engine):
    assert engine.send_probe(engine.get_local_segment_name()) == 0
    assert engine.send_probe("no-port") == -1
    with pytest.raises(TypeError):
        engine.send_probe(None)
    assert "send_probe" in TransferEngine.send_probe.__doc__


# ---- RpcInterface ----

def test_rpc_before_initialize():
    r = RpcInterface()
    assert r.send_data("127.0.0.1:1", b"x") == -1
    assert r.start_server_async() is False
    assert r.start_server() is False
    assert r.get_server_port() == -1
    r.stop_server()  # nothing to stop


def test_rpc_initialize_conventions():
    r = RpcInterface()
    assert r.initialize() is True  # a client only
    assert r.get_server_port() == -1 and r.start_server_async() is False
    assert r.initialize_server("not an address") is False
    assert r.initialize_server("127.0.0.1:0", thread_count=2, timeout_seconds=5) is True
    assert r.start_server_async() is True
    assert r.get_server_port() > 0
    # a running server is not replaced
    assert r.initialize_client() is False
    r.stop_server()
    assert r.get_server_port() == -1
    assert r.initialize_client(pool_size=1, timeout_seconds=1) is True
    with pytest.raises(ValueError):
        r.initialize_client(pool_size=-1)
    with pytest.raises(TypeError):
        r.initialize_server(None)
    with pytest.raises(TypeError):
        r.initialize(listen_address=5)


def test_rpc_factories():
    c = create_rpc_client()
    assert isinstance(c, RpcInterface) and c.get_server_port() == -1
    assert c.send_data("no-port", b"x") == -1
    s = create_rpc_server(local_rank=0, world_size=1)
    assert isinstance(s, RpcInterface)
    assert s.get_server_port() == -1  # initialized on 0.0.0.0:8080, not started
    assert inspect.signature(create_rpc_client).parameters.keys() == {"local_rank", "world_size"}


def test_rpc_loopback_and_bad_input():
    got = []
    s = RpcInterface()
    assert s.initialize_server("127.0.0.1:0")
    s.set_data_receive_callback(got.append)
    s.set_tensor_receive_callback(got.append)
    assert s.start_server_async()
    target = f"127.0.0.1:{s.get_server_port()}"
    c = create_rpc_client()
    try:
        assert c.send_data(target, b"ping") == 0
        assert got[-1]["data"] == b"ping" and got[-1]["source"].startswith("127.0.0.1:")
        for bad in ("text", 12, None, [1, 2]):
            with pytest.raises(TypeError):
                c.send_data(target, bad)
        with pytest.raises(TypeError):
            c.send_data(None, b"x")
        with pytest.raises(TypeError):
            c.send_tensor(target, b"not a tensor")
        with pytest.raises(TypeError):
            c.send_tensor(7, b"x")
        with pytest.raises(TypeError):
            s.set_data_receive_callback("not callable")
        with pytest.raises(TypeError):
            s.set_tensor_receive_callback(42)

        class OnDevice:
            shape, dtype, device = (1,), "torch.float32", type("D", (), {"type": "cuda"})()

            def data_ptr(self):
                return 1

            def numel(self):
                return 1

            def element_size(self):
                return 4

        with pytest.raises(ValueError, match="host memory"):
            c.send_tensor(target, OnDevice())
        # no callback: the message is received and dropped, the sender still gets 0
        s.set_data_receive_callback(None)
        assert c.send_data(target, b"dropped") == 0
        assert got[-1]["data"] == b"ping"
    finally:
        s.stop_server()


def test_rpc_stop_server_inside_callback_is_refused():
    errors = []
    s = RpcInterface()
    assert s.initialize_server("127.0.0.1:0")

    def cb(msg):
        try:
            s.stop_server()
        except RuntimeError as exc:
            errors.append(str(exc))

    s.set_data_receive_callback(cb)
    assert s.start_server_async()
    try:
        assert create_rpc_client().send_data(f"127.0.0.1:{s.get_server_port()}", b"x") == 0
        assert errors and "callback" in errors[0]
    finally:
        s.stop_server()


def test_rpc_server_garbage_collected_while_serving():
    s = RpcInterface()
    assert s.initialize_server("127.0.0.1:0")
    s.set_data_receive_callback(lambda m, s=s: None)  # a cycle through the callback
    assert s.start_server_async()
    port = s.get_server_port()
    del s
    import gc

    gc.collect()
    c = create_rpc_client()
    # as the reference's destructor does, a collected server stops (cleanly, no callback runs)
    assert c.send_data(f"127.0.0.1:{port}", b"x") == -102


def test_received_classes():
    d = ReceivedData("1.2.3.4:5", b"abc")
    assert (d.source_address, d.data_size, d.get_bytes()) == ("1.2.3.4:5", 3, b"abc")
    assert d.get_memory_view().readonly and bytes(d.get_memory_view()) == b"abc"
    t = ReceivedTensor("1.2.3.4:5", b"\x00" * 8, (2, 1), "torch.float32")
    assert t.shape == [2, 1] and t.dtype == "torch.float32" and t.total_bytes == 8
    assert t.get_data_size() == 8 and t.get_data_as_bytes() == b"\x00" * 8
    assert len(t.get_memory_view()) == 8 and "ReceivedTensor" in repr(t)


def test_rpc_concurrent_senders():
    got = []
    lock = threading.Lock()
    s = RpcInterface()
    assert s.initialize_server("127.0.0.1:0")

    def cb(msg):
        with lock:
            got.append(msg["data"])

    s.set_data_receive_callback(cb)
    assert s.start_server_async()
    target = f"127.0.0.1:{s.get_server_port()}"
    c = create_rpc_client()
    results = []

    def send(i):
        results.extend(c.send_data(target, f"{i}:{j}".encode()) for j in range(50))

    threads = [threading.Thread(target=send, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s.stop_server()
    assert results == [0] * 200
    assert sorted(got) == sorted(f"{i}:{j}".encode() for i in range(4) for j in range(50))
