"""Device memory through mooncake.engine on a host without a GPU: engines created with
MC_DEVMEM=fake use the fake device-memory backend, so a buffer registered as "cuda:N" is "GPU
memory" the engine may only reach through the backend's copies (the same staging path a real GPU
takes, docs/transfer-engine.md). Byte-exact transfers over tcp and shm in both directions, and a
copy that fails in the middle of one transfer (the backend fails a copy whose source holds its
marker) fails that transfer alone while another in flight completes."""

import ctypes
import mmap
import os

import pytest

from mooncake.engine import TransferEngine

MiB = 1 << 20
MARKER = b"MC-FAKE-DEV-FAIL"  # devmem_fake.h: a copy whose source holds it fails


class Mem:
    """An anonymous mapping and its address."""

    def __init__(self, n):
        self.m = mmap.mmap(-1, n)
        self.addr = ctypes.addressof(ctypes.c_char.from_buffer(self.m))
        self.n = n

    def put(self, off, data):
        self.m[off:off + len(data)] = data

    def get(self, off, n):
        return bytes(self.m[off:off + n])


@pytest.fixture
def engines(monkeypatch):
    monkeypatch.setenv("MC_DEVMEM", "fake")
    monkeypatch.setenv("MC_SLICE_SIZE", str(MiB))  # many slices per transfer
    made = []

    def make(proto):
        e = TransferEngine()
        assert e.initialize("127.0.0.1", "P2PHANDSHAKE", proto, "") == 0
        made.append(e)
        return e

    yield make
    for e in made:
        e.close()


def pattern(n, seed):
    return (bytes(range(seed % 251, 256)) + bytes(range(256))) * (n // 256 + 2)


def test_device_buffers_over_tcp_and_shm(engines):
    target = engines("tcp")
    dev_t, host_t = Mem(16 * MiB), Mem(16 * MiB)
    assert target.register_memory(dev_t.addr, dev_t.n, "cuda:1") == 0
    assert target.register_memory(host_t.addr, host_t.n, "cpu:0") == 0
    managed = target.allocate_managed_buffer(8 * MiB)
    assert managed
    name = target.get_local_segment_name()

    for proto, remote, remote_put, remote_get in (
        ("tcp", host_t.addr, host_t.put, host_t.get),
        ("tcp", dev_t.addr, dev_t.put, dev_t.get),
        ("shm", managed, lambda o, d: ctypes.memmove(managed + o, d, len(d)),
         lambda o, n: ctypes.string_at(managed + o, n)),
    ):
        e = engines(proto)
        dev = Mem(16 * MiB)
        assert e.register_memory(dev.addr, dev.n, "cuda:0") == 0
        for n in (1, 4097, 3 * MiB + 5):
            data = pattern(n, n)[:n]
            dev.put(0, data)
            assert e.transfer_sync_write(name, dev.addr, remote, n) == 0, (proto, n)
            assert remote_get(0, n) == data, (proto, n)
            back = pattern(n, n + 7)[:n]
            remote_put(4 * MiB, back)
            assert e.transfer_sync_read(name, dev.addr + 8 * MiB, remote + 4 * MiB, n) == 0
            assert dev.get(8 * MiB, n) == back, (proto, n)
        stats = e.get_transport_stats()
        assert stats.get(proto, (0, 0))[0] >= 6, stats  # carried by the transport asked for
        assert e.unregister_memory(dev.addr) == 0


def test_copy_failure_fails_only_that_transfer(engines):
    target = engines("tcp")
    host_t = Mem(16 * MiB)
    assert target.register_memory(host_t.addr, host_t.n, "cpu:0") == 0
    name = target.get_local_segment_name()
    e = engines("tcp")
    dev = Mem(16 * MiB)
    assert e.register_memory(dev.addr, dev.n, "cuda:0") == 0

    bad = pattern(6 * MiB, 3)[:6 * MiB]
    dev.put(0, bad)
    dev.put(4 * MiB, MARKER)  # the fifth 1 MiB slice's copy fails
    good = pattern(2 * MiB, 9)[:2 * MiB]
    dev.put(8 * MiB, good)
    b_bad = e.batch_transfer_async_write(name, [dev.addr], [host_t.addr], [6 * MiB])
    b_good = e.batch_transfer_async_write(name, [dev.addr + 8 * MiB], [host_t.addr + 8 * MiB],
                                          [2 * MiB])
    assert b_bad and b_good
    assert e.get_batch_transfer_status([b_good]) == 0
    assert e.get_batch_transfer_status([b_bad]) == -1
    assert host_t.get(8 * MiB, 2 * MiB) == good
    # and the engine moves device memory afterwards
    dev.put(4 * MiB, b"\0" * len(MARKER))
    assert e.transfer_sync_write(name, dev.addr, host_t.addr, 6 * MiB) == 0
    assert host_t.get(0, 6 * MiB) == dev.get(0, 6 * MiB)


def test_unknown_device_and_bad_location(engines):
    e = engines("tcp")
    dev = Mem(MiB)
    assert e.register_memory(dev.addr, dev.n, "cuda:9") < 0  # 2 fake GPUs
    assert e.register_memory(dev.addr, dev.n, "cuda:x") < 0
    assert e.register_memory(dev.addr, dev.n, "cuda:1") == 0  # nothing left by the refusals
    assert e.unregister_memory(dev.addr) == 0
    # a closed engine's device registrations are gone: the memory may be reused at once
    assert e.register_memory(dev.addr, dev.n, "cuda:0") == 0
    e.close()
    again = engines("tcp")
    assert again.register_memory(dev.addr, dev.n, "cuda:1") == 0


def test_host_without_fake_is_unchanged(monkeypatch):
    """Without MC_DEVMEM the CUDA backend answers; with no driver in the process a "cuda:0"
    registration is host memory, as before."""
    monkeypatch.delenv("MC_DEVMEM", raising=False)
    e = TransferEngine()
    try:
        assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
        m = Mem(MiB)
        assert e.register_memory(m.addr, m.n, "cuda:0") == 0
        other = e.allocate_managed_buffer(MiB)
        m.put(0, b"x" * 4096)
        assert e.transfer_sync_write(e.get_local_segment_name(), m.addr, other, 4096) == 0
        assert ctypes.string_at(other, 4096) == b"x" * 4096
        assert "libcuda" not in open(f"/proc/{os.getpid()}/maps").read()
    finally:
        e.close()


def test_staging_benchmark_runs():
    """benchmarks/devmem_staging.py (the staging pipeline's cost beside memcpy) runs and prints
    its baseline with its figures."""
    import pathlib
    import subprocess
    import sys

    script = pathlib.Path(__file__).resolve().parents[4] / "benchmarks" / "devmem_staging.py"
    out = subprocess.run([sys.executable, str(script), "--size", "2", "--rounds", "1",
                          "--duration", "0.05"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "MC_LOG_LEVEL": "error"})
    assert out.returncode == 0, out.stderr
    assert "memcpy (1 thread" in out.stdout
    assert "staged device buffer" in out.stdout
