"""Cached replica locations never yield wrong bytes.

A client keeps the replica list a get was granted (with its lease) and reads through it again
without asking the master while the lease lasts (docs/store.md, "Replica-location cache"). These
tests race what could free or replace those bytes against such reads from other processes:
removes (plain and forced), upserts, removes followed by a put of a new value, and fills that
make the master evict. Every value carries its key, a version and a checksum, so a reader can
tell a whole, right value from anything else; the writer's timeline then bounds which version a
read may return: one that was current at some moment during the read (an upsert or a forced
remove answers only once no cached location of the value it took away can start a read, so a
read that starts after it returned sees what it did), never another object's bytes. The cache's switch (MOONCAKE_REPLICA_CACHE_ENTRIES), a client's own writes and
a storage node's new incarnation are checked too."""

import signal

import pytest
from store_helpers import wait_for

# Short, so that upserts and forced removes, which wait out the cached locations of what they
# take away (at most the lease), leave the writer time for many of them.
LEASE_MS = 300

# Runs in the store worker processes (store_worker.py), sent as code. A value is
# key (64 bytes, NUL-padded) | version (8) | length (4) | body | sha256 of all that.
VALUE_CODE = r'''
import hashlib, random, struct, time
def make_value(key, version, size):
    head = key.encode().ljust(64, b"\0") + struct.pack("<QI", version, size)
    body = hashlib.sha256(head).digest() * (size // 32 + 1)
    body = body[:size - len(head) - 32]
    return head + body + hashlib.sha256(head + body).digest()
def check_value(key, data):
    """The version of a whole, right value of key; -1 for an empty read (a miss); raises on
    anything else."""
    data = bytes(data)
    if not data:
        return -1
    if len(data) < 108 or hashlib.sha256(data[:-32]).digest() != data[-32:]:
        raise ValueError(f"{key}: {len(data)} bytes that are not one whole value")
    if data[:64].rstrip(b"\0").decode() != key:
        raise ValueError(f"{key}: bytes of {data[:64].rstrip(bytes(1))!r}")
    version, size = struct.unpack("<QI", data[64:76])
    if size != len(data):
        raise ValueError(f"{key}: a value of {size} bytes read as {len(data)}")
    return version
def check_prefix(key, data):
    """The version of the value whose first 4096 bytes data holds (the body repeats a hash of
    the head, so a prefix checks itself); raises on anything else."""
    data = bytes(data)
    head = data[:76]
    if head[:64].rstrip(b"\0").decode(errors="replace") != key:
        raise ValueError(f"{key}: a prefix of {head[:64].rstrip(bytes(1))!r}")
    version, size = struct.unpack("<QI", head[64:76])
    body = hashlib.sha256(head).digest() * (4096 // 32 + 1)
    end = min(size - 32, len(data))  # a 4096-byte value ends with its checksum
    whole = size == len(data) and hashlib.sha256(data[:-32]).digest() == data[-32:]
    if size < len(data) or data[76:end] != body[:end - 76] or (size == len(data) and not whole):
        raise ValueError(f"{key}: {len(data)} bytes that are not a prefix of one value")
    return version
ns["make_value"] = make_value
ns["check_value"] = check_value
ns["check_prefix"] = check_prefix
result = 0
'''

WRITER_CODE = r'''
import random, time
make_value = ns["make_value"]
rng = random.Random(1)
keys = [f"k{i}" for i in range(NKEYS)]
version = {k: 0 for k in keys}
events = []  # (key, kind, version, start, end): kind "v" (this version current) or "gone"
fills = 0
for k in keys:
    version[k] = 1
    t0 = time.monotonic()
    assert store.put(k, make_value(k, 1, rng.choice(SIZES))) == 0
    events.append((k, "v", 1, t0, time.monotonic()))
deadline = time.monotonic() + SECONDS
while time.monotonic() < deadline:
    k = rng.choice(keys)
    op = rng.random()
    t0 = time.monotonic()
    if op < 0.4:  # upsert a new version
        v = version[k] + 1
        if store.upsert(k, make_value(k, v, rng.choice(SIZES))) == 0:
            version[k] = v
            events.append((k, "v", v, t0, time.monotonic()))
    elif op < 0.55:  # plain remove: refused while a reader holds a lease
        if store.remove(k) == 0:
            events.append((k, "gone", version[k], t0, time.monotonic()))
    elif op < 0.65:  # forced remove
        if store.remove(k, force=True) == 0:
            events.append((k, "gone", version[k], t0, time.monotonic()))
    elif op < 0.8:  # gone and put again: a new value, maybe at the old one's offsets
        if store.remove(k, force=True) == 0:
            events.append((k, "gone", version[k], t0, time.monotonic()))
        v = version[k] + 1
        t1 = time.monotonic()
        if store.put(k, make_value(k, v, rng.choice(SIZES))) == 0:
            version[k] = v
            events.append((k, "v", v, t1, time.monotonic()))
    else:  # fill the pool: the master evicts what no lease holds
        for _ in range(6):
            fills += 1
            store.put(f"fill{fills}", bytes([fills % 251]) * FILL)
result = {"events": events, "fills": fills}
'''

READER_CODE = r'''
import random, time
check_value = ns["check_value"]
rng = random.Random(SEED)
keys = [f"k{i}" for i in range(NKEYS)]
reads, misses, bad = [], 0, []
if MODE == "into":
    cap = max(SIZES)
    buf = (ctypes.c_ubyte * (cap * 4))()
    base = ctypes.addressof(buf)
    assert store.register_buffer(base, cap * 4) == 0
deadline = time.monotonic() + SECONDS
while time.monotonic() < deadline:
    if MODE == "get":
        ks = [rng.choice(keys)]
    else:
        ks = rng.sample(keys, 4)
    t0 = time.monotonic()
    if MODE == "get":
        got = [store.get(ks[0])]
    elif MODE == "batch":
        got = store.get_batch(ks)
    elif len(reads) % 2:
        n = store.batch_get_into(ks, [base + i * cap for i in range(4)], [cap] * 4)
        got = [ctypes.string_at(base + i * cap, n[i]) if n[i] > 0 else b"" for i in range(4)]
    else:  # the first 4 KiB of each, as two ranges (every value is at least that long)
        dsts = [base + i * cap + h for i in range(4) for h in (0, 2048)]
        n = store._get_ranges_raw(ks, [2] * 4, dsts, [0, 2048] * 4, [2048] * 8)
        got = [(ctypes.string_at(base + i * cap, 4096), "prefix")
               if n[2 * i] == n[2 * i + 1] == 2048 else b"" for i in range(4)]
    t1 = time.monotonic()
    for k, data in zip(ks, got):
        try:
            if isinstance(data, tuple):
                v = ns["check_prefix"](k, data[0])
            else:
                v = check_value(k, data)
        except ValueError as e:
            bad.append(str(e))
            continue
        if v < 0:
            misses += 1
        else:
            reads.append((k, v, t0, t1))
result = {"reads": reads, "misses": misses, "bad": bad[:20], "n_bad": len(bad)}
'''


def check_timeline(events, reads):
    """Every read version was published before the read ended, and was not yet replaced (or
    removed) when the read started: an upsert or a remove that has returned is seen by every read
    that starts after it, cached or not. Returns the reads that break that."""
    by_key = {}
    for k, kind, v, start, end in events:
        by_key.setdefault(k, []).append((kind, v, start, end))
    wrong = []
    for k, v, t0, t1 in reads:
        evs = by_key.get(k, [])
        pub = [e for e in evs if e[0] == "v" and e[1] == v]
        if not pub or pub[0][2] > t1:
            wrong.append((k, v, t0, t1, "never published before the read"))
            continue
        i = evs.index(pub[0])
        later = evs[i + 1:]
        if later and t0 > later[0][3]:
            wrong.append((k, v, t0, t1, f"replaced at {later[0][3]:.3f}, read after that"))
    return wrong


def setup_cluster(make_master, make_worker, env=None, master_flags=(), lease_ms=LEASE_MS):
    master = make_master(f"--default_kv_lease_ttl={lease_ms}", *master_flags)
    node = make_worker()
    node.setup(master, segment=8 << 20, buffer=0)
    clients = [make_worker(env=env) for _ in range(4)]
    for c in clients:
        c.setup(master, segment=0, buffer=16 << 20)
        assert c.run(VALUE_CODE) == 0
    return master, node, clients


def params(code, **kw):
    return "".join(f"{k} = {v!r}\n" for k, v in kw.items()) + code


# 300 ms: the readers' entries run out (a lease that short is not renewed); 2 s: the readers'
# client renews the entries of the keys they keep reading (docs/store.md, "Renewal"), so the
# race also runs against renewed locations.
@pytest.mark.parametrize("lease_ms", [LEASE_MS, 2000], ids=["short-lease", "renewed"])
def test_cached_reads_race_remove_evict_upsert_reput(make_master, make_worker, lease_ms):
    master, node, (writer, *readers) = setup_cluster(
        make_master, make_worker, lease_ms=lease_ms,
        master_flags=("--eviction_high_watermark_ratio=0.7", "--eviction_ratio=0.2"))
    common = dict(NKEYS=12, SIZES=[4096, 16384, 65536], SECONDS=8.0)
    gets_before = master.metric("total_get_nums_")
    writer.send(params(WRITER_CODE, FILL=256 << 10, **common))
    # "into": batch_get_into of whole values and ranged reads of their first 4 KiB, in turns.
    for i, (r, mode) in enumerate(zip(readers, ["get", "batch", "into"])):
        r.send(params(READER_CODE, SEED=i + 2, MODE=mode, **common))
    results = [r.reply() for r in readers]
    w = writer.reply()
    gets = master.metric("total_get_nums_") - gets_before

    assert [r["n_bad"] for r in results] == [0, 0, 0], [r["bad"] for r in results]
    reads = [x for r in results for x in r["reads"]]
    wrong = check_timeline(w["events"], reads)
    assert wrong == [], wrong[:10]
    # The race happened: values changed, went and came back, the pool was refilled, and the
    # readers read many values, most of them without asking the master.
    kinds = [e[1] for e in w["events"]]
    assert kinds.count("v") > 12 + 12 and kinds.count("gone") > 4, kinds
    assert w["fills"] > 20
    assert master.metric("master_evicted_key_count") > 0
    assert len(reads) > 300
    looked_up = len(reads) + sum(r["misses"] for r in results)
    assert gets < looked_up, (gets, looked_up)
    # Nothing committed was lost: every key reads as its last version, or is gone (removed, or
    # evicted by the fills), and the service still answers.
    last = {}
    for k, kind, v, _, _ in w["events"]:
        last[k] = v if kind == "v" else -1
    now = writer.run(f"result = {{k: ns['check_value'](k, store.get(k)) for k in {sorted(last)!r}}}")
    assert all(now[k] in (last[k], -1) for k in last), (now, last)


def test_switch_and_bad_values(make_master, make_worker):
    master = make_master("--default_kv_lease_ttl=10000")
    node = make_worker()
    node.setup(master, segment=16 << 20, buffer=0)
    on, off = make_worker(), make_worker(env={"MOONCAKE_REPLICA_CACHE_ENTRIES": "0"})
    for c in (on, off):
        c.setup(master, segment=0, buffer=8 << 20)
    assert on.run("result = store.put('sw', b'x' * 4096)") == 0
    ranges = ("buf = ctypes.create_string_buffer(4096); p = ctypes.addressof(buf); "
              "assert store.register_buffer(p, 4096) == 0; "
              "result = [store._get_ranges_raw(['sw'], [1], [p], [1024], [512])[0] "
              "for _ in range(50)]; store.unregister_buffer(p)")
    # the cache-off client first: the other's client renews its hot entry once more after its
    # reads, a lookup the master would count in a measurement that followed
    for c, most in ((off, 50), (on, 10)):
        for code, want in (("result = [len(store.get('sw')) for _ in range(50)]", [4096] * 50),
                           (ranges, [512] * 50)):
            before = master.metric("total_get_nums_")
            assert c.run(code) == want
            asked = master.metric("total_get_nums_") - before
            assert (asked <= most) if c is on else (asked == 50), asked
    # Bad values fail setup with a clear code, and the master serves on.
    for bad in ("many", "-1", str((1 << 22) + 1)):
        w = make_worker(env={"MOONCAKE_REPLICA_CACHE_ENTRIES": bad})
        rc = w.run(f"result = store.setup('127.0.0.1', 'P2PHANDSHAKE', 0, 1 << 20, 'tcp', '', "
                   f"{master.addr!r})")
        assert rc == -600, (bad, rc)  # INVALID_PARAMS
    assert off.run("result = len(store.get('sw'))") == 4096


def test_own_writes_drop_the_entry(make_master, make_worker):
    master = make_master("--default_kv_lease_ttl=10000")
    node = make_worker()
    node.setup(master, segment=16 << 20, buffer=0)
    c = make_worker()
    c.setup(master, segment=0, buffer=8 << 20)
    assert c.run(VALUE_CODE) == 0
    assert c.run("""
mv, cv = ns["make_value"], ns["check_value"]
out = []
assert store.put("own", mv("own", 1, 4096)) == 0
out.append(cv("own", store.get("own")))          # 1, and cached under a 10 s lease
assert store.upsert("own", mv("own", 2, 8192)) == 0
out.append(cv("own", store.get("own")))          # our own upsert: 2, not the cached 1
out.append(cv("own", store.get_batch(["own"])[0]))
out.append(store.remove("own"))                  # our own lease holds it: refused
assert store.remove("own", force=True) == 0
out.append(cv("own", store.get("own")))          # forced away by us: a miss, not 2's bytes
assert store.put("own", mv("own", 3, 4096)) == 0
out.append(cv("own", store.get("own")))
out.append(store.remove_all(True) >= 1)
out.append(cv("own", store.get("own")))
result = out
""") == [1, 2, 2, -706, -1, 3, True, -1]


HOT_READER_CODE = r'''
import time
cv = ns["check_value"]
keys = [f"hot{i}" for i in range(8)]
versions = set()
t0 = time.monotonic()
for _ in range(ROUNDS):
    for k in keys:
        versions.add(cv(k, store.get(k)))
    time.sleep(0.025)  # pacing: each key is read again every ~30 ms, well inside a window
result = {"versions": sorted(versions), "seconds": time.monotonic() - t0}
'''


def test_hot_keys_stay_cached(make_master, make_worker):
    """A key read over and over keeps its cached location: the client renews it in the
    background (docs/store.md, "Replica-location cache"), so its reads stop asking the master
    after the first, where without renewal each read after a window's end asks again. Values of
    64 KiB, so that a read that misses asks the master itself (a single GET_REPLICA_LIST) and a
    renewal shows as a batch. That renewed locations never return a value another client
    replaced or removed is what test_cached_reads_race_remove_evict_upsert_reput checks, with
    renewal on (the default) and readers that read their keys over and over."""
    master = make_master("--default_kv_lease_ttl=10000")
    node = make_worker()
    node.setup(master, segment=16 << 20, buffer=0)
    assert node.run(VALUE_CODE) == 0
    assert node.run("result = [store.put(f'hot{i}', ns['make_value'](f'hot{i}', 1, 65536)) "
                    "for i in range(8)]") == [0] * 8
    readers = {"on": make_worker(), "off": make_worker(env={"MC_STORE_CACHE_RENEW": "0"}),
               "bad value": make_worker(env={"MC_STORE_CACHE_RENEW": "sometimes"})}
    asked, renewed = {}, {}
    for name, r in readers.items():
        r.setup(master, segment=0, buffer=8 << 20)
        assert r.run(VALUE_CODE) == 0
        single = master.metric("master_get_replica_list_requests_total")
        batch = master.metric("master_batch_get_replica_list_items_total")
        got = r.run(params(HOT_READER_CODE, ROUNDS=40))
        assert got["versions"] == [1], (name, got)
        asked[name] = master.metric("master_get_replica_list_requests_total") - single
        renewed[name] = master.metric("master_batch_get_replica_list_items_total") - batch
    # 40 rounds take at least a second, several windows: without renewal each key went back to
    # the master about once a window; with it, each asked once and was renewed in batches.
    # (renewed["off"] is not 0 on a busy machine: the reader before it renews its last reads once
    # more, maybe late.)
    assert asked["off"] >= 3 * 8, asked
    assert asked["on"] <= asked["off"] // 2, asked
    assert renewed["on"] >= 8, renewed
    # an unusable value keeps the default (on), with a warning
    assert asked["bad value"] <= asked["off"] // 2 and renewed["bad value"] >= 8, (asked, renewed)


@pytest.mark.parametrize("fault", ["master_restart", "segment_expiry"])
def test_cached_read_across_a_new_incarnation(make_master, make_worker, fault):
    """A reader stops between its cached lookup and its read (a failpoint); meanwhile the node's
    segment gets a new incarnation and the node fills the same offsets with other objects. When
    the reader goes on, its read through the cached location must not return those bytes: the
    node refuses the old epoch, the read is too late for the entry anyway, and the get goes to
    the master, which no longer knows the key (a miss)."""
    # client_ttl 6 s: a loaded machine delaying a heartbeat must not expire the node a second time
    master = make_master("--client_ttl=6", "--default_kv_lease_ttl=30000")
    node = make_worker()
    node.setup(master, segment=16 << 20, buffer=0)
    reader = make_worker(env={"MC_FAILPOINTS": "store_get_cached=stop"})
    reader.setup(master, segment=0, buffer=16 << 20)
    for w in (node, reader):
        assert w.run(VALUE_CODE) == 0
    assert node.run("result = [store.put(f'g{i}', ns['make_value'](f'g{i}', 1, 65536)) "
                    "for i in range(8)]") == [0] * 8
    # The first get asks the master and keeps the location; the second stops on the cached one.
    reader.send("first = ns['check_value']('g3', store.get('g3')); "
                "result = [first, ns['check_value']('g3', store.get('g3'))]")
    assert wait_for(reader.stopped), "the reader did not reach its cached read"
    if fault == "master_restart":
        port = master.port
        master.stop()
        master.port = port
        master.start()
    else:
        node.signal(signal.SIGSTOP)
        assert wait_for(lambda: master.metric("mooncake_master_segments") == 0, timeout=60)
        node.signal(signal.SIGCONT)
    assert wait_for(lambda: master.metric("mooncake_master_segments") == 1, timeout=60)
    # New objects of other keys in the new incarnation, at the same offsets.
    assert node.run("result = [store.put(f'h{i}', ns['make_value'](f'h{i}', 1, 65536)) "
                    "for i in range(8)]") == [0] * 8
    reader.signal(signal.SIGCONT)
    assert reader.reply() == [1, -1]
    assert reader.run("result = [ns['check_value'](f'h{i}', x) for i, x in "
                      "enumerate(store.get_batch([f'h{i}' for i in range(8)]))]") == [1] * 8


def test_get_batch_of_large_values(make_master, make_worker):
    """get_batch reads values of 1 MiB or more straight into their results (sized through the
    cache); small values, misses, a value larger than the staging buffer and another client's
    upsert to a new size come out right too, with the cache on and off."""
    master = make_master()
    node = make_worker()
    node.setup(master, segment=64 << 20, buffer=0)
    on, off = make_worker(), make_worker(env={"MOONCAKE_REPLICA_CACHE_ENTRIES": "0"})
    for c in (on, off):
        c.setup(master, segment=0, buffer=4 << 20)
        assert c.run(VALUE_CODE) == 0
    sizes = {"L1": 2 << 20, "s1": 4096, "L2": 3 << 20 | 5, "L3": 5 << 20}  # L3: past staging
    assert on.run("result = [store.put(k, ns['make_value'](k, 1, n)) for k, n in "
                  f"{sorted(sizes.items())!r}]") == [0] * 4
    keys = ["L1", "s1", "missing", "L2", "L3", "L1"]
    want = [1, 1, -1, 1, 1, 1]
    for c in (on, off):
        got = c.run(f"result = [ns['check_value'](k, v) for k, v in zip({keys!r}, "
                    f"store.get_batch({keys!r}))]")
        assert got == want
    # Another client upserts L2 to another size while the reader holds its location: the old
    # value, whole, until that location lapses (within about 1 s), then the new one.
    assert on.run(f"result = [len(x) for x in store.get_batch({keys!r})]")[3] == sizes["L2"]
    assert node.run(VALUE_CODE) == 0
    assert node.run("result = store.upsert('L2', ns['make_value']('L2', 2, 1 << 21))") == 0
    assert on.run("result = ns['check_value']('L2', store.get_batch(['L2', 'L1'])[0])") in (1, 2)
    assert wait_for(lambda: on.run("result = ns['check_value']('L2', store.get_batch(['L2'])[0])")
                    == 2, timeout=5)
    assert on.run("result = store.get_batch([])") == []
