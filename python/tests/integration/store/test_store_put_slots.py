"""Small puts through put slots (placements reserved ahead, one commit per put or batch; see
docs/perf/issue26-put.md): what a put's success means does not change. A put that returned 0 is
readable after a master kill -9 and restart from its log; a put stopped between its placement
and its commit across such a restart is placed again and reads back whole, with nothing else
overwritten; a put of an existing key keeps the first value; MC_STORE_PUT_SLOTS=0 takes the
start / write / end path."""

import signal

from store_helpers import digests, put_many, wait_for

LEASE = "--default_kv_lease_ttl=200"
COMMITS = 'mooncake_master_requests_total{op="put_commit"}'
FORWARDS = 'mooncake_master_requests_total{op="put_commit_for"}'
RESERVES = 'mooncake_master_requests_total{op="put_reserve"}'
STARTS = 'mooncake_master_requests_total{op="put_start"}'
N = 64


def test_small_puts_take_slots_and_survive_a_restart(make_master, make_worker, tmp_path):
    d = str(tmp_path / "meta")
    master = make_master(LEASE, f"--metadata_dir={d}")
    node, client = make_worker(), make_worker()
    node.setup(master, segment=64 << 20)
    client.setup(master, segment=0)
    stored = put_many(client, "small", N, 4096)
    # one commit per put (sent by the client, or with its bytes and forwarded by the holder:
    # test_store_put_forward.py), a reserve per several; the reference's put_start family counts
    # each commit as the put start it stands for
    assert master.metric(COMMITS) + master.metric(FORWARDS) >= N
    assert master.metric(RESERVES) < N / 2
    assert master.metric("master_put_start_requests_total") == N
    assert master.metric("master_put_end_requests_total") == N
    # a batch: one commit for all of it
    commits = master.metric(COMMITS)
    assert client.run("items = [('b%d' % i, pattern(65536, 'b%d' % i)) for i in range(16)]\n"
                      "result = store.put_batch([k for k, _ in items], [v for _, v in items])"
                      ) == 0
    assert master.metric(COMMITS) <= commits + 2  # the batch's, and perhaps a give-back
    stored.update(client.run("result = {('b%d' % i): sha(pattern(65536, 'b%d' % i))"
                             " for i in range(16)}"))
    # an existing key keeps its first value, as a put of the start path does
    assert client.run("result = store.put('small0', b'x' * 4096)") == 0
    assert digests(client, stored) == stored

    port = master.port
    master.stop(signal.SIGKILL)
    master = make_master(LEASE, f"--metadata_dir={d}", port=port)
    assert wait_for(lambda: node.run("result = store.is_exist('small0')") == 1, timeout=60)
    assert digests(client, stored) == stored


def test_a_slot_put_stopped_across_a_restart_is_placed_again(make_master, make_worker, tmp_path):
    for point in ("store_put_after_start", "store_put_before_end"):
        d = str(tmp_path / point)
        master = make_master(LEASE, f"--metadata_dir={d}")
        node = make_worker()
        # the client commits itself, so that the second stop lies between its bytes and its
        # commit (a forwarded put's bytes and commit travel together: test_store_put_forward.py
        # stops the holder between them)
        late = make_worker(env={"MC_FAILPOINTS": f"{point}=stop", "MC_STORE_PUT_FORWARD": "0"})
        node.setup(master, segment=64 << 20)
        late.setup(master, segment=0)
        late.send("result = store.put('late', pattern(4096, 'late'))")
        assert wait_for(late.stopped, timeout=30), "the writer did not reach " + point
        port = master.port
        master.stop(signal.SIGKILL)
        master = make_master(LEASE, f"--metadata_dir={d}", port=port)
        stored = put_many(node, "fill", N, 4096)
        late.signal(signal.SIGCONT)
        # its slot is gone with the restart: the commit says so and the put is placed again
        assert late.reply() == 0
        assert late.run("result = sha(store.get('late')) == sha(pattern(4096, 'late'))") is True
        assert digests(node, stored) == stored
        master.stop()


def test_slots_off_takes_the_start_path(make_master, make_worker):
    master = make_master(LEASE)
    node, client = make_worker(), make_worker(env={"MC_STORE_PUT_SLOTS": "0"})
    node.setup(master, segment=64 << 20)
    client.setup(master, segment=0)
    stored = put_many(client, "old", 8, 4096)
    assert master.metric(STARTS) >= 8
    assert master.metric(COMMITS) == 0
    assert master.metric(RESERVES) == 0
    assert digests(client, stored) == stored
