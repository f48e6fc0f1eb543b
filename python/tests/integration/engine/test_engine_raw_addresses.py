"""Raw addresses (Python ints) handed to the Transfer Engine: a wild local address in a
transfer, a wild remote one, registering a wild address, and the byte helpers
(write_bytes_to_buffer / read_bytes_from_buffer) on wild or overrunning ranges. Each gets a code
or a ValueError, and the process lives on and still moves bytes.

Each case runs in a process of its own, so a call that faults fails its test with the signal
instead of taking pytest down."""

import json
import subprocess
import sys

import pytest

PRELUDE = """
import json
from mooncake.engine import TransferEngine
e = TransferEngine()
assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
name = e.get_local_segment_name()
MiB = 1 << 20
src = e.allocate_managed_buffer(MiB)
dst = e.allocate_managed_buffer(MiB)
assert src and dst
def err(fn, *a):
    try:
        return fn(*a)
    except ValueError as x:
        return "ValueError"
"""

# After each case the engine still moves bytes between its two buffers.
EPILOGUE = """
ok = (e.write_bytes_to_buffer(src, b"alive" * 100, 500) == 0 and
      e.transfer_sync_write(name, src, dst, 500) == 0 and
      e.read_bytes_from_buffer(dst, 500) == b"alive" * 100)
print(json.dumps([r, ok]), flush=True)
e.close()
"""

CASES = {
    # the engine's own check of the local side: unregistered memory is refused (-3)
    "transfer_sync_write_wild_local": ("r = e.transfer_sync_write(name, 1, dst, 4096)", -3),
    "transfer_sync_read_wild_local": ("r = e.transfer_sync_read(name, 1, dst, 4096)", -3),
    "batch_transfer_sync_write_wild_local": (
        "r = e.batch_transfer_sync_write(name, [src, 1], [dst, dst + 4096], [4096, 4096])", -3),
    # the serving side's check of the remote address
    "transfer_sync_write_wild_remote": ("r = e.transfer_sync_write(name, src, 1, 4096) < 0", True),
    "transfer_sync_write_straddling_local": (
        "r = e.transfer_sync_write(name, src + MiB - 8, dst, 4096)", -3),
    # a wild address cannot be registered (so transfers cannot reach it that way either)
    "register_wild": ("r = [e.register_memory(1, 4096) < 0, e.transfer_sync_write(name, 1, dst, "
                      "4096)]", [True, -3]),
    "write_bytes_wild": ("r = err(e.write_bytes_to_buffer, 1, b'x' * 16, 16)", "ValueError"),
    "read_bytes_wild": ("r = err(e.read_bytes_from_buffer, 1, 16)", "ValueError"),
    "write_bytes_straddling_end": (
        "r = err(e.write_bytes_to_buffer, dst + MiB - 8, b'x' * 16, 16)", "ValueError"),
    "read_bytes_straddling_end": ("r = err(e.read_bytes_from_buffer, dst + MiB - 8, 16)",
                                  "ValueError"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_raw_address_is_an_error(case):
    code, want = CASES[case]
    p = subprocess.run([sys.executable, "-c", PRELUDE + code + EPILOGUE], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, f"rc={p.returncode}\n{p.stderr[-2000:]}"
    assert json.loads(p.stdout.strip().splitlines()[-1]) == [want, True]


def test_plain_memory_in_the_byte_helpers():
    # Live memory the engine did not register still works with the byte helpers.
    code = PRELUDE + """
import ctypes
b = ctypes.create_string_buffer(64)
r = [e.write_bytes_to_buffer(ctypes.addressof(b), b"plain", 5), b.raw[:5],
     e.read_bytes_from_buffer(ctypes.addressof(b), 5)]
r = [r[0], r[1].decode(), r[2].decode()]
""" + EPILOGUE
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout.strip().splitlines()[-1]) == [[0, "plain", "plain"], True]
