"""Replica copy and move tasks (create_copy_task / create_move_task / query_task) against a real
master and storage clients in their own processes: the reference's shapes and codes, the bytes
arrive, and a task that races a remove or a replace fails without touching the object."""

import signal
import time

import pytest

from mooncake.store import (MooncakeDistributedStore, QueryTaskResponse, ReplicateConfig,
                            TaskStatus, TaskType)

INVALID_PARAMS, NOT_FOUND, HAS_TASK, TASK_NOT_FOUND = -600, -704, -708, -1400


@pytest.fixture(scope="module")
def trio():
    """A master, three storage clients (processes) and a pure client here that drives tasks."""
    from store_helpers import Master, Worker

    master = Master("--default_kv_lease_ttl=200")
    nodes = [Worker() for _ in range(3)]
    coord = MooncakeDistributedStore()
    try:
        names = [w.setup(master, segment=48 << 20) for w in nodes]
        assert coord.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master.addr) == 0
        yield master, nodes, names, coord
    finally:
        coord.close()
        for w in nodes:
            w.close()
        master.stop()


def _put_on(store, key, value, segments):
    cfg = ReplicateConfig()
    cfg.replica_num = len(segments)
    cfg.preferred_segments = list(segments)
    assert store.put(key, value, cfg) == 0
    assert _where(store, key) == sorted(segments)


def _where(store, key):
    return sorted(d.get_memory_descriptor().buffer_descriptor.transport_endpoint
                  for d in store.get_replica_desc(key))


def _wait(store, task_id, timeout=15):
    deadline = time.time() + timeout
    while True:
        resp, err = store.query_task(task_id)
        assert err == 0
        if resp.status in (TaskStatus.SUCCESS, TaskStatus.FAILED):
            return resp
        assert time.time() < deadline, resp
        time.sleep(0.1)


def _read_from(nodes, names, key, value):
    """Every node reads the key (its own replica first): the bytes are the same everywhere."""
    for w in nodes:
        assert w.run(f"result = store.get({key!r}).hex()") == value.hex()


def test_copy_adds_replicas_with_the_bytes(trio):
    master, nodes, names, coord = trio
    value = bytes(range(256)) * 40000  # ~10 MB: several chunks
    _put_on(coord, "copy-me", value, names[:1])
    task_id, err = coord.create_copy_task("copy-me", names[1:])
    assert err == 0 and isinstance(task_id, tuple) and len(task_id) == 2
    resp = _wait(coord, task_id)
    assert isinstance(resp, QueryTaskResponse)
    assert resp.status == TaskStatus.SUCCESS, resp.message
    assert resp.type == TaskType.REPLICA_COPY and resp.id == task_id
    assert resp.created_at_ms_epoch <= resp.last_updated_at_ms_epoch
    assert abs(resp.created_at_ms_epoch / 1000 - time.time()) < 60
    assert isinstance(resp.assigned_client, tuple) and resp.assigned_client != (0, 0)
    assert "QueryTaskResponse(" in repr(resp)
    assert _where(coord, "copy-me") == sorted(names)
    assert coord.get("copy-me") == value
    # Each new replica holds the bytes: drop the original and read from what is left.
    time.sleep(0.3)  # the get's lease passes
    assert coord.batch_replica_clear(["copy-me"], names[0]) == ["copy-me"]
    assert _where(coord, "copy-me") == sorted(names[1:])
    assert coord.get("copy-me") == value


def test_move_leaves_one_replica_on_the_target(trio):
    master, nodes, names, coord = trio
    value = b"moving" * 1000
    _put_on(coord, "move-me", value, names[:1])
    task_id, err = coord.create_move_task("move-me", names[0], names[2])
    assert err == 0
    resp = _wait(coord, task_id)
    assert resp.status == TaskStatus.SUCCESS and resp.type == TaskType.REPLICA_MOVE
    assert _where(coord, "move-me") == [names[2]]
    assert coord.get("move-me") == value
    _read_from(nodes, names, "move-me", value)


def test_targets_that_hold_a_replica_are_skipped(trio):
    master, nodes, names, coord = trio
    _put_on(coord, "both", b"twice", names[:2])
    task_id, err = coord.create_copy_task("both", [names[1]])
    assert err == 0
    assert _wait(coord, task_id).status == TaskStatus.SUCCESS
    assert _where(coord, "both") == sorted(names[:2])
    # A move onto a segment that has one already only drops the source.
    task_id, err = coord.create_move_task("both", names[0], names[1])
    assert err == 0 and _wait(coord, task_id).status == TaskStatus.SUCCESS
    assert _where(coord, "both") == [names[1]]
    assert coord.get("both") == b"twice"


def test_bad_input(trio):
    master, nodes, names, coord = trio
    _put_on(coord, "bad", b"x" * 100, names[:1])
    zero = (0, 0)
    assert coord.create_copy_task("no-such-key", names[1:]) == (zero, NOT_FOUND)
    assert coord.create_move_task("no-such-key", names[0], names[1]) == (zero, NOT_FOUND)
    assert coord.create_copy_task("bad", ["nowhere:1"]) == (zero, INVALID_PARAMS)
    assert coord.create_copy_task("bad", []) == (zero, INVALID_PARAMS)
    assert coord.create_copy_task("bad", [""]) == (zero, INVALID_PARAMS)
    assert coord.create_move_task("bad", "nowhere:1", names[1]) == (zero, INVALID_PARAMS)
    assert coord.create_move_task("bad", names[0], "nowhere:1") == (zero, INVALID_PARAMS)
    assert coord.create_move_task("bad", names[0], names[0]) == (zero, INVALID_PARAMS)
    # A source without a replica of the object.
    assert coord.create_move_task("bad", names[1], names[2]) == (zero, INVALID_PARAMS)
    assert coord.create_copy_task("", names[1:]) == (zero, -400)
    with pytest.raises(TypeError):
        coord.create_copy_task("bad", names[1])  # a string, not a list
    with pytest.raises(TypeError):
        coord.create_copy_task(7, names[1:])
    assert coord.query_task((1, 2)) == (None, TASK_NOT_FOUND)
    with pytest.raises(TypeError):
        coord.query_task(12)
    with pytest.raises((TypeError, ValueError, OverflowError)):
        coord.query_task((-1, 0))
    # The object is untouched by all of that.
    assert _where(coord, "bad") == [names[0]] and coord.get("bad") == b"x" * 100


def test_one_unfinished_task_per_key(trio):
    master, nodes, names, coord = trio
    _put_on(coord, "busy", b"b" * 1000, names[:1])
    # The owner takes tasks with its heartbeats: stop it so the first stays pending.
    nodes[0].signal(signal.SIGSTOP)
    try:
        first, err = coord.create_copy_task("busy", [names[1]])
        assert err == 0
        resp, err = coord.query_task(first)
        assert err == 0 and resp.status == TaskStatus.PENDING
        assert coord.create_copy_task("busy", [names[2]]) == ((0, 0), HAS_TASK)
    finally:
        nodes[0].signal(signal.SIGCONT)
    assert _wait(coord, first).status == TaskStatus.SUCCESS
    task_id, err = coord.create_copy_task("busy", [names[2]])
    assert err == 0 and _wait(coord, task_id).status == TaskStatus.SUCCESS
    assert _where(coord, "busy") == sorted(names)


def test_task_racing_a_replace_fails_and_keeps_the_new_value(trio):
    master, nodes, names, coord = trio
    _put_on(coord, "raced", b"old" * 1000, names[:1])
    nodes[0].signal(signal.SIGSTOP)
    try:
        task_id, err = coord.create_copy_task("raced", [names[1]])
        assert err == 0
        # Replaced before the owner ran the task: the task reads nothing stale into a replica.
        # (The new value goes to a node that is not stopped.)
        cfg = ReplicateConfig()
        cfg.preferred_segment = names[2]
        assert coord.upsert("raced", b"new" * 1000, cfg) == 0
    finally:
        nodes[0].signal(signal.SIGCONT)
    resp = _wait(coord, task_id)
    assert resp.status == TaskStatus.FAILED and resp.message
    assert coord.get("raced") == b"new" * 1000


def test_concurrent_tasks(trio):
    master, nodes, names, coord = trio
    keys = [f"many-{i}" for i in range(12)]
    for i, k in enumerate(keys):
        _put_on(coord, k, bytes([i]) * 50000, [names[i % 3]])
    ids = []
    for i, k in enumerate(keys):
        others = [n for n in names if n != names[i % 3]]
        task_id, err = coord.create_copy_task(k, others)
        assert err == 0
        ids.append(task_id)
    for task_id in ids:
        assert _wait(coord, task_id).status == TaskStatus.SUCCESS
    for i, k in enumerate(keys):
        assert _where(coord, k) == sorted(names)
        assert coord.get(k) == bytes([i]) * 50000


@pytest.mark.parametrize("race", ["upsert", "remove"])
def test_task_racing_a_change_mid_copy_fails(make_master, make_worker, race):
    """The owner has fetched the task (its targets are reserved) and stops before moving the
    bytes; meanwhile the object is replaced or force-removed. When the owner goes on, its report
    is refused: the object keeps only what the writer gave it, and the reserved space returns."""
    from store_helpers import wait_for

    master = make_master("--default_kv_lease_ttl=200")
    owner = make_worker(env={"MC_FAILPOINTS": "store_task_after_fetch=stop"})
    other = make_worker()
    a, b = owner.setup(master, segment=16 << 20), other.setup(master, segment=16 << 20)
    coord = MooncakeDistributedStore()
    assert coord.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master.addr) == 0
    try:
        _put_on(coord, "mid", b"old" * 1000, [a])
        task_id, err = coord.create_copy_task("mid", [b])
        assert err == 0
        assert wait_for(owner.stopped)
        assert coord.query_task(task_id)[0].status == TaskStatus.PROCESSING
        if race == "upsert":
            cfg = ReplicateConfig()
            cfg.preferred_segment = b
            assert coord.upsert("mid", b"new" * 1000, cfg) == 0
        else:
            assert coord.remove("mid", True) == 0
        owner.signal(signal.SIGCONT)
        resp = _wait(coord, task_id)
        assert resp.status == TaskStatus.FAILED, resp
        assert "changed" in resp.message
        if race == "upsert":
            assert coord.get("mid") == b"new" * 1000
            assert _where(coord, "mid") == [b]
        else:
            assert coord.is_exist("mid") == 0
        # Nothing reserved is left behind: both segments can take a value of their whole size.
        coord.remove_all(True)
        assert wait_for(lambda: master.metric("mooncake_master_used_bytes") == 0)
    finally:
        coord.close()


def test_task_limits_and_timeouts(make_master, make_worker):
    """The reference's --max_total_pending_tasks and --pending_task_timeout_sec: a task its
    client does not take in time fails, and past the pending limit creation is refused."""
    from store_helpers import wait_for

    master = make_master("--default_kv_lease_ttl=200", "--pending_task_timeout_sec=1",
                         "--max_total_pending_tasks=1")
    owner, other = make_worker(), make_worker()
    a, b = owner.setup(master, segment=16 << 20), other.setup(master, segment=16 << 20)
    coord = MooncakeDistributedStore()
    assert coord.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master.addr) == 0
    try:
        _put_on(coord, "t1", b"1" * 100, [a])
        _put_on(coord, "t2", b"2" * 100, [a])
        owner.signal(signal.SIGSTOP)
        try:
            first, err = coord.create_copy_task("t1", [b])
            assert err == 0
            assert coord.create_copy_task("t2", [b]) == ((0, 0), -1401)
            resp = _wait(coord, first)
            assert resp.status == TaskStatus.FAILED and "in time" in resp.message
            # Room again once the first one ended.
            second, err = coord.create_copy_task("t2", [b])
            assert err == 0
        finally:
            owner.signal(signal.SIGCONT)
        assert wait_for(lambda: coord.query_task(second)[0].status in (TaskStatus.SUCCESS,
                                                                TaskStatus.FAILED))
    finally:
        coord.close()
