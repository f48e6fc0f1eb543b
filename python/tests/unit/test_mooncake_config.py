"""mooncake.mooncake_config on its own: the reference's loader names, defaults, environment
variables, size and boolean parsing, and every way a file or the environment can be wrong.
(test_store_config.py feeds what it loads to a real store.)"""

import dataclasses
import inspect
import json
import logging

import pytest

from mooncake import mooncake_config as mc
from mooncake.mooncake_config import (
    DEFAULT_GLOBAL_SEGMENT_SIZE,
    DEFAULT_LOCAL_BUFFER_SIZE,
    MooncakeConfig,
    _parse_bool,
    _parse_segment_size,
)

REQUIRED = {"local_hostname": "10.0.0.1", "metadata_server": "P2PHANDSHAKE",
            "master_server_address": "10.0.0.2:50051"}
ENV_VARS = ["MOONCAKE_CONFIG_PATH", "MOONCAKE_MASTER", "MOONCAKE_LOCAL_HOSTNAME",
            "MOONCAKE_TE_META_DATA_SERVER", "MOONCAKE_GLOBAL_SEGMENT_SIZE",
            "MOONCAKE_LOCAL_BUFFER_SIZE", "MOONCAKE_PROTOCOL", "MOONCAKE_DEVICE",
            "MOONCAKE_OFFLOAD_ENABLED", "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", "MOONCAKE_TENANT_ID",
            "MOONCAKE_ENABLE_CLIENT_HTTP_SERVER", "MOONCAKE_CLIENT_HTTP_PORT"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for v in ENV_VARS:
        monkeypatch.delenv(v, raising=False)


@pytest.fixture
def write(tmp_path):
    def write(obj, raw=None):
        p = tmp_path / "mooncake.json"
        p.write_text(raw if raw is not None else json.dumps(obj))
        return p

    return write


def make(**over):
    kw = dict(local_hostname="h", metadata_server="P2PHANDSHAKE", global_segment_size=1,
              local_buffer_size=2, protocol="tcp", device_name="", master_server_address="m:1")
    kw.update(over)
    return MooncakeConfig(**kw)


def test_public_names_and_defaults():
    assert mc.__all__ == ["MooncakeConfig", "DEFAULT_GLOBAL_SEGMENT_SIZE",
                          "DEFAULT_LOCAL_BUFFER_SIZE"]
    assert DEFAULT_GLOBAL_SEGMENT_SIZE == 3355443200
    assert DEFAULT_LOCAL_BUFFER_SIZE == 1 << 30
    assert dataclasses.is_dataclass(MooncakeConfig)
    fields = [(f.name, f.default) for f in dataclasses.fields(MooncakeConfig)]
    assert [n for n, _ in fields] == [
        "local_hostname", "metadata_server", "global_segment_size", "local_buffer_size",
        "protocol", "device_name", "master_server_address", "enable_ssd_offload",
        "ssd_offload_path", "tenant_id", "enable_client_http_server", "client_http_port"]
    assert dict(fields[7:]) == {"enable_ssd_offload": False, "ssd_offload_path": "",
                                "tenant_id": "default", "enable_client_http_server": False,
                                "client_http_port": 9300}
    assert list(inspect.signature(MooncakeConfig.from_file).parameters) == ["file_path"]
    assert list(inspect.signature(MooncakeConfig.load_from_env).parameters) == []
    assert isinstance(mc.logger, logging.Logger) and mc.logger.name == "mooncake.mooncake_config"


def test_module_loads_no_native_code():
    import subprocess
    import sys

    code = ("import sys, mooncake.mooncake_config; "
            "print(sorted(m for m in sys.modules if m.startswith('mooncake')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['mooncake', 'mooncake.mooncake_config']"


def test_from_file_every_field(write):
    cfg = MooncakeConfig.from_file(str(write({
        **REQUIRED, "global_segment_size": "4gb", "local_buffer_size": 1 << 20,
        "protocol": "RDMA", "device_name": "mlx5_0,mlx5_1", "enable_ssd_offload": "on",
        "ssd_offload_path": "/nvme", "tenant_id": "t1", "enable_client_http_server": "enable",
        "client_http_port": "19444"})))
    assert cfg == MooncakeConfig("10.0.0.1", "P2PHANDSHAKE", 4 << 30, 1 << 20, "rdma",
                                 "mlx5_0,mlx5_1", "10.0.0.2:50051", True, "/nvme", "t1", True,
                                 19444)


def test_from_file_defaults_and_nulls(write, tmp_path):
    cfg = MooncakeConfig.from_file(write(REQUIRED))  # a Path is fine too
    assert (cfg.global_segment_size, cfg.local_buffer_size) == (DEFAULT_GLOBAL_SEGMENT_SIZE,
                                                                DEFAULT_LOCAL_BUFFER_SIZE)
    assert (cfg.protocol, cfg.device_name, cfg.enable_ssd_offload, cfg.ssd_offload_path,
            cfg.tenant_id, cfg.enable_client_http_server, cfg.client_http_port) == (
        "tcp", "", False, "", "default", False, 9300)
    cfg = MooncakeConfig.from_file(write({**REQUIRED, "tenant_id": None,
                                          "ssd_offload_path": None}))
    assert (cfg.tenant_id, cfg.ssd_offload_path) == ("default", "")


@pytest.mark.parametrize("field", sorted(REQUIRED))
def test_from_file_missing_required_field(write, field):
    cfg = dict(REQUIRED)
    del cfg[field]
    with pytest.raises(ValueError, match=f"Missing required config field: {field}"):
        MooncakeConfig.from_file(write(cfg))


@pytest.mark.parametrize("field", sorted(REQUIRED))
@pytest.mark.parametrize("bad", ["", "   ", None, 5])
def test_required_fields_must_be_nonempty_strings(write, field, bad):
    with pytest.raises(ValueError, match=field):
        MooncakeConfig.from_file(write({**REQUIRED, field: bad}))


def test_from_file_bad_files(write, tmp_path):
    with pytest.raises(FileNotFoundError):
        MooncakeConfig.from_file(tmp_path / "absent.json")
    with pytest.raises(json.JSONDecodeError):
        MooncakeConfig.from_file(write(None, raw="{not json"))
    with pytest.raises(ValueError, match="JSON object"):
        MooncakeConfig.from_file(write(["local_hostname"]))
    with pytest.raises(IsADirectoryError):
        MooncakeConfig.from_file(tmp_path)
    with pytest.raises(TypeError):
        MooncakeConfig.from_file(None)


def test_from_file_ignores_foreign_keys_and_says_so(write, caplog, monkeypatch):
    # vLLM's and LMCache's files carry keys of their own next to ours. Each is said once per
    # process: start from a process that said none (other tests load such files too).
    monkeypatch.setattr(mc, "_said_foreign", set())
    path = write({**REQUIRED, "kv_connector": "MooncakeConnector", "chunk_size": 256,
                  "remote_url": "mooncakestore://x:1/", "local_cpu": False})
    with caplog.at_level(logging.INFO, logger="mooncake.mooncake_config"):
        cfg = MooncakeConfig.from_file(path)
        MooncakeConfig.from_file(path)
    assert cfg.master_server_address == "10.0.0.2:50051"
    said = [r.getMessage() for r in caplog.records if "no MooncakeConfig setting" in r.getMessage()]
    assert sum("'kv_connector'" in m for m in said) == 1  # once per key, not once per load
    assert any("'remote_url'" in m for m in said)


@pytest.mark.parametrize("key", ["global_segment_size", "local_buffer_size"])
@pytest.mark.parametrize("bad,exc", [("abc", ValueError), ("gb", ValueError), ("", ValueError),
                                     ("1.2.3mb", ValueError), ("-1gb", ValueError),
                                     (-5, ValueError), ("inf", ValueError), ("nan", ValueError),
                                     (True, TypeError), ([1], TypeError), (None, TypeError)])
def test_from_file_bad_sizes(write, key, bad, exc):
    with pytest.raises(exc):
        MooncakeConfig.from_file(write({**REQUIRED, key: bad}))


@pytest.mark.parametrize("key", ["enable_ssd_offload", "enable_client_http_server"])
def test_from_file_booleans(write, key):
    for raw, want in [("false", False), ("False", False), ("0", False), ("no", False),
                      ("off", False), ("disable", False), ("true", True), ("1", True),
                      ("YES", True), ("on", True), (True, True), (False, False), (1, True),
                      (0, False), (None, False)]:
        assert getattr(MooncakeConfig.from_file(write({**REQUIRED, key: raw})), key) is want
    with pytest.raises(ValueError, match="Invalid boolean"):
        MooncakeConfig.from_file(write({**REQUIRED, key: "notabool"}))


@pytest.mark.parametrize("bad", ["abc", "70000", -1, 65536, None, True])
def test_from_file_bad_client_http_port(write, bad):
    with pytest.raises((ValueError, TypeError), match="client_http_port"):
        MooncakeConfig.from_file(write({**REQUIRED, "client_http_port": bad}))


def test_parse_segment_size():
    assert _parse_segment_size(1024) == 1024
    assert _parse_segment_size(0) == 0
    assert _parse_segment_size(1.5) == 1
    assert _parse_segment_size("  2048 ") == 2048
    assert _parse_segment_size("1kb") == _parse_segment_size("1K") == 1024
    assert _parse_segment_size("1.5kb") == 1536
    assert _parse_segment_size("512MB") == 512 << 20
    assert _parse_segment_size("1m") == 1 << 20
    assert _parse_segment_size("3 GB") == 3 << 30
    assert _parse_segment_size("1.5g") == 3 << 29
    assert _parse_segment_size("1TB") == _parse_segment_size("1t") == 1 << 40
    assert _parse_segment_size("4096B") == 4096
    assert _parse_segment_size("1e9") == 10**9
    assert _parse_segment_size("1.5") == 1
    for bad in ["", "  ", "gb", "mb", "abc", "4 gigabytes", "0x10", "inf", "-inf", "nan"]:
        with pytest.raises(ValueError):
            _parse_segment_size(bad)
    for bad in [None, True, b"4gb", [4]]:
        with pytest.raises(TypeError):
            _parse_segment_size(bad)


def test_parse_bool():
    assert _parse_bool("enable") is True and _parse_bool(" Off ") is False
    assert _parse_bool("") is False and _parse_bool(None) is False and _parse_bool(2.0) is True
    with pytest.raises(ValueError):
        _parse_bool("maybe")


def test_validation_on_direct_construction(caplog):
    assert make(protocol="  TCP ").protocol == "tcp"
    for p in ["rdma", "efa", "cxl", "nvlink_intra", "ubshmem", "rpc_only", "shm"]:
        with caplog.at_level(logging.WARNING, logger="mooncake.mooncake_config"):
            caplog.clear()
            assert make(protocol=p).protocol == p
        assert not caplog.records, p
    with caplog.at_level(logging.WARNING, logger="mooncake.mooncake_config"):
        assert make(protocol="RMDA").protocol == "rmda"  # a typo: passed on, but said
    assert any("Unrecognised protocol 'rmda'" in r.getMessage() for r in caplog.records)
    for bad in ["", "   ", None, 5]:
        with pytest.raises(ValueError, match="Invalid protocol"):
            make(protocol=bad)
    assert make(global_segment_size=0, local_buffer_size=0).global_segment_size == 0
    with pytest.raises(ValueError, match="global_segment_size"):
        make(global_segment_size=-1)
    with pytest.raises(ValueError, match="local_buffer_size"):
        make(local_buffer_size=-1024)
    with pytest.raises(TypeError, match="global_segment_size"):
        make(global_segment_size="4gb")  # strings are parsed by the loaders, not here
    with pytest.raises(TypeError, match="device_name"):
        make(device_name=3)
    with pytest.raises(ValueError, match="client_http_port"):
        make(client_http_port=70000)
    with pytest.raises(TypeError):
        make(unknown_field=1)


def test_load_from_env_variables(monkeypatch):
    env = {"MOONCAKE_MASTER": "10.1.1.1:50051", "MOONCAKE_LOCAL_HOSTNAME": "10.1.1.2",
           "MOONCAKE_TE_META_DATA_SERVER": "http://10.1.1.1:8080/metadata",
           "MOONCAKE_GLOBAL_SEGMENT_SIZE": "2gb", "MOONCAKE_LOCAL_BUFFER_SIZE": "64mb",
           "MOONCAKE_PROTOCOL": "RDMA", "MOONCAKE_DEVICE": "mlx5_0",
           "MOONCAKE_OFFLOAD_ENABLED": "True", "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH": "/ssd",
           "MOONCAKE_TENANT_ID": "tenant-env", "MOONCAKE_ENABLE_CLIENT_HTTP_SERVER": "1",
           "MOONCAKE_CLIENT_HTTP_PORT": "19300"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert MooncakeConfig.load_from_env() == MooncakeConfig(
        "10.1.1.2", "http://10.1.1.1:8080/metadata", 2 << 30, 64 << 20, "rdma", "mlx5_0",
        "10.1.1.1:50051", True, "/ssd", "tenant-env", True, 19300)


def test_load_from_env_defaults(monkeypatch):
    monkeypatch.setenv("MOONCAKE_MASTER", "m:50051")
    assert MooncakeConfig.load_from_env() == MooncakeConfig(
        "localhost", "P2PHANDSHAKE", DEFAULT_GLOBAL_SEGMENT_SIZE, DEFAULT_LOCAL_BUFFER_SIZE, "tcp",
        "", "m:50051")


def test_load_from_env_prefers_config_path(monkeypatch, write):
    monkeypatch.setenv("MOONCAKE_MASTER", "ignored:1")
    monkeypatch.setenv("MOONCAKE_CONFIG_PATH", str(write(REQUIRED)))
    assert MooncakeConfig.load_from_env().master_server_address == "10.0.0.2:50051"


def test_load_from_env_errors(monkeypatch, tmp_path):
    msg = "Neither the environment variable 'MOONCAKE_CONFIG_PATH' nor 'MOONCAKE_MASTER' is set."
    with pytest.raises(ValueError) as e:
        MooncakeConfig.load_from_env()
    assert str(e.value) == msg
    monkeypatch.setenv("MOONCAKE_MASTER", "")
    with pytest.raises(ValueError, match="MOONCAKE_MASTER"):
        MooncakeConfig.load_from_env()
    monkeypatch.setenv("MOONCAKE_MASTER", "m:1")
    for var, bad in [("MOONCAKE_GLOBAL_SEGMENT_SIZE", "lots"), ("MOONCAKE_LOCAL_BUFFER_SIZE", "-1"),
                     ("MOONCAKE_OFFLOAD_ENABLED", "sometimes"),
                     ("MOONCAKE_CLIENT_HTTP_PORT", "http"), ("MOONCAKE_PROTOCOL", " ")]:
        monkeypatch.setenv(var, bad)
        with pytest.raises(ValueError):
            MooncakeConfig.load_from_env()
        monkeypatch.delenv(var)
    monkeypatch.setenv("MOONCAKE_CONFIG_PATH", str(tmp_path / "missing.json"))
    with pytest.raises(FileNotFoundError):
        MooncakeConfig.load_from_env()
