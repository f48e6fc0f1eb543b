"""The reference Mooncake's configuration loader, ``mooncake.mooncake_config``.

A :class:`MooncakeConfig` holds what a store client needs to set up, read either from a JSON file
(:meth:`MooncakeConfig.from_file`) or from the environment (:meth:`MooncakeConfig.load_from_env`),
and its fields feed ``MooncakeDistributedStore.setup`` directly::

    from mooncake.mooncake_config import MooncakeConfig
    from mooncake.store import MooncakeDistributedStore

    cfg = MooncakeConfig.load_from_env()
    store = MooncakeDistributedStore()
    store.setup(cfg.local_hostname, cfg.metadata_server, cfg.global_segment_size,
                cfg.local_buffer_size, cfg.protocol, cfg.device_name, cfg.master_server_address)

Environment (used when ``MOONCAKE_CONFIG_PATH`` is unset; ``MOONCAKE_MASTER`` is then required):
``MOONCAKE_MASTER``, ``MOONCAKE_LOCAL_HOSTNAME`` ("localhost"), ``MOONCAKE_TE_META_DATA_SERVER``
("P2PHANDSHAKE"), ``MOONCAKE_GLOBAL_SEGMENT_SIZE`` (3.125 GiB), ``MOONCAKE_LOCAL_BUFFER_SIZE``
(1 GiB), ``MOONCAKE_PROTOCOL`` ("tcp"), ``MOONCAKE_DEVICE`` (""), ``MOONCAKE_OFFLOAD_ENABLED``
(false), ``MOONCAKE_OFFLOAD_FILE_STORAGE_PATH`` (""), ``MOONCAKE_TENANT_ID`` ("default"),
``MOONCAKE_ENABLE_CLIENT_HTTP_SERVER`` (false), ``MOONCAKE_CLIENT_HTTP_PORT`` (9300).

Sizes are byte counts or strings with a binary suffix: "4gb", "512MB", "64k", "1.5g", "4096b".
Booleans accept true/false, 1/0, yes/no, on/off, enable/disable. Pure Python: importing this module
loads no native code.
"""

import json
import logging
import math
import os
from dataclasses import dataclass
from typing import Optional

__all__ = ["MooncakeConfig", "DEFAULT_GLOBAL_SEGMENT_SIZE", "DEFAULT_LOCAL_BUFFER_SIZE"]

logger = logging.getLogger(__name__)

# The reference's defaults (bytes).
DEFAULT_GLOBAL_SEGMENT_SIZE = 3355443200  # 3.125 GiB
DEFAULT_LOCAL_BUFFER_SIZE = 1073741824  # 1 GiB

# Longest suffixes first, so that "4gb" is read as gigabytes and not as "4g" + "b".
_UNITS = (("tb", 1 << 40), ("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10),
          ("t", 1 << 40), ("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10), ("b", 1))

# Transports and store modes some Mooncake build accepts. Only a hint for a warning: which of them
# a given build serves is decided by the C side, which refuses the rest at setup with a code.
_KNOWN_PROTOCOLS = frozenset({
    "tcp", "rdma", "efa", "nvmeof", "nvlink", "nvlink_intra", "musa", "hip", "barex", "cxl",
    "ascend", "ub", "ubshmem", "maca", "sunrise_link", "rpc_only",
    "shm", "auto", "fabric",  # this implementation's own: shared memory, best available, libfabric
})

_REQUIRED = ("local_hostname", "metadata_server", "master_server_address")

_TRUE = frozenset({"true", "1", "yes", "on", "enable"})
_FALSE = frozenset({"false", "0", "no", "off", "disable"})

# Every key from_file reads; any other key in a file belongs to some other program.
_FILE_KEYS = frozenset({
    "local_hostname", "metadata_server", "master_server_address", "global_segment_size",
    "local_buffer_size", "protocol", "device_name", "enable_ssd_offload", "ssd_offload_path",
    "tenant_id", "enable_client_http_server", "client_http_port",
})
_said_foreign: set[str] = set()


def _parse_segment_size(value) -> int:
    """Bytes from an int, a float (truncated) or a size string ("4gb", "1.5 MB", "1e9")."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"Invalid segment size: expected an int or a size string like '4gb', "
                        f"got {type(value).__name__} {value!r}")
    if isinstance(value, int):
        return value
    text = value if isinstance(value, float) else value.strip().lower()
    scale = 1
    if isinstance(text, str):
        if not text:
            raise ValueError("Invalid segment size: empty string")
        for suffix, mult in _UNITS:
            if text.endswith(suffix):
                text = text[: -len(suffix)].strip()
                if not text:
                    raise ValueError(f"Invalid segment size {value!r}: no number before "
                                     f"'{suffix}'")
                scale = mult
                break
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"Invalid segment size: {value!r}") from None
    else:
        number = text
    if not math.isfinite(number):
        raise ValueError(f"Invalid segment size: {value!r}")
    return int(number * scale)


def _parse_bool(value) -> bool:
    """A config boolean: a bool, a number, None (false) or one of the usual words; anything else
    is a ValueError rather than a silent guess (``bool("false")`` would be True)."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, (int, float)):
        return bool(value)
    word = str(value).strip().lower()
    if not word or word in _FALSE:
        return False
    if word in _TRUE:
        return True
    raise ValueError(f"Invalid boolean value: {value!r}")


def _parse_port(value) -> int:
    if isinstance(value, bool):
        raise TypeError(f"client_http_port must be an int, not {value!r}")
    try:
        port = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"Invalid client_http_port: {value!r}") from None
    return port


@dataclass
class MooncakeConfig:
    """Settings of one store client.

    Attributes:
        local_hostname: this client's address ("host" or "host:port"); its segment name.
        metadata_server: "P2PHANDSHAKE", or "http://host:port/metadata".
        global_segment_size: bytes this client contributes to the pool (0: a pure client).
        local_buffer_size: bytes of the client's staging buffer.
        protocol: transport, lowercased ("tcp" default; an unknown one is warned about and passed
            through, for the store to refuse at setup).
        device_name: RDMA device list ("" for none / auto).
        master_server_address: "host:port" of mooncake_master.
        enable_ssd_offload, ssd_offload_path: the reference's disk tier: a client with a segment
            keeps what the master evicts from it in ssd_offload_path (docs/disk-tier.md; setup
            refuses enable_ssd_offload=True without a path or a segment).
        tenant_id: tenant name ("default").
        enable_client_http_server, client_http_port: the reference client's HTTP endpoints
            (accepted; this client serves none).
    """

    local_hostname: str
    metadata_server: str
    global_segment_size: int
    local_buffer_size: int
    protocol: str
    device_name: Optional[str]
    master_server_address: str
    enable_ssd_offload: bool = False
    ssd_offload_path: str = ""
    tenant_id: str = "default"
    enable_client_http_server: bool = False
    client_http_port: int = 9300

    def __post_init__(self):
        # Every way of building one (file, environment, direct) is checked here, so that a mistake
        # is reported with the field's name instead of as an obscure failure at setup.
        if not isinstance(self.protocol, str) or not self.protocol.strip():
            raise ValueError(f"Invalid protocol: {self.protocol!r} (a non-empty string such as "
                             f"'tcp' or 'rdma')")
        self.protocol = self.protocol.strip().lower()
        if self.protocol not in _KNOWN_PROTOCOLS:
            logger.warning("Unrecognised protocol %r: passed on unchanged (known: %s)",
                           self.protocol, ", ".join(sorted(_KNOWN_PROTOCOLS)))
        for name in ("global_segment_size", "local_buffer_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{name} must be an int (bytes), not {v!r}")
            if v < 0:
                raise ValueError(f"Invalid {name}: {v}. Size must be non-negative.")
        for name in _REQUIRED:
            v = getattr(self, name)
            if not isinstance(v, str) or not v.strip():
                raise ValueError(f"Config field {name!r} must be a non-empty string, got {v!r}.")
        if self.device_name is not None and not isinstance(self.device_name, str):
            raise TypeError(f"device_name must be a string, not {self.device_name!r}")
        if isinstance(self.client_http_port, bool) or not isinstance(self.client_http_port, int):
            raise TypeError(f"client_http_port must be an int, not {self.client_http_port!r}")
        if not 0 <= self.client_http_port <= 65535:
            raise ValueError(f"Invalid client_http_port: {self.client_http_port} (0..65535)")

    @staticmethod
    def from_file(file_path) -> "MooncakeConfig":
        """Reads a JSON object file. local_hostname, metadata_server and master_server_address are
        required (ValueError naming the missing one); the other keys default as the reference's.
        Keys this loader does not read (vLLM's and LMCache's files carry their own) are ignored,
        each said once at info. A missing file is FileNotFoundError, bad JSON json.JSONDecodeError
        (a ValueError)."""
        with open(os.fspath(file_path)) as f:
            config = json.load(f)  # bad JSON: json.JSONDecodeError, a ValueError
        if not isinstance(config, dict):
            raise ValueError(f"{file_path}: the config must be a JSON object, not "
                             f"{type(config).__name__}")
        for name in _REQUIRED:
            if name not in config:
                raise ValueError(f"Missing required config field: {name}")
        for key in config:
            if key not in _FILE_KEYS and key not in _said_foreign:
                _said_foreign.add(key)
                logger.info("config key %r is no MooncakeConfig setting: ignored", key)

        def text(key, default):
            v = config.get(key)
            return default if v is None else str(v)

        return MooncakeConfig(
            local_hostname=config["local_hostname"],
            metadata_server=config["metadata_server"],
            global_segment_size=_parse_segment_size(
                config.get("global_segment_size", DEFAULT_GLOBAL_SEGMENT_SIZE)),
            local_buffer_size=_parse_segment_size(
                config.get("local_buffer_size", DEFAULT_LOCAL_BUFFER_SIZE)),
            protocol=config.get("protocol", "tcp"),
            device_name=config.get("device_name", ""),
            master_server_address=config["master_server_address"],
            enable_ssd_offload=_parse_bool(config.get("enable_ssd_offload", False)),
            ssd_offload_path=text("ssd_offload_path", ""),
            tenant_id=text("tenant_id", "default"),
            enable_client_http_server=_parse_bool(config.get("enable_client_http_server", False)),
            client_http_port=_parse_port(config.get("client_http_port", 9300)),
        )

    @staticmethod
    def load_from_env() -> "MooncakeConfig":
        """The file named by ``MOONCAKE_CONFIG_PATH`` if that is set; otherwise the ``MOONCAKE_*``
        variables (see the module docstring), of which ``MOONCAKE_MASTER`` is required
        (ValueError when neither is set)."""
        path = os.getenv("MOONCAKE_CONFIG_PATH")
        if path is not None:
            return MooncakeConfig.from_file(path)
        master = os.getenv("MOONCAKE_MASTER")
        if not master:
            raise ValueError("Neither the environment variable 'MOONCAKE_CONFIG_PATH' nor "
                             "'MOONCAKE_MASTER' is set.")
        env = os.getenv
        return MooncakeConfig(
            local_hostname=env("MOONCAKE_LOCAL_HOSTNAME", "localhost"),
            metadata_server=env("MOONCAKE_TE_META_DATA_SERVER", "P2PHANDSHAKE"),
            global_segment_size=_parse_segment_size(
                env("MOONCAKE_GLOBAL_SEGMENT_SIZE", DEFAULT_GLOBAL_SEGMENT_SIZE)),
            local_buffer_size=_parse_segment_size(
                env("MOONCAKE_LOCAL_BUFFER_SIZE", DEFAULT_LOCAL_BUFFER_SIZE)),
            protocol=env("MOONCAKE_PROTOCOL", "tcp"),
            device_name=env("MOONCAKE_DEVICE", ""),
            master_server_address=master,
            enable_ssd_offload=_parse_bool(env("MOONCAKE_OFFLOAD_ENABLED", "false")),
            ssd_offload_path=env("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", ""),
            tenant_id=env("MOONCAKE_TENANT_ID", "default"),
            enable_client_http_server=_parse_bool(
                env("MOONCAKE_ENABLE_CLIENT_HTTP_SERVER", "false")),
            client_http_port=_parse_port(env("MOONCAKE_CLIENT_HTTP_PORT", "9300")),
        )
