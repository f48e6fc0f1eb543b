"""A get that waits once (docs/perf/issue26-put.md, "A get that waits once"): a reader that does
not know a key's replicas asks the holder its last read found a value on; the holder asks the
master for the replica list (a lease) and answers with it and, when it holds a replica of at
most 16 KiB, the value. What a get returns does not change: values read back through one
holder, through a second one, with a holder stopped after its lookup and then killed (the reader
reads the second replica), from holders that forward only puts or only gets, and for keys that
are missing or removed."""

import signal

from store_helpers import digests, put_many, wait_for

LEASE = "--default_kv_lease_ttl=200"
FORWARDS = 'mooncake_master_requests_total{op="put_commit_for"}'
COMMITS = 'mooncake_master_requests_total{op="put_commit"}'
STOP_AFTER_LOOKUP = {"MC_FAILPOINTS": "store_get_forward_after_lookup=stop"}


def second_get_through(holder, reader, stored, first, second):
    """The reader's first get asks the master itself and learns which holder to ask next; the
    second goes to that holder, which stops after its lookup, holding the answer, and is let go.
    """
    assert reader.run(f"result = sha(store.get({first!r}))") == stored[first]
    reader.send(f"result = sha(store.get({second!r}))")
    assert wait_for(holder.stopped, timeout=30), "the get did not reach the holder"
    holder.signal(signal.SIGCONT)
    assert reader.reply() == stored[second]


def test_a_first_get_goes_through_the_holder(make_master, make_worker):
    master = make_master(LEASE)
    node = make_worker(env=STOP_AFTER_LOOKUP)
    node.setup(master, segment=64 << 20)
    writer, reader = make_worker(), make_worker()
    writer.setup(master, segment=0)
    reader.setup(master, segment=0)
    stored = put_many(writer, "small", 16, 4096)
    stored.update(put_many(writer, "edge", 4, 16384))  # the largest sent with an answer
    stored.update(put_many(writer, "big", 4, 65536))  # read through the list the holder sends
    second_get_through(node, reader, stored, "small0", "small1")
    assert digests(reader, stored) == stored
    # into a buffer of the caller's (get_into): a value that fits comes with the answer
    assert reader.run(
        "import ctypes\n"
        "buf = ctypes.create_string_buffer(4096)\n"
        "ptr = ctypes.addressof(buf)\n"
        "assert store.register_buffer(ptr, 4096) == 0\n"
        "n = store.get_into('small2', ptr, 4096)\n"
        "result = [n, sha(buf.raw[:n])]\n"
        "store.unregister_buffer(ptr)") == [4096, stored["small2"]]


def test_a_holder_stopped_and_killed_mid_get(make_master, make_worker):
    master = make_master(LEASE)
    nodes = [make_worker(env=STOP_AFTER_LOOKUP) for _ in range(2)]
    for n in nodes:
        n.setup(master, segment=64 << 20)
    writer, reader = make_worker(), make_worker()
    writer.setup(master, segment=0)
    reader.setup(master, segment=0)
    stored = writer.run("c = ReplicateConfig(); c.replica_num = 2\n"
                        "out = {}\n"
                        "for i in range(8):\n"
                        "    v = pattern(4096, 'two%d' % i)\n"
                        "    assert store.put('two%d' % i, v, c) == 0\n"
                        "    out['two%d' % i] = sha(v)\n"
                        "result = out")
    assert reader.run("result = sha(store.get('two0'))") == stored["two0"]
    reader.send("result = sha(store.get('two1'))")
    assert wait_for(lambda: any(n.stopped() for n in nodes), timeout=30)
    asked = next(n for n in nodes if n.stopped())
    other = next(n for n in nodes if n is not asked)
    asked.kill()
    # the holder's answer never came: the reader asks the master and reads the other replica
    assert reader.reply() == stored["two1"]
    # and asks the other holder next (which stops once there, at its own failpoint)
    reader.send(f"result = {{k: sha(store.get(k)) for k in {sorted(stored)!r}}}")
    assert wait_for(other.stopped, timeout=30), "the reader did not turn to the other holder"
    other.signal(signal.SIGCONT)
    assert reader.reply() == stored


def test_holders_that_forward_one_kind_only(make_master, make_worker):
    master = make_master(LEASE)
    gets_off = make_worker(env={"MC_STORE_GET_FORWARD": "0"})
    gets_off.setup(master, segment=64 << 20)
    client = make_worker()
    client.setup(master, segment=0)
    stored = put_many(client, "a", 16, 4096)
    assert master.metric(FORWARDS) >= 1  # puts still forwarded
    reader = make_worker()
    reader.setup(master, segment=0)
    assert digests(reader, stored) == stored  # it declines the gets; the reader asks the master

    puts_off = make_worker(env={"MC_STORE_PUT_FORWARD": "0", **STOP_AFTER_LOOKUP})
    puts_off.setup(master, segment=64 << 20)
    gets_off.close()  # the values now go to puts_off
    commits = master.metric(COMMITS)
    more = put_many(client, "b", 16, 4096)
    assert master.metric(COMMITS) - commits >= 16  # it declined the commits: the client's own
    reader2 = make_worker()
    reader2.setup(master, segment=0)
    second_get_through(puts_off, reader2, more, "b0", "b1")
    assert digests(reader2, more) == more


def test_missing_and_removed_keys(make_master, make_worker):
    master = make_master(LEASE)
    node = make_worker()
    node.setup(master, segment=64 << 20)
    client = make_worker()
    client.setup(master, segment=0)
    plain = make_worker(env={"MC_STORE_GET_FORWARD": "0"})
    plain.setup(master, segment=0)
    stored = put_many(client, "k", 4, 4096)
    probe = ("result = [sha(store.get('k0')), len(store.get('nothing')),\n"
             "          store.get_size('nothing'), store.remove('k3'), len(store.get('k3')),\n"
             "          store.is_exist('k3')]")
    # the reader that asks holders gets the same answers as one that asks the master
    assert client.run("result = sha(store.get('k1'))") == stored["k1"]
    want = plain.run(probe.replace("'k3'", "'k2'"))
    got = client.run(probe)
    assert got[0] == want[0] == stored["k0"]
    assert got[1:] == want[1:]
    # and the holder still serves
    assert digests(client, {"k0": stored["k0"], "k1": stored["k1"]}) == {
        "k0": stored["k0"], "k1": stored["k1"]}
