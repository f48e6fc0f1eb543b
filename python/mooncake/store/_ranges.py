"""Ranged reads and put-session writes with the reference's nested argument shapes, over the
flat C calls.

``MooncakeDistributedStore._get_ranges_raw(keys, counts, dsts, src_offsets, sizes)`` reads every
range of every key after one master round trip (``mc_store_batch_get_ranges``); this module only
flattens the reference's lists and nests the results back. A key whose three lists differ in
length gets ``[INVALID_PARAMS]`` and reaches no one, as in the reference.
"""

_INVALID_PARAMS = -600


def _flatten(store, keys, dsts, offs, sizes):
    """Per entry i: (dst addresses, source offsets, sizes) -> flat call; returns per-entry
    result lists (``None`` marks a mismatched entry)."""
    ok_keys, counts, flat_d, flat_o, flat_s, which = [], [], [], [], [], []
    out = [None] * len(keys)
    for i, (key, d, o, s) in enumerate(zip(keys, dsts, offs, sizes)):
        d, o, s = list(d), list(o), list(s)
        if not (len(d) == len(o) == len(s)):
            continue
        ok_keys.append(key)
        counts.append(len(d))
        flat_d += d
        flat_o += o
        flat_s += s
        which.append(i)
    flat = store._get_ranges_raw(ok_keys, counts, flat_d, flat_o, flat_s) if ok_keys else []
    at = 0
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
    flat = _flatten(self, keys, dsts, offs, sizes)
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
    for rs in _flatten(self, keys, all_buffer_ptrs, all_src_offsets, all_sizes):
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
    ok_keys, counts, srcs, offs, lens, which = [], [], [], [], [], []
    out = [_INVALID_PARAMS] * len(keys)
    for i, (key, p, s, o) in enumerate(zip(keys, all_buffer_ptrs, all_sizes, all_dst_offsets)):
        p, s, o = list(p), list(s), list(o)
        if not (len(p) == len(s) == len(o)):
            continue
        ok_keys.append(key)
        counts.append(len(p))
        srcs += p
        offs += o
        lens += s
        which.append(i)
    if ok_keys:
        for i, r in zip(which, self._put_ranges_raw(ok_keys, counts, srcs, offs, lens)):
            out[i] = r
    return out


def attach(cls):
    for fn in (get_into_ranges, batch_get_into_multi_buffer_ranges, batch_get_session_start,
               batch_get_session_end, batch_put_from_multi_buffer_ranges):
        setattr(cls, fn.__name__, fn)
