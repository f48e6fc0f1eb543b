"""The Python surface: argument checking, return conventions, configuration forms, engine
sharing, pure client and pure storage node."""

import json
import re

import pytest

from mooncake.store import MAX_KEY_LEN, MooncakeDistributedStore, ReplicateConfig, strerror


@pytest.fixture
def store(make_master):
    master = make_master()
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 16 << 20, 4 << 20, "tcp", "", master.addr) == 0
    yield s
    s.close()


def test_unknown_keywords_raise_type_error_naming_them(store):
    s = MooncakeDistributedStore()
    with pytest.raises(TypeError, match="no_such_option"):
        s.setup("127.0.0.1", "P2PHANDSHAKE", no_such_option=1)
    with pytest.raises(TypeError, match="bogus"):
        store.put("k", b"v", bogus=1)
    with pytest.raises(TypeError, match="extra"):
        store.put_parts("k", b"v", extra=1)
    with pytest.raises(TypeError, match="other"):
        store.get_buffer(other="k")
    with pytest.raises(TypeError, match="nope"):
        s.setup({"local_hostname": "127.0.0.1", "nope": "1"})


def test_wrong_types_raise_type_error(store):
    for call in (lambda: store.put(1, b"v"), lambda: store.put("k", "not bytes"),
                 lambda: store.get(None), lambda: store.put_from("k", "addr", 1),
                 lambda: store.batch_is_exist("abc"), lambda: store.get_batch([1, 2]),
                 lambda: store.put("k", b"v", config=5),
                 lambda: store.put("k", b"v", config=ReplicateConfig(replica_num="2")),
                 lambda: store.register_buffer(1.5, 10), lambda: store.remove(b"k"),
                 lambda: MooncakeDistributedStore().setup("h", "P2PHANDSHAKE", [1]),
                 lambda: MooncakeDistributedStore().setup("h", "P2PHANDSHAKE", engine=object())):
        with pytest.raises(TypeError):
            call()
    with pytest.raises(ValueError):
        store.get_into("k", -1, 10)
    with pytest.raises(ValueError):
        store.put("a\0b", b"v")
    # Lists of unequal length: the reference's answer, -600 for each key (no exception).
    assert store.batch_put_from(["a", "b"], [1], [1, 2]) == [-600, -600]
    assert store.batch_get_into(["a", "b", "c"], [1, 2], [1, 2, 3]) == [-600] * 3
    assert store.batch_put_from_multi_buffers(["a"], [[1], [2]], [[1]]) == [-600]
    assert store.batch_get_into_multi_buffers(["a", "b"], [[1], [2]], [[1, 2], [1]]) == [-600] * 2
    assert store.put_batch(["a", "b"], [b"x"]) == -600
    with pytest.raises(ValueError):
        store.put("k", b"v", config=ReplicateConfig(replica_num=0))
    # The store still works after all that.
    assert store.put("still-ok", b"v") == 0
    assert store.get("still-ok") == b"v"


def test_bad_keys_and_values_get_codes(store):
    assert store.put("", b"v") == -400
    assert store.put("k" * (MAX_KEY_LEN + 1), b"v") == -400
    assert store.put("k" * MAX_KEY_LEN, b"v") == 0
    assert store.get("k" * MAX_KEY_LEN) == b"v"
    assert store.get("") == b""
    assert store.is_exist("") == -1
    assert store.get_size("") == -400
    assert store.batch_is_exist(["", "k" * MAX_KEY_LEN, "absent"]) == [-1, 1, 0]
    assert store.put("zero", b"") == -600
    assert store.put("toolarge", bytes(17 << 20)) == -200
    assert store.get_into("absent", 0, 0) == -704
    assert store.put_from("k2", 0, 10) < 0  # NULL source
    assert store.health_check() == 0
    assert "not found" in strerror(-704)


def test_calls_before_setup_and_after_close(make_master):
    s = MooncakeDistributedStore()
    assert s.health_check() == 1
    assert s.put("k", b"v") == -1010
    assert s.get("k") == b""
    assert s.is_exist("k") == -1
    assert s.get_hostname() == ""
    master = make_master()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 1 << 20, "tcp", "", master.addr) == 0
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 1 << 20, "tcp", "", master.addr) < 0
    assert s.close() == 0
    assert s.close() == 0
    assert s.health_check() == 1
    assert s.put("k", b"v") == -1010


def test_a_closed_store_sets_up_again(make_master, make_worker):
    master = make_master()
    other = make_worker()
    other.setup(master, segment=0)
    s = MooncakeDistributedStore()
    # a failed setup (no master there) leaves nothing behind either
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 8 << 20, 1 << 20, "tcp", "", "127.0.0.1:1") == -900
    for round_ in range(3):
        assert s.setup("127.0.0.1", "P2PHANDSHAKE", 8 << 20, 1 << 20, "tcp", "", master.addr) == 0
        assert s.put(f"again-{round_}", b"x" * 5000) == 0
        assert other.run(f"result = store.get('again-{round_}') == b'x' * 5000") is True
        assert s.close() == 0
    # the master saw each close: no segment is left mounted
    assert master.metric("mooncake_master_segments") == 0


def test_close_frees_the_name_and_port_at_once(make_master):
    """As the reference's close: the engine goes with it, so another store takes the same
    host:port right away although the closed object is still alive. A get_buffer buffer still
    out keeps the closed store's engine and memory until the buffer is freed."""
    import socket

    master = make_master()

    def free_name():
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return f"127.0.0.1:{probe.getsockname()[1]}"

    def setup(store, name):
        return store.setup(name, "P2PHANDSHAKE", 8 << 20, 1 << 20, "tcp", "", master.addr)

    a, b = MooncakeDistributedStore(), MooncakeDistributedStore()
    name = free_name()
    assert setup(a, name) == 0
    assert a.put("k", b"v") == 0
    assert a.close() == 0
    assert setup(b, name) == 0 and b.get_hostname() == name
    assert b.put("k2", b"v2") == 0 and b.get("k2") == b"v2"
    assert b.close() == 0

    name = free_name()
    assert setup(a, name) == 0
    assert a.put("held", b"h" * 1000) == 0
    held = a.get_buffer("held")
    assert a.close() == 0
    assert bytes(held) == b"h" * 1000  # its memory stays while the buffer lives
    assert setup(b, name) != 0  # and so does the closed store's port
    del held
    assert setup(a, name) == 0  # the buffer is gone: a sets up again from scratch
    assert a.close() == 0
    assert setup(b, name) == 0
    b.close()


def test_setup_from_dict_with_string_values(make_master, make_worker):
    master = make_master()
    w = make_worker()
    cfg = {"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
           "global_segment_size": "8mb", "local_buffer_size": "2MiB", "protocol": "tcp",
           "rdma_devices": "", "master_server_addr": master.addr}
    assert w.run(f"result = store.setup({cfg!r})") == 0
    assert master.metric("mooncake_master_capacity_bytes") == 8 << 20
    assert w.run("result = store.put('d', b'dict')") == 0
    bad = dict(cfg, global_segment_size="lots")
    w2 = make_worker()
    assert w2.run(f"result = store.setup({bad!r})") == -600


def test_setup_from_environment_and_config_file(make_master, make_worker, tmp_path):
    master = make_master()
    conf = tmp_path / "mooncake.json"
    conf.write_text(json.dumps({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                                "master_server_address": "127.0.0.1:1",
                                "global_segment_size": "4gb", "local_buffer_size": 1048576,
                                "protocol": "tcp", "device_name": ""}))
    # The environment overrides the file (the master address and the segment size here).
    w = make_worker({"MOONCAKE_CONFIG_PATH": str(conf), "MOONCAKE_MASTER": master.addr,
                     "MOONCAKE_GLOBAL_SEGMENT_SIZE": "12mb"})
    assert w.run("result = store.setup()") == 0
    assert master.metric("mooncake_master_capacity_bytes") == 12 << 20
    # Explicit arguments override both.
    w2 = make_worker({"MOONCAKE_CONFIG_PATH": str(conf), "MOONCAKE_MASTER": master.addr})
    assert w2.run("result = store.setup('127.0.0.1', 'P2PHANDSHAKE', 2 << 20, 1 << 20)") == 0
    assert master.metric("mooncake_master_capacity_bytes") == 14 << 20
    # A bad value in the environment fails setup with INVALID_PARAMS.
    w3 = make_worker({"MOONCAKE_LOCAL_BUFFER_SIZE": "-3", "MOONCAKE_MASTER": master.addr})
    assert w3.run("result = store.setup()") == -600
    w4 = make_worker({"MOONCAKE_CONFIG_PATH": str(tmp_path / "missing.json")})
    assert w4.run("result = store.setup()") < 0


def test_shared_engine(make_master):
    from mooncake.engine import TransferEngine
    master = make_master()
    te = TransferEngine()
    assert te.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 4 << 20, 1 << 20, "tcp", "", master.addr,
                   engine=te.get_engine()) == 0
    assert s.get_hostname() == f"127.0.0.1:{te.get_rpc_port()}"
    assert s.put("shared", b"through a shared engine") == 0
    assert s.get("shared") == b"through a shared engine"
    assert s.close() == 0


def test_pure_storage_node_and_pure_client(make_master, make_worker):
    master = make_master()
    node, client = make_worker(), make_worker()
    node.setup(master, segment=16 << 20, buffer=0)  # no staging buffer
    client.setup(master, segment=0, buffer=4 << 20)
    d = client.run("v = pattern(3 << 20, 'pure'); result = [store.put('pure', v), sha(v)]")
    assert d[0] == 0
    # The storage node reads without a staging buffer (its memory is registered per call).
    assert node.run("result = sha(store.get('pure'))") == d[1]
    assert node.run("result = store.put('node', pattern(5000, 'n'))") == 0
    assert client.run("result = sha(store.get('node')) == sha(pattern(5000, 'n'))") is True
    # A buffer-protocol object from get_buffer is a zero-copy view that outlives close().
    assert client.run("b = store.get_buffer('node'); store.close();"
                      " result = sha(memoryview(b)) == sha(pattern(5000, 'n'))") is True


@pytest.mark.parametrize("metadata", ["P2PHANDSHAKE", "http"])
def test_bare_local_hostname_gets_a_port(make_master, make_worker, metadata):
    # vLLM and SGLang pass local_hostname="127.0.0.1" (or "localhost") from every process of a
    # host: each must get a segment name of its own, or they read only their own objects.
    if metadata == "http":
        master = make_master("--enable_http_metadata_server", "--http_metadata_server_port=0",
                             "--http_metadata_server_host=127.0.0.1")
        meta = f"http://127.0.0.1:{master.http_metadata_port}/metadata"
    else:
        master = make_master()
        meta = "P2PHANDSHAKE"
    a, b = make_worker(), make_worker()
    names = []
    for w in (a, b):
        assert w.run(f"result = store.setup('127.0.0.1', {meta!r}, 16 << 20, 4 << 20, 'tcp', '',"
                     f" {master.addr!r})") == 0
        names.append(w.run("result = store.get_hostname()"))
    for n in names:
        host, _, port = n.rpartition(":")
        assert host == "127.0.0.1" and 12300 <= int(port) <= 14300, n
    assert names[0] != names[1]
    for i, w in enumerate((a, b)):
        cfg = f"ReplicateConfig(preferred_segments=[{names[i]!r}])"
        assert w.run(f"result = store.put('own-{i}', pattern(300000, 'own-{i}'), "
                     f"config={cfg})") == 0
    assert a.run("result = sha(store.get('own-1')) == sha(pattern(300000, 'own-1'))") is True
    assert b.run("result = sha(store.get('own-0')) == sha(pattern(300000, 'own-0'))") is True


def config_file(tmp_path, name, data):
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return str(p)


def test_config_files_of_vllm_and_lmcache_set_up_a_store(make_master, make_worker, tmp_path):
    master = make_master()
    # vLLM's Mooncake connector and LMCache's mooncakestore backend write their own keys into the
    # file they point MOONCAKE_CONFIG_PATH at; ours are read, theirs ignored.
    vllm = config_file(tmp_path, "vllm.json", {
        "local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE", "protocol": "tcp",
        "device_name": "", "master_server_address": master.addr,
        "global_segment_size": "32MB", "local_buffer_size": 16 << 20,
        "transfer_timeout": 1, "storage_root_dir": "", "kv_connector_extra_config": {"a": 1}})
    lmcache = config_file(tmp_path, "lmcache.json", {
        "local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE", "protocol": "tcp",
        "master_server_address": master.addr, "global_segment_size": 33554432,
        "local_buffer_size": 16777216, "chunk_size": 256, "save_chunk_meta": False,
        "use_exponential_backoff": True, "mooncake_prefer_local_alloc": None,
        "extra_config": {"nested": [1, 2]}})
    for path in (vllm, lmcache):
        w = make_worker(env={"MOONCAKE_CONFIG_PATH": path})
        assert w.run("result = store.setup()") == 0
        assert w.run(f"result = store.put('cfg-{path[-9:]}', b'z' * 100)") == 0


def test_explicit_arguments_win_over_the_config_file(make_master, make_worker, tmp_path):
    master = make_master()
    bad = config_file(tmp_path, "bad.json", {"global_segment_size": "lots",
                                             "master_server_address": "127.0.0.1:1"})
    w = make_worker(env={"MOONCAKE_CONFIG_PATH": bad})
    # every setting given: the file's (bad or wrong) values are not consulted for them
    assert w.run("result = store.setup('127.0.0.1', 'P2PHANDSHAKE', 8 << 20, 4 << 20, 'tcp', '',"
                 f" {master.addr!r})") == 0
    # a store setting the call leaves to the file still has to be valid there
    w2 = make_worker(env={"MOONCAKE_CONFIG_PATH": bad})
    assert w2.run(f"result = store.setup(master_server_addr={master.addr!r})") == -600


def test_store_calls_return_store_codes_only(make_master, make_worker, tmp_path):
    from mooncake.store import StoreError
    import socket
    master = make_master()
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    try:
        w = make_worker()
        # the engine cannot listen there: a store code (-600), not the engine's SOCKET (-102,
        # which the store's table calls SEGMENT_ALREADY_EXISTS)
        rc = w.run(f"result = store.setup('127.0.0.1:{port}', 'P2PHANDSHAKE', 0, 1 << 20,"
                   f" 'tcp', '', {master.addr!r})")
        assert rc == -600 and StoreError(rc).name == "INVALID_PARAMS"
    finally:
        busy.close()
    missing = make_worker(env={"MOONCAKE_CONFIG_PATH": str(tmp_path / "nope.json")})
    rc = missing.run("result = store.setup()")
    assert rc == -1100 and StoreError(rc).name == "FILE_NOT_FOUND"
    w = make_worker()
    w.setup(master, segment=0)
    rc = w.run("b = ctypes.create_string_buffer(8192); ns['b'] = b\n"
               "a = ctypes.addressof(b)\n"
               "result = [store.register_buffer(a, 8192), store.register_buffer(a + 4096, 4096)]")
    assert rc[0] == 0 and rc[1] == -600
    # StoreError knows every code the C side has for the store
    import mooncake._store as raw
    assert {n for n, _ in raw.STORE_ERRORS} == set(StoreError.__members__)
    assert StoreError.FILE_NOT_FOUND == -1100 and StoreError.ETCD_OPERATION_ERROR == -1000


SETUP = ("r = store.setup({host!r}, {meta!r}, 4 << 20, 1 << 20, {proto!r}, '', {master!r})\n"
         "result = [r, store.get_hostname()]")


def test_bad_environment_values_are_said_not_swallowed(make_master, make_worker, tmp_path):
    master = make_master()
    for env, said in (({"MC_LOG_LEVEL": "loud"}, "ignoring MC_LOG_LEVEL=loud"),
                      ({"MC_FORCE_TCP": "maybe"}, "ignoring MC_FORCE_TCP=maybe"),
                      ({"MOONCAKE_PROTOCOL": "bogus"}, 'protocol "bogus"')):
        log = tmp_path / "log.txt"
        with open(log, "w") as err:
            w = make_worker(env=env, stderr=err)
            cfg = "" if "MOONCAKE_PROTOCOL" in env else "tcp"
            code = (f"result = store.setup(master_server_addr={master.addr!r})" if not cfg else
                    SETUP.format(host="127.0.0.1", meta="P2PHANDSHAKE", proto=cfg,
                                 master=master.addr) + "\nresult = result[0]")
            assert w.run(code) == 0
            w.close()
        assert said in log.read_text(), (env, log.read_text())
    # an empty port range: a clear error, not "cannot listen ...: Success"
    log = tmp_path / "range.txt"
    with open(log, "w") as err:
        w = make_worker(env={"MC_MIN_RPC_PORT": "20000"}, stderr=err)
        r = w.run(SETUP.format(host="127.0.0.1", meta="P2PHANDSHAKE", proto="tcp",
                               master=master.addr))
        w.close()
    assert r[0] == -600
    assert "range 20000..17000 is empty" in log.read_text()
    assert "Success" not in log.read_text()


def test_none_is_not_a_setting(make_master, make_worker):
    master = make_master()
    w = make_worker()
    with pytest.raises(AssertionError, match="TypeError"):
        w.run("result = store.setup('127.0.0.1', 'P2PHANDSHAKE', 1 << 20, 1 << 20, 'tcp', '',"
              " None)")
    # the same store still sets up with a real address
    assert w.run(f"result = store.setup(master_server_addr={master.addr!r})") == 0


def test_ipv6_local_hostname(make_master, make_worker):
    master = make_master()
    a, b = make_worker(), make_worker()
    names = []
    for w in (a, b):
        r = w.run(SETUP.format(host="[::1]", meta="P2PHANDSHAKE", proto="tcp",
                               master=master.addr))
        assert r[0] == 0, r
        assert re.fullmatch(r"\[::1\]:\d+", r[1]), r[1]
        names.append(r[1])
    assert a.run("result = store.put('six', b'v6' * 1000)") == 0
    assert b.run("result = store.get('six') == b'v6' * 1000") is True


def test_two_engines_cannot_share_a_segment_name(make_master, make_worker, tmp_path):
    master = make_master("--enable_http_metadata_server", "--http_metadata_server_port=0",
                         "--http_metadata_server_host=127.0.0.1")
    meta = f"http://127.0.0.1:{master.http_metadata_port}/metadata"
    init = ("from mooncake.engine import TransferEngine\n"
            "e = TransferEngine(); ns['e'] = e\n"
            f"result = e.initialize('prefill-0', {meta!r}, 'tcp', '')")
    first = make_worker()
    assert first.run(init) == 0
    log = tmp_path / "second.txt"
    with open(log, "w") as err:
        second = make_worker(stderr=err)
        assert second.run(init) != 0
        second.close()
    assert 'segment name "prefill-0" is already served by another engine' in log.read_text()
    # once the first is gone, the name can be taken over
    first.run("ns['e'] = None; import gc; gc.collect(); result = 0")
    third = make_worker()
    assert third.run(init) == 0


def test_store_as_a_context_manager(make_master):
    master = make_master()
    with MooncakeDistributedStore() as s:
        assert s.setup("127.0.0.1", "P2PHANDSHAKE", 4 << 20, 1 << 20, "tcp", "", master.addr) == 0
        assert s.put("ctx", b"v") == 0
    assert s.health_check() == 1  # closed when the block ended
    assert s.put("ctx2", b"v") == -1010
    with pytest.raises(RuntimeError):
        with MooncakeDistributedStore() as s2:
            raise RuntimeError("propagates")
    assert s2.health_check() == 1


def test_replica_descriptors(make_master, make_worker):
    master = make_master()
    a, b, c = make_worker(), make_worker(), make_worker()
    names = [w.setup(master, segment=16 << 20) for w in (a, b)]
    c.setup(master, segment=0)
    assert c.run("result = store.put('two', b'x' * 5000, config=ReplicateConfig(replica_num=2))"
                 ) == 0
    got = c.run("ds = store.get_replica_desc('two')\n"
                "result = [[d.status.name, d.is_memory_replica(), d.is_disk_replica(),\n"
                "           d.get_memory_descriptor().buffer_descriptor.transport_endpoint,\n"
                "           d.get_memory_descriptor().buffer_descriptor.size,\n"
                "           d.get_memory_descriptor().buffer_descriptor.buffer_address > 0,\n"
                "           type(d.get_memory_descriptor().buffer_descriptor).__name__,\n"
                "           (d.get_memory_descriptor().buffer_descriptor.transport_endpoint_,\n"
                "            d.get_memory_descriptor().buffer_descriptor.size_)]\n"
                "          for d in ds]")
    # The reference's field names (its buffer_descriptor is a Descriptor); the earlier
    # underscore spellings still read the same fields.
    assert sorted(g[3] for g in got) == sorted(names)
    assert all(g[0] == "COMPLETE" and g[1] and not g[2] and g[4] == 5000 and g[5] for g in got)
    assert all(g[6] == "Descriptor" and g[7] == [g[3], 5000] for g in got)
    assert c.run("result = store.get_replica_desc('missing')") == []
    batch = c.run("d = store.batch_get_replica_desc(['two', 'missing', ''])\n"
                  "result = {k: len(v) for k, v in d.items()}")
    assert batch == {"two": 2, "missing": 0, "": 0}


def test_remove_by_regex(make_master, make_worker):
    master = make_master("--default_kv_lease_ttl=100")
    w = make_worker()
    w.setup(master, segment=16 << 20)
    keys = ["layer0/a", "layer0/b", "layer1/a", "other"]
    assert w.run(f"result = [store.put(k, b'v') for k in {keys!r}]") == [0] * 4
    assert w.run("result = store.remove_by_regex('^layer0/')") == 2
    assert w.run(f"result = [store.is_exist(k) for k in {keys!r}]") == [0, 0, 1, 1]
    assert w.run("result = store.remove_by_regex('nomatch$')") == 0
    assert w.run("result = store.remove_by_regex('a$')") == 1  # matched anywhere: layer1/a
    # bad input: a malformed or empty expression is an error code, the store keeps working
    assert w.run("result = store.remove_by_regex('(unclosed')") == -600
    assert w.run("result = store.remove_by_regex('')") == -600
    assert w.run("result = store.is_exist('other')") == 1
