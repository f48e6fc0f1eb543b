"""Data through the store between processes: sizes 0 B..64 MiB, batches, zero copy."""

import pytest

SIZES = [1, 1024, 1 << 20, 64 << 20]


@pytest.mark.parametrize("size", SIZES)
def test_put_on_pure_client_get_on_storage_client(cluster, size):
    master, storage, pure, names = cluster
    key = f"obj-{size}"
    digest = pure.run(f"v = pattern({size}, 'p{size}'); result = [store.put({key!r}, v), sha(v)]")
    assert digest[0] == 0
    for reader in (storage[1], pure):
        got = reader.run(f"b = store.get({key!r}); result = [len(b), sha(b)]")
        assert got == [size, digest[1]]
    assert storage[0].run(f"result = store.get_size({key!r})") == size
    assert storage[0].run(f"result = store.is_exist({key!r})") == 1


def test_zero_size_value_is_refused(cluster):
    _, storage, pure, _ = cluster
    # As the reference's master: a zero-size object is INVALID_PARAMS and nothing is stored.
    assert pure.run("result = store.put('empty', b'')") == -600
    assert pure.run("result = store.put_parts('empty')") == -600
    assert storage[0].run("result = store.is_exist('empty')") == 0
    assert storage[0].run("result = store.get('empty') == b''") is True


def test_miss(cluster):
    _, storage, pure, _ = cluster
    assert pure.run("result = [store.get('missing') == b'', store.get_buffer('missing'),"
                    " store.is_exist('missing'), store.get_size('missing'),"
                    " store.remove('missing')]") == [True, None, 0, -704, -704]


def test_batches(cluster):
    _, storage, pure, _ = cluster
    sizes = [1, 4096, 300_000, 2 << 20]
    keys = [f"batch-{i}" for i in range(len(sizes))]
    digests = pure.run(
        f"vals = [pattern(n, 'b' + str(n)) for n in {sizes}];"
        f"rc = store.put_batch({keys!r}, vals);"
        "result = [rc, [sha(v) for v in vals]]")
    assert digests[0] == 0
    got = storage[0].run(f"result = [sha(b) for b in store.get_batch({keys!r} + ['nope'])]")
    assert got[:-1] == digests[1]
    assert got[-1] == storage[0].run("result = sha(b'')")
    assert storage[1].run(f"result = store.batch_is_exist({keys!r} + ['nope'])") == [1, 1, 1, 1, 0]
    bufs = storage[1].run(
        f"bs = store.batch_get_buffer({keys!r} + ['nope']);"
        "result = [None if b is None else [len(b), sha(memoryview(b))] for b in bs]")
    assert bufs[-1] is None
    assert [b[1] for b in bufs[:-1]] == digests[1]
    assert [b[0] for b in bufs[:-1]] == sizes
    # put_parts: the value is the concatenation of the parts.
    d = pure.run("parts = [pattern(1000, 'x'), pattern(70000, 'y'), b'z'];"
                 "result = [store.put_parts('parts', *parts), sha(b''.join(parts))]")
    assert d[0] == 0
    assert storage[0].run("result = sha(store.get('parts'))") == d[1]
    # Leases from the reads above block a plain remove; force removes anyway.
    assert storage[0].run(f"result = store.batch_remove({keys!r})") == [-706] * 4
    assert storage[0].run(f"result = store.batch_remove({keys!r}, force=True)") == [0] * 4
    assert storage[0].run(f"result = store.batch_is_exist({keys!r})") == [0] * 4


def test_existing_key_keeps_its_first_value(cluster):
    # The reference's convention: putting a key again succeeds and changes nothing.
    _, _, pure, _ = cluster
    assert pure.run("result = store.put('dup', b'one')") == 0
    assert pure.run("result = store.put('dup', b'two')") == 0
    assert pure.run("result = store.get('dup') == b'one'") is True
    assert pure.run("result = store.put_batch(['dup', 'dup-new'], [b'three', b'new'])") == 0
    assert pure.run("result = [store.get('dup') == b'one', store.get('dup-new') == b'new']") == \
        [True, True]


PLAIN_KINDS = """
sizes = [1, (16 << 10) - 1, 16 << 10, 64 << 10, (1 << 20) + 1]
keys = ['pk-%d' % n for n in sizes]
vals = [pattern(n, 'pk%d' % n) for n in sizes]
# memoryviews that start inside one larger bytearray, at odd offsets
big = bytearray(b'xyz') + bytearray(b''.join(vals))
views, off = [], 3
for v in vals:
    views.append(memoryview(big)[off:off + len(v)])
    off += len(v)
r = [store.put_batch(keys, views)]
r.append([store.put('pk1-%d' % i, bytearray(v)) for i, v in enumerate(vals)])
got = store.get_batch(keys + ['nope'] + keys)
r.append([g == v for g, v in zip(got, vals + [b''] + vals)])
r.append(all(type(g) is bytes for g in got))
r.append([store.get('pk1-%d' % i) == v for i, v in enumerate(vals)])
r.append(big[3:] == b''.join(vals))  # the sources are left as they were
result = r
"""


def test_plain_memory_of_every_kind(cluster):
    # Plain (unregistered) memory of every kind moves straight between the caller's objects and
    # the replicas over tcp, with no staging copy: values on both sides of the size from which
    # get_batch reads into its bytes objects directly, memoryviews at odd offsets, a miss in
    # the middle of a batch, and the same key twice in one get_batch.
    _, storage, pure, _ = cluster
    n = 5
    assert pure.run(PLAIN_KINDS) == [0, [0] * n, [True] * (2 * n + 1), True, [True] * n, True]
    # another process reads the same bytes
    assert storage[1].run("result = [store.get('pk-%d' % n) == pattern(n, 'pk%d' % n)"
                          " for n in [1, (16 << 10) - 1, 16 << 10, 64 << 10, (1 << 20) + 1]]"
                          ) == [True] * n


ZERO_COPY = """
n = {n}
src = (ctypes.c_char * (n + 4096))()
dst = (ctypes.c_char * (n + 4096))()
sa, da = ctypes.addressof(src), ctypes.addressof(dst)
ctypes.memmove(sa, pattern(n, 'zc'), n)
assert store.register_buffer(sa, n + 4096) == 0
assert store.register_buffer(da, n + 4096) == 0
r = [store.put_from('zc-{n}', sa, n)]
r.append(store.get_into('zc-{n}', da, n + 4096))
r.append(sha(dst.raw[:n]) == sha(pattern(n, 'zc')))
r.append(store.get_into('zc-{n}', da, n - 1))       # too small: an error, not a truncation
# batches from/into the registered buffers: two objects of n//2 each
h = n // 2
r.append(store.batch_put_from(['zc-a-{n}', 'zc-b-{n}'], [sa, sa + h], [h, n - h]))
ctypes.memset(da, 0, n)
r.append(store.batch_get_into(['zc-a-{n}', 'zc-b-{n}', 'nope'], [da, da + h, da], [h, n - h, 8]))
r.append(dst.raw[:n] == pattern(n, 'zc'))
# multi buffers: one object from three pieces, read back into two
r.append(store.batch_put_from_multi_buffers(['zc-m-{n}'], [[sa, sa + 10, sa + 100]],
                                            [[10, 90, n - 100]]))
ctypes.memset(da, 0, n)
r.append(store.batch_get_into_multi_buffers(['zc-m-{n}'], [[da, da + 7]], [[7, n - 7 + 100]]))
r.append(dst.raw[:n] == pattern(n, 'zc'))
# unregistered memory works too, through the staging buffer
plain = ctypes.create_string_buffer(n)
r.append(store.get_into('zc-{n}', ctypes.addressof(plain), n))
r.append(plain.raw == pattern(n, 'zc'))
r.append(store.unregister_buffer(sa))
r.append(store.unregister_buffer(sa) < 0)
store.unregister_buffer(da)
result = r
"""


@pytest.mark.parametrize("n", [4096, 3 << 20])
def test_zero_copy_registered_buffers(cluster, n):
    _, storage, pure, _ = cluster
    r = pure.run(ZERO_COPY.format(n=n))
    assert r == [0, n, True, -10, [0, 0], [n // 2, n - n // 2, -704], True, [0], [n], True, n,
                 True, 0, True]
    # another process sees the same bytes
    assert storage[1].run(f"result = sha(store.get('zc-m-{n}')) == sha(pattern({n}, 'zc'))")


def test_replicas_on_distinct_segments_and_preferred(cluster):
    master, storage, pure, names = cluster
    cfg = f"ReplicateConfig(replica_num=1, preferred_segment={names[1]!r})"
    assert pure.run(f"result = store.put('pref', pattern(5000, 'pref'), config={cfg})") == 0
    import json
    info = json.loads(master.http("/query_key?key=pref"))
    assert names[1] in json.dumps(info)
