"""Every method of ``MooncakeDistributedStore`` written in Python, in one place.

The native type (``mooncake._store``, built from mooncake-integration/store) defines the calls
that reach the C client. The methods here give the reference's shapes over them: replica
descriptor objects, nested range lists, task ids, tensors, and a few conveniences. ``attach``
adds every one of them to the type, once, when ``mooncake.store`` is imported; ``METHODS`` lists
them. ``mooncake/_store.pyi`` stubs the type with both kinds, and
``python/tests/unit/test_stubs.py`` checks that stub against ``dir()`` of the live type.

The tensor methods' bodies stay in ``_tensor.py`` beside the byte layout they share (1,300
lines); they are named here like the others, and their upsert forms are made here. Error codes
come from the C error table (``mooncake._store.ERR_*``), never from numbers written here.
"""

from mooncake import _store
from mooncake.store import _tensor
from mooncake.store._extras import Descriptor, DiskDescriptor, LocalDiskDescriptor, MemoryDescriptor
from mooncake.store._extras import ReplicaDescriptor
from mooncake.store._tasks import QueryTaskResponse, TaskType

_INVALID_PARAMS = _store.ERR_INVALID_PARAMS

# ---- replica descriptors ----


def _descriptor(endpoint, addr, size, status, is_disk, file_path):
    if is_disk == 2:  # a file of the shared directory (the reference's DISK replica)
        return ReplicaDescriptor(status, None, DiskDescriptor(file_path, size))
    if is_disk:
        return ReplicaDescriptor(status, None, LocalDiskDescriptor(endpoint, size))
    return ReplicaDescriptor(status, MemoryDescriptor(Descriptor(size, addr, endpoint)))


def _descriptors(raw):
    code, reps = raw
    return [_descriptor(*r) for r in reps] if code == 0 else []


def get_replica_desc(self, key):
    """The replicas of ``key`` (a list of ReplicaDescriptor; empty when it is missing). Asking
    grants a lease, as a get does."""
    return _descriptors(self.batch_replica_desc_raw([key])[0])


def batch_get_replica_desc(self, keys):
    """``{key: [ReplicaDescriptor, ...]}`` for every key, in one master round trip (an empty
    list for a missing key)."""
    keys = list(keys)
    return {k: _descriptors(r) for k, r in zip(keys, self.batch_replica_desc_raw(keys))}


# ---- ranged reads and put-session writes ----
#
# ``_get_ranges_raw(keys, counts, dsts, src_offsets, sizes)`` reads every range of every key after
# one master round trip (``mc_store_batch_get_ranges``), and ``_put_ranges_raw`` writes into open
# put sessions the same way; the methods here only flatten the reference's nested lists and nest
# the results back. A key whose range lists differ in length gets INVALID_PARAMS and reaches no
# one, as in the reference.


def _flat(keys, *per_key):
    """Per key i, the lists per_key[0][i], per_key[1][i], ... (one entry per range) ->
    (ok_keys, counts, the flat lists concatenated, which): only keys whose lists agree in length
    are kept; ``which`` gives each kept key's index."""
    ok_keys, counts, flat, which = [], [], [[] for _ in per_key], []
    for i, (key, *lists) in enumerate(zip(keys, *per_key)):
        lists = [list(x) for x in lists]
        if any(len(x) != len(lists[0]) for x in lists):
            continue
        ok_keys.append(key)
        counts.append(len(lists[0]))
        for into, x in zip(flat, lists):
            into += x
        which.append(i)
    return ok_keys, counts, flat, which


def _get_ranges(store, keys, dsts, offs, sizes):
    """Per entry i: (dst addresses, source offsets, sizes) -> flat call; returns per-entry
    result lists (``None`` marks a mismatched entry)."""
    ok_keys, counts, (flat_d, flat_o, flat_s), which = _flat(keys, dsts, offs, sizes)
    flat = store._get_ranges_raw(ok_keys, counts, flat_d, flat_o, flat_s) if ok_keys else []
    out, at = [None] * len(keys), 0
    for i, n in zip(which, counts):
        out[i] = flat[at:at + n]
        at += n
    return out


def get_into_ranges(self, buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets, all_sizes):
    """Byte ranges of several objects into several registered buffers, buffer-major:
    ``all_keys[b]`` are the keys read into ``buffer_ptrs[b]``; for key ``k`` of buffer ``b``,
    range ``r`` copies ``all_sizes[b][k][r]`` bytes from object offset
    ``all_src_offsets[b][k][r]`` to ``buffer_ptrs[b] + all_dst_offsets[b][k][r]``.

    Returns the same nesting: each range's byte count, or a negative code (OBJECT_NOT_FOUND;
    INVALID_PARAMS for a range past the object's end or past the end of the registered buffer
    it starts in). A key whose three range lists differ in length gets ``[-600]``; lists of
    buffers or keys that differ in length give ``[-600]`` for each buffer's keys.
    """
    buffer_ptrs = list(buffer_ptrs)
    all_keys = [list(k) for k in all_keys]
    if not (len(buffer_ptrs) == len(all_keys) == len(all_dst_offsets) == len(all_src_offsets)
            == len(all_sizes)):
        return [[[_INVALID_PARAMS] for _ in keys] for keys in all_keys]
    keys, dsts, offs, sizes, shape = [], [], [], [], []
    for b, base in enumerate(buffer_ptrs):
        kb, db, ob, sb = all_keys[b], all_dst_offsets[b], all_src_offsets[b], all_sizes[b]
        if not (len(kb) == len(db) == len(ob) == len(sb)):
            shape.append(-len(kb) - 1)  # every key of this buffer: INVALID_PARAMS
            continue
        shape.append(len(kb))
        for key, d, o, s in zip(kb, db, ob, sb):
            keys.append(key)
            dsts.append([base + x for x in d])
            offs.append(o)
            sizes.append(s)
    flat = _get_ranges(self, keys, dsts, offs, sizes)
    out, at = [], 0
    for b, n in enumerate(shape):
        if n < 0:
            out.append([[_INVALID_PARAMS] for _ in all_keys[b]])
            continue
        out.append([r if r is not None else [_INVALID_PARAMS] for r in flat[at:at + n]])
        at += n
    return out


def batch_get_into_multi_buffer_ranges(self, keys, all_buffer_ptrs, all_sizes, all_src_offsets):
    """For each key, ranges of the object into several buffers: ``all_sizes[i][j]`` bytes from
    offset ``all_src_offsets[i][j]`` to ``all_buffer_ptrs[i][j]``. One result per key: the bytes
    read, or a negative code (the first failing range's; INVALID_PARAMS for mismatched lists).
    No get session is needed here (the reference requires ``batch_get_session_start`` first;
    here that call only checks the keys and takes their leases)."""
    keys = list(keys)
    if not (len(keys) == len(all_buffer_ptrs) == len(all_sizes) == len(all_src_offsets)):
        return [_INVALID_PARAMS] * len(keys)
    results = []
    for rs in _get_ranges(self, keys, all_buffer_ptrs, all_src_offsets, all_sizes):
        if rs is None:
            results.append(_INVALID_PARAMS)
            continue
        bad = [r for r in rs if r < 0]
        results.append(bad[0] if bad else sum(rs))
    return results


def batch_get_session_start(self, keys):
    """Looks the keys up once (taking their leases, as a get does): 0 per key found, else its
    code. Reads need no session here; it exists so code written for the reference runs."""
    return [code for code, _ in self.batch_replica_desc_raw(list(keys))]


def batch_get_session_end(self, keys):
    """Ends a get session: it holds nothing (leases lapse by themselves), so this answers 0."""
    list(keys)
    return 0


def batch_put_from_multi_buffer_ranges(self, keys, all_buffer_ptrs, all_sizes, all_dst_offsets):
    """Writes into open put sessions (``batch_put_session_start``): for key ``i``, range ``j``
    copies ``all_sizes[i][j]`` bytes from ``all_buffer_ptrs[i][j]`` to offset
    ``all_dst_offsets[i][j]`` of the object. One result per key: the bytes written, or a
    negative code (INVALID_PARAMS for a key without an open session, mismatched lists, or a
    range past the object's end; then none of that key's ranges is written). All keys' ranges
    move together; call it as often as needed before ``batch_put_session_end``."""
    keys = list(keys)
    if not (len(keys) == len(all_buffer_ptrs) == len(all_sizes) == len(all_dst_offsets)):
        return [_INVALID_PARAMS] * len(keys)
    ok_keys, counts, (srcs, lens, offs), which = _flat(keys, all_buffer_ptrs, all_sizes,
                                                       all_dst_offsets)
    out = [_INVALID_PARAMS] * len(keys)
    if ok_keys:
        for i, r in zip(which, self._put_ranges_raw(ok_keys, counts, srcs, offs, lens)):
            out[i] = r
    return out


# ---- replica copy and move tasks (mc_store_create_copy_task / _move_task / query_task) ----
#
# Task ids are the reference's UUID tuples ``(hi, lo)``; a failed create answers
# ``((0, 0), code)`` and a failed query ``(None, code)``.


def _targets(targets):
    if isinstance(targets, (str, bytes)):
        raise TypeError("targets must be a list of segment names, not a single string")
    return list(targets)


def create_copy_task(self, key, targets):
    """Copies the object to the target segments (names as ``get_hostname()`` gives them).
    Returns ``(task_id, 0)``, or ``((0, 0), code)``: OBJECT_NOT_FOUND (-704), INVALID_PARAMS
    (-600: an unknown segment, no targets, more than 8 replicas), OBJECT_HAS_REPLICATION_TASK
    (-708). The copy runs on the client that owns a replica; poll ``query_task``."""
    hi, lo, code = self._create_task_raw(int(TaskType.REPLICA_COPY), key, None, _targets(targets))
    return (hi, lo), code


def create_move_task(self, key, source, target):
    """Moves the object's replica on segment ``source`` to segment ``target``. Returns as
    ``create_copy_task``; INVALID_PARAMS also when source holds no replica or equals target."""
    hi, lo, code = self._create_task_raw(int(TaskType.REPLICA_MOVE), key, source, [target])
    return (hi, lo), code


def query_task(self, task_id):
    """``(QueryTaskResponse, 0)``, or ``(None, code)``: TASK_NOT_FOUND (-1400)."""
    try:
        hi, lo = task_id
    except (TypeError, ValueError):
        raise TypeError(f"task_id must be a (hi, lo) tuple, not {task_id!r}") from None
    code, ttype, status, created, updated, chi, clo, msg = self._query_task_raw(hi, lo)
    if code != 0:
        return None, code
    return QueryTaskResponse((hi, lo), ttype, status, created, updated, (chi, clo), msg), 0


# ---- smaller parts of the reference's surface, over calls the store has ----


def put_from_with_metadata(self, key, buffer_ptr, metadata_buffer_ptr, size, metadata_size,
                           config=None):
    """Stores ``metadata_size`` bytes at ``metadata_buffer_ptr`` followed by ``size`` bytes at
    ``buffer_ptr`` as one object, moved from both places without a copy when they are
    registered: 0 or a negative code. A zero ``size`` stores nothing and answers 0, as the
    reference's does."""
    if size == 0:
        return 0
    ptrs, sizes = [metadata_buffer_ptr, buffer_ptr], [metadata_size, size]
    if metadata_size == 0:
        ptrs, sizes = ptrs[1:], sizes[1:]
    return self.batch_put_from_multi_buffers([key], [ptrs], [sizes], config)[0]


def get_offload_rpc_read_count(self):
    """Objects this client read from a storage node's disk tier (LOCAL_DISK copies, served by
    the node that owns them) since setup."""
    return self.disk_read_count()


def init_all(self, protocol, device_name, mount_segment_size=16 << 20):
    """The reference's one-call setup with its fixed choices: segment name ``localhost:12345``,
    Transfer Engine metadata on the etcd at ``127.0.0.1:2379``, a ``mount_segment_size``-byte
    global segment, a 1 GiB local buffer, the master at ``127.0.0.1:50051``. 0, or setup's code;
    INVALID_PARAMS when this store is set up already, as the reference answers."""
    rc = self.setup("localhost:12345", "127.0.0.1:2379", mount_segment_size, 1 << 30, protocol,
                    device_name)
    return _INVALID_PARAMS if rc == _store.ERR_UNAVAILABLE_IN_CURRENT_STATUS else rc


# ---- tensors (bodies in _tensor.py) ----

_TENSOR_METHODS = (
    _tensor.put_tensor, _tensor.batch_put_tensor, _tensor.get_tensor, _tensor.batch_get_tensor,
    _tensor.get_tensor_into, _tensor.batch_get_tensor_into, _tensor.put_tensor_from,
    _tensor.batch_put_tensor_from, _tensor.put_tensor_with_tp, _tensor.batch_put_tensor_with_tp,
    _tensor.get_tensor_with_tp, _tensor.batch_get_tensor_with_tp, _tensor.get_tensor_with_tp_into,
    _tensor.batch_get_tensor_with_tp_into, _tensor.put_tensor_with_tp_from,
    _tensor.batch_put_tensor_with_tp_from, _tensor.pub_tensor, _tensor.batch_pub_tensor,
    _tensor.pub_tensor_with_tp, _tensor.batch_pub_tensor_with_tp,
    _tensor.save_tensor_to_safetensor, _tensor.load_tensor_from_safetensor,
    _tensor.put_tensor_with_parallelism, _tensor.batch_put_tensor_with_parallelism,
    _tensor.put_tensor_with_parallelism_from, _tensor.batch_put_tensor_with_parallelism_from,
    _tensor.get_tensor_with_parallelism, _tensor.batch_get_tensor_with_parallelism,
    _tensor.get_tensor_with_parallelism_into, _tensor.batch_get_tensor_with_parallelism_into,
)

# The upsert forms, under the reference's names (upsert for put, upsert_pub for pub): each is its
# put form with every store write replacing an existing value.
_TENSOR_UPSERTS = tuple(_tensor.upsert_form(f) for f in (
    _tensor.put_tensor, _tensor.put_tensor_from, _tensor.batch_put_tensor,
    _tensor.batch_put_tensor_from, _tensor.pub_tensor, _tensor.batch_pub_tensor,
    _tensor.put_tensor_with_parallelism, _tensor.put_tensor_with_parallelism_from,
    _tensor.batch_put_tensor_with_parallelism, _tensor.batch_put_tensor_with_parallelism_from,
))

METHODS = (
    get_replica_desc, batch_get_replica_desc,
    get_into_ranges, batch_get_into_multi_buffer_ranges, batch_get_session_start,
    batch_get_session_end, batch_put_from_multi_buffer_ranges,
    create_copy_task, create_move_task, query_task,
    put_from_with_metadata, get_offload_rpc_read_count, init_all,
) + _TENSOR_METHODS + _TENSOR_UPSERTS


def attach(cls):
    """Adds every method of METHODS to cls (the native MooncakeDistributedStore), by name."""
    for fn in METHODS:
        setattr(cls, fn.__name__, fn)
