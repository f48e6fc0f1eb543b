"""Mooncake Transfer Engine: move bytes between registered memory of processes.

Same names and return conventions as the reference Mooncake's ``mooncake.engine``::

    from mooncake.engine import TransferEngine, TransferOpcode

    engine = TransferEngine()
    engine.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "")
    addr = engine.allocate_managed_buffer(1 << 20)
    engine.transfer_sync_write("10.0.0.2:15001", addr, peer_addr, 1 << 20)

API-level failures are returned as the reference's negative integers (``strerror(code)`` explains
one); only wrong argument types (``TypeError``) and values (``ValueError``) raise.

``TransferEngine.get_engine()`` returns a capsule named ``"mooncake.engine_handle"`` holding the
C ``mc_engine_t *``; ``MooncakeDistributedStore.setup(..., engine=handle)`` shares the engine
through it. The capsule keeps the engine alive while it exists. ``get_engine_ptr()`` gives the
same ``mc_engine_t *`` as a plain int (0 before ``initialize``), as the reference does; it keeps
nothing alive.

``RpcInterface`` (and ``create_rpc_server`` / ``create_rpc_client``) sends whole messages and
host tensors between processes, as the reference's RPC helpers do. docs/compatibility.md lists
every name of the reference's ``mooncake.engine`` and where ours differs.
"""

import enum as _enum

from mooncake._engine import (  # noqa: F401  (re-exported)
    ENGINE_HANDLE_CAPSULE,
    TransferEngine,
    TransferNotify,
    err_name,
    strerror,
)
from mooncake.engine import _rpc
from mooncake.engine._rpc import (  # noqa: F401  (re-exported)
    CoroRPCInterface,
    ReceivedData,
    ReceivedTensor,
    RpcInterface,
    create_rpc_client,
    create_rpc_server,
)

__all__ = [
    "TransferEngine",
    "TransferOpcode",
    "TransferNotify",
    "Read",
    "Write",
    *_rpc.__all__,
    "ENGINE_HANDLE_CAPSULE",
    "strerror",
    "err_name",
    "SUPPORT_CUDA",
    "SUPPORT_EFA",
    "SUPPORT_HIP",
    "SUPPORT_MNNVL",
    "SUPPORT_MUSA",
    "SUPPORT_INTRA_NVLINK",
]


class TransferOpcode(_enum.IntEnum):
    """Direction of a transfer, valued as the C API's ``MC_OPCODE_*`` (and the reference's)."""

    Read = 0
    Write = 1
    # The reference's docs also spell them in capitals; both name the same members.
    READ = 0
    WRITE = 1


# The reference exposes the enum on the class too (TransferEngine.TransferOpcode.Write), and its
# members at module level (pybind11's export_values): mooncake.engine.Read / .Write.
TransferEngine.TransferOpcode = TransferOpcode
Read = TransferOpcode.Read
Write = TransferOpcode.Write

# Build-time feature flags the reference exposes; none of these transports is in this build.
SUPPORT_CUDA = False
SUPPORT_EFA = False
SUPPORT_HIP = False
SUPPORT_MNNVL = False
SUPPORT_MUSA = False
SUPPORT_INTRA_NVLINK = False
