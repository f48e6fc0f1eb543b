"""The store's put_from / get_into and batch calls with device buffers, on a host without a GPU:
the store clients' engines run with the fake device-memory backend (MC_DEVMEM=fake), and a
buffer is the fake's "GPU memory" once an engine of this process registered it as "cuda:0". The
engine reaches such memory only through the backend's copies, which fail on a marker in the
data: a put of marked device bytes fails while the same bytes from host memory succeed, which
shows the device path was taken. Checked byte for byte: registered (zero-copy) and unregistered
(staged) device buffers, over tcp to another client's segment and within a client's own."""

import ctypes

import pytest
from store_helpers import Master, local_store

from mooncake.engine import TransferEngine

MiB = 1 << 20
MARKER = b"MC-FAKE-DEV-FAIL"


class Mem(bytearray):
    """Host memory at a fixed address (a bytearray is not moved while it keeps its size)."""

    @property
    def addr(self):
        return ctypes.addressof((ctypes.c_char * len(self)).from_buffer(self))

    def put(self, off, data):
        self[off:off + len(data)] = data

    def get(self, off, n):
        return bytes(self[off:off + n])


def pattern(n, seed):
    return ((bytes([seed % 256]) + bytes(range(256))) * (n // 257 + 1))[:n]


@pytest.fixture
def clients(monkeypatch):
    monkeypatch.setenv("MC_DEVMEM", "fake")
    master = Master()
    marker = TransferEngine()  # registers "GPU memory" with the fake backend
    assert marker.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    holder = local_store(master, segment=64 << 20)  # holds the replicas
    user = local_store(master, segment=0)  # moves its bytes over tcp to holder
    try:
        yield holder, user, marker
    finally:
        user.close()
        holder.close()
        marker.close()
        master.stop()


def device(marker, n):
    m = Mem(n)
    assert marker.register_memory(m.addr, len(m), "cuda:0") == 0
    return m


def test_put_get_device_buffers(clients):
    holder, user, marker = clients
    reg, unreg = device(marker, 8 * MiB), device(marker, 8 * MiB)
    assert user.register_buffer(reg.addr, len(reg)) == 0
    n = 3 * MiB + 11
    for i, (src, dst) in enumerate(((reg, unreg), (unreg, reg))):
        data = pattern(n, i)
        src.put(0, data)
        assert user.put_from(f"dev-{i}", src.addr, n) == 0
        dst.put(4 * MiB, b"\0" * n)
        assert user.get_into(f"dev-{i}", dst.addr + 4 * MiB, n) == n
        assert dst.get(4 * MiB, n) == data
        # the holder reads its own replica straight into its device memory
        dst.put(0, b"\0" * n)
        assert holder.get_into(f"dev-{i}", dst.addr, n) == n
        assert dst.get(0, n) == data

    # batches: one key from registered device memory, one staged from unregistered
    keys = ["b-0", "b-1"]
    blobs = [pattern(MiB + 3, 7), pattern(2 * MiB, 8)]
    reg.put(0, blobs[0])
    unreg.put(0, blobs[1])
    assert user.batch_put_from(keys, [reg.addr, unreg.addr], [len(b) for b in blobs]) == [0, 0]
    reg.put(4 * MiB, b"\0" * 3 * MiB)
    unreg.put(4 * MiB, b"\0" * 3 * MiB)
    got = user.batch_get_into(keys, [unreg.addr + 4 * MiB, reg.addr + 4 * MiB],
                              [len(b) for b in blobs])
    assert got == [len(b) for b in blobs]
    assert unreg.get(4 * MiB, len(blobs[0])) == blobs[0]
    assert reg.get(4 * MiB, len(blobs[1])) == blobs[1]
    assert user.unregister_buffer(reg.addr) == 0


def test_device_copy_failure_fails_that_call(clients):
    _, user, marker = clients
    dev = device(marker, 4 * MiB)
    host = Mem(4 * MiB)
    data = bytearray(pattern(2 * MiB, 3))
    data[MiB:MiB + len(MARKER)] = MARKER
    dev.put(0, bytes(data))
    host.put(0, bytes(data))
    assert user.put_from("marked-host", host.addr, len(data)) == 0  # host memory: no device copy
    assert user.put_from("marked-dev", dev.addr, len(data)) < 0  # copied by the fake: refused
    assert user.put_from("after", host.addr, len(data)) == 0
    # a batch: only the device key fails
    res = user.batch_put_from(["bm-dev", "bm-host"], [dev.addr, host.addr], [len(data)] * 2)
    assert res[0] < 0 and res[1] == 0
    assert user.put_from("after-batch", host.addr, len(data)) == 0  # no segment was blamed
    # a batch read: the key whose bytes carry the marker fails going into device memory only
    dev2 = device(marker, 4 * MiB)
    res = user.batch_get_into(["bm-host", "after"], [dev2.addr, host.addr + 2 * MiB],
                              [len(data)] * 2)
    assert res[0] < 0 and res[1] == len(data)
    assert host.get(2 * MiB, len(data)) == bytes(data)
    # and reading marked bytes into device memory fails that read alone
    assert user.get_into("marked-host", dev.addr, len(data)) < 0
    host.put(0, b"\0" * len(data))
    assert user.get_into("marked-host", host.addr, len(data)) == len(data)
    assert host.get(0, len(data)) == bytes(data)
