"""The disk tier with real processes: a master with --enable_offload, storage nodes
(mooncake_client --root_fs_dir) on tmpfs and on ext4, and a pure client that fills the pool past
its memory with 1 MiB objects and reads every one back by checksum, from disk where it was
offloaded. Also: removal and overwrite free disk space, a node killed with SIGKILL in the middle
of its writes comes back with everything intact (and nothing torn or corrupt is served),
promotion on hit, the disk limit under ten times its size of churn, offload_on_evict, and what
users and peers get wrong."""

import json
import os
import signal
import socket
import struct
import subprocess
import tempfile
import time

import pytest
from node_helpers import Node, run_client
from store_helpers import wait_for
from store_worker import sha

MIB = 1 << 20
OBJECT_NOT_FOUND = -704

# Where the tiers live: a tmpfs and an ext4 directory (the build host's disk; skipped where the
# file system is not what the name says, so a pass always means that file system was used).
FILESYSTEMS = {"tmpfs": "/dev/shm", "ext4": os.environ.get("MC_TEST_EXT4_DIR", "/tmp")}


def fs_type(path):
    out = subprocess.run(["df", "--output=fstype", path], capture_output=True, text=True)
    return out.stdout.split()[-1] if out.returncode == 0 else ""


@pytest.fixture(params=sorted(FILESYSTEMS))
def disk_dir(request):
    base = FILESYSTEMS[request.param]
    if fs_type(base) != request.param:
        pytest.skip(f"{base} is {fs_type(base)!r}, not {request.param}")
    with tempfile.TemporaryDirectory(prefix="mc-disk-", dir=base) as d:
        yield os.path.join(d, "tier")


def disk_node(master, root, capacity="256mb", segment="32mb", extra=(), env=None):
    return Node(master, segment=segment, http=True, env=env,
                extra=[f"--root_fs_dir={root}", f"--disk_capacity={capacity}", *extra])


def start(make_master, make_worker, root, master_flags=(), **node_kw):
    # Short leases: a reader's lease would keep objects in memory (unevictable) for 10 s.
    master = make_master("--enable_offload", "--default_kv_lease_ttl=200", "--client_ttl=3",
                         *master_flags)
    node = disk_node(master, root, **node_kw)
    pure = make_worker()
    pure.setup(master, segment=0)
    return master, node, pure


def put_many(worker, prefix, n, size=MIB):
    """Puts n objects of size bytes; their checksums."""
    return worker.run(
        f"out = []\n"
        f"for i in range({n}):\n"
        f"    v = pattern({size}, '{prefix}' + str(i))\n"
        f"    rc = store.put('{prefix}' + str(i), v)\n"
        f"    assert rc == 0, (i, rc)\n"
        f"    out.append(sha(v))\n"
        f"result = out")


def read_all(worker, prefix, n):
    """[(size, sha)] of each object as get() returns it."""
    return worker.run(
        f"result = [[len(b), sha(b)] for b in "
        f"(store.get('{prefix}' + str(i)) for i in range({n}))]")


def where(worker, keys):
    """{key: sorted replica types} ('MEMORY', 'LOCAL_DISK')."""
    return worker.run(
        f"d = store.batch_get_replica_desc({list(keys)!r})\n"
        f"result = {{k: sorted(r.type.name for r in v) for k, v in d.items()}}")


def node_metric(node, name):
    return node.metric(name)


def test_fill_past_memory_and_read_everything_back(make_master, make_worker, disk_dir):
    master, node, pure = start(make_master, make_worker, disk_dir)
    try:
        n = 96  # three times the node's 32 MiB of memory
        digests = put_many(pure, "fill", n)
        assert wait_for(lambda: master.metric("mooncake_disk_offloads_total") >= n, 20)
        got = read_all(pure, "fill", n)
        assert got == [[MIB, d] for d in digests]
        places = where(pure, [f"fill{i}" for i in range(n)])
        disk_only = [k for k, v in places.items() if v == ["LOCAL_DISK"]]
        # Most objects left memory (the pool holds 32 at most) and were read from disk.
        assert len(disk_only) >= n - 32, places
        assert all("LOCAL_DISK" in v for v in places.values())
        assert node_metric(node, "mooncake_disk_reads_total") >= len(disk_only)
        # The zero-copy forms find disk replicas too.
        keys = disk_only[:4]
        assert pure.run(
            f"buf = ctypes.create_string_buffer({4 * MIB}); a = ctypes.addressof(buf)\n"
            f"assert store.register_buffer(a, {4 * MIB}) == 0\n"
            f"rs = store.batch_get_into({keys!r}, [a + i * {MIB} for i in range(4)], "
            f"[{MIB}] * 4)\n"
            f"part = [sha(ctypes.string_at(a + i * {MIB}, {MIB})) for i in range(4)]\n"
            f"one = store.get_into({keys[0]!r}, a, {MIB})\n"
            f"store.unregister_buffer(a)\n"
            f"result = [rs, one, part]"
        ) == [[MIB] * 4, MIB, [digests[int(k[4:])] for k in keys]]
        assert pure.run(f"result = store.get_size({keys[0]!r})") == MIB
        assert pure.run(f"result = store.is_exist({keys[0]!r})") == 1
        # Bytes on disk stay under the limit.
        assert node_metric(node, "mooncake_disk_used_bytes") <= 256 * MIB
    finally:
        node.stop()


def test_remove_and_overwrite_free_disk_space(make_master, make_worker, disk_dir):
    master, node, pure = start(make_master, make_worker, disk_dir)
    try:
        n = 48
        put_many(pure, "rm", n)
        assert wait_for(lambda: node_metric(node, "mooncake_disk_objects") >= n, 20)
        used = node_metric(node, "mooncake_disk_live_bytes")
        assert used >= n * MIB
        # Remove half: their disk copies go (also those only on disk).
        assert pure.run(f"result = [store.remove('rm' + str(i)) for i in range(0, {n}, 2)]") == \
            [0] * (n // 2)
        assert wait_for(lambda: node_metric(node, "mooncake_disk_objects") == n // 2, 10)
        assert node_metric(node, "mooncake_disk_live_bytes") < used
        assert pure.run("result = [len(store.get('rm0')), store.is_exist('rm0')]") == [0, 0]
        # Overwrite a disk-only object: the new value is read, the old copy is gone from disk.
        key = "rm1"
        assert pure.run(f"result = store.upsert({key!r}, pattern({MIB}, 'new'))") == 0
        assert pure.run(f"result = sha(store.get({key!r}))") == \
            pure.run(f"result = sha(pattern({MIB}, 'new'))")
        # remove_all takes what only the disk holds as well (once the get's lease has passed).
        time.sleep(0.4)
        removed = pure.run("result = store.remove_all()")
        assert removed == n // 2
        assert wait_for(lambda: node_metric(node, "mooncake_disk_objects") == 0, 10)
        assert wait_for(lambda: node_metric(node, "mooncake_disk_used_bytes") == 0, 10)
        assert pure.run("result = len(store.get('rm3'))") == 0
    finally:
        node.stop()


def bucket_files(root):
    return sorted(os.path.join(root, f) for f in os.listdir(root) if f.endswith(".mcb"))


def bucket_bytes(root):
    """Bytes the bucket files take now. A bucket the node's compaction unlinks between the
    listing and its stat takes none."""
    total = 0
    for f in bucket_files(root):
        try:
            total += os.path.getsize(f)
        except FileNotFoundError:
            pass
    return total


def test_kill9_mid_write_then_restart(make_master, make_worker, disk_dir):
    master, node, pure = start(make_master, make_worker, disk_dir, capacity="512mb",
                               segment="64mb")
    n = 40
    digests = put_many(pure, "k9-", n)
    assert wait_for(lambda: node_metric(node, "mooncake_disk_objects") >= n, 20)
    # More puts, and SIGKILL while the node is writing them to disk.
    pure.send(f"out = [store.put('late' + str(i), pattern({MIB}, 'late' + str(i))) "
              f"for i in range(30)]\nresult = out")
    assert wait_for(lambda: node_metric(node, "mooncake_disk_offloads_total") >= n + 3, 20)
    node.stop(signal.SIGKILL)
    pure.reply()
    # Damage on top of whatever the kill left: a torn record at the end of the newest bucket
    # (half a header), a flipped byte in the value of an object (the first record of the
    # oldest bucket; its key is in the clear after the 32-byte header) and one in the header of
    # the record after it (its value length): that costs that record, not the rest of the bucket.
    files = bucket_files(disk_dir)
    assert files
    with open(files[-1], "ab") as f:
        f.write(b"MCOB\x05\x00\x00\x00\x00\x00\x10")
    with open(files[0], "r+b") as f:
        head = f.read(32)
        klen, vlen = struct.unpack_from("<IQ", head, 4)
        bad_key = f.read(klen).decode()
        f.seek(32 + klen + 1000)
        b = f.read(1)
        f.seek(32 + klen + 1000)
        f.write(bytes([b[0] ^ 0xFF]))
        # The second record starts after the first and, when that one was written with
        # O_DIRECT, its zero padding up to the next 4 KiB boundary.
        end = 32 + klen + vlen
        f.seek(end)
        pad = f.read(-end % 4096)
        second = end + len(pad) if pad and not any(pad) else end
        f.seek(second)
        head2 = f.read(32)
        assert head2[:4] == b"MCOB"
        klen2 = struct.unpack_from("<I", head2, 4)[0]
        bad_key2 = f.read(klen2).decode()
        f.seek(second + 9)
        f.write(bytes([head2[9] ^ 0x20]))
    assert bad_key.startswith("k9-") and bad_key2.startswith("k9-")
    # The master forgets the dead node's copies once it expires; the restarted node (same
    # directory) announces what is intact and replaces its old self right away.
    node = disk_node(master, disk_dir, capacity="512mb", segment="64mb")
    try:
        assert wait_for(lambda: node_metric(node, "mooncake_disk_announces_total") >= 1, 10)
        got = read_all(pure, "k9-", n)
        for i in range(n):
            if f"k9-{i}" in (bad_key, bad_key2):
                assert got[i] == [0, pure.run("result = sha(b'')")], "a corrupt copy was served"
            else:
                assert got[i] == [MIB, digests[i]], i
        late = pure.run("result = [[len(b), sha(b)] for b in (store.get('late' + str(i)) "
                        "for i in range(30))]")
        for i, (size, digest) in enumerate(late):
            # Each is intact or absent (lost with the node's memory), never torn.
            assert size in (0, MIB)
            if size:
                assert digest == pure.run(f"result = sha(pattern({MIB}, 'late{i}'))")
        assert node_metric(node, "mooncake_disk_objects") >= n - 2
        assert node_metric(node, "mooncake_disk_damaged_spans_total") >= 1
        assert node_metric(node, "mooncake_disk_damaged_bytes_total") >= 32 + klen2 + MIB
    finally:
        node.stop()


def test_promotion_on_hit(make_master, make_worker, disk_dir):
    master, node, pure = start(make_master, make_worker, disk_dir,
                               master_flags=("--promotion_on_hit",
                                             "--promotion_admission_threshold=3"))
    try:
        n = 64
        digests = put_many(pure, "pr", n)
        assert wait_for(lambda: master.metric("mooncake_disk_offloads_total") >= n, 20)
        # A read admits a promotion only while memory is under the eviction high watermark (0.9,
        # the reference's gate): the puts left it full until background eviction ran.
        assert wait_for(lambda: master.metric("mooncake_master_used_bytes")
                        < 0.9 * master.metric("master_total_capacity_bytes"), 10)
        # Every replica-list request counts as a read: this one is the first of the key's.
        places = where(pure, [f"pr{i}" for i in range(n)])
        key = next(k for k, v in sorted(places.items()) if v == ["LOCAL_DISK"])
        idx = int(key[2:])
        # The second read: below the threshold, nothing is promoted.
        assert pure.run(f"result = sha(store.get({key!r}))") == digests[idx]
        time.sleep(0.3)
        assert node_metric(node, "mooncake_disk_promotions_total") == 0
        # The third admits it: the node puts it back into memory, the disk copy stays.
        assert pure.run(f"result = sha(store.get({key!r}))") == digests[idx]
        assert wait_for(lambda: node_metric(node, "mooncake_disk_promotions_total") == 1, 10)
        assert where(pure, [key])[key] == ["LOCAL_DISK", "MEMORY"]
        assert master.metric("mooncake_disk_promotions_total") == 1
        reads = node_metric(node, "mooncake_disk_reads_total")
        assert pure.run(f"result = sha(store.get({key!r}))") == digests[idx]
        assert node_metric(node, "mooncake_disk_reads_total") == reads  # from memory now
    finally:
        node.stop()


def test_disk_limit_holds_under_churn(make_master, make_worker, disk_dir):
    cap = 16 * MIB
    master, node, pure = start(make_master, make_worker, disk_dir, capacity="16mb",
                               segment="8mb")
    try:
        peak = 0
        for rnd in range(10):  # 10 x 16 objects of 1 MiB: ten times the disk
            put_many(pure, f"ch{rnd}-", 16)
            pure.run(f"result = [store.remove('ch{rnd}-' + str(i)) for i in range(0, 16, 4)]")
            pure.run(f"result = store.upsert('ch{rnd}-1', pattern({MIB}, 'again'))")
            used = node_metric(node, "mooncake_disk_used_bytes")
            du = bucket_bytes(disk_dir)
            peak = max(peak, used, du)
            assert used <= cap and du <= cap, (rnd, used, du)
        assert peak > cap // 2  # the disk was really used
        assert node_metric(node, "mooncake_disk_lru_evictions_total") > 0
        # What is still listed reads back intact; evicted objects are simply gone.
        got = pure.run("result = [[len(b), sha(b)] for b in (store.get('ch9-' + str(i)) "
                       "for i in range(16))]")
        for i, (size, digest) in enumerate(got):
            if size:
                seed = "again" if i == 1 else f"ch9-{i}"
                assert digest == pure.run(f"result = sha(pattern({MIB}, {seed!r}))")
    finally:
        node.stop()


def test_offload_on_evict(make_master, make_worker, tmp_path):
    master, node, pure = start(make_master, make_worker, str(tmp_path / "tier"),
                               master_flags=("--offload_on_evict",))
    try:
        # Below the watermark nothing goes to disk (the reference's test_offload_on_eviction).
        put_many(pure, "small", 8, size=1024)
        time.sleep(1)
        assert all(v == ["MEMORY"] for v in where(pure, [f"small{i}" for i in range(8)]).values())
        assert master.metric("mooncake_disk_offloads_total") == 0
        # Past memory: eviction copies the coldest objects to disk before it frees them.
        n = 80
        digests = put_many(pure, "ooe", n)
        assert read_all(pure, "ooe", n) == [[MIB, d] for d in digests]
        assert master.metric("mooncake_disk_offloads_total") > 0
        # Only what eviction picked went to disk: the objects still in memory have no copy.
        places = where(pure, [f"ooe{i}" for i in range(n)])
        assert any(v == ["MEMORY"] for v in places.values()), places
        assert any(v == ["LOCAL_DISK"] for v in places.values()), places
    finally:
        node.stop()


def test_node_flags_refused():
    r = run_client("--enable_offload")
    assert r.returncode == 2 and "--enable_offload needs --root_fs_dir" in r.stderr
    r = run_client("--root_fs_dir=/tmp/x", "--disk_capacity=1kb")
    assert r.returncode == 2 and "--disk_capacity must be at least 1mb" in r.stderr
    r = run_client("--root_fs_dir=/tmp/x", "--disk_port=70000")
    assert r.returncode == 2 and "--disk_port" in r.stderr


def test_unusable_directory_fails_clearly(make_master, tmp_path):
    master = make_master()
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    r = run_client(f"--master_server_address={master.addr}", "--host=127.0.0.1",
                   "--metadata_server=P2PHANDSHAKE", "--global_segment_size=16mb",
                   f"--root_fs_dir={blocker}/tier", "--port=1")
    assert r.returncode == 1
    assert "cannot open the disk tier" in r.stderr


def disk_endpoint(node):
    for line in node.lines:
        if "disk tier" in line and "served at" in line:
            host, port = line.rsplit("served at ", 1)[1].split()[0].rsplit(":", 1)
            return host, int(port)
    raise AssertionError("no disk endpoint in:\n" + "".join(node.lines))


def frame(type_, body, flags=0, req=7):
    return struct.pack("<IBBHQQ", 0x314B434D, 1, type_, flags, req, len(body)) + body


TRAILER_MAGIC = 0x5452434D  # "MCRT": the verdict after a streamed value (disk_proto.h)


def read_req(key, cap=1 << 30):
    k = key.encode()
    return frame(1, struct.pack("<I", len(k)) + k + struct.pack("<QQ", 0, cap))


def ask(host, port, raw):
    """One raw request to a node's read server on a connection of its own: (code, len, value
    bytes, verdict), the verdict being the trailer's after a value (None without one); None when
    the node closed first."""
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(raw)
        return answer_on(s)


def answer_on(s):
    """The answer to the one request outstanding on connection s, as ask() gives it."""
    data = b""
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            return None
        data += chunk
        if len(data) < 24 + 12:
            continue
        blen = struct.unpack_from("<IBBHQQ", data)[5]
        code, vlen = struct.unpack_from("<iQ", data, 24)
        if code != 0:
            return code, vlen, data[24 + blen:], None
        if len(data) >= 24 + blen + vlen + 8:
            value = data[24 + blen:24 + blen + vlen]
            magic, verdict = struct.unpack_from("<Ii", data, 24 + blen + vlen)
            assert magic == TRAILER_MAGIC
            assert len(data) == 24 + blen + vlen + 8  # nothing after the trailer
            return code, vlen, value, verdict


@pytest.mark.parametrize("spin_us", [None, "0", "1000"])
def test_reads_on_one_kept_connection_whenever_they_come(make_master, make_worker, tmp_path,
                                                         spin_us):
    """The read server's thread waits for a connection's next read by spinning first, then
    sleeping (MC_TCP_REPLY_SPIN_US: as the environment has it, by default adaptive; 0, off;
    1000 µs, always). A read that comes at once, one that comes long after any spin ended, and
    one whose frame arrives in two pieces on either side of a pause are all answered, in order,
    on the same connection; a reader that goes away while the thread waits leaves the node
    serving. (What the spin saves is a benchmark's to show: docs/perf/issue26-amd/ab.md.)"""
    env = {"MC_TCP_REPLY_SPIN_US": spin_us} if spin_us is not None else None
    master, node, pure = start(make_master, make_worker, str(tmp_path / "tier"), env=env)
    try:
        digests = put_many(pure, "kept", 3, size=4096)
        assert wait_for(lambda: node_metric(node, "mooncake_disk_objects") >= 3, 10)
        host, port = disk_endpoint(node)
        with socket.create_connection((host, port), timeout=10) as s:
            for i in range(20):  # back to back: each comes within the spin after its reply
                s.sendall(read_req(f"kept{i % 3}"))
                code, vlen, value, verdict = answer_on(s)
                assert (code, vlen, verdict) == (0, 4096, 0)
                assert sha(value) == digests[i % 3]
            time.sleep(0.2)  # far past any spin (1000 us at most): the thread sleeps
            s.sendall(read_req("kept1"))
            assert answer_on(s)[:2] == (0, 4096)
            raw = read_req("kept2")
            s.sendall(raw[:10])  # part of the header, then the rest after the spin ended
            time.sleep(0.05)
            s.sendall(raw[10:])
            code, vlen, value, verdict = answer_on(s)
            assert (code, vlen, verdict) == (0, 4096, 0)
            assert sha(value) == digests[2]
            s.sendall(read_req("missing"))  # a code-only answer is followed by a wait as well
            assert answer_on(s)[0] == OBJECT_NOT_FOUND
            s.sendall(read_req("kept0"))
            assert answer_on(s)[:2] == (0, 4096)
        # the reader left while the thread waited; a new connection is served
        assert ask(host, port, read_req("kept0"))[:2] == (0, 4096)
        assert node_metric(node, "mooncake_disk_reads_total") >= 23
    finally:
        node.stop()


def test_bad_requests_to_the_read_server(make_master, make_worker, tmp_path):
    master, node, pure = start(make_master, make_worker, str(tmp_path / "tier"))
    try:
        put_many(pure, "bad", 2, size=4096)
        assert wait_for(lambda: node_metric(node, "mooncake_disk_objects") >= 2, 10)
        host, port = disk_endpoint(node)
        code, vlen, value, verdict = ask(host, port, read_req("bad0"))
        assert (code, vlen, len(value), verdict) == (0, 4096, 4096, 0)
        assert ask(host, port, read_req("missing"))[0] == OBJECT_NOT_FOUND
        assert ask(host, port, read_req("bad0", cap=10))[:2] == (-10, 0)  # BUFFER_OVERFLOW
        assert ask(host, port, frame(1, b"\x00\x00\x00\x00" + b"\x00" * 16))[0] == -400  # empty
        assert ask(host, port, frame(1, b"\x01\x02"))[0] == -600  # short body
        # Garbage framing: the connection is closed, the node serves on.
        with socket.create_connection((host, port), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n" + b"x" * 100)
            try:
                assert s.recv(100) == b""
            except ConnectionResetError:
                pass  # closed with our bytes unread: a reset, which says the same
        assert ask(host, port, read_req("bad1"))[:2] == (0, 4096)
        assert json.loads(node.http("/health")[1])["status"] == "healthy"
    finally:
        node.stop()


def test_a_store_client_with_a_segment_owns_a_disk(make_master, make_worker, disk_dir):
    # The reference's spelling: setup(..., enable_ssd_offload=True) with the directory from
    # MOONCAKE_OFFLOAD_FILE_STORAGE_PATH (here given as ssd_offload_path on one, env on another).
    master = make_master("--enable_offload", "--default_kv_lease_ttl=200")
    owner = make_worker(env={"MOONCAKE_OFFLOAD_BUCKET_MAX_TOTAL_SIZE": "128mb"})
    owner.setup(master, segment=16 * MIB,
                extra=f", enable_ssd_offload=True, ssd_offload_path={disk_dir!r}")
    pure = make_worker()
    pure.setup(master, segment=0)
    n = 48
    digests = put_many(pure, "own", n)
    assert read_all(pure, "own", n) == [[MIB, d] for d in digests]
    places = where(pure, [f"own{i}" for i in range(n)])
    assert sum(v == ["LOCAL_DISK"] for v in places.values()) >= n - 16
    assert master.metric("mooncake_disk_capacity_bytes") == 128 * MIB
    # Without a directory, or without a segment, setup refuses it with a code.
    bad = make_worker()
    assert bad.run(f"result = store.setup('127.0.0.1', 'P2PHANDSHAKE', {16 * MIB}, {4 * MIB}, "
                   f"'tcp', '', {master.addr!r}, enable_ssd_offload=True)") == -600
    env = make_worker(env={"MOONCAKE_OFFLOAD_FILE_STORAGE_PATH": disk_dir + "-env"})
    assert env.run(f"result = store.setup('127.0.0.1', 'P2PHANDSHAKE', 0, {4 * MIB}, "
                   f"'tcp', '', {master.addr!r}, enable_ssd_offload=True)") == -600
    assert env.run(f"result = store.setup('127.0.0.1', 'P2PHANDSHAKE', {16 * MIB}, {4 * MIB}, "
                   f"'tcp', '', {master.addr!r}, enable_ssd_offload=True)") == 0
    assert wait_for(lambda: master.metric("mooncake_disk_nodes") == 2, 10)
    owner.close()
    assert wait_for(lambda: master.metric("mooncake_disk_nodes") == 1, 10)


def find_value(root, key):
    """(bucket path, file offset of the value) of key's live record on a node's disk, walking
    the buckets as the node's rescan does (records, and the zero padding after each that an
    O_DIRECT store writes up to the next 4 KiB boundary); None when it is not there."""
    want = key.encode()
    for path in bucket_files(root):
        with open(path, "rb") as f:
            data = f.read()
        off = 0
        while off + 32 <= len(data):
            magic, klen, vlen = struct.unpack_from("<IIQ", data, off)
            if magic not in (0x424F434D, 0x4444434D):
                nxt = (off + 4095) // 4096 * 4096
                if nxt > off and not any(data[off:nxt]):
                    off = nxt
                    continue
                break
            if magic == 0x424F434D and data[off + 32:off + 32 + klen] == want:
                return path, off + 32 + klen
            off += 32 + klen + vlen
    return None


def flip(path, off):
    with open(path, "r+b") as f:
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0xFF]))


def test_io_modes_logged_and_the_io_uring_off_fallback(make_master, make_worker, disk_dir):
    # The node says how it writes (O_DIRECT on ext4, buffered on tmpfs: decided once, at open)
    # and how it submits I/O; with MC_DISK_IO_URING=0 it uses pread/pwrite, and every object
    # still comes back by checksum either way. A value the variable does not take is warned
    # about and leaves the default.
    ext4 = fs_type(os.path.dirname(disk_dir)) == "ext4"
    for env, mode in (({"MC_DISK_IO_URING": "0"}, "pread/pwrite (MC_DISK_IO_URING=0)"),
                      ({"MC_DISK_IO_URING": "maybe"}, None), ({}, None)):
        root = disk_dir + "-" + (env.get("MC_DISK_IO_URING") or "default")
        master, node, pure = start(make_master, make_worker, root, env=env)
        try:
            n = 48  # more than the node's 32 MiB of memory: most are read from disk
            digests = put_many(pure, "io", n)
            assert wait_for(lambda: master.metric("mooncake_disk_offloads_total") >= n, 20)
            assert read_all(pure, "io", n) == [[MIB, d] for d in digests]
            assert node_metric(node, "mooncake_disk_reads_total") >= n - 32
            log = "".join(node.lines)
            if ext4:
                assert ("O_DIRECT writes and reads of values of 64 KiB and more, records padded "
                        "to 4096 bytes" in log), log
                assert all(os.path.getsize(f) % 4096 == 0 for f in bucket_files(root))
            else:
                assert "buffered writes and reads (memory file system" in log, log
            if mode:
                assert f"reads streamed through {mode}" in log, log
                if ext4:
                    assert f"writes through {mode}" in log, log
            else:
                # io_uring where the kernel allows it; where it refuses, the log says so.
                assert ("reads streamed through io_uring" in log or
                        "reads streamed through pread/pwrite (io_uring_setup refused" in log), log
            if env.get("MC_DISK_IO_URING") == "maybe":
                assert "MC_DISK_IO_URING" in log, log
        finally:
            node.stop()
            master.stop()


def test_checksum_failure_in_the_middle_of_a_streamed_value(make_master, make_worker, disk_dir):
    # The node streams a value while it reads and checksums it, so the verdict comes after the
    # bytes: a byte flipped half way through a 1 MiB value on disk reaches the reader as
    # CHECKSUM_MISMATCH in the trailer, and the reader gives its caller an error, never the
    # bytes. The copy is deleted and then simply absent; the node keeps serving.
    master, node, pure = start(make_master, make_worker, disk_dir)
    try:
        n = 48
        digests = put_many(pure, "mid", n)
        assert wait_for(lambda: master.metric("mooncake_disk_offloads_total") >= n, 20)
        places = where(pure, [f"mid{i}" for i in range(n)])
        disk_only = sorted((k for k, v in places.items() if v == ["LOCAL_DISK"]),
                           key=lambda k: int(k[3:]))
        assert len(disk_only) >= 4, places
        raw_key, get_key, into_key, good_key = disk_only[:4]
        for key in (raw_key, get_key, into_key):
            path, value_off = find_value(disk_dir, key)
            flip(path, value_off + MIB // 2 + 123)
        host, port = disk_endpoint(node)
        code, vlen, value, verdict = ask(host, port, read_req(raw_key))
        assert (code, vlen, verdict) == (0, MIB, -801), (code, vlen, verdict)
        assert ask(host, port, read_req(raw_key))[0] == OBJECT_NOT_FOUND  # deleted
        # Through the store client: get gives nothing, get_into a negative code.
        assert pure.run(f"result = len(store.get({get_key!r}))") == 0
        rc = pure.run(f"buf = ctypes.create_string_buffer({MIB}); a = ctypes.addressof(buf)\n"
                      f"assert store.register_buffer(a, {MIB}) == 0\n"
                      f"rc = store.get_into({into_key!r}, a, {MIB})\n"
                      f"store.unregister_buffer(a)\n"
                      f"result = rc")
        assert rc < 0, rc
        assert node_metric(node, "mooncake_disk_checksum_failures_total") >= 3
        # Intact copies are still served, whole.
        i = int(good_key[3:])
        assert read_all(pure, "mid", n)[i] == [MIB, digests[i]]
        assert ask(host, port, read_req(good_key))[3] == 0
        assert json.loads(node.http("/health")[1])["status"] == "healthy"
    finally:
        node.stop()


def test_unmount_local_disk_segment(make_master, make_worker, tmp_path):
    """The reference's preStop call: the node's disk tier goes off the master (readers are no
    longer sent to its copies, no more work for it), the call holds for the grace period, a
    second call is a no-op; the copies stay on disk and a restarted node serves them again."""
    master = make_master("--enable_offload", "--default_kv_lease_ttl=200")
    root = str(tmp_path / "disk")
    owner_args = f", enable_ssd_offload=True, ssd_offload_path={root!r}"
    owner = make_worker()
    owner.setup(master, segment=16 * MIB, extra=owner_args)
    pure = make_worker()
    pure.setup(master, segment=0)
    n = 6
    keys = [f"um{i}" for i in range(n)]
    digests = put_many(pure, "um", n)
    assert wait_for(lambda: all("LOCAL_DISK" in v for v in where(pure, keys).values()), 30)
    assert master.metric("mooncake_disk_nodes") == 1
    # Wrong arguments are refused before anything changes.
    for bad in ("-1", "'30'", "1.5", "None", "1 << 64"):
        assert owner.run(f"try:\n    store.unmount_local_disk_segment({bad})\n"
                         f"    result = 'accepted'\nexcept (TypeError, ValueError, "
                         f"OverflowError) as e:\n    result = type(e).__name__") != "accepted", bad
    assert master.metric("mooncake_disk_nodes") == 1
    t0 = time.monotonic()
    assert owner.run("result = store.unmount_local_disk_segment(grace_period_seconds=1)") == 0
    assert time.monotonic() - t0 >= 1.0
    assert master.metric("mooncake_disk_nodes") == 0
    assert all(v == ["MEMORY"] for v in where(pure, keys).values())
    assert read_all(pure, "um", n) == [[MIB, d] for d in digests]
    # No more offloads to it: new objects stay in memory only.
    offloads = master.metric("mooncake_disk_offloads_total")
    put_many(pure, "after", 2)
    assert all(v == ["MEMORY"] for v in where(pure, ["after0", "after1"]).values())
    assert master.metric("mooncake_disk_offloads_total") == offloads
    assert owner.run("result = store.unmount_local_disk_segment()") == 0  # already off
    # A store without a disk tier has nothing to take off (the reference answers 0 too).
    assert pure.run("result = store.unmount_local_disk_segment()") == 0
    # The node goes (its memory copies with it); the disk still holds the objects, and the
    # node started again on the same directory announces them: they are served from disk.
    owner.close()
    again = make_worker()
    again.setup(master, segment=16 * MIB, extra=owner_args)
    assert wait_for(lambda: all(v == ["LOCAL_DISK"] for v in where(pure, keys).values()), 30)
    assert read_all(pure, "um", n) == [[MIB, d] for d in digests]
    # A closed store refuses.
    assert pure.run("store.close()\nresult = store.unmount_local_disk_segment()") == -1010
