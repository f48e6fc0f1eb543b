"""Names of the reference's store binding that issue 27 added: ReplicateConfig's fields of the
other tiers (absent here: a clear error for anything but their defaults; hints kept) and the
enum values the binding exports at module level (pybind11's export_values)."""

import pytest

import mooncake.store as store
from mooncake.store import ObjectDataType, ReplicateConfig, ReplicaStatus, TaskStatus, TaskType


def test_tier_fields_defaults_and_hints():
    c = ReplicateConfig()
    assert (c.nof_replica_num, c.dfs_replica_num, c.preferred_nof_segments,
            c.prefer_alloc_in_same_node, c.data_type) == (0, 0, [], False, ObjectDataType.UNKNOWN)
    c.data_type = ObjectDataType.KVCACHE
    c.prefer_alloc_in_same_node = True
    c.nof_replica_num = c.dfs_replica_num = 0
    c.preferred_nof_segments = []
    assert c.data_type is ObjectDataType.KVCACHE and c.prefer_alloc_in_same_node is True
    assert c.data_type == 1


@pytest.mark.parametrize("field,value,error,needle", [
    ("nof_replica_num", 1, ValueError, "NVMe-oF tier is not in this build"),
    ("dfs_replica_num", 2, ValueError, "DFS tier is not in this build"),
    ("preferred_nof_segments", ["nof-0"], ValueError, "NVMe-oF tier"),
    ("nof_replica_num", -1, TypeError, "non-negative"),
    ("dfs_replica_num", "1", TypeError, "non-negative"),
    ("preferred_nof_segments", [1], TypeError, "list of str"),
    ("data_type", "KVCACHE", TypeError, "ObjectDataType"),
    ("data_type", 99, ValueError, "99"),
    ("prefer_alloc_in_same_node", "yes", TypeError, "bool"),
])
def test_tier_fields_bad_values(field, value, error, needle):
    c = ReplicateConfig()
    with pytest.raises(error, match=needle):
        setattr(c, field, value)


def test_module_level_enum_values():
    assert store.KVCACHE is ObjectDataType.KVCACHE and store.GENERAL == 9
    assert store.UNDEFINED is ReplicaStatus.UNDEFINED and store.COMPLETE is ReplicaStatus.COMPLETE
    assert store.REPLICA_COPY is TaskType.REPLICA_COPY and store.REPLICA_MOVE == 1
    # exported last in the reference, so the shared names are TaskStatus's
    assert store.PROCESSING is TaskStatus.PROCESSING and store.FAILED is TaskStatus.FAILED
    assert store.PENDING is TaskStatus.PENDING and store.SUCCESS is TaskStatus.SUCCESS
