"""A put that waits once (docs/perf/issue26-put.md): a small put's bytes and its commit go to the
slot's holder in one message, and the holder forwards the commit to the master (PUT_COMMIT_FOR)
once the bytes are in place. What a put's success means does not change: a put that returned 0
reads back after a master kill -9 and restart; a holder stopped between the bytes and the
forward across such a restart leaves the put to be placed again; a holder killed after the
master recorded the commit and before it answered leaves a client that finds out, and reports
the put done; a holder with forwarding off answers that it has none, and its clients commit
themselves."""

import signal

from store_helpers import digests, put_many, wait_for

LEASE = "--default_kv_lease_ttl=200"
COMMITS = 'mooncake_master_requests_total{op="put_commit"}'
FORWARDS = 'mooncake_master_requests_total{op="put_commit_for"}'
N = 64


def test_forwarded_puts_are_recorded_and_survive_a_restart(make_master, make_worker, tmp_path):
    d = str(tmp_path / "meta")
    master = make_master(LEASE, f"--metadata_dir={d}")
    node, client = make_worker(), make_worker()
    node.setup(master, segment=64 << 20)
    client.setup(master, segment=0)
    stored = put_many(client, "small", N, 4096)
    stored.update(put_many(client, "mid", 8, 16384))  # the largest forwarded
    # the commits went through the holder; the client's own are give-backs of unused slots
    assert master.metric(FORWARDS) >= 1
    assert master.metric(COMMITS) < N / 4
    assert master.metric("master_put_start_requests_total") == N + 8
    assert master.metric("master_put_end_requests_total") == N + 8
    # an existing key keeps its first value, as any put does
    assert client.run("result = store.put('small0', b'x' * 4096)") == 0
    assert digests(client, stored) == stored
    assert digests(node, stored) == stored

    port = master.port
    master.stop(signal.SIGKILL)
    master = make_master(LEASE, f"--metadata_dir={d}", port=port)
    assert wait_for(lambda: node.run("result = store.is_exist('small0')") == 1, timeout=60)
    assert digests(client, stored) == stored


def test_many_clients_share_forwards(make_master, make_worker):
    master = make_master(LEASE)
    node = make_worker()
    node.setup(master, segment=64 << 20)
    clients = [make_worker() for _ in range(4)]
    for c in clients:
        c.setup(master, segment=0)
    for i, c in enumerate(clients):
        c.send("out = {}\n"
               "for j in range(200):\n"
               f"    k = 'c{i}-%d' % j\n"
               "    v = pattern(4096, k)\n"
               "    assert store.put(k, v) == 0\n"
               "    out[k] = sha(v)\n"
               "result = out")
    stored = {}
    for c in clients:
        stored.update(c.reply())
    assert len(stored) == 800
    assert master.metric("master_put_end_requests_total") == 800
    # one forward may carry several clients' commits, never more requests than puts
    assert 1 <= master.metric(FORWARDS) <= 800
    assert digests(node, stored) == stored


def test_a_holder_stopped_before_its_forward_across_a_restart(make_master, make_worker, tmp_path):
    d = str(tmp_path / "meta")
    master = make_master(LEASE, f"--metadata_dir={d}")
    node = make_worker(env={"MC_FAILPOINTS": "store_forward_before_commit=stop"})
    node.setup(master, segment=64 << 20)
    client = make_worker()
    client.setup(master, segment=0)
    client.send("result = store.put('late', pattern(4096, 'late'))")
    assert wait_for(node.stopped, timeout=30), "the holder did not reach its failpoint"
    port = master.port
    master.stop(signal.SIGKILL)
    master = make_master(LEASE, f"--metadata_dir={d}", port=port)
    node.signal(signal.SIGCONT)
    # the slot is gone with the restart: the forward says so and the put is placed again
    assert client.reply() == 0
    assert client.run("result = sha(store.get('late')) == sha(pattern(4096, 'late'))") is True
    stored = put_many(client, "after", 16, 4096)
    assert digests(node, stored) == stored


def test_a_holder_killed_after_the_master_recorded(make_master, make_worker):
    master = make_master(LEASE)
    node = make_worker(env={"MC_FAILPOINTS": "store_forward_after_commit=stop"})
    node.setup(master, segment=64 << 20)
    spare = make_worker()
    spare.setup(master, segment=64 << 20)
    client = make_worker()
    client.setup(master, segment=0)
    # the first put whose slot lies on the doomed node stops that node after the master's answer
    client.send("out = []\n"
                "for i in range(64):\n"
                "    assert store.put('k%d' % i, pattern(4096, 'k%d' % i)) == 0\n"
                "    out.append('k%d' % i)\n"
                "result = out")
    assert wait_for(node.stopped, timeout=30), "the holder did not reach its failpoint"
    ends = master.metric("master_put_end_requests_total")
    node.kill()
    keys = client.reply()  # every put returned 0: the one in doubt was found recorded
    assert len(keys) == 64
    # the put in doubt was recorded once, by the holder's forward; nothing was put twice
    assert master.metric("master_put_end_requests_total") >= ends
    assert client.run(f"result = [store.is_exist(k) for k in {keys!r}]") == [1] * 64


def test_a_holder_without_forwarding(make_master, make_worker):
    master = make_master(LEASE)
    node = make_worker(env={"MC_STORE_PUT_FORWARD": "0"})
    node.setup(master, segment=64 << 20)
    client = make_worker()
    client.setup(master, segment=0)
    stored = put_many(client, "plain", 32, 4096)
    assert master.metric(FORWARDS) == 0
    assert master.metric(COMMITS) >= 32
    assert digests(client, stored) == stored


def test_a_client_without_forwarding(make_master, make_worker):
    master = make_master(LEASE)
    node = make_worker()
    node.setup(master, segment=64 << 20)
    client = make_worker(env={"MC_STORE_PUT_FORWARD": "0"})
    client.setup(master, segment=0)
    stored = put_many(client, "plain", 32, 4096)
    assert master.metric(FORWARDS) == 0
    assert master.metric(COMMITS) >= 32
    assert digests(client, stored) == stored
