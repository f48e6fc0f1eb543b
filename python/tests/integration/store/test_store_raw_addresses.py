"""Raw addresses (Python ints) handed to the store: a wild one, one just past a registered
buffer, one straddling its end, memory unregistered and then taken away, and a registered
bytearray whose last reference is dropped. Each call gets a clear code (-600) and the client
process lives on with its data intact; a registered object stays alive while registered.

Every case runs in a store client process of its own (store_worker.py), so a call that faults
fails its own test ("store worker exited (rc=-11)") instead of taking pytest down. The client
holds the only segment, so its reads and writes are plain copies in its own memory: the path
on which a bad address faulted before.
"""

import pytest
from store_helpers import Master

INVALID_PARAMS = -600

# Two registered pages followed by a PROT_NONE page, so "just past the end" is a fault, not
# somebody else's heap; and one 4 KiB object written from the first page.
PREP = """
libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
P = 4096
base = libc.mmap(None, 3 * P, 3, 0x22, -1, 0)  # PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS
assert libc.mprotect(base + 2 * P, P, 0) == 0
assert store.register_buffer(base, 2 * P) == 0
ctypes.memmove(base, pattern(P, 'raw'), P)
assert store.put_from('raw-k', base, P) == 0
ns.update(base=base, libc=libc, P=P)
result = True
"""

# Each case: statements that set ``r`` (base, P and libc in scope). The object written by PREP
# is then read back to show the client and its data survived.
CASES = {
    "get_into_wild": ("r = store.get_into('raw-k', 1, P)", INVALID_PARAMS),
    "get_into_just_past_end": ("r = store.get_into('raw-k', base + 2 * P, P)", INVALID_PARAMS),
    "get_into_straddling_end": ("r = store.get_into('raw-k', base + P + 8, P)", INVALID_PARAMS),
    "put_from_wild": ("r = store.put_from('raw-w', 1, P)", INVALID_PARAMS),
    "put_from_straddling_end": ("r = store.put_from('raw-w', base + P + 8, P)", INVALID_PARAMS),
    "upsert_from_wild": ("r = store.upsert_from('raw-k', 1, P)", INVALID_PARAMS),
    # batches answer per key: the good key is served
    "batch_get_into": ("r = store.batch_get_into(['raw-k', 'raw-k'], [1, base + P], [P, P])",
                       [INVALID_PARAMS, 4096]),
    "batch_put_from": ("r = store.batch_put_from(['raw-b1', 'raw-b2'], [1, base], [P, P])",
                       [INVALID_PARAMS, 0]),
    "batch_get_into_multi_buffers": (
        "r = store.batch_get_into_multi_buffers(['raw-k'], [[base, base + 2 * P]], [[8, P - 8]])",
        [INVALID_PARAMS]),
    "batch_put_from_multi_buffers": (
        "r = store.batch_put_from_multi_buffers(['raw-m'], [[base, 1]], [[8, P - 8]])",
        [INVALID_PARAMS]),
    "get_into_ranges": (
        "r = store.get_into_ranges([1, base], [['raw-k'], ['raw-k']], [[[0]], [[0]]], "
        "[[[0]], [[0]]], [[[P]], [[P]]])", [[[INVALID_PARAMS]], [[4096]]]),
    "put_session_range_write": (
        "assert store.batch_put_session_start(['raw-s'], [P]) == [0]\n"
        "r = store.batch_put_from_multi_buffer_ranges(['raw-s'], [[1]], [[P]], [[0]])\n"
        "store.batch_put_session_revoke(['raw-s'])", [INVALID_PARAMS]),
    "put_tensor_from_wild": ("r = store.put_tensor_from('raw-t', 1, P)", INVALID_PARAMS),
    # a wild address cannot be registered either, so it cannot sneak past the check that way
    "register_wild_then_get_into": (
        "r = [store.register_buffer(1, P) < 0, store.get_into('raw-k', 1, P)]",
        [True, INVALID_PARAMS]),
    # unregistered, then the memory is taken away (PROT_NONE, as a free that unmaps it)
    "unregister_then_use": (
        "assert store.unregister_buffer(base) == 0\n"
        "assert libc.mprotect(base, 2 * P, 0) == 0\n"
        "r = [store.get_into('raw-k', base, P), store.put_from('raw-u', base, P),\n"
        "     store.batch_get_into(['raw-k'], [base + 8], [P - 8])]\n"
        "libc.mprotect(base, 2 * P, 3)", [INVALID_PARAMS, INVALID_PARAMS, [INVALID_PARAMS]]),
}


# Each request runs in a fresh scope; PREP left its names in ns.
NAMES = "base, P, libc = ns['base'], ns['P'], ns['libc']\n"


@pytest.fixture(scope="module")
def master():
    m = Master()
    yield m
    m.stop()


@pytest.fixture
def client(master, make_worker):
    w = make_worker()
    w.setup(master, segment=32 << 20)
    assert w.run(PREP) is True
    return w


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_raw_address_is_an_error(client, case):
    code, want = CASES[case]
    got = client.run(NAMES + code + "\nresult = [r, store.get('raw-k') == pattern(P, 'raw')]")
    assert got == [want, True]
    # the process is alive and still moves bytes through the registered buffer
    assert client.run(NAMES + "ctypes.memset(base, 0, P)\n"
                      "result = [store.get_into('raw-k', base, P), "
                      "ctypes.string_at(base, P) == pattern(P, 'raw')]") == [4096, True]


BYTEARRAY_HELD = """
import gc
n = 4 << 20  # large enough that freeing it unmaps it
b = bytearray(pattern(n, 'ba'))
r = [store.register_buffer(b)]
view = (ctypes.c_char * n).from_buffer(b)
addr = ctypes.addressof(view)
del view
try:
    b.extend(b'x')  # the registration holds the buffer: no resize may move it
    r.append('resized')
except BufferError:
    r.append('held')
del b
gc.collect()
r.append(store.put_from('raw-ba', addr, n))
r.append(sha(store.get('raw-ba')) == sha(pattern(n, 'ba')))
r.append(store.get_into('raw-ba', addr, n))
r.append(sha(ctypes.string_at(addr, n)) == sha(pattern(n, 'ba')))
r.append(store.unregister_buffer(addr))
result = r
"""


def test_registered_bytearray_outlives_its_last_reference(client):
    assert client.run(BYTEARRAY_HELD) == [0, "held", 0, True, 4 << 20, True, 0]


def test_unregistering_an_object_releases_it(client):
    code = """
b = bytearray(b'x' * 8192)
r = [store.register_buffer(b, 4096), store.register_buffer(b) < 0]  # overlap: refused
try:
    b.extend(b'y'); r.append('resized')
except BufferError:
    r.append('held')
r.append(store.unregister_buffer(b))
b.extend(b'y')  # released: the object is the caller's again
r.append(len(b))
try:
    store.register_buffer(memoryview(bytearray(64))[::2])
    r.append('registered')
except BufferError:
    r.append('BufferError')
try:
    store.register_buffer(3.5)
    r.append('registered')
except TypeError:
    r.append('TypeError')
try:
    store.register_buffer(b, 1 << 30)
    r.append('registered')
except ValueError:
    r.append('ValueError')
result = r
"""
    assert client.run(code) == [0, True, "held", 0, 8193, "BufferError", "TypeError",
                                "ValueError"]


def test_close_releases_registered_objects(client):
    code = """
b = bytearray(4096)
r = [store.register_buffer(b), store.close()]
b.extend(b'z')
r.append(len(b))
result = r
"""
    assert client.run(code) == [0, 0, 4097]


def test_plain_memory_still_moves_without_registration(client):
    # Raw addresses of live, unregistered memory are accepted, as before: tcp and shm move
    # them as they are (docs/store.md, "Raw addresses").
    code = """
src = ctypes.create_string_buffer(pattern(9000, 'pl'), 9000)
dst = ctypes.create_string_buffer(9000)
r = [store.put_from('raw-pl', ctypes.addressof(src), 9000),
     store.get_into('raw-pl', ctypes.addressof(dst), 9000), dst.raw == pattern(9000, 'pl'),
     store.batch_get_into(['raw-pl'], [ctypes.addressof(dst)], [9000]),
     store._check_memory(ctypes.addressof(dst), 9000, True), store._check_memory(1, 1),
     store._check_memory(0, 0)]
result = r
"""
    assert client.run(code) == [0, 9000, True, [9000], 0, INVALID_PARAMS, 0]


def test_dummy_client_refuses_bad_raw_addresses(make_master, make_worker):
    # A dummy client copies caller memory itself (to or from its node's pool): the same check
    # runs before, with the pool ranges it mapped as its registered memory.
    from node_helpers import Node, dummy_setup

    master = make_master()
    node = Node(master, segment="32mb")
    try:
        w = make_worker()
        dummy_setup(w, node, local_buffer=4 << 20)
        code = """
P = 4096
assert store.put('raw-d', pattern(P, 'd')) == 0
pool = store.alloc_from_mem_pool(2 * P)
assert pool and store.register_buffer(pool, 2 * P) == 0
r = [store.get_into('raw-d', 1, P), store.put_from('raw-dw', 1, P),
     store.batch_get_into(['raw-d', 'raw-d'], [1, pool], [P, P]),
     store.get_into('raw-d', pool + P + 8, P),
     store.get_into('raw-d', pool, P), ctypes.string_at(pool, P) == pattern(P, 'd')]
result = r
"""
        assert w.run(code) == [INVALID_PARAMS, INVALID_PARAMS, [INVALID_PARAMS, 4096],
                               INVALID_PARAMS, 4096, True]
    finally:
        node.stop()
