"""Smaller parts of the reference's ``mooncake.store`` surface, over calls the store has."""

import enum
import os


class ObjectDataType(enum.IntEnum):
    """What an object holds, numbered as the reference's (a hint; placement ignores it here)."""

    UNKNOWN = 0
    KVCACHE = 1
    TENSOR = 2
    WEIGHT = 3
    SAMPLE = 4
    ACTIVATION = 5
    GRADIENT = 6
    OPTIMIZER_STATE = 7
    METADATA = 8
    GENERAL = 9


class Descriptor:
    """Where an allocated buffer is (the reference's ``AllocatedBuffer::Descriptor``, also the
    type of a memory replica's ``buffer_descriptor``): ``size`` bytes at ``buffer_address`` in
    the memory of the engine serving ``transport_endpoint``. ``size_``, ``buffer_address_`` and
    ``transport_endpoint_`` are this package's earlier spellings of the same fields."""

    __slots__ = ("size", "buffer_address", "transport_endpoint")

    def __init__(self, size=0, buffer_address=0, transport_endpoint=""):
        self.size = size
        self.buffer_address = buffer_address
        self.transport_endpoint = transport_endpoint

    size_ = property(lambda self: self.size)
    buffer_address_ = property(lambda self: self.buffer_address)
    transport_endpoint_ = property(lambda self: self.transport_endpoint)

    def __repr__(self):
        return (f"<Descriptor size={self.size} buffer_address={self.buffer_address} "
                f"transport_endpoint={self.transport_endpoint}>")


def put_from_with_metadata(self, key, buffer_ptr, metadata_buffer_ptr, size, metadata_size,
                           config=None):
    """Stores ``metadata_size`` bytes at ``metadata_buffer_ptr`` followed by ``size`` bytes at
    ``buffer_ptr`` as one object, moved from both places without a copy when they are
    registered: 0 or a negative code. A zero ``size`` stores nothing and answers 0, as the
    reference's does."""
    if size == 0:
        return 0
    ptrs, sizes = [metadata_buffer_ptr, buffer_ptr], [metadata_size, size]
    if metadata_size == 0:
        ptrs, sizes = ptrs[1:], sizes[1:]
    return self.batch_put_from_multi_buffers([key], [ptrs], [sizes], config)[0]


def get_offload_rpc_read_count(self):
    """Objects this client read from a storage node's disk tier (LOCAL_DISK copies, served by
    the node that owns them) since setup."""
    return self.disk_read_count()


def _cpulist(text):
    cpus = set()
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def bind_to_numa_node(node):
    """Runs the calling thread on the CPUs of NUMA node ``node`` (as the reference's does,
    with a warning and no change when the node does not exist or NUMA is unavailable). Memory
    placement follows the kernel's first-touch policy: there is no libnuma dependency here."""
    if isinstance(node, bool) or not isinstance(node, int):
        raise TypeError(f"node must be an int, not {type(node).__name__}")
    import warnings

    path = f"/sys/devices/system/node/node{node}/cpulist"
    try:
        with open(path) as f:
            cpus = _cpulist(f.read())
    except (OSError, ValueError):
        warnings.warn(f"NUMA node {node} is not available here; binding skipped", stacklevel=2)
        return
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as e:
        warnings.warn(f"binding to NUMA node {node} failed: {e}", stacklevel=2)


def init_all(self, protocol, device_name, mount_segment_size=16 << 20):
    """The reference's one-call setup with its fixed choices: segment name ``localhost:12345``,
    Transfer Engine metadata on the etcd at ``127.0.0.1:2379``, a ``mount_segment_size``-byte
    global segment, a 1 GiB local buffer, the master at ``127.0.0.1:50051``. 0, or setup's code;
    -600 (INVALID_PARAMS) when this store is set up already, as the reference answers."""
    rc = self.setup("localhost:12345", "127.0.0.1:2379", mount_segment_size, 1 << 30, protocol,
                    device_name)
    return -600 if rc == -1010 else rc


def attach(cls):
    cls.put_from_with_metadata = put_from_with_metadata
    cls.get_offload_rpc_read_count = get_offload_rpc_read_count
    cls.init_all = init_all
