"""The master's admin HTTP endpoints (--metrics_port), over real HTTP against a real master with
a real storage client: the reference's shapes (/health, /query_key, /batch_query_keys,
/get_all_keys, /get_all_segments, /query_segment), our /json/ views, and what callers get wrong
(unknown keys, missing or malformed parameters, oversized requests, wrong methods)."""

import http.client
import json
import socket

import pytest
from store_helpers import Master, Worker

SEGMENT = 32 << 20
KEYS = {"adm-a": 1000, "adm-b": 70000, "adm line\nbreak": 10}


@pytest.fixture(scope="module")
def node():
    """A master and one storage client holding KEYS; the client's segment name."""
    master = Master()
    worker = Worker()
    try:
        name = worker.setup(master, segment=SEGMENT)
        for k, n in KEYS.items():
            assert worker.run(f"result = store.put({k!r}, pattern({n}, {k!r}))") == 0
        yield master, name
    finally:
        worker.close()
        master.stop()


def get(master, target, method="GET"):
    """(status, content type, body as text) of one request."""
    c = http.client.HTTPConnection("127.0.0.1", master.metrics_port, timeout=5)
    try:
        c.request(method, target)
        r = c.getresponse()
        return r.status, r.getheader("Content-Type", ""), r.read().decode()
    finally:
        c.close()


def get_json(master, target):
    status, ctype, body = get(master, target)
    assert ctype.startswith("application/json"), (target, ctype)
    return status, json.loads(body)


def raw(master, data):
    """Sends bytes as they are; the status line of the answer ('reset' when the server reset
    the connection)."""
    with socket.create_connection(("127.0.0.1", master.metrics_port), timeout=5) as s:
        s.sendall(data)
        try:
            answer = s.recv(4096)
        except ConnectionResetError:
            return "reset"
    return answer.split(b"\r\n", 1)[0].decode()


def still_up(master):
    status, health = get_json(master, "/health")
    return status == 200 and health["status"] == "ok"


def test_health_role_and_state(node):
    master, _ = node
    status, health = get_json(master, "/health")
    assert status == 200
    assert health == {"status": "ok", "role": "leader", "ha_state": "serving",
                      "service_ready": True, "recovering": False, "segments_awaiting_owner": 0}
    assert get(master, "/role")[::2] == (200, "leader")
    assert get(master, "/ha_status")[::2] == (200, "serving")
    status, _, summary = get(master, "/metrics/summary")
    assert status == 200 and summary.startswith("role=leader, state=serving, ")
    assert f"objects={len(KEYS)} " in summary


def test_query_key_gives_the_replica_descriptors(node):
    master, name = node
    status, body = get_json(master, "/query_key?key=adm-b")
    assert status == 200 and body["success"] is True
    (d,) = body["data"]
    assert set(d) == {"size_", "buffer_address_", "protocol_", "transport_endpoint_"}
    assert d["size_"] == 70000 and d["transport_endpoint_"] == name
    assert d["buffer_address_"] > 0
    # the same placement as our detailed view names
    status, mine = get_json(master, "/json/query_key?key=adm-b")
    assert status == 200 and mine["replicas"][0]["addr"] == d["buffer_address_"]
    # a key with a newline, sent URL-encoded, is found
    status, body = get_json(master, "/query_key?key=adm%20line%0Abreak")
    assert status == 200 and body["data"][0]["size_"] == 10


@pytest.mark.parametrize("target, status, code", [
    ("/query_key?key=nope", 404, -704),            # unknown key
    ("/query_key", 400, -600),                     # missing parameter
    ("/query_key?key=", 400, -600),                # empty key
    ("/query_key?other=adm-a", 400, -600),         # the wrong parameter
    ("/query_key?key=%ZZ", 400, -600),             # malformed escape
    ("/query_key?key=%", 400, -600),               # truncated escape
    ("/query_key?key=" + "k" * 4097, 400, -600),   # longer than any key can be
])
def test_query_key_bad_input(node, target, status, code):
    master, _ = node
    got, body = get_json(master, target)
    assert got == status
    assert body["success"] is False and body["error_code"] == code
    assert body["error_message"]
    assert still_up(master)


def test_batch_query_keys(node):
    master, name = node
    status, body = get_json(master, "/batch_query_keys?keys=adm-a,nope,adm-a,,adm-b")
    assert status == 200 and body["success"] is True
    data = body["data"]
    assert set(data) == {"adm-a", "nope", "", "adm-b"}  # a key named twice answers once
    assert data["adm-a"]["ok"] is True
    assert [v["size_"] for v in data["adm-a"]["values"]] == [1000]
    assert data["adm-a"]["values"][0]["transport_endpoint_"] == name
    assert data["nope"] == {"ok": False, "error": "OBJECT_NOT_FOUND"}
    assert data[""] == {"ok": False, "error": "INVALID_PARAMS"}
    status, mine = get_json(master, "/json/batch_query_keys?keys=adm-a,nope")
    assert status == 200 and mine["adm-a"]["size"] == 1000 and "error" in mine["nope"]


@pytest.mark.parametrize("target", ["/batch_query_keys", "/batch_query_keys?keys=",
                                    "/batch_query_keys?key=adm-a", "/batch_query_keys?keys=%G0"])
def test_batch_query_keys_bad_input(node, target):
    master, _ = node
    status, body = get_json(master, target)
    assert status == 400
    assert body["success"] is False and "keys" in body["error"]
    assert still_up(master)


def test_get_all_keys_is_one_key_a_line(node):
    master, _ = node
    status, ctype, body = get(master, "/get_all_keys")
    assert status == 200 and ctype.startswith("text/plain")
    assert body.endswith("\n")
    # the newline inside a key is written \x0a, so every key stays one line
    assert sorted(body.splitlines()) == sorted(k.replace("\n", "\\x0a") for k in KEYS)
    status, mine = get_json(master, "/json/get_all_keys")
    assert status == 200 and sorted(mine) == sorted(KEYS)


def test_get_all_segments_and_query_segment(node):
    master, name = node
    status, ctype, body = get(master, "/get_all_segments")
    assert status == 200 and ctype.startswith("text/plain")
    assert body.splitlines() == [name]
    status, _, body = get(master, f"/query_segment?segment={name}")
    assert status == 200
    lines = body.splitlines()
    assert lines[0] == name
    used = int(lines[1].removeprefix("Used(bytes): "))
    cap = int(lines[2].removeprefix("Capacity(bytes) : "))
    assert cap == SEGMENT and sum(KEYS.values()) <= used < cap
    status, mine = get_json(master, f"/json/query_segment?segment={name}")
    assert status == 200 and mine[0]["used"] == used and mine[0]["size"] == cap
    status, mine = get_json(master, "/json/get_all_segments")
    assert status == 200 and [s["name"] for s in mine] == [name]


@pytest.mark.parametrize("target, status", [
    ("/query_segment?segment=nowhere:1", 404),   # unknown segment
    ("/query_segment", 400),                     # missing parameter
    ("/query_segment?segment=", 400),            # empty
    ("/query_segment?segment=%", 400),           # malformed
    ("/query_segment?segment=" + "s" * 300, 404),  # longer than any segment name
])
def test_query_segment_bad_input(node, target, status):
    master, _ = node
    got, ctype, body = get(master, target)
    assert got == status and ctype.startswith("text/plain") and body
    assert still_up(master)


def test_unknown_paths_methods_and_oversized_requests(node):
    master, _ = node
    status, _, body = get(master, "/no/such/endpoint")
    assert status == 404 and "/get_all_segments" in body  # the answer lists what is served
    assert get(master, "/query_key?key=adm-a", method="POST")[0] == 405
    assert get(master, "/health", method="DELETE")[0] == 405
    # a request head beyond the server's 64 KiB limit: refused, and nothing else is hurt
    big = b"GET /query_key?key=" + b"k" * (70 << 10) + b" HTTP/1.1\r\n\r\n"
    assert raw(master, big) == "HTTP/1.1 431 Request Header Fields Too Large"
    # a batch query as long as a query may be: answered, every item an error
    keys = ",".join(f"missing-{i:05d}" for i in range(4000))
    status, body = get_json(master, "/batch_query_keys?keys=" + keys)
    assert status == 200 and len(body["data"]) == 4000
    assert not any(v["ok"] for v in body["data"].values())
    # not HTTP at all
    assert raw(master, b"\x00\x01garbage\r\n\r\n") == "HTTP/1.1 400 Bad Request"
    assert raw(master, b"GET /health\r\n\r\n") == "HTTP/1.1 400 Bad Request"  # no version
    assert still_up(master)


def send(master, method, target, body=b""):
    """(status, JSON answer) of one request with a body."""
    c = http.client.HTTPConnection("127.0.0.1", master.metrics_port, timeout=10)
    try:
        c.request(method, target, body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.getheader("Content-Type", "").startswith("application/json"), target
        return r.status, json.loads(r.read())
    finally:
        c.close()


def test_leader_kv_events_and_segments_detail(node):
    master, name = node
    # no HA: no leader view, as the reference's master answers without one
    assert get_json(master, "/leader") == (200, {"present": False})
    status, body = get_json(master, "/kv_events/status")
    assert status == 200 and body == {"enabled": False, "published_batches": 0,
                                      "published_events": 0, "dropped_events": 0,
                                      "skipped_unparsed_keys": 0}
    status, body = get_json(master, "/get_segments_detail")
    assert status == 200 and body["total_segments"] == len(body["segments"]) >= 1
    seg = [s for s in body["segments"] if s["segment_name"] == name][0]
    assert seg["status"] == "OK" and seg["te_endpoint"] == name
    assert seg["size_bytes"] == SEGMENT and seg["base_address"].startswith("0x")
    assert seg["size_human"] == "0.03125 GiB"
    assert seg["allocator_capacity_bytes"] <= SEGMENT
    assert 0 < seg["allocator_used_bytes"] <= seg["allocator_capacity_bytes"]
    assert 0 < seg["allocator_usage_percent"] < 100
    assert len(seg["client_id"]) == 36 and len(seg["segment_id"]) == 36
    status, body = get_json(master, f"/api/v1/segments/status?segment={name}")
    assert status == 200 and body == {"success": True, "segment": name, "status": 1,
                                      "status_name": "OK", "error_code": 0, "error_message": ""}


def test_tenant_quotas_answer_as_with_multi_tenancy_off(node):
    master, _ = node
    off = {"success": False, "error_code": -1011, "error_message": "UNAVAILABLE_IN_CURRENT_MODE"}
    assert send(master, "GET", "/api/v1/tenant_quotas") == (409, off)
    assert send(master, "GET", "/api/v1/tenant_quotas?tenant_id=t1") == (409, off)
    assert send(master, "PUT", "/api/v1/tenant_quotas?tenant_id=t1",
                b'{"requested_quota_bytes": 800}') == (409, off)
    assert send(master, "DELETE", "/api/v1/tenant_quotas?tenant_id=t1") == (409, off)
    # bad input first, as the reference checks it
    for method, target, body in (
            ("GET", "/api/v1/tenant_quotas?tenant_id=_system", b""),
            ("PUT", "/api/v1/tenant_quotas", b'{"requested_quota_bytes": 8}'),
            ("PUT", "/api/v1/tenant_quotas?tenant_id=", b'{"requested_quota_bytes": 8}'),
            ("PUT", "/api/v1/tenant_quotas?tenant_id=t1", b'{"requested_quota_bytes": 0}'),
            ("PUT", "/api/v1/tenant_quotas?tenant_id=t1",
             b'{"requested_quota_bytes": 9223372036854775808000}'),
            ("PUT", "/api/v1/tenant_quotas?tenant_id=t1", b"not json"),
            ("DELETE", "/api/v1/tenant_quotas?tenant_id=%01x", b"")):
        status, err = send(master, method, target, body)
        assert status == 400 and err["error_code"] == -600, (method, target, err)
    assert send(master, "POST", "/api/v1/tenant_quotas")[0] == 405
    assert still_up(master)


def test_remove_all_over_http():
    master = Master()
    worker = Worker()
    try:
        worker.setup(master, segment=SEGMENT)
        for i in range(5):
            assert worker.run(f"result = store.put('ra-{i}', b'v' * 100)") == 0
        assert send(master, "POST", "/api/v1/remove_all?tenant_id=other") == (
            200, {"success": True, "removed_count": 0})
        assert send(master, "GET", "/api/v1/remove_all")[0] == 405
        assert send(master, "POST", "/api/v1/remove_all?force=true") == (
            200, {"success": True, "removed_count": 5})
        assert worker.run("result = [store.is_exist(f'ra-{i}') for i in range(5)]") == [0] * 5
        assert send(master, "POST", "/api/v1/remove_all") == (
            200, {"success": True, "removed_count": 0})
    finally:
        worker.close()
        master.stop()
