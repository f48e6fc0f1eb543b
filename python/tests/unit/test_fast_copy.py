"""mooncake._fast_copy: the gather copy the structured object store uses (the reference's
extension of that name), checked byte for byte, split over threads, and against bad input."""

import ctypes

import numpy as np
import pytest

from mooncake._fast_copy import concat_arrays_into


def _dest(n):
    buf = ctypes.create_string_buffer(max(n, 1))
    return buf, ctypes.addressof(buf)


def test_copies_whole_list_and_range():
    arrays = [np.arange(5, dtype=np.int32), b"xyz", np.full(3, 7, dtype=np.uint8)]
    want = b"".join(bytes(memoryview(a)) for a in arrays)
    buf, addr = _dest(len(want))
    assert concat_arrays_into(arrays, addr, len(want)) == len(want)
    assert buf.raw[: len(want)] == want
    # start/count select a slice; a count past the end is cut, as the reference does
    buf2, addr2 = _dest(len(want))
    assert concat_arrays_into(arrays, addr2, len(want), 1, 99) == 6
    assert buf2.raw[:6] == b"xyz" + bytes([7, 7, 7])


def test_threads_split_bytes_not_arrays():
    big = np.random.default_rng(1).integers(0, 256, 3 << 20, dtype=np.uint8)
    small = np.arange(10, dtype=np.uint8)
    buf, addr = _dest(big.nbytes + small.nbytes)
    n = concat_arrays_into([small, big], addr, len(buf), 0, -1, 8)
    assert n == big.nbytes + small.nbytes
    assert buf.raw[:n] == small.tobytes() + big.tobytes()


def test_bad_input():
    buf, addr = _dest(8)
    with pytest.raises(ValueError, match="destination buffer too small"):
        concat_arrays_into([np.zeros(9, np.uint8)], addr, 8)
    with pytest.raises(ValueError, match="C-contiguous"):
        concat_arrays_into([np.arange(8, dtype=np.uint8)[::2]], addr, 8)
    with pytest.raises(TypeError, match=r"arrays\[0\]"):
        concat_arrays_into([object()], addr, 8)
    with pytest.raises(TypeError):
        concat_arrays_into(np.zeros(4, np.uint8), addr, 8)
    with pytest.raises(ValueError, match="dest_ptr is 0"):
        concat_arrays_into([b"a"], 0, 8)
    assert concat_arrays_into([], addr, 8) == 0
    assert buf.raw == b"\0" * 8  # nothing written by a refused call
