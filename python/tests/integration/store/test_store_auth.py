"""The opt-in cluster secret: with it, the master, every storage node's engine and the metadata
service serve only processes that prove they know it (challenge-response, HMAC-SHA256; the
secret never crosses the wire). Without it, nothing changes (the reference's behaviour)."""

import hashlib
import hmac
import json
import re
import subprocess
import urllib.error
import urllib.request

import pytest

from mooncake.cli import binary_path

SECRET = "correct horse battery staple"


@pytest.fixture
def secret_file(tmp_path):
    p = tmp_path / "secret"
    p.write_text(SECRET + "\n")
    return p


def test_cluster_secret_gates_the_master_and_the_engines(make_master, make_worker, secret_file):
    master = make_master(f"--cluster_secret_file={secret_file}")
    ok_env = {"MC_CLUSTER_SECRET": SECRET}
    node = make_worker(env={"MC_CLUSTER_SECRET_FILE": str(secret_file)})
    name = node.setup(master, segment=32 << 20)
    client = make_worker(env=ok_env)
    client.setup(master, segment=0)
    assert client.run("result = store.put('guarded', pattern(1 << 20, 'g'))") == 0
    assert client.run("result = sha(store.get('guarded')) == sha(pattern(1 << 20, 'g'))")

    # No secret, or the wrong one: the master refuses the client at setup (ILLEGAL_CLIENT).
    for env in ({}, {"MC_CLUSTER_SECRET": "wrong"}):
        stranger = make_worker(env=env)
        rc = stranger.run("result = store.setup('127.0.0.1', 'P2PHANDSHAKE', 0, 1 << 20, 'tcp',"
                          f" '', {master.addr!r})")
        assert rc == -601

    # ... and the storage node's engine refuses to be written or read by it.
    addr = json.loads(master.http("/query_key?key=guarded"))["data"][0]["buffer_address_"]
    intruder = make_worker()
    got = intruder.run(
        "from mooncake.engine import TransferEngine\n"
        "e = TransferEngine(); ns['e'] = e\n"
        "assert e.initialize('127.0.0.1', 'P2PHANDSHAKE', 'tcp', '') == 0\n"
        "buf = e.allocate_managed_buffer(1 << 20)\n"
        "ctypes.memset(buf, 0x41, 1 << 20)\n"
        f"result = [e.transfer_sync_write({name!r}, buf, {addr}, 1 << 20),\n"
        f"          e.transfer_sync_read({name!r}, buf, {addr}, 1 << 20)]")
    assert got[0] < 0 and got[1] < 0, got
    assert client.run("result = sha(store.get('guarded')) == sha(pattern(1 << 20, 'g'))")


def test_a_client_with_a_secret_refuses_a_master_without_one(make_master, make_worker):
    master = make_master()
    w = make_worker(env={"MC_CLUSTER_SECRET": SECRET})
    rc = w.run("result = store.setup('127.0.0.1', 'P2PHANDSHAKE', 0, 1 << 20, 'tcp', '', "
               f"{master.addr!r})")
    assert rc == -601  # it cannot prove it knows our secret


@pytest.fixture
def guarded_metadata(secret_file):
    proc = subprocess.Popen([binary_path("mooncake_http_metadata_server"), "--host=127.0.0.1",
                             "--port=0", f"--cluster_secret_file={secret_file}"],
                            stdout=subprocess.PIPE, text=True)
    port = int(re.search(r":(\d+)", proc.stdout.readline()).group(1))
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)


def http(method, url, data=None, headers=None):
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def answer(nonce_hex, method, target, body=b""):
    msg = b"mc-http" + bytes.fromhex(nonce_hex) + f"{method} {target}\n".encode() + body
    mac = hmac.new(SECRET.encode(), msg, hashlib.sha256).hexdigest()
    return {"Authorization": f"MC-HMAC nonce={nonce_hex}, mac={mac}"}


def test_metadata_service_challenge_response(guarded_metadata, make_worker):
    target = "/metadata?key=seg-a"
    status, headers, _ = http("PUT", guarded_metadata + target, b"{}")
    assert status == 401
    nonce = re.fullmatch(r"MC-HMAC nonce=([0-9a-f]{32})", headers["WWW-Authenticate"]).group(1)
    auth = answer(nonce, "PUT", target, b"{}")
    assert http("PUT", guarded_metadata + target, b"{}", auth)[0] == 200
    # the same answer again (a replay), or one for another body, is refused
    assert http("PUT", guarded_metadata + target, b"{}", auth)[0] == 401
    status, headers, _ = http("PUT", guarded_metadata + target, b"{}")
    nonce = headers["WWW-Authenticate"].split("=", 1)[1]
    assert http("PUT", guarded_metadata + target, b'{"x":1}',
                answer(nonce, "PUT", target, b"{}"))[0] == 401

    # Engines publish and fetch descriptors through it only with the secret.
    meta = f"{guarded_metadata}/metadata"
    with_secret = make_worker(env={"MC_CLUSTER_SECRET": SECRET})
    assert with_secret.run("from mooncake.engine import TransferEngine\n"
                           "e = TransferEngine(); ns['e'] = e\n"
                           f"result = e.initialize('127.0.0.1', {meta!r}, 'tcp', '')") == 0
    without = make_worker()
    assert without.run("from mooncake.engine import TransferEngine\n"
                       "e = TransferEngine(); ns['e'] = e\n"
                       f"result = e.initialize('127.0.0.1', {meta!r}, 'tcp', '')") != 0
