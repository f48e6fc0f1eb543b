"""The tensor methods (put_tensor / get_tensor and their batch, TP, parallelism, _from / _into,
pub and safetensors forms) between real client processes: one writes, another reads, and the
bytes are compared by sha256 of the tensors' raw bytes, dtype and shape."""

import struct
import subprocess
import sys

import pytest

# Run in a worker before each request: torch, the parallelism classes and tensor helpers.
PRE = """
import torch
from mooncake.store import ParallelAxis, TensorParallelism, ReadTarget

def make(dtype, shape, seed):
    g = torch.Generator().manual_seed(seed)
    n = 1
    for d in shape:
        n *= d
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool().reshape(shape)
    el = torch.empty((), dtype=dtype).element_size()
    raw = torch.randint(0, 256, (n * el,), dtype=torch.uint8, generator=g)
    return raw.view(dtype).reshape(shape)

def digest(t):
    if t is None:
        return None
    flat = t.contiguous().reshape(-1)
    raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    return [str(t.dtype), list(t.shape), hashlib.sha256(raw).hexdigest()]

def tp(rank, size, split_dim):
    return TensorParallelism([ParallelAxis("tp", rank, size, split_dim=split_dim)])
"""


def run(worker, code):
    return worker.run(PRE + code)


DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32",
          "int64", "uint16", "uint32", "uint64", "bool", "float8_e4m3fn", "float8_e5m2"]


def test_import_loads_no_torch():
    code = ("import sys, mooncake.store as s; "
            "assert hasattr(s.MooncakeDistributedStore, 'put_tensor'); "
            "s.ReadTarget('full', s.TensorParallelism([s.ParallelAxis('tp', 0, 2, 0)])); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_every_dtype(cluster, dtype):
    _, storage, pure, _ = cluster
    key = f"t-dtype-{dtype}"
    want = run(pure, f"t = make(torch.{dtype}, (3, 5, 7), 1); "
                     f"result = [store.put_tensor({key!r}, t), digest(t)]")
    assert want[0] == 0
    assert run(storage[0], f"result = digest(store.get_tensor({key!r}))") == want[1]


SHAPES = [(), (1,), (0,), (2, 0, 3), (4096,), (17, 3), (1, 1, 1, 1, 1, 1, 1, 2), (512, 1024)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)) or "scalar")
def test_round_trip_shapes(cluster, shape):
    _, storage, pure, _ = cluster
    key = f"t-shape-{shape}"
    want = run(pure, f"t = make(torch.float32, {shape!r}, 2); "
                     f"result = [store.put_tensor({key!r}, t), digest(t)]")
    assert want[0] == 0
    assert want[1][1] == list(shape)
    assert run(storage[1], f"result = digest(store.get_tensor({key!r}))") == want[1]
    # Header (304 bytes) + the data, nothing else.
    elems = 1
    for d in shape:
        elems *= d
    assert run(storage[0], f"result = store.get_size({key!r})") == 304 + 4 * elems


def test_non_contiguous_inputs(cluster):
    _, storage, pure, _ = cluster
    want = run(pure, """
base = make(torch.bfloat16, (6, 8), 3)
views = {"t-nc-transposed": base.t(), "t-nc-strided": base[::2, 1::3],
         "t-nc-expanded": torch.arange(4, dtype=torch.int32).expand(3, 4),
         "t-nc-narrowed": make(torch.int8, (4, 6, 5), 4).narrow(1, 2, 3)}
result = {k: [store.put_tensor(k, v), v.is_contiguous(), digest(v)] for k, v in views.items()}
""")
    for key, (rc, contiguous, dig) in want.items():
        assert rc == 0 and not contiguous
        assert run(storage[0], f"result = digest(store.get_tensor({key!r}))") == dig


def test_stored_header_is_the_reference_layout(cluster):
    _, storage, pure, _ = cluster
    assert run(pure, "result = store.put_tensor('t-layout', "
                     "torch.arange(6, dtype=torch.bfloat16).reshape(2, 3))") == 0
    raw = bytes.fromhex(storage[0].run("result = store.get('t-layout').hex()"))
    magic, version, hsize, dtype, ndim, kind, flags, off, nbytes = struct.unpack_from(
        "<IHHiiIIQQ", raw, 0)
    assert (magic, version, hsize, dtype, ndim, kind, flags) == (0x4D4F4F4E, 1, 304, 12, 2, 0, 0)
    assert (off, nbytes, len(raw)) == (304, 12, 316)
    gshape = struct.unpack_from("<8q", raw, 40)
    lshape = struct.unpack_from("<8q", raw, 104)
    assert gshape == lshape == (2, 3, -1, -1, -1, -1, -1, -1)
    assert struct.unpack_from("<I", raw, 168)[0] == 0  # no parallel axes
    assert raw[304:] == struct.pack("<6H", 0, 0x3F80, 0x4000, 0x4040, 0x4080, 0x40A0)


def test_result_is_a_private_copy(cluster):
    _, storage, pure, _ = cluster
    assert run(pure, "result = store.put_tensor('t-private', torch.zeros(8))") == 0
    got = run(storage[0], "a = store.get_tensor('t-private'); a += 7; "
                          "b = store.get_tensor('t-private'); "
                          "result = [a.tolist(), b.tolist()]")
    assert got == [[7.0] * 8, [0.0] * 8]


def test_bad_input(cluster):
    _, storage, pure, _ = cluster
    got = run(pure, """
import numpy
result = [store.put_tensor('t-bad-1', [1, 2]), store.put_tensor('t-bad-2', None),
          store.put_tensor('t-bad-3', numpy.zeros(3)),
          store.put_tensor('t-bad-4', torch.zeros(2, dtype=torch.complex64)),
          store.put_tensor('t-bad-5', torch.zeros((1,) * 9)),
          store.batch_put_tensor(['t-bad-6', 't-bad-7'], [torch.ones(2)]),
          store.batch_put_tensor([], []),
          store.batch_is_exist(['t-bad-%d' % i for i in range(1, 8)])]
""")
    assert got == [-600, -600, -600, -600, -600, [-600, -600], [], [0] * 7]
    for code in ("store.put_tensor(5, torch.ones(1))", "store.get_tensor(b'k')",
                 "store.batch_get_tensor('abc')"):
        with pytest.raises(AssertionError, match="TypeError"):
            run(pure, code)


def test_missing_and_foreign_objects(cluster):
    _, storage, pure, _ = cluster
    # Plain bytes, a header-sized garbage value, and a tensor object whose length was cut.
    assert pure.run("result = [store.put('t-plain', b'hello'), store.put('t-garbage', "
                    "bytes(400)), store.put('t-cut', store.get('t-dtype-float32')[:-4])]"
                    ) == [0, 0, 0]
    got = run(storage[0], """
result = [store.get_tensor('t-missing'), store.get_tensor('t-plain'),
          store.get_tensor('t-garbage'), store.get_tensor('t-cut'),
          store.batch_get_tensor(['t-missing', 't-dtype-int8', 't-plain'])]
result[-1] = [None if t is None else str(t.dtype) for t in result[-1]]
""")
    assert got == [None, None, None, None, [None, "torch.int8", None]]


def test_batch_put_and_get(cluster):
    _, storage, pure, _ = cluster
    keys = [f"t-batch-{i}" for i in range(4)]
    want = run(pure, f"""
ts = [make(torch.float16, (64, 32), 10), "not a tensor", torch.tensor(True),
      make(torch.int64, (0, 5), 11)]
result = [store.batch_put_tensor({keys!r}, ts), [digest(t) if i != 1 else None
          for i, t in enumerate(ts)]]
""")
    assert want[0] == [0, -600, 0, 0]
    got = run(storage[1], f"result = [digest(t) for t in store.batch_get_tensor({keys!r})]")
    assert got == want[1]


def test_into_and_from(cluster):
    _, storage, pure, _ = cluster
    want = run(pure, "t = make(torch.int16, (33, 9), 20); "
                     "result = [store.put_tensor('t-into', t), digest(t)]")
    assert want[0] == 0
    got = run(storage[0], """
size = 4096
buf = (ctypes.c_ubyte * size)()
ptr = ctypes.addressof(buf)
ns['buf'] = buf
assert store.register_buffer(ptr, size) == 0
t = store.get_tensor_into('t-into', ptr, size)
n = store.get_size('t-into')
result = [digest(t), ptr <= t.data_ptr() < ptr + size, n,
          store.get_tensor_into('t-into', ptr, 100), store.get_tensor_into('t-into', 0, size),
          store.get_tensor_into('t-missing', ptr, size),
          store.put_tensor_from('t-from', ptr, n),
          store.put_tensor_from('t-from-bad', ptr, 100),
          store.put_tensor_from('t-from-bad', 0, n)]
ctypes.memset(ptr, 0, size)
result.append(store.put_tensor_from('t-from-bad', ptr, n))
result.append(store.unregister_buffer(ptr))
""")
    assert got[0] == want[1] and got[1] is True and got[2] == 304 + 33 * 9 * 2
    assert got[3:] == [None, None, None, 0, -600, -600, -600, 0]
    assert run(pure, "result = digest(store.get_tensor('t-from'))") == want[1]
    assert run(pure, "result = store.is_exist('t-from-bad')") == 0


def test_batch_into_and_from(cluster):
    _, storage, pure, _ = cluster
    keys = ["t-bi-0", "t-bi-1"]
    want = run(pure, f"ts = [make(torch.float32, (10, 10), 30), make(torch.bool, (7,), 31)]; "
                     f"result = [store.batch_put_tensor({keys!r}, ts), [digest(t) for t in ts]]")
    assert want[0] == [0, 0]
    got = run(storage[1], f"""
bufs = [(ctypes.c_ubyte * 1024)() for _ in range(3)]
ptrs = [ctypes.addressof(b) for b in bufs]
ns['bufs'] = bufs
ts = store.batch_get_tensor_into({keys!r} + ['t-missing'], ptrs, [1024] * 3)
sizes = [store.get_size(k) for k in {keys!r}]
result = [[digest(t) for t in ts],
          store.batch_get_tensor_into({keys!r}, ptrs[:1], [1024]),
          store.batch_get_tensor_into({keys!r}, [ptrs[0], 0], [1024, 1024]),
          store.batch_put_tensor_from(['t-bf-0', 't-bf-1'], ptrs[:2], sizes),
          store.batch_put_tensor_from(['t-bf-2', 't-bf-3'], [ptrs[0], ptrs[2]], [sizes[0], 400]),
          store.batch_put_tensor_from([], [], [])]
""")
    assert got[0] == want[1] + [None]
    assert got[1:] == [[-600, -600], [-600, -600], [0, 0], [-600, -600], []]
    assert run(pure, "result = [digest(t) for t in store.batch_get_tensor(['t-bf-0', 't-bf-1',"
                     " 't-bf-2'])]") == want[1] + [None]


@pytest.mark.parametrize("split_dim", [0, 1, 2])
def test_tp_split_and_merge(cluster, split_dim):
    _, storage, pure, _ = cluster
    key = f"t-tp-{split_dim}"
    want = run(pure, f"""
full = make(torch.bfloat16, (4, 8, 12), 40 + {split_dim})
result = [store.put_tensor_with_tp({key!r}, full, tp_size=4, split_dim={split_dim}),
          digest(full), [digest(c) for c in full.chunk(4, {split_dim})]]
""")
    assert want[0] == 0
    got = run(storage[0], f"""
shards = [store.get_tensor_with_tp({key!r}, tp_rank=r, tp_size=4) for r in range(4)]
batch = store.batch_get_tensor_with_tp([{key!r}, 't-missing'], tp_rank=2, tp_size=4)
result = [[digest(s) for s in shards], digest(torch.cat(shards, {split_dim})),
          digest(batch[0]), batch[1], store.is_exist({key!r})]
""")
    assert got == [want[2], want[1], want[2][2], None, 0]
    # Each shard's header names the full shape and its TP axis (rank, size, split_dim).
    raw = bytes.fromhex(storage[1].run(f"result = store.get({key + '_tp_3'!r})[:304].hex()"))
    assert struct.unpack_from("<I", raw, 16)[0] == 1  # SHARD
    assert struct.unpack_from("<3q", raw, 40) == (4, 8, 12)
    local = [4, 8, 12]
    local[split_dim] //= 4
    assert list(struct.unpack_from("<3q", raw, 104)) == local
    assert struct.unpack_from("<I", raw, 168)[0] == 1
    assert struct.unpack_from("<6i", raw, 176) == (1, 0, 3, 4, split_dim, 0)


def test_tp_bad_requests_and_tp1(cluster):
    _, storage, pure, _ = cluster
    got = run(pure, """
t = torch.ones(6, 4)
result = [store.put_tensor_with_tp('t-tpbad-1', t, tp_size=4, split_dim=0),
          store.put_tensor_with_tp('t-tpbad-2', t, tp_size=2, split_dim=2),
          store.put_tensor_with_tp('t-tpbad-3', t, tp_size=2, split_dim=-1),
          store.put_tensor_with_tp('t-tpbad-4', 'x', tp_size=2),
          store.batch_put_tensor_with_tp(['t-tpbad-5', 't-tpbad-6'], [t, torch.ones(5)],
                                         tp_size=2),
          store.put_tensor_with_tp('t-tp1', t, tp_size=1),
          store.batch_is_exist(['t-tpbad-1_tp_0', 't-tpbad-2_tp_0', 't-tpbad-5_tp_1',
                                't-tpbad-6_tp_0', 't-tp1', 't-tp1_tp_0'])]
""")
    assert got == [-600, -600, -600, -600, [0, -600], 0, [0, 0, 1, 0, 1, 0]]
    assert run(storage[0], "result = digest(store.get_tensor_with_tp('t-tp1', 0, 1))") == \
        run(storage[0], "result = digest(torch.ones(6, 4))")


def test_tp_from_and_into(cluster):
    _, storage, pure, _ = cluster
    want = run(pure, """
full = make(torch.float32, (6, 10), 50)
buf = (ctypes.c_ubyte * 4096)()
ptr = ctypes.addressof(buf)
ns['buf'] = buf
assert store.put_tensor('t-tpf-src', full) == 0
n = store.get_into('t-tpf-src', ptr, 4096)
result = [store.put_tensor_with_tp_from('t-tpf', ptr, n, tp_size=2, split_dim=1),
          store.batch_put_tensor_with_tp_from(['t-tpf-b', 't-tpf-c'], [ptr, ptr], [n, 100],
                                              tp_size=3, split_dim=0),
          store.put_tensor_with_tp_from('t-tpf-d', ptr, n, tp_size=4, split_dim=1),
          [digest(c) for c in full.chunk(2, 1)], [digest(c) for c in full.chunk(3, 0)]]
""")
    assert want[:3] == [0, [0, -600], -600]
    got = run(storage[1], """
bufs = [(ctypes.c_ubyte * 1024)() for _ in range(3)]
ptrs = [ctypes.addressof(b) for b in bufs]
ns['bufs'] = bufs
one = store.get_tensor_with_tp_into('t-tpf', ptrs[0], 1024, tp_rank=1, tp_size=2)
many = store.batch_get_tensor_with_tp_into(['t-tpf-b', 't-tpf-c'], ptrs[1:], [1024, 1024],
                                           tp_rank=2, tp_size=3)
result = [digest(one), [digest(t) for t in many]]
""")
    assert got == [want[3][1], [want[4][2], None]]


def test_parallelism_tp_shards_from_two_writers(cluster):
    """Two processes each store their own TP shard; a third reads the full tensor, a shard,
    and a shard of another TP size (resharded)."""
    _, storage, pure, _ = cluster
    want = run(pure, "full = make(torch.float16, (8, 6), 60); "
                     "result = [digest(full), [digest(c) for c in full.chunk(4, 0)],"
                     " [digest(c) for c in full.chunk(2, 0)]]")
    for rank, writer in enumerate([pure, storage[0]]):
        rc = run(writer, f"full = make(torch.float16, (8, 6), 60); "
                         f"result = store.put_tensor_with_parallelism('t-par', "
                         f"full.chunk(2, 0)[{rank}].contiguous(), tp({rank}, 2, 0))")
        assert rc == 0
    got = run(storage[1], """
full = store.get_tensor_with_parallelism('t-par', ReadTarget('full', tp(0, 2, 0)))
same = store.get_tensor_with_parallelism('t-par', ReadTarget('SHARD', tp(1, 2, 0)))
finer = [store.get_tensor_with_parallelism('t-par', ReadTarget('shard', tp(r, 4, 0)))
         for r in range(4)]
stored = store.get_tensor_with_parallelism('t-par_tp_0')
result = [digest(full), digest(same), [digest(t) for t in finer], digest(stored),
          store.get_tensor_with_parallelism('t-par', ReadTarget('full', tp(0, 2, 1))),
          store.get_tensor_with_parallelism('t-par', ReadTarget('full', tp(0, 3, 0))),
          store.get_tensor_with_parallelism('t-nope', ReadTarget('full', tp(0, 2, 0))),
          store.get_tensor_with_parallelism('t-nope', ReadTarget('shard', tp(0, 2, 0)))]
""")
    assert got == [want[0], want[2][1], want[1], want[2][0], None, None, None, None]
    # The TP API reads the same shards.
    assert run(pure, "result = digest(store.get_tensor_with_tp('t-par', 1, 2))") == want[2][1]


def test_parallelism_multi_axis_and_generic(cluster):
    _, storage, pure, _ = cluster
    got = run(pure, """
full = make(torch.int32, (4, 6), 70)
def dp_tp(dp, r):
    return TensorParallelism([ParallelAxis("tp", r, 3, split_dim=1), ParallelAxis("dp", dp, 2)])
rcs = [store.put_tensor_with_parallelism('t-dptp', full, dp_tp(1, r)) for r in range(3)]
ep = TensorParallelism([ParallelAxis("ep", 1, 4, expert_id=9)])
expert = make(torch.float32, (5,), 71)
rcs.append(store.put_tensor_with_parallelism('t-ep', expert, ep))
result = [rcs, digest(full), [digest(c) for c in full.chunk(3, 1)], digest(expert),
          store.batch_is_exist(['t-dptp__dp_1of2__tp_0of3_sd1', 't-dptp__parallelism_manifest',
                                't-ep__ep_1of4_eid9'])]
""")
    assert got[0] == [0, 0, 0, 0] and got[4] == [1, 1, 1]
    read = run(storage[0], """
def dp_tp(dp, r, n=3):
    return TensorParallelism([ParallelAxis("dp", dp, 2), ParallelAxis("tp", r, n, split_dim=1)])
ep = TensorParallelism([ParallelAxis("EP", 1, 4, expert_id=9)])
result = [digest(store.get_tensor_with_parallelism('t-dptp', ReadTarget('full', dp_tp(1, 0)))),
          digest(store.get_tensor_with_parallelism('t-dptp', ReadTarget('shard', dp_tp(1, 2)))),
          store.get_tensor_with_parallelism('t-dptp', ReadTarget('full', dp_tp(0, 0))),
          digest(store.get_tensor_with_parallelism('t-ep', ReadTarget('shard', ep))),
          store.get_tensor_with_parallelism('t-ep', ReadTarget('full', ep)),
          [digest(t) for t in store.batch_get_tensor_with_parallelism(
              ['t-dptp', 't-ep', 't-dptp'], [ReadTarget('shard', dp_tp(1, 1)),
              ReadTarget('shard', ep), None])],
          store.batch_get_tensor_with_parallelism(['t-ep'], [None, None])]
""")
    assert read[:5] == [got[1], got[2][2], None, got[3], None]
    assert read[5] == [got[2][1], got[3], None] and read[6] == [None]


def test_parallelism_bad_requests(cluster):
    _, storage, pure, _ = cluster
    got = run(pure, """
t = torch.ones(4, 4)
A = ParallelAxis
bad = [TensorParallelism([]), TensorParallelism([A("tp", 0, 2)]),
       TensorParallelism([A("tp", 2, 2, split_dim=0)]), TensorParallelism([A("xp", 0, 2)]),
       TensorParallelism([A("tp", 0, 2, split_dim=0), A("tp", 1, 2, split_dim=0)]),
       TensorParallelism([A("dp", 0, 2, split_dim=0)]), TensorParallelism([A("ep", 0, 2)]),
       TensorParallelism([A("pp", 0, 2)]), TensorParallelism([A("tp", 0, 2, split_dim=5)]),
       "tp", TensorParallelism([A("tp", 0, 3, split_dim=0), A("dp", 0, 1)])]
rcs = [store.put_tensor_with_parallelism('t-pbad', t, p) for p in bad]
wp = type("WP", (), {"rank": 0, "size": 2, "split_dim": 0})()
rcs.append(store.put_tensor_with_parallelism('t-pbad', t, tp(0, 2, 0), writer_partition=wp))
rcs.append(store.put_tensor_with_parallelism('t-pbad', [1], tp(0, 2, 0)))
cfg = ReplicateConfig(replica_num=1, preferred_segments=['a', 'b'])
rcs.append(store.put_tensor_with_parallelism('t-pbad', t, None, cfg))
try:
    ReadTarget('everything')
    mode_error = None
except ValueError as e:
    mode_error = [isinstance(e, RuntimeError), str(e)]
target = ReadTarget()
reads = [store.get_tensor_with_parallelism('t-dtype-int8', 'nonsense'),
         store.get_tensor_with_parallelism('t-dtype-int8', ReadTarget('shard')),
         store.get_tensor_with_parallelism('t-dtype-int8', ReadTarget('as_stored', tp(0, 2, 0))),
         store.get_tensor_with_parallelism('t-dtype-int8', ReadTarget('shard', bad[1])),
         target.mode]
result = [rcs, store.is_exist('t-pbad'), mode_error, reads,
          store.batch_put_tensor_with_parallelism(['a', 'b'], [t, t], [None]),
          store.batch_put_tensor_with_parallelism(['a'], [t], [tp(0, 2, 0)], None, [wp])]
""")
    assert got[0] == [-600] * 14
    assert got[1] == 0
    assert got[2] == [True, "Unsupported ReadTarget mode: 'everything'"]
    assert got[3] == [None, None, None, None, "as_stored"]
    assert got[4:] == [[-600, -600], [-600]]


def test_writer_partition_and_full_read(cluster):
    _, storage, pure, _ = cluster
    want = run(pure, "full = make(torch.uint8, (3, 10), 80); result = digest(full)")
    for rank, writer in enumerate([pure, storage[0]]):
        rc = run(writer, f"""
full = make(torch.uint8, (3, 10), 80)
wp = type("WP", (), {{"rank": {rank}, "size": 2, "split_dim": 1}})()
result = store.put_tensor_with_parallelism('t-wp', full, writer_partition=wp)
""")
        assert rc == 0
    got = run(storage[1], """
result = [digest(store.get_tensor_with_parallelism('t-wp', ReadTarget('full'))),
          digest(store.get_tensor_with_parallelism('t-wp', ReadTarget('shard', tp(1, 2, 1)))),
          digest(store.get_tensor_with_parallelism('t-dtype-int8', ReadTarget('full'))),
          digest(store.get_tensor('t-dtype-int8')),
          store.is_exist('t-wp__writer_1of2_sd1')]
""")
    assert got[0] == want
    assert got[1] == run(pure, "result = digest(make(torch.uint8, (3, 10), 80)[:, 5:])")
    assert got[2] == got[3] and got[4] == 1


def test_parallelism_from_and_into(cluster):
    _, storage, pure, _ = cluster
    want = run(pure, """
full = make(torch.float64, (6, 4), 90)
buf = (ctypes.c_ubyte * 4096)()
ptr = ctypes.addressof(buf)
ns['buf'] = buf
assert store.put_tensor('t-pf-src', full) == 0
n = store.get_into('t-pf-src', ptr, 4096)
result = [store.put_tensor_with_parallelism_from('t-pf', ptr, n, tp(0, 3, 0)),
          store.put_tensor_with_parallelism_from('t-pf-plain', ptr, n),
          store.batch_put_tensor_with_parallelism_from(['t-pf-b', 't-pf-c'], [ptr, 0], [n, n],
                                                       [tp(0, 2, 1), None]),
          store.put_tensor_with_parallelism_from('t-pf-bad', ptr, n, tp(0, 4, 0)),
          digest(full), [digest(c) for c in full.chunk(3, 0)]]
""")
    assert want[:4] == [0, 0, [0, -600], -600]
    got = run(storage[0], """
bufs = [(ctypes.c_ubyte * 1024)() for _ in range(6)]
ptrs = [ctypes.addressof(b) for b in bufs]
ns['bufs'] = bufs
into = store.get_tensor_with_parallelism_into
full = into('t-pf', ptrs[0], 1024, ReadTarget('full', tp(0, 3, 0)))
shard = into('t-pf', ptrs[1], 1024, ReadTarget('shard', tp(2, 3, 0)))
small = into('t-pf', ptrs[2], 200, ReadTarget('full', tp(0, 3, 0)))
batch = store.batch_get_tensor_with_parallelism_into(
    ['t-pf-plain', 't-pf-b', 't-pf'], ptrs[3:], [1024] * 3,
    [None, ReadTarget('full', tp(0, 2, 1)), ReadTarget('shard', tp(1, 3, 0))])
result = [digest(full), ptrs[0] <= full.data_ptr() < ptrs[0] + 1024, digest(shard), small,
          [digest(t) for t in batch],
          store.batch_get_tensor_with_parallelism_into(['t-pf'], ptrs, [1024])]
""")
    assert got[0] == want[4] and got[1] is True
    assert got[2] == want[5][2] and got[3] is None
    assert got[4] == [want[4], want[4], want[5][1]]
    assert got[5] == [None]


def test_pub_tensor_replicas(cluster):
    _, storage, pure, names = cluster
    got = run(pure, """
t = make(torch.float32, (128,), 100)
two = ReplicateConfig(replica_num=2)
mismatch = ReplicateConfig(replica_num=2, preferred_segments=[store.get_hostname()])
result = [store.pub_tensor('t-pub', t, two), store.pub_tensor('t-pub-bad', t, mismatch),
          store.batch_pub_tensor(['t-pub-b0', 't-pub-b1'], [t, t], two),
          store.batch_pub_tensor(['t-pub-b2'], [t], mismatch),
          store.pub_tensor_with_tp('t-pubtp', t, two, tp_size=2),
          store.batch_pub_tensor_with_tp(['t-pubtp-b'], [t], two, tp_size=4),
          store.pub_tensor('t-pub-1', t),
          [len(store.get_replica_desc(k)) for k in
           ['t-pub', 't-pub-b1', 't-pubtp_tp_1', 't-pubtp-b_tp_3', 't-pub-1']],
          store.is_exist('t-pub-bad'), digest(t)]
""")
    assert got[:7] == [0, -600, [0, 0], [-600], 0, [0], 0]
    assert got[7] == [2, 2, 2, 2, 1] and got[8] == 0
    assert run(storage[1], "result = digest(store.get_tensor('t-pub'))") == got[9]


def test_safetensors_save_and_load(cluster, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    _, storage, pure, _ = cluster
    path = tmp_path / "one.safetensors"
    want = run(pure, "t = make(torch.bfloat16, (16, 3), 110); "
                     "result = [store.put_tensor('t-st', t), digest(t)]")
    assert want[0] == 0
    assert run(storage[0], f"result = store.save_tensor_to_safetensor('t-st', {str(path)!r})") == 0
    on_disk = load_file(str(path))  # read back by safetensors itself, in this process
    assert list(on_disk) == ["t-st"] and on_disk["t-st"].dtype == torch.bfloat16
    assert list(on_disk["t-st"].shape) == [16, 3]
    got = run(storage[1], f"""
import os
os.chdir({str(tmp_path)!r})
loaded = store.load_tensor_from_safetensor('t-st-copy', {str(path)!r})
result = [digest(loaded), digest(store.get_tensor('t-st-copy')),
          store.save_tensor_to_safetensor('t-missing', 'x.safetensors'),
          os.path.exists('x.safetensors'),
          store.save_tensor_to_safetensor('t-st'), os.path.exists('t-st'),
          store.save_tensor_to_safetensor('t-st', {str(tmp_path / 'no' / 'dir.st')!r}),
          store.load_tensor_from_safetensor('t-st-none', 'does-not-exist.safetensors'),
          store.is_exist('t-st-none')]
""")
    assert got[0] == got[1] == want[1]
    assert got[2:] == [-1100, False, 0, True, -600, None, 0]
    assert load_file(str(tmp_path / "t-st"))["t-st"].shape == (16, 3)
    # A file with two entries: the named one, else the first; no key: the file name is the key.
    two = tmp_path / "two.safetensors"
    save_file({"first": torch.arange(3, dtype=torch.int64), "second": torch.ones(2, 2)}, str(two))
    got = run(pure, f"""
a = store.load_tensor_from_safetensor('second', {str(two)!r})
b = store.load_tensor_from_safetensor('absent', {str(two)!r})
c = store.load_tensor_from_safetensor(file_name={str(two)!r})
result = [a.tolist(), b.tolist(), c.tolist(), store.get_tensor({str(two)!r}).tolist(),
          store.get_tensor('absent').tolist()]
""")
    assert got == [[[1.0, 1.0], [1.0, 1.0]], [0, 1, 2], [0, 1, 2], [0, 1, 2], [0, 1, 2]]
    with pytest.raises(AssertionError, match="TypeError"):
        run(pure, "store.load_tensor_from_safetensor('k')")


def test_store_not_set_up(make_worker):
    fresh = make_worker()
    got = run(fresh, "t = torch.ones(4); "
                     "result = [store.put_tensor('k', t), store.pub_tensor('k', t), "
                     "store.put_tensor_with_parallelism('k', t, tp(0, 2, 0)), "
                     "store.get_tensor('k'), store.get_tensor_with_tp('k', 0, 2), "
                     "store.get_tensor_with_parallelism('k', ReadTarget('full', tp(0, 2, 0)))]")
    assert got == [-1010, -1010, -1010, None, None, None]


def test_upsert_tensor_forms_replace(cluster):
    """The upsert forms replace what put keeps: another shape and dtype under the same key,
    read whole by another process."""
    _, storage, pure, _ = cluster
    want = run(pure, """
a, b = make(torch.float32, (4, 4), 10), make(torch.int16, (3, 7, 2), 11)
codes = [store.put_tensor("t-up", a), store.put_tensor("t-up", b),
         store.upsert_tensor("t-up", b),
         store.batch_put_tensor(["t-up-b0", "t-up-b1"], [a, a]),
         store.batch_upsert_tensor(["t-up-b0", "t-up-b1"], [b, a]),
         store.upsert_pub_tensor("t-up-pub", a, None), store.upsert_pub_tensor("t-up-pub", b, None),
         store.upsert_tensor("t-up-bad", "not a tensor")]
result = [codes, digest(a), digest(b)]
""")
    codes, da, db = want
    assert codes == [0, 0, 0, [0, 0], [0, 0], 0, 0, -600]
    got = run(storage[0], "result = [digest(store.get_tensor(k)) for k in "
                          "('t-up', 't-up-b0', 't-up-b1', 't-up-pub')]")
    assert got == [db, db, da, db]


def test_module_level_serialization_helpers(cluster):
    """mooncake.store._serialize_tensor / _deserialize_tensor / _tensor_metadata_size, the
    reference's module-level helpers: a header built here plus the data bytes is an object
    get_tensor reads in another process, and what get returns deserializes to the tensor."""
    _, storage, pure, _ = cluster
    want = run(pure, "import mooncake.store as ms, ctypes\n"
                     "t = make(torch.float16, (4, 6), 7)[:, ::2]  # not contiguous\n"
                     "meta, ptr, n, owner = ms._serialize_tensor(t)\n"
                     "assert len(meta) == ms._tensor_metadata_size() == 304\n"
                     "assert n == t.numel() * 2 and owner.is_contiguous()\n"
                     "obj = meta + ctypes.string_at(ptr, n)\n"
                     "assert digest(ms._deserialize_tensor(obj)) == digest(t)\n"
                     "result = [store.put('t-helpers', obj), digest(t)]")
    assert want[0] == 0
    assert run(storage[0], "result = digest(store.get_tensor('t-helpers'))") == want[1]
    assert run(storage[1], "import mooncake.store as ms\n"
                           "result = digest(ms._deserialize_tensor(store.get('t-helpers')))") \
        == want[1]
    bad = run(pure, "import mooncake.store as ms\n"
                    "out = []\n"
                    "for f, arg in ((ms._serialize_tensor, [1, 2]),\n"
                    "               (ms._deserialize_tensor, b'x' * 400),\n"
                    "               (ms._deserialize_tensor, store.get('t-helpers')[:-1])):\n"
                    "    try:\n"
                    "        f(arg)\n"
                    "        out.append(None)\n"
                    "    except (TypeError, ValueError) as e:\n"
                    "        out.append(type(e).__name__)\n"
                    "result = out")
    assert bad == ["TypeError", "ValueError", "ValueError"]
