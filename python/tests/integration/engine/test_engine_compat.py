"""The reference's engine surface against real peer processes over loopback: send_probe on live,
killed and unknown peers (P2PHANDSHAKE and an HTTP metadata server), transfer_submit_write's
ids and its 0 on an unknown peer, initialize_ext composing the metadata URL, and RpcInterface
messages and tensors to a server in another process, checked by SHA-256 on the receiving side."""

import asyncio
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mooncake.engine import RpcInterface, TransferEngine, create_rpc_client
from te_helpers import LinePeer, LocalBuffer, free_port, pattern, sha

MiB = 1 << 20
RPC_PEER = Path(__file__).with_name("rpc_peer.py")
ERR_INVALID_ARGUMENT, ERR_DNS, ERR_SOCKET, ERR_METADATA = -1, -101, -102, -200


# ---- send_probe ----

def test_send_probe_p2p(make_engine, spawn_peer):
    e = make_engine()
    peer = spawn_peer()
    assert e.send_probe(peer.name) == 0
    assert e.send_probe(peer_server_name=peer.name) == 0
    assert e.send_probe(e.get_local_segment_name()) == 0  # itself
    # a probe opens no segment: a transfer afterwards still works
    local = LocalBuffer(e, 4096, managed=False)
    want = local.put(0, pattern(3, 4096))
    assert e.transfer_sync_write(peer.name, local.addr, peer.addr, 4096) == 0
    assert peer.sha(0, 4096) == want
    peer.kill()
    assert e.send_probe(peer.name) == ERR_SOCKET
    # the reference's CPU test: an unknown peer is non-zero (its P2P code: the name's host
    # does not resolve)
    assert e.send_probe("unreachable_peer:9") == ERR_DNS
    assert e.send_probe(f"127.0.0.1:{free_port()}") == ERR_SOCKET
    assert e.send_probe("no-port-here") == ERR_INVALID_ARGUMENT
    assert e.send_probe("") == ERR_INVALID_ARGUMENT


def test_send_probe_bad_types(make_engine):
    e = make_engine()
    for bad in (None, 12, b"127.0.0.1:1", ["127.0.0.1:1"]):
        with pytest.raises(TypeError):
            e.send_probe(bad)
    with pytest.raises(TypeError):
        e.send_probe()
    with pytest.raises(TypeError):
        e.send_probe("127.0.0.1:1", "extra")


def test_send_probe_http_metadata(make_engine, spawn_peer, metadata_url):
    e = make_engine(metadata=metadata_url)
    peer = spawn_peer(metadata=metadata_url)
    assert e.send_probe(peer.name) == 0
    # not published: the reference's ERR_METADATA, which its own CPU test expects here
    assert e.send_probe("unreachable_peer:9") == ERR_METADATA
    # killed without unpublishing: the descriptor is still there, nobody answers
    peer.kill()
    assert e.send_probe(peer.name) == ERR_SOCKET


def test_send_probe_before_initialize_and_after_close():
    e = TransferEngine()
    assert e.send_probe("127.0.0.1:1") == ERR_INVALID_ARGUMENT
    assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    name = e.get_local_segment_name()
    assert e.send_probe(name) == 0
    e.close()
    assert e.send_probe(name) == ERR_INVALID_ARGUMENT


# ---- transfer_submit_write ----

def test_transfer_submit_write_ids_and_unknown_peer(make_engine, spawn_peer, metadata_url):
    e = make_engine()
    peer = spawn_peer()
    local = LocalBuffer(e, MiB, managed=True)
    want = local.put(0, pattern(21, MiB))
    bid = e.transfer_submit_write(peer.name, local.addr, peer.addr, MiB)
    assert isinstance(bid, int) and bid > 0
    deadline = time.monotonic() + 30
    while (st := e.transfer_check_status(bid)) == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert st == 1
    assert peer.sha(0, MiB) == want
    # unknown peers: the reference's failure sentinel 0, never a negative id
    assert e.transfer_submit_write("unreachable_peer:9", 0, 0, 16) == 0
    assert e.transfer_submit_write(f"127.0.0.1:{free_port()}", local.addr, peer.addr, 16) == 0
    assert e.batch_transfer_async_write("unreachable_peer:9", [0], [0], [16]) == 0
    # a known peer, an address outside what it published: refused at submit, also 0
    assert e.transfer_submit_write(peer.name, local.addr, 4096, 16) == 0
    # the peer is still fine afterwards
    bid = e.transfer_submit_write(peer.name, local.addr, peer.addr, 16)
    assert bid > 0
    while (st := e.transfer_check_status(bid)) == 0:
        time.sleep(0.001)
    assert st == 1
    with pytest.raises(TypeError):
        e.transfer_submit_write(peer.name, "addr", peer.addr, 16)
    with pytest.raises(ValueError):
        e.transfer_submit_write(peer.name, -1, peer.addr, 16)
    h = make_engine(metadata=metadata_url)
    assert h.transfer_submit_write("no-such-segment", local.addr, 0, 16) == 0


# ---- initialize_ext ----

def test_initialize_ext_composes_the_metadata_url(spawn_peer, metadata_url):
    peer = spawn_peer(metadata=metadata_url)
    bare = metadata_url[len("http://"):]
    e = TransferEngine()
    try:
        assert e.initialize_ext(f"127.0.0.1:{free_port()}", bare, "tcp", "", "http") == 0
        assert e.send_probe(peer.name) == 0
        local = LocalBuffer(e, 4096, managed=False)
        want = local.put(0, pattern(5, 4096))
        assert e.transfer_sync_write(peer.name, local.addr, peer.addr, 4096) == 0
        assert peer.sha(0, 4096) == want
    finally:
        e.close()
    # a full URL is used as given; P2PHANDSHAKE stays P2P whatever the type
    e = TransferEngine()
    assert e.initialize_ext(f"127.0.0.1:{free_port()}", metadata_url, "tcp", "", "etcd") == 0
    e.close()
    e = TransferEngine()
    assert e.initialize_ext("127.0.0.1", "P2PHANDSHAKE", "tcp", "", "etcd") == 0
    assert e.send_probe(e.get_local_segment_name()) == 0
    e.close()
    # a back end this build lacks fails with a code, no exception; so does an etcd nobody runs
    e = TransferEngine()
    assert e.initialize_ext("127.0.0.1", "127.0.0.1:6379", "tcp", "", "redis") == -303
    e.close()
    e = TransferEngine()
    assert e.initialize_ext("127.0.0.1", f"127.0.0.1:{free_port()}", "tcp", "", "etcd") == -200
    e.close()
    with pytest.raises(TypeError):
        TransferEngine().initialize_ext("127.0.0.1", "P2PHANDSHAKE", "tcp", "")
    with pytest.raises(TypeError):
        TransferEngine().initialize_ext("127.0.0.1", None, "tcp", "", "http")


# ---- RpcInterface across processes ----

class RpcPeer(LinePeer):
    """rpc_peer.py: an RPC server in its own process that prints one line per message."""

    def __init__(self, tmp_path, blocking=False):
        super().__init__(tmp_path, [sys.executable, str(RPC_PEER)] +
                         (["--blocking"] if blocking else []), "rpc peer")
        self.port = int(self.ready.split()[1])
        self.target = f"127.0.0.1:{self.port}"

    def cmd(self, text: str) -> str:
        return self.send(text)


@pytest.fixture
def rpc_peer(tmp_path):
    peers = []

    def spawn(**kw):
        p = RpcPeer(tmp_path, **kw)
        peers.append(p)
        return p

    yield spawn
    for p in peers:
        p.close()


class HostTensor:
    """A torch.Tensor-shaped view of a numpy array (what send_tensor reads), so the tensor
    path runs where torch is not installed."""

    def __init__(self, a: np.ndarray, dtype_name: str):
        self.a, self.shape, self.dtype = a, a.shape, dtype_name

    def data_ptr(self):
        return self.a.ctypes.data

    def numel(self):
        return self.a.size

    def element_size(self):
        return self.a.itemsize

    def is_contiguous(self):
        return self.a.flags["C_CONTIGUOUS"]


def test_rpc_data_to_another_process(rpc_peer):
    peer = rpc_peer()
    client = RpcInterface()
    assert client.initialize_client(pool_size=4, timeout_seconds=10) is True
    for i, n in enumerate([0, 1, 1024, 1025, MiB, 5 * MiB + 7]):
        data = pattern(100 + i, n)
        assert client.send_data(peer.target, data) == 0
        # send_data returns after the server's callback: its line is already on the way
        kind, source, length, digest = peer.line().split()
        assert (kind, int(length), digest) == ("DATA", n, sha(data))
        assert source.startswith("127.0.0.1:")
    # other bytes-like objects are sent as they are
    for obj in (bytearray(b"abc"), memoryview(b"xyzw")[1:], np.arange(4, dtype=np.uint8)):
        assert client.send_data(target_address=peer.target, data=obj) == 0
        assert peer.line().split()[3] == hashlib.sha256(bytes(memoryview(obj))).hexdigest()


def test_rpc_tensor_to_another_process(rpc_peer):
    peer = rpc_peer()
    client = create_rpc_client()
    for shape, np_dtype, name in [((2, 3), np.float32, "torch.float32"),
                                  ((4, 1, 5), np.int64, "torch.int64"),
                                  ((), np.float64, "torch.float64"),
                                  ((0, 7), np.uint8, "torch.uint8"),
                                  ((256, 1024), np.float16, "torch.float16")]:
        a = np.random.default_rng(len(shape)).random(shape).astype(np_dtype)
        assert client.send_tensor(peer.target, HostTensor(a, name)) == 0
        kind, _, dtype, got_shape, nbytes, digest = peer.line().split()
        assert kind == "TENSOR" and dtype == name
        assert json.loads(got_shape) == list(shape)
        assert int(nbytes) == a.nbytes and digest == sha(a.tobytes())


def test_rpc_async_forms(rpc_peer):
    peer = rpc_peer()
    client = create_rpc_client()
    payloads = [pattern(200 + i, 4096 * (i + 1)) for i in range(8)]

    async def main():
        loop = asyncio.get_running_loop()
        results = await asyncio.gather(*[client.send_data_async(peer.target, p, loop)
                                         for p in payloads])
        assert results == [0] * len(payloads)
        a = np.arange(12, dtype=np.int32).reshape(3, 4)
        assert await client.send_tensor_async(peer.target, HostTensor(a, "torch.int32"), loop) == 0
        dead = f"127.0.0.1:{free_port()}"
        with pytest.raises(RuntimeError, match="Send data failed"):
            await client.send_data_async(dead, b"x", loop)
        with pytest.raises(RuntimeError, match="Send tensor failed"):
            await client.send_tensor_async(dead, HostTensor(a, "torch.int32"), loop)
        with pytest.raises(TypeError):
            client.send_data_async(peer.target, "text", loop)
        with pytest.raises(TypeError):
            client.send_tensor_async(peer.target, b"not a tensor", loop)

    asyncio.run(main())
    got = sorted(peer.line().split()[3] for _ in payloads)
    assert got == sorted(sha(p) for p in payloads)
    assert peer.line().split()[0] == "TENSOR"


def test_rpc_failing_callback_and_dead_server(rpc_peer):
    peer = rpc_peer()
    client = create_rpc_client()
    assert peer.cmd("RAISE 1") == "OK"
    # the callback raises: the sender still gets 0 (as in the reference), the server serves on
    assert client.send_data(peer.target, b"first") == 0
    assert peer.line().startswith("DATA ")
    assert peer.cmd("RAISE 0") == "OK"
    assert client.send_data(peer.target, b"second") == 0
    assert peer.line().split()[3] == sha(b"second")
    assert "callback failure on purpose" in peer.stderr()
    # killed: the pooled connection fails, so does the fresh one
    peer.proc.kill()
    peer.proc.wait()
    assert client.send_data(peer.target, b"x") == ERR_SOCKET
    assert client.send_data("unreachable_peer.invalid:9", b"x") == ERR_DNS
    assert client.send_data("no-port", b"x") == ERR_INVALID_ARGUMENT


def test_rpc_blocking_start_server_returns_after_stop(rpc_peer):
    peer = rpc_peer(blocking=True)
    client = create_rpc_client()
    assert client.send_data(peer.target, b"hi") == 0
    assert peer.line().startswith("DATA ")
    assert peer.cmd("QUIT") == "STOPPED True"
    assert client.send_data(peer.target, b"x") == ERR_SOCKET


def test_rpc_server_port_in_use(rpc_peer):
    peer = rpc_peer()
    s = RpcInterface()
    assert s.initialize_server(peer.target) is True  # nothing bound yet
    assert s.start_server_async() is False
    assert s.start_server() is False  # fails at once, does not block
