"""Dummy clients (MooncakeDistributedStore.setup_dummy) of real mooncake_client nodes, each in its
own process: the store calls a dummy offers with bytes verified, memory from
MooncakeHostMemAllocator / alloc_from_mem_pool moved without a copy, and the faults that matter:
a node SIGKILLed (the pool keeps serving every object with a replica on a live node) and a dummy
SIGKILLed (its node keeps serving the others and drops what the dead one held)."""

import signal

import pytest
from node_helpers import Node, dummy_setup
from store_helpers import wait_for


@pytest.fixture
def node_pair(make_master):
    master = make_master("--client_ttl=6")
    nodes = [Node(master, segment="64mb", http=True), Node(master, segment="64mb", http=True)]
    yield master, nodes
    for n in nodes:
        n.stop(signal.SIGKILL)


def test_dummy_api(node_pair, make_worker):
    _, (node, _) = node_pair
    w = make_worker()
    dummy_setup(w, node, local_buffer=4 << 20)
    # the segment name a dummy reports is its node's
    assert w.run("result = store.get_hostname()") == node.segment
    assert w.run("result = store.health_check()") == 0
    # put / get / get_size / is_exist / remove, and the same key again (first value stays)
    assert w.run("result = store.put('d-basic', b'Hello, World!')") == 0
    assert w.run("result = store.get('d-basic') == b'Hello, World!'") is True
    assert w.run("result = store.get_size('d-basic')") == 13
    assert w.run("result = store.put('d-basic', b'Hello, World!')") == 0
    assert w.run("result = store.is_exist('d-basic')") == 1
    assert w.run("result = store.batch_is_exist(['d-basic', 'd-none'])") == [1, 0]
    assert w.run("result = store.batch_is_exist([])") == []
    assert w.run("result = store.get('d-none') == b''") is True
    assert w.run("result = store.get_size('d-none')") == -704
    assert w.run("result = store.remove('d-basic', force=True)") == 0
    assert w.run("result = store.is_exist('d-basic')") == 0
    # values bigger than the local buffer (a block of their own) and batches
    assert w.run("result = store.put('d-big', pattern(9 << 20, 3))") == 0
    assert w.run("result = sha(store.get('d-big')) == sha(pattern(9 << 20, 3))") is True
    assert w.run("result = store.put_batch(['d-b1', 'd-b2'], [pattern(1000, 1), pattern(2000, 2)])"
                 ) == 0
    assert w.run("result = [sha(v) for v in store.get_batch(['d-b1', 'd-b2'])] == "
                 "[sha(pattern(1000, 1)), sha(pattern(2000, 2))]") is True
    assert w.run("result = store.put_parts('d-parts', b'ab', b'cd', b'ef')") == 0
    assert w.run("result = store.get('d-parts') == b'abcdef'") is True
    assert w.run("result = store.upsert('d-parts', b'new value')") == 0
    assert w.run("result = store.get('d-parts') == b'new value'") is True
    # zero copy: pool memory from the allocator and from alloc_from_mem_pool
    w.run("""
from mooncake.store import MooncakeHostMemAllocator
ns['alloc'] = MooncakeHostMemAllocator()
ns['src'] = ns['alloc'].alloc(1 << 20)
ns['dst'] = store.alloc_from_mem_pool(1 << 20)
data = pattern(1 << 20, 7)
ctypes.memmove(ns['src'], data, len(data))
result = [store.register_buffer(ns['src'], 1 << 20), store.register_buffer(ns['dst'], 1 << 20)]
""") == [0, 0]
    assert w.run("result = store.put_from('d-zc', ns['src'], 1 << 20)") == 0
    assert w.run("result = store.get_into('d-zc', ns['dst'], 1 << 20)") == 1 << 20
    assert w.run("result = sha(ctypes.string_at(ns['dst'], 1 << 20)) == sha(pattern(1 << 20, 7))"
                 ) is True
    assert w.run("result = store.batch_put_from(['d-zc1', 'd-zc2'], [ns['src'], ns['src'] + 4096],"
                 " [4096, 4096])") == [0, 0]
    assert w.run("result = store.batch_get_into(['d-zc1', 'd-zc2', 'd-none'], [ns['dst'], "
                 "ns['dst'] + 4096, ns['dst'] + 8192], [4096, 4096, 4096])") == [4096, 4096, -704]
    assert w.run("result = ctypes.string_at(ns['dst'] + 4096, 4096) == "
                 "pattern(1 << 20, 7)[4096:8192]") is True
    assert w.run("result = store.get_into('d-zc', ns['dst'], 100)") == -10  # buffer too small
    # ranged reads, buffer-major as the reference's test has them
    assert w.run("store.put('d-r1', b'0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ'); "
                 "store.put('d-r2', b'abcdefghijklmnopqrstuvwxyz0123456789'); "
                 "result = store.get_into_ranges([ns['dst'], ns['dst'] + 64], "
                 "[['d-r1', 'd-r2'], ['d-r2', 'd-r1']], [[[0, 20], [8]], [[4], [16]]], "
                 "[[[2, 30], [10]], [[0], [12]]], [[[4, 3], [6]], [[6], [4]]])"
                 ) == [[[4, 3], [6]], [[6], [4]]]
    assert w.run("b = ctypes.string_at(ns['dst'], 128); "
                 "result = [b[0:4] == b'2345', b[8:14] == b'klmnop', b[20:23] == b'UVW', "
                 "b[68:74] == b'abcdef', b[80:84] == b'CDEF']") == [True] * 5
    # a range that starts in a registered buffer but runs past its end fails alone
    assert w.run("ns['small'] = store.alloc_from_mem_pool(32); "
                 "store.register_buffer(ns['small'], 32); "
                 "result = store.get_into_ranges([ns['small']], [['d-r1']], [[[30]]], [[[0]]], "
                 "[[[4]]])[0][0][0]") == -600
    assert w.run("result = [store.unregister_buffer(ns['small']), "
                 "store.unregister_buffer(ns['small'])]") == [0, -600]
    # memory of no pool block cannot be registered by a dummy
    assert w.run("ns['heap'] = ctypes.create_string_buffer(4096); "
                 "result = store.register_buffer(ctypes.addressof(ns['heap']), 4096)") == -600
    assert w.run("result = ns['alloc'].free(ns['src'])") == 0
    assert w.run("result = ns['alloc'].free(ns['src'])") == -600
    assert w.run("result = store.remove_by_regex('^d-', force=True)") >= 8
    assert w.run("result = store.close()") == 0
    assert w.run("result = store.put('d-after-close', b'x')") == -1010


def test_setup_dummy_without_a_node(make_worker):
    w = make_worker()
    assert w.run("result = store.setup_dummy(1 << 20, 1 << 20, '127.0.0.1:1')") == -900
    assert w.run("result = store.setup_dummy(1 << 20, 1 << 20, 'nonsense')") == -600
    assert w.run("result = store.put('k', b'v')") == -1010


def _put_all(w, keys, size, replicas):
    code = (f"from mooncake.store import ReplicateConfig\n"
            f"c = ReplicateConfig(); c.replica_num = {replicas}\n"
            f"result = [store.put(k, pattern({size}, k)) for k in {keys!r}]")
    return w.run(code)


def _verify(w, keys, size):
    return w.run(f"result = {{k: (lambda v: -1 if not v else (1 if sha(v) == "
                 f"sha(pattern({size}, k)) else 0))(store.get(k)) for k in {keys!r}}}")


def test_two_nodes_many_dummies_and_faults(node_pair, make_worker):
    master, (a, b) = node_pair
    dummies_a = [make_worker() for _ in range(2)]
    dummies_b = [make_worker() for _ in range(3)]
    for w in dummies_a:
        dummy_setup(w, a)
    for w in dummies_b:
        dummy_setup(w, b)
    assert a.metric("mooncake_client_dummy_clients") == 2
    assert b.metric("mooncake_client_dummy_clients") == 3
    size = 300000
    # Every dummy writes its own keys with two replicas (one on each node's segment) ...
    keys = {}
    for i, w in enumerate(dummies_a + dummies_b):
        keys[i] = [f"pair-{i}-{j}" for j in range(6)]
        assert w.run("from mooncake.store import ReplicateConfig\n"
                     "c = ReplicateConfig(); c.replica_num = 2\n"
                     f"result = [store.put(k, pattern({size}, k), c) for k in {keys[i]!r}]"
                     ) == [0] * 6
    every = [k for ks in keys.values() for k in ks]
    # ... and every dummy, through either node, reads everyone's bytes back.
    for w in dummies_a + dummies_b:
        assert set(_verify(w, every, size).values()) == {1}
    # Pinned to node A only (replica_num=1, preferred: A's segment): lost with A.
    only_a = [f"only-a-{j}" for j in range(4)]
    assert dummies_a[0].run(
        "from mooncake.store import ReplicateConfig\n"
        f"c = ReplicateConfig(); c.preferred_segment = {a.segment!r}\n"
        f"result = [store.put(k, pattern({size}, k), c) for k in {only_a!r}]") == [0] * 4

    # A dummy of B is SIGKILLed in the middle of its calls: B serves the rest and drops what the
    # dead one held.
    dead = dummies_b.pop()
    calls = b.metric("mooncake_client_rpc_count")
    dead.send("while True:\n"
              "    store.put(f'busy-{os.getpid()}', pattern(2 << 20, 'busy'))\n"
              "    store.get(f'busy-{os.getpid()}')\n"
              "    store.remove(f'busy-{os.getpid()}', force=True)")
    assert wait_for(lambda: b.metric("mooncake_client_rpc_count") > calls + 30, timeout=60)
    mapped = b.metric("mooncake_client_shm_mapped_bytes")
    assert mapped > 0
    dead.kill()
    assert wait_for(lambda: b.metric("mooncake_client_dummy_clients") == 2, timeout=60)
    assert b.metric("mooncake_client_shm_mapped_bytes") < mapped
    for w in dummies_b:
        assert set(_verify(w, every, size).values()) == {1}
        assert w.run("result = store.put(f'after-dummy-death-{os.getpid()}', b'z' * 100)") == 0

    # Node A is SIGKILLed: every object with a replica on B is still served, with its bytes.
    a.stop(signal.SIGKILL)
    for w in dummies_b:
        got = _verify(w, every, size)
        assert set(got.values()) == {1}, {k: v for k, v in got.items() if v != 1}
        got = _verify(w, only_a, size)
        assert set(got.values()) <= {-1}, got  # gone with A (never wrong bytes)
    # The master forgets A once its client_ttl passes; B's segment stays.
    assert wait_for(lambda: a.segment not in master.http("/get_all_segments"), timeout=60)
    assert b.segment in master.http("/get_all_segments")
    # New puts land on B and work.
    assert dummies_b[0].run(f"result = store.put('after-a-died', pattern({size}, 'x'))") == 0
    assert dummies_b[1].run(f"result = sha(store.get('after-a-died')) == sha(pattern({size}, 'x'))"
                            ) is True
    # A's dummies say their node is gone, clearly.
    assert dummies_a[0].run("result = store.put('to-a-dead-node', b'x')") == -900
    assert dummies_a[0].run("result = store.health_check()") == 2


def test_dummies_share_one_node_concurrently(node_pair, make_worker):
    _, (node, _) = node_pair
    ws = [make_worker() for _ in range(4)]
    for w in ws:
        dummy_setup(w, node, local_buffer=2 << 20)
    # All at once: each writes and reads its own keys from two threads.
    code = """
errors = []
def job(t):
    for j in range(20):
        k = f'conc-{os.getpid()}-{t}-{j}'
        v = pattern(50000 + j, k)
        if store.put(k, v) != 0 or sha(store.get(k)) != sha(v):
            errors.append(k)
ts = [threading.Thread(target=job, args=(t,)) for t in range(2)]
[t.start() for t in ts]
[t.join() for t in ts]
result = errors
"""
    for w in ws:
        w.send(code)
    for w in ws:
        assert w.reply() == []
    # Four processes, each with as many connections as its threads needed at once.
    assert node.metric("mooncake_client_dummy_clients") == 4
    assert node.metric("mooncake_client_dummy_connections") >= 4
