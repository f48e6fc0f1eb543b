"""The shared-filesystem tier (the master's --root_fs_dir, the reference's DISK replicas) with real
processes: a master with --root_fs_dir and store clients with segments that copy their objects to
files under DIR/<cluster_id>, which every client reads itself. Objects evicted from memory are read
back from there by another client; a client SIGKILLed and restarted, and a master SIGKILLed and
restarted (with and without its metadata log), lose no object whose copy was on file; a damaged
file is refused (the log names it), never served; directories that cannot be used are refused
at start, by the master and by a client."""

import os
import signal
import struct
import subprocess
import tempfile
import zlib

import pytest
from node_helpers import Node, dummy_setup, run_client
from store_helpers import free_port, wait_for
from test_disk_tier import put_many, read_all

from mooncake.cli import binary_path

MIB = 1 << 20


@pytest.fixture
def root():
    # /tmp: a real disk file system (the tier's files are synced as on a shared mount)
    with tempfile.TemporaryDirectory(prefix="mc-sharedfs-", dir="/tmp") as d:
        yield d


def file_of(root, key, cluster="mooncake_cluster"):
    """Where the file store keeps key (disk/file_store.c): two levels of the key's CRC-32."""
    h = zlib.crc32(key.encode())
    name = "".join(c if c.isalnum() or c in "_-" else "%%%02X" % ord(c) for c in key)
    return os.path.join(root, cluster, "%x" % (h & 15), "%x" % ((h >> 4) & 15), name)


def write_record(path, key, value, version):
    """A file as the file store writes it: a bucket record (header, key, value), seq = version."""
    k = key.encode()
    body = struct.pack("<IQQI", len(k), len(value), version, zlib.crc32(k + value))
    header = struct.pack("<I", 0x424F434D) + body + struct.pack("<I", zlib.crc32(body))
    with open(path, "wb") as f:
        f.write(header + k + value)


def places(worker, keys):
    return worker.run(
        f"d = store.batch_get_replica_desc({list(keys)!r})\n"
        f"result = {{k: sorted(r.type.name for r in v) for k, v in d.items()}}")


def start(make_master, make_worker, root, *flags, port=0, segment=16 * MIB):
    master = make_master(f"--root_fs_dir={root}", "--default_kv_lease_ttl=200",
                         "--client_ttl=3", *flags, port=port)
    a, b = make_worker(), make_worker()
    a.setup(master, segment=segment)
    b.setup(master, segment=segment)
    return master, a, b


def test_evicted_objects_are_read_from_files_by_another_client(make_master, make_worker, root):
    master, a, b = start(make_master, make_worker, root)
    pure = make_worker()
    pure.setup(master, segment=0)
    n = 48  # 1.5 times the pool's 32 MiB
    digests = put_many(a, "ev", n)
    # Every object is copied to its file as its put finishes (the reference's DISK replica).
    assert wait_for(lambda: master.metric("mooncake_disk_offloads_total") >= n, 60)
    for i in range(n):
        assert os.path.getsize(file_of(root, f"ev{i}")) == 32 + len(f"ev{i}") + MIB
    where = places(b, [f"ev{i}" for i in range(n)])
    disk_only = [k for k, v in where.items() if v == ["DISK"]]
    assert len(disk_only) >= n - 32, where  # memory holds 32 at most: the rest left it
    # The reference's DiskDescriptor names the object's file (and only DISK replicas have one).
    key = disk_only[0]
    assert b.run(
        f"(d,) = store.get_replica_desc({key!r})\n"
        f"dd = d.get_disk_descriptor()\n"
        f"try:\n    d.get_local_disk_descriptor()\n    bad = 'served'\n"
        f"except RuntimeError:\n    bad = 'refused'\n"
        f"result = [d.is_disk_replica(), d.is_local_disk_replica(), d.is_memory_replica(), "
        f"dd.file_path, dd.object_size, bad, type(dd).__name__, repr(d).split()[2]]"
    ) == [True, False, False, file_of(root, key), MIB, "refused", "DiskDescriptor", "DISK"]
    # Another client, and one without a segment (and so without a tier), read every object.
    want = [[MIB, d] for d in digests]
    assert read_all(b, "ev", n) == want
    assert read_all(pure, "ev", n) == want
    assert pure.run("result = store.get_offload_rpc_read_count()") >= len(disk_only)
    # The zero-copy form reads a file into registered memory too.
    key = disk_only[0]
    assert pure.run(
        f"buf = ctypes.create_string_buffer({MIB}); a = ctypes.addressof(buf)\n"
        f"assert store.register_buffer(a, {MIB}) == 0\n"
        f"n = store.get_into({key!r}, a, {MIB})\n"
        f"d = sha(ctypes.string_at(a, {MIB}))\n"
        f"store.unregister_buffer(a)\n"
        f"result = [n, d]") == [MIB, digests[int(key[2:])]]
    # A removed object's file goes (one of the tier's nodes deletes it).
    assert b.run(f"result = store.remove({key!r})") == 0
    assert wait_for(lambda: not os.path.exists(file_of(root, key)), 15)
    assert b.run(f"result = store.is_exist({key!r})") == 0


def test_node_and_master_restarts_lose_nothing_on_file(make_master, make_worker, root):
    port = free_port()
    master, a, b = start(make_master, make_worker, root, port=port)
    n = 40
    digests = put_many(a, "rs", n)
    assert wait_for(lambda: master.metric("mooncake_disk_offloads_total") >= n, 60)
    want = [[MIB, d] for d in digests]
    # The writer dies: its files stay readable (they belong to no node), also its segment's
    # objects (their memory is gone with it, their files are not).
    a.kill()
    assert read_all(b, "rs", n) == want
    # It comes back: its announce of the shared directory changes nothing.
    a2 = make_worker()
    a2.setup(master, segment=16 * MIB)
    assert read_all(a2, "rs", n) == want
    # The master dies (no metadata log): the restarted one adopts the files when the clients'
    # tiers announce the directory, and serves every object again.
    master.stop(signal.SIGKILL)
    master.start()
    assert wait_for(lambda: b.run("result = store.is_exist('rs0')") == 1, 30)
    assert wait_for(lambda: b.run(
        f"result = sum(store.is_exist('rs' + str(i)) == 1 for i in range({n}))") == n, 30)
    assert read_all(b, "rs", n) == want


def test_master_with_metadata_log_restores_shared_copies(make_master, make_worker, root):
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="mc-sharedfs-meta-") as meta:
        master, a, b = start(make_master, make_worker, root, f"--metadata_dir={meta}", port=port)
        n = 24
        digests = put_many(a, "ml", n)
        assert wait_for(lambda: master.metric("mooncake_disk_offloads_total") >= n, 60)
        assert b.run("result = store.remove('ml0')") == 0
        master.stop(signal.SIGKILL)
        master.start()
        # The log holds the shared copies: served at once, without any client announcing.
        assert read_all(b, "ml", n)[1:] == [[MIB, d] for d in digests[1:]]
        assert b.run("result = store.is_exist('ml0')") == 0


def test_damaged_file_is_refused_not_served(make_master, make_worker, root):
    master, a, _ = start(make_master, make_worker, root)
    log = os.path.join(root, "reader.log")
    with open(log, "w") as f:
        b = make_worker(stderr=f)
    b.setup(master, segment=0)
    n = 48
    digests = put_many(a, "cf", n)
    assert wait_for(lambda: master.metric("mooncake_disk_offloads_total") >= n, 60)
    where = places(b, [f"cf{i}" for i in range(n)])
    disk_only = sorted(k for k, v in where.items() if v == ["DISK"])
    flip, cut, stale = disk_only[0], disk_only[1], disk_only[2]
    with open(file_of(root, flip), "r+b") as f:
        f.seek(32 + len(flip) + MIB // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x40]))
    with open(file_of(root, cut), "r+b") as f:
        f.truncate(32 + len(cut) + 1000)
    # Another value of the key, of the same size and intact (what two nodes writing one key at
    # once could leave): its version is not the copy's the master recorded.
    write_record(file_of(root, stale), stale, b"x" * MIB, version=999999)
    for key in (flip, cut, stale):
        assert b.run(f"result = len(store.get({key!r}))") == 0
        assert b.run(
            f"buf = ctypes.create_string_buffer({MIB}); a = ctypes.addressof(buf)\n"
            f"assert store.register_buffer(a, {MIB}) == 0\n"
            f"n = store.get_into({key!r}, a, {MIB})\n"
            f"store.unregister_buffer(a)\n"
            f"result = n") < 0
        with open(log) as f:
            assert f"{key} is damaged or not the object the master describes" in f.read()
    # The rest is intact and the clients keep serving.
    got = read_all(b, "cf", n)
    for i in range(n):
        if f"cf{i}" not in (flip, cut, stale):
            assert got[i] == [MIB, digests[i]], i


def test_directories_that_cannot_be_used_are_refused(make_master, make_worker, root):
    def master_refuses(*flags):
        r = subprocess.run([binary_path("mooncake_master"), "--port=0", "--metrics_port=0",
                            *flags], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2, r
        return r.stderr

    assert "No such file or directory" in master_refuses(f"--root_fs_dir={root}/missing")
    open(os.path.join(root, "plain"), "w").close()
    assert "not a directory" in master_refuses(f"--root_fs_dir={root}/plain")
    # /proc takes no new directory: the cluster's subdirectory cannot be made.
    assert "cannot create it" in master_refuses("--root_fs_dir=/proc")
    assert "--cluster_id" in master_refuses(f"--root_fs_dir={root}", "--cluster_id=a/b")
    # A client that cannot use the directory the master names fails its setup, saying why.
    master = make_master(f"--root_fs_dir={root}", "--cluster_id=c1")
    os.rmdir(os.path.join(root, "c1"))
    open(os.path.join(root, "c1"), "w").close()
    err = os.path.join(root, "client.log")
    with open(err, "w") as log:
        w = make_worker(stderr=log)
        rc = w.run(f"result = store.setup('127.0.0.1', 'P2PHANDSHAKE', {16 * MIB}, {16 * MIB}, "
                   f"'tcp', '', {master.addr!r})")
    assert rc != 0
    with open(err) as f:
        assert "shared directory (--root_fs_dir) is not usable" in f.read()
    # Without a segment there is nothing to copy: such a client sets up (and only reads).
    assert w.run(f"result = store.setup('127.0.0.1', 'P2PHANDSHAKE', 0, {16 * MIB}, 'tcp', '', "
                 f"{master.addr!r})") == 0


def test_storage_node_copies_its_segment_for_dummy_clients(make_master, make_worker, root):
    master = make_master(f"--root_fs_dir={root}", "--default_kv_lease_ttl=200")
    node = Node(master, segment="16mb")
    try:
        dummy = make_worker()
        dummy_setup(dummy, node)
        n = 24  # 1.5 times the node's memory: most are read back from their files by the node
        digests = put_many(dummy, "dn", n)
        assert wait_for(lambda: master.metric("mooncake_disk_offloads_total") >= n, 60)
        assert all(os.path.exists(file_of(root, f"dn{i}")) for i in range(n))
        assert read_all(dummy, "dn", n) == [[MIB, d] for d in digests]
    finally:
        node.stop()


def test_node_takes_offload_dir_from_the_environment(make_master, root):
    master = make_master("--enable_offload", f"--root_fs_dir={root}")
    tier = os.path.join(root, "node")
    node = Node(master, segment="16mb", env={"MOONCAKE_OFFLOAD_FILE_STORAGE_PATH": tier},
                extra=["--enable_offload"])
    try:
        assert any(f"disk tier {tier}" in line for line in node.lines), node.lines
    finally:
        node.stop()
    r = run_client("--enable_offload", f"--master_server_address={master.addr}")
    assert r.returncode == 2 and "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH" in r.stderr
