"""Extra segments (mount_segment / allocate_and_mount_segment / unmount_segment /
unmount_and_free_segment) against a real master: the reference's result shapes, objects placed in
them are served to other clients, unmounting takes them away, and bad input."""

import mmap
import os
import time

import pytest
from store_helpers import local_store

from mooncake.store import ReplicateConfig

INVALID_PARAMS, SEGMENT_NOT_FOUND, FILE_NOT_FOUND = -600, -101, -1100


@pytest.fixture
def master(make_master):
    return make_master("--default_kv_lease_ttl=200")


def _store(master, segment=0):
    return local_store(master, segment)


def _on(store):
    cfg = ReplicateConfig()
    cfg.preferred_segment = store.get_hostname()
    return cfg


def _where(store, key):
    return [d.get_memory_descriptor().buffer_descriptor.transport_endpoint
            for d in store.get_replica_desc(key)]


def test_allocated_segment_serves_and_goes(master):
    owner, other = _store(master), _store(master, segment=16 << 20)
    try:
        res = owner.allocate_and_mount_segment(5 << 20)
        assert res["ret"] == 0 and res["allocated_size"] == 8 << 20
        (seg_id,) = res["segment_ids"]
        assert len(seg_id) == 36 and seg_id.count("-") == 4
        value = os.urandom(3 << 20)
        # A pure client (no global segment) now holds objects in its extra segment.
        assert other.put("in-extra", value, _on(owner)) == 0
        assert _where(other, "in-extra") == [owner.get_hostname()]
        assert other.get("in-extra") == value and owner.get("in-extra") == value
        # The wrong kind of unmount, an unknown id, a malformed one.
        assert owner.unmount_segment([seg_id]) == SEGMENT_NOT_FOUND
        assert owner.unmount_and_free_segment(["0" * 8 + "-0000-0000-0000-" + "0" * 12]) == \
            SEGMENT_NOT_FOUND
        assert owner.unmount_and_free_segment(["not-an-id"]) == INVALID_PARAMS
        assert other.get("in-extra") == value
        assert owner.unmount_and_free_segment([seg_id]) == 0
        # Its objects went with it (their only replica was there).
        assert other.is_exist("in-extra") == 0 and other.get("in-extra") == b""
        assert owner.unmount_and_free_segment([seg_id]) == SEGMENT_NOT_FOUND
    finally:
        owner.close()
        other.close()


def test_file_segment_holds_the_bytes_in_the_file(master, tmp_path):
    path = tmp_path / "pool.bin"
    size = 4 << 20
    with open(path, "wb") as f:
        f.truncate(size + mmap.PAGESIZE)
    owner, reader = _store(master), _store(master, segment=8 << 20)
    try:
        res = owner.mount_segment(str(path), size, mmap.PAGESIZE)
        assert res["ret"] == 0 and len(res["segment_ids"]) == 1
        value = b"file-backed:" + os.urandom(1 << 20)
        assert reader.put("in-file", value, _on(owner)) == 0
        assert reader.get("in-file") == value
        # The object's bytes are the file's pages (after the unmapped first page).
        with open(path, "rb") as f:
            data = f.read()
        at = data.find(value)
        assert at >= mmap.PAGESIZE
        assert owner.unmount_and_free_segment(res["segment_ids"]) == SEGMENT_NOT_FOUND
        assert owner.unmount_segment(res["segment_ids"]) == 0
        assert reader.is_exist("in-file") == 0
    finally:
        owner.close()
        reader.close()


def test_mount_follows_links_except_in_directories_anyone_may_write(master, tmp_path):
    """A symbolic link in a sticky world-writable directory (/dev/shm, /tmp) may be another
    user's plant: mounting it would hand the linked file to every client's puts, so it is
    refused. Elsewhere a link is followed, as the reference follows it."""
    target = tmp_path / "target.bin"
    original = os.urandom(8192)
    target.write_bytes(original)
    own = tmp_path / "own-link"
    os.symlink(target, own)
    shared = f"/dev/shm/mc-seg-link-{os.getpid()}-{time.monotonic_ns()}"
    os.symlink(target, shared)
    s = _store(master)
    try:
        assert os.stat("/dev/shm").st_mode & 0o1002 == 0o1002  # sticky, writable by others
        assert s.mount_segment(shared, 4096)["ret"] == INVALID_PARAMS
        assert target.read_bytes() == original
        res = s.mount_segment(str(own), 4096)
        assert res["ret"] == 0, res
        assert s.unmount_segment(res["segment_ids"]) == 0
        # A plain file in /dev/shm itself mounts (what the REST service's mount_shm is for).
        plain = shared + "-file"
        with open(plain, "wb") as f:
            f.truncate(8192)
        try:
            res = s.mount_segment(plain, 8192)
            assert res["ret"] == 0, res
            assert s.unmount_segment(res["segment_ids"]) == 0
        finally:
            os.unlink(plain)
    finally:
        os.unlink(shared)
        s.close()


def test_mount_reserves_the_holes_of_a_sparse_file(master):
    """A sparse file's range gets its blocks at mount (a write into a hole on a full tmpfs
    would otherwise end the process with SIGBUS); its bytes stay as they were."""
    path = f"/dev/shm/mc-seg-sparse-{os.getpid()}-{time.monotonic_ns()}"
    with open(path, "wb") as f:
        f.write(b"head")
        f.truncate(4 << 20)
    s = _store(master)
    try:
        assert os.stat(path).st_blocks * 512 < 1 << 20
        res = s.mount_segment(path, 4 << 20)
        assert res["ret"] == 0, res
        assert os.stat(path).st_blocks * 512 >= 4 << 20
        with open(path, "rb") as f:
            assert f.read(4) == b"head"
        assert s.unmount_segment(res["segment_ids"]) == 0
    finally:
        s.close()
        os.unlink(path)


def test_mount_bad_input(master, tmp_path):
    s = _store(master)
    try:
        small = tmp_path / "small.bin"
        small.write_bytes(b"\0" * 8192)
        missing = tmp_path / "missing.bin"
        empty = {"ret": FILE_NOT_FOUND, "segment_ids": []}
        assert s.mount_segment(str(missing), 4096) == empty
        assert s.mount_segment(str(small), 8193)["ret"] == INVALID_PARAMS  # past the end
        assert s.mount_segment(str(small), 4096, 8192)["ret"] == INVALID_PARAMS
        assert s.mount_segment(str(small), 4096, 100)["ret"] == INVALID_PARAMS  # unaligned
        assert s.mount_segment(str(small), 0)["ret"] == INVALID_PARAMS
        assert s.mount_segment(str(tmp_path), 4096)["ret"] == INVALID_PARAMS  # a directory
        assert s.allocate_and_mount_segment(0) == {"ret": INVALID_PARAMS, "segment_ids": [],
                                                   "allocated_size": 0}
        with pytest.raises(TypeError):
            s.mount_segment(str(small))
        with pytest.raises((TypeError, OverflowError, ValueError)):
            s.allocate_and_mount_segment(-1)
        with pytest.raises(TypeError):
            s.unmount_segment("one-id")
        assert s.unmount_segment([]) == 0
    finally:
        s.close()
    # A closed store refuses.
    assert s.allocate_and_mount_segment(1 << 20)["ret"] == -1010
    assert s.unmount_and_free_segment(["x"]) == -1010


def test_grace_period_keeps_serving_then_unmounts(master):
    owner, reader = _store(master), _store(master)
    try:
        seg_id = owner.allocate_and_mount_segment(4 << 20)["segment_ids"][0]
        assert reader.put("graceful", b"g" * 4096, _on(owner)) == 0
        assert owner.unmount_and_free_segment([seg_id], grace_period_seconds=2) == 0
        assert reader.get("graceful") == b"g" * 4096  # still served
        deadline = time.time() + 10
        while reader.is_exist("graceful") == 1:
            assert time.time() < deadline, "the segment was never unmounted"
            time.sleep(0.2)
        assert owner.unmount_and_free_segment([seg_id]) == SEGMENT_NOT_FOUND
    finally:
        owner.close()
        reader.close()


def test_close_unmounts_extra_segments(master):
    owner, reader = _store(master), _store(master)
    try:
        owner.allocate_and_mount_segment(4 << 20)
        assert reader.put("closing", b"c" * 100, _on(owner)) == 0
        assert owner.close() == 0
        assert reader.is_exist("closing") == 0
        # The reader's puts now find no segment at all (only the closed client had one).
        assert reader.put("nowhere", b"n") == -200
    finally:
        reader.close()


def test_extra_segment_survives_a_master_restart_in_a_new_incarnation(make_master):
    """The master forgets everything on a restart; the allocated segment is mounted again by
    itself (new memory, new epoch), so puts find room in it again."""
    master = make_master("--default_kv_lease_ttl=200")
    owner, writer = _store(master), _store(master)
    try:
        owner.allocate_and_mount_segment(4 << 20)
        assert writer.put("before", b"b" * 100, _on(owner)) == 0
        port = master.port
        master.stop()
        master = make_master("--default_kv_lease_ttl=200", port=port)
        deadline = time.time() + 15
        while writer.put("after", b"a" * 100, _on(owner)) != 0:
            assert time.time() < deadline, "the segment never came back"
            time.sleep(0.3)
        assert writer.get("after") == b"a" * 100
        assert writer.is_exist("before") == 0  # a restarted master knows no old object
    finally:
        owner.close()
        writer.close()
