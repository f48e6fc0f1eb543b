"""Drain jobs on the master's admin port (the reference's /api/v1/drain_jobs, query, cancel and
/api/v1/segments/status) against a real master and storage clients in their own processes: a
segment's objects move to the others while they are read, none is lost or changed, the states
go DRAINING then DRAINED, nothing new lands on a draining segment, and bad jobs are refused."""

import json
import time
import urllib.error
import urllib.request

import pytest

from store_helpers import wait_for

from mooncake.store import MooncakeDistributedStore, ReplicateConfig

N = 16
SIZE = 200 << 10


def _call(master, method, path, body=None):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(f"http://127.0.0.1:{master.metrics_port}{path}", data=data,
                                 method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _status(master, seg):
    code, body = _call(master, "GET", f"/api/v1/segments/status?segment={seg}")
    assert code == 200, body
    return body["status_name"]


def _wait_job(master, job, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        code, body = _call(master, "GET", f"/api/v1/drain_jobs/query?job_id={job}")
        assert code == 200 and body["success"], body
        if body["status_name"] in ("SUCCEEDED", "FAILED", "CANCELED"):
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.1)


def _where(store, key):
    return sorted(d.get_memory_descriptor().buffer_descriptor.transport_endpoint
                  for d in store.get_replica_desc(key))


def _put_on(store, key, value, seg):
    cfg = ReplicateConfig()
    cfg.replica_num = 1
    cfg.preferred_segment = seg
    assert store.put(key, value, cfg) == 0


@pytest.fixture
def cluster():
    """A master, two storage clients (processes) and a pure client here."""
    from store_helpers import Master, Worker

    master = Master("--default_kv_lease_ttl=500")
    nodes = [Worker() for _ in range(2)]
    me = MooncakeDistributedStore()
    try:
        names = [w.setup(master, segment=32 << 20) for w in nodes]
        assert me.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master.addr) == 0
        yield master, nodes, names, me
    finally:
        me.close()
        for w in nodes:
            w.close()
        master.stop()


def test_drain_moves_every_object_while_it_is_read(cluster, tmp_path):
    master, nodes, (src, dst), me = cluster
    values = {f"d-{i}": bytes([i]) * 7 + bytes(range(256)) * (SIZE // 256) for i in range(N)}
    for k, v in values.items():
        _put_on(me, k, v, src)
        assert _where(me, k) == [src]
    assert _status(master, src) == "OK"
    # a reader on the other node reads every key, over and over, through the whole drain
    stop = tmp_path / "stop"
    nodes[1].send(f"""
import time
want = {{k: sha(bytes([int(k[2:])]) * 7 + bytes(range(256)) * ({SIZE} // 256))
        for k in {sorted(values)!r}}}
bad, reads, t_end = [], 0, time.monotonic() + 120
while time.monotonic() < t_end and not os.path.exists({str(stop)!r}):
    for k in want:
        v = store.get(k)
        reads += 1
        if not v or sha(v) != want[k]:
            bad.append(k)
result = [bad[:5], len(bad), reads]
""")
    code, body = _call(master, "POST", "/api/v1/drain_jobs",
                       {"segments": [src], "target_segments": [dst], "max_concurrency": 4})
    assert code == 200 and body["success"] and body["status"] == "CREATED", body
    job = body["job_id"]
    assert len(job) == 36 and job.count("-") == 4
    assert _status(master, src) in ("DRAINING", "DRAINED")
    # a new put that prefers the draining segment lands elsewhere
    _put_on(me, "after", b"x" * 1000, src)
    assert _where(me, "after") == [dst]
    final = _wait_job(master, job)
    assert final["status_name"] == "SUCCEEDED", final
    assert final["type_name"] == "DRAIN" and final["segments"] == [src]
    assert final["active_units"] == 0 and final["succeeded_units"] >= N
    assert final["migrated_bytes"] >= N * SIZE
    assert _status(master, src) == "DRAINED"
    stop.write_text("")
    bad, n_bad, reads = nodes[1].reply()
    assert n_bad == 0 and reads >= N, bad
    for k, v in values.items():
        assert _where(me, k) == [dst]
        assert me.get(k) == v
    # drained: the source can go, and every object stays readable
    nodes[0].close()
    for k, v in values.items():
        assert me.get(k) == v
    # a finished job cannot be canceled
    code, body = _call(master, "POST", f"/api/v1/drain_jobs/cancel?job_id={job}")
    assert code == 409 and body["error_code"] == -1010, body


def test_drain_without_room_fails_cleanly(cluster):
    master, nodes, (src, dst), me = cluster
    big = bytes(range(256)) * 4096  # 1 MiB
    for i in range(20):
        _put_on(me, f"big-{i}", big, src)
    code, body = _call(master, "POST", "/api/v1/drain_jobs",
                       {"segments": [src], "target_segments": [src + "-none"]})
    assert code == 404 and body["error_code"] == -101, body
    # fill the target until 1 MiB no longer fits there (a put preferring it goes elsewhere)
    for i in range(64):
        _put_on(me, f"filler-{i}", big, dst)
        if _where(me, f"filler-{i}") != [dst]:
            # it landed on the source: gone again once the lease the look took runs out
            assert wait_for(lambda: me.remove(f"filler-{i}") == 0, timeout=30)
            break
    else:
        pytest.fail("the target never filled up")
    code, body = _call(master, "POST", "/api/v1/drain_jobs", {"segments": [src]})
    assert code == 200, body
    final = _wait_job(master, body["job_id"])
    assert final["status_name"] == "FAILED", final
    assert final["failed_units"] >= 20
    assert _status(master, src) == "OK"  # takes placements again
    for i in range(20):
        assert me.get(f"big-{i}") == big and _where(me, f"big-{i}") == [src]


def test_cancel_midway_and_bad_requests(cluster):
    master, nodes, (src, dst), me = cluster
    value = b"c" * (512 << 10)
    for i in range(24):
        _put_on(me, f"c-{i}", value, src)
    code, body = _call(master, "POST", "/api/v1/drain_jobs",
                       {"segments": [src], "max_concurrency": 1})
    assert code == 200, body
    job = body["job_id"]
    deadline = time.monotonic() + 30  # cancel once some objects moved and others wait
    while _call(master, "GET", f"/api/v1/drain_jobs/query?job_id={job}")[1]["succeeded_units"] < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    # a second drain of a draining segment is refused
    code, again = _call(master, "POST", "/api/v1/drain_jobs", {"segments": [src]})
    assert code == 409 and again["error_code"] == -1010, again
    code, body = _call(master, "POST", f"/api/v1/drain_jobs/cancel?job_id={job}")
    assert code == 200 and body == {"success": True, "job_id": job, "status": "CANCELED",
                                    "error_code": 0, "error_message": ""}, body
    assert _wait_job(master, job)["status_name"] == "CANCELED"
    assert _status(master, src) == "OK"
    # nothing lost: each object is whole on one side or the other
    for i in range(24):
        assert me.get(f"c-{i}") == value
        assert len(_where(me, f"c-{i}")) == 1
    # bad bodies and ids
    for body in (b"not json", b"[1, 2]", {"segments": "x"}, {"segments": [1]}, {"segments": []},
                 {"segments": [src, src]}, {"segments": [src], "max_concurrency": 0},
                 {"segments": [src], "max_concurrency": -1},
                 {"segments": [src], "target_segments": [src]}):
        code, err = _call(master, "POST", "/api/v1/drain_jobs", body)
        assert code == 400 and err["success"] is False and err["error_code"] == -600, (body, err)
    code, err = _call(master, "POST", "/api/v1/drain_jobs", {"segments": ["no-such-segment"]})
    assert code == 404 and err["error_code"] == -101
    for q in ("", "?job_id=", "?job_id=xyz", "?job_id=00000000-0000-0000-0000-00000000000g"):
        for method, path in (("GET", "query"), ("POST", "cancel")):
            code, err = _call(master, method, f"/api/v1/drain_jobs/{path}{q}")
            assert code == 400 and err["error_message"] == "Missing or invalid job_id", err
    unknown = "12345678-1234-1234-1234-123456789abc"
    for method, path in (("GET", "query"), ("POST", "cancel")):
        code, err = _call(master, method, f"/api/v1/drain_jobs/{path}?job_id={unknown}")
        assert code == 404 and err["error_code"] == -1402 and err["error_message"] == \
            "JOB_NOT_FOUND", err
    code, err = _call(master, "GET", "/api/v1/drain_jobs")
    assert code == 405 and err["success"] is False
    code, err = _call(master, "GET", "/api/v1/segments/status")
    assert code == 400 and err["error_message"] == "Missing segment query parameter"
    code, err = _call(master, "GET", "/api/v1/segments/status?segment=nope")
    assert code == 404 and err["error_code"] == -101
    # the master is still serving
    assert me.get("c-0") == value
