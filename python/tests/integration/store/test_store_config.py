"""MooncakeConfig feeds a real store: what from_file and load_from_env produce is accepted by
MooncakeDistributedStore.setup (positional, as the reference's scripts pass it, and as keywords),
including files written for vLLM and LMCache, an HTTP metadata server started from
mooncake.http_metadata_server, and the settings this store refuses."""

import hashlib
import json

import pytest

from mooncake.http_metadata_server import KVBootstrapServer
from mooncake.mooncake_config import MooncakeConfig
from mooncake.store import MooncakeDistributedStore

MiB = 1 << 20

ENV_VARS = ["MOONCAKE_CONFIG_PATH", "MOONCAKE_MASTER", "MOONCAKE_LOCAL_HOSTNAME",
            "MOONCAKE_TE_META_DATA_SERVER", "MOONCAKE_GLOBAL_SEGMENT_SIZE",
            "MOONCAKE_LOCAL_BUFFER_SIZE", "MOONCAKE_PROTOCOL", "MOONCAKE_DEVICE"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for v in ENV_VARS:
        monkeypatch.delenv(v, raising=False)


@pytest.fixture
def stores():
    made = []

    def make():
        s = MooncakeDistributedStore()
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def positional(cfg):
    """The reference's scripts call setup exactly like this."""
    return (cfg.local_hostname, cfg.metadata_server, cfg.global_segment_size,
            cfg.local_buffer_size, cfg.protocol, cfg.device_name, cfg.master_server_address)


def keywords(cfg):
    return dict(local_hostname=cfg.local_hostname, metadata_server=cfg.metadata_server,
                global_segment_size=cfg.global_segment_size,
                local_buffer_size=cfg.local_buffer_size, protocol=cfg.protocol,
                rdma_devices=cfg.device_name, master_server_addr=cfg.master_server_address,
                enable_ssd_offload=cfg.enable_ssd_offload, ssd_offload_path=cfg.ssd_offload_path,
                tenant_id=cfg.tenant_id, enable_client_http_server=cfg.enable_client_http_server,
                client_http_port=cfg.client_http_port)


def write(tmp_path, obj, name="mooncake.json"):
    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return p


def test_file_with_size_strings_sets_up_a_store(make_master, stores, tmp_path):
    master = make_master()
    cfg = MooncakeConfig.from_file(write(tmp_path, {
        "local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
        "master_server_address": master.addr, "global_segment_size": "48mb",
        "local_buffer_size": "8MB", "protocol": "TCP", "device_name": ""}))
    assert (cfg.global_segment_size, cfg.local_buffer_size, cfg.protocol) == (48 * MiB, 8 * MiB,
                                                                               "tcp")
    s = stores()
    assert s.setup(*positional(cfg)) == 0
    assert s.put("cfg-k", b"from a config file") == 0
    assert s.get("cfg-k") == b"from a config file"
    assert s.get_hostname().startswith("127.0.0.1:")


def test_every_field_as_setup_keywords(make_master, stores, tmp_path):
    master = make_master()
    cfg = MooncakeConfig.from_file(write(tmp_path, {
        "local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
        "master_server_address": master.addr, "global_segment_size": 16 * MiB,
        "local_buffer_size": 4 * MiB, "tenant_id": "t1", "client_http_port": 19300,
        "ssd_offload_path": "/unused"}))
    s = stores()
    assert s.setup(**keywords(cfg)) == 0
    assert s.put("kw", b"v") == 0 and s.get("kw") == b"v"


def test_environment_sets_up_a_store_another_process_reads(make_master, make_worker, stores,
                                                           monkeypatch):
    master = make_master()
    monkeypatch.setenv("MOONCAKE_MASTER", master.addr)
    monkeypatch.setenv("MOONCAKE_LOCAL_HOSTNAME", "127.0.0.1")
    monkeypatch.setenv("MOONCAKE_GLOBAL_SEGMENT_SIZE", "32mb")
    monkeypatch.setenv("MOONCAKE_LOCAL_BUFFER_SIZE", "4mb")
    cfg = MooncakeConfig.load_from_env()
    assert cfg.metadata_server == "P2PHANDSHAKE" and cfg.global_segment_size == 32 * MiB
    s = stores()
    assert s.setup(*positional(cfg)) == 0
    data = bytes(range(256)) * 4096
    assert s.put("env-k", data) == 0
    peer = make_worker()
    peer.setup(master, segment=0)
    assert peer.run("result = sha(store.get('env-k'))") == hashlib.sha256(data).hexdigest()


def test_vllm_and_lmcache_files(make_master, stores, tmp_path, monkeypatch):
    # Each program's own file, with its own keys beside ours; both the loader and the store
    # (which reads MOONCAKE_CONFIG_PATH itself for what is not given) must live with them.
    master = make_master()
    vllm = {"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
            "global_segment_size": "32MB", "local_buffer_size": "4MB", "protocol": "tcp",
            "device_name": "", "master_server_address": master.addr,
            "transfer_timeout": 1, "storage_root_dir": "", "replica_num": 1,
            "fast_transfer": True, "fast_transfer_buffer_size": 1}
    lmcache = {"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
               "protocol": "tcp", "device_name": "", "master_server_address": master.addr,
               "global_segment_size": 33554432, "local_buffer_size": 4194304,
               "chunk_size": 256, "local_cpu": False, "max_local_cpu_size": 5,
               "remote_url": f"mooncakestore://{master.addr}/", "remote_serde": "naive",
               "numa_mode": None}
    for name, obj in [("vllm.json", vllm), ("lmcache.json", lmcache)]:
        monkeypatch.setenv("MOONCAKE_CONFIG_PATH", str(write(tmp_path, obj, name)))
        cfg = MooncakeConfig.load_from_env()
        assert cfg.global_segment_size == 32 * MiB, name
        s = stores()
        assert s.setup(*positional(cfg)) == 0, name
        assert s.put(f"{name}-k", name.encode()) == 0
        assert s.get(f"{name}-k") == name.encode()
        s.close()


def test_http_metadata_server_from_the_module(make_master, make_worker, tmp_path):
    master = make_master()
    server = KVBootstrapServer(port=0, host="127.0.0.1")
    server.run()
    s = MooncakeDistributedStore()
    peer = make_worker()
    try:
        url = f"http://127.0.0.1:{server.port}/metadata"
        cfg = MooncakeConfig.from_file(write(tmp_path, {
            "local_hostname": "127.0.0.1", "metadata_server": url,
            "master_server_address": master.addr, "global_segment_size": "32mb",
            "local_buffer_size": "4mb"}))
        assert s.setup(*positional(cfg)) == 0
        assert s.put("http-meta", b"found through the http metadata server") == 0
        rc = peer.run(f"result = store.setup('127.0.0.1', {url!r}, 0, 4 << 20, 'tcp', '', "
                      f"{master.addr!r})")
        assert rc == 0
        assert peer.run("result = store.get('http-meta').decode()") == (
            "found through the http metadata server")
    finally:
        # Both clients go before the metadata server they registered with.
        peer.close()
        s.close()
        server.close()


def test_settings_this_store_refuses_are_codes(make_master, stores, caplog):
    master = make_master()
    base = MooncakeConfig("127.0.0.1", "P2PHANDSHAKE", 16 * MiB, 4 * MiB, "tcp", "", master.addr)
    for change in [dict(enable_ssd_offload=True), dict(enable_client_http_server=True)]:
        cfg = MooncakeConfig(**{**base.__dict__, **change})
        rc = stores().setup(**keywords(cfg))
        assert isinstance(rc, int) and rc < 0, change
    assert stores().setup(*positional(base)) == 0  # and the good one still works
    # A protocol typo is said by the loader and passed on; the engine decides (this one says so
    # too and falls back to what the host has).
    with caplog.at_level("WARNING", logger="mooncake.mooncake_config"):
        typo = MooncakeConfig(**{**base.__dict__, "protocol": "RMDA"})
    assert typo.protocol == "rmda"
    assert any("Unrecognised protocol 'rmda'" in r.getMessage() for r in caplog.records)
    s = stores()
    assert s.setup(*positional(typo)) == 0
    assert s.put("typo", b"v") == 0 and s.get("typo") == b"v"
