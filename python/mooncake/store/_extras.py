"""Value types of the reference's ``mooncake.store`` surface (Descriptor, ObjectDataType, the
replica descriptors) and ``bind_to_numa_node``. The store's Python-side methods are in
``_methods.py``."""

import enum
import os


def checked_property(attr, check):
    """An attribute kept in the slot ``attr`` whose setter stores ``check(value)``: check raises
    for a value of the wrong type or range, and may normalize a good one."""
    return property(lambda self: getattr(self, attr),
                    lambda self, value: setattr(self, attr, check(value)))


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


# ---- replicas, as get_replica_desc describes them ----


class ReplicaStatus(enum.IntEnum):
    """A replica's state, numbered as the reference's ``ReplicaStatus``."""

    UNDEFINED = 0
    INITIALIZED = 1
    PROCESSING = 2
    COMPLETE = 3
    REMOVED = 4
    FAILED = 5


class MemoryDescriptor:
    """A memory replica: its ``buffer_descriptor``."""

    __slots__ = ("buffer_descriptor",)

    def __init__(self, buffer_descriptor):
        self.buffer_descriptor = buffer_descriptor


class LocalDiskDescriptor:
    """A LOCAL_DISK replica: the storage node's disk tier that serves it (``transport_endpoint``,
    "host:port" of its read server) and the object's size."""

    __slots__ = ("transport_endpoint", "object_size")

    def __init__(self, transport_endpoint, object_size):
        self.transport_endpoint = transport_endpoint
        self.object_size = object_size

    def __repr__(self):
        return f"<LocalDiskDescriptor {self.transport_endpoint} {self.object_size}>"


class DiskDescriptor:
    """A DISK replica: the object's file in the master's shared directory (--root_fs_dir), which
    any client reads itself (``file_path``), and the object's size. The file is ours (a bucket
    record), not the reference's raw value (docs/disk-tier.md)."""

    __slots__ = ("file_path", "object_size")

    def __init__(self, file_path, object_size):
        self.file_path = file_path
        self.object_size = object_size

    def __repr__(self):
        return f"<DiskDescriptor {self.file_path} {self.object_size}>"


class ReplicaType(enum.IntEnum):
    """The reference's replica types."""

    MEMORY = 0
    DISK = 1
    LOCAL_DISK = 2

    def __str__(self):
        return f"ReplicaType.{self.name}"  # as the reference's enum prints


class ReplicaDescriptor:
    """One replica of an object, as ``get_replica_desc`` returns it: in memory, on a storage
    node's disk tier (LOCAL_DISK), or a file of the shared directory (DISK); the master lists
    disk copies last. ``disk`` is a LocalDiskDescriptor or a DiskDescriptor."""

    __slots__ = ("status", "type", "_memory", "_disk")

    def __init__(self, status, memory, disk=None):
        self.status = ReplicaStatus(status)
        if disk is None:
            self.type = ReplicaType.MEMORY
        elif isinstance(disk, DiskDescriptor):
            self.type = ReplicaType.DISK
        else:
            self.type = ReplicaType.LOCAL_DISK
        self._memory = memory
        self._disk = disk

    def is_memory_replica(self):
        return self.type == ReplicaType.MEMORY

    def is_disk_replica(self):
        return self.type == ReplicaType.DISK

    def is_local_disk_replica(self):
        return self.type == ReplicaType.LOCAL_DISK

    def get_memory_descriptor(self):
        if self.type != ReplicaType.MEMORY:
            raise RuntimeError("not a memory replica")
        return self._memory

    def get_disk_descriptor(self):
        if self.type != ReplicaType.DISK:
            raise RuntimeError("not a disk replica")
        return self._disk

    def get_local_disk_descriptor(self):
        if self.type != ReplicaType.LOCAL_DISK:
            raise RuntimeError("not a local disk replica")
        return self._disk

    def __repr__(self):
        if self._disk is not None:
            return f"<ReplicaDescriptor {self.status.name} {self.type.name} {self._disk!r}>"
        return f"<ReplicaDescriptor {self.status.name} {self._memory.buffer_descriptor!r}>"


# Defined here, named where users import them from (repr, help, pickling).
for _cls in (ReplicaStatus, MemoryDescriptor, LocalDiskDescriptor, DiskDescriptor, ReplicaType,
             ReplicaDescriptor):
    _cls.__module__ = "mooncake.store"
del _cls
