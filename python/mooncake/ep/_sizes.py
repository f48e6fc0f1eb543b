"""Workspace-size arithmetic of the reference's EP buffers, in plain Python (no torch).

The numbers are the reference's formulas (mooncake-ep's ``BufferPair`` for the low-latency
``Buffer`` and ``MooncakeElasticBuffer::calculate_buffer_size`` for ``ElasticBuffer``), so a
caller sizing its workspace with our hints gets the same byte counts as with the reference's
wheel. The fallback path checks its shapes against these bounds.
"""

from __future__ import annotations

# The reference's compile-time limits (mooncake_ep_configs.cuh and the elastic buffer).
MAX_QP_COUNT = 256
NUM_MAX_LOCAL_EXPERTS = 1024
_INT4_BYTES = 16  # the low-latency layout keeps two int4 of metadata in front of each token
_BF16_BYTES = 2
_INT_BYTES = 4
_INT64_BYTES = 8
_FLOAT_BYTES = 4

# ElasticBuffer's fixed workspace: the same maxima the reference reserves once for every shape.
_NUM_MAX_RANKS = 1024
_NUM_MAX_EXPERTS = 2048
_NUM_MAX_CHANNELS = 8 * 160
_NUM_BARRIER_TAGS = 16
_NUM_MAX_INFLIGHT_AGRS = 32


def _ceil_div(x: int, y: int) -> int:
    return (x + y - 1) // y


def _align(x: int, alignment: int) -> int:
    return _ceil_div(x, alignment) * alignment


def _check_int(name: str, value: object, minimum: int) -> int:
    # bool is an int subclass; a flag passed where a count belongs is a caller bug.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def get_ep_buffer_size_hint(
    num_max_dispatch_tokens_per_rank: int, hidden: int, num_ranks: int, num_experts: int
) -> int:
    """Bytes of the low-latency ``Buffer`` workspace for these shapes (the reference's formula).

    Two buffer pairs (send and receive, double-buffered), each with one signal int per expert and
    one slot per (expert, token) holding two int4 of metadata plus a bf16 row. ``num_ranks`` does
    not enter the formula (it does not in the reference either); it is validated all the same.
    """
    _check_int("num_max_dispatch_tokens_per_rank", num_max_dispatch_tokens_per_rank, 0)
    _check_int("hidden", hidden, 0)
    _check_int("num_ranks", num_ranks, 1)
    _check_int("num_experts", num_experts, 0)
    signaling_bytes = num_experts * _INT_BYTES
    send_recv_bytes = num_experts * num_max_dispatch_tokens_per_rank * (2 * _INT4_BYTES + hidden * _BF16_BYTES)
    return 4 * signaling_bytes + 4 * send_recv_bytes


def elastic_workspace_num_bytes() -> int:
    """The elastic buffer's fixed workspace prefix (barrier tags, counters, channel tables)."""
    n = 0
    n += _NUM_BARRIER_TAGS * (_INT64_BYTES + 2 * _NUM_MAX_RANKS * _INT_BYTES)
    n += (_NUM_MAX_RANKS + _NUM_MAX_EXPERTS) * _INT64_BYTES
    n += _NUM_MAX_RANKS * _INT64_BYTES * 2
    n += _NUM_MAX_EXPERTS * _INT64_BYTES * 2
    n += _NUM_MAX_RANKS * _INT_BYTES
    n += _NUM_MAX_RANKS * _INT_BYTES * 2
    n += _NUM_MAX_EXPERTS * _INT_BYTES * 2
    n += _NUM_MAX_RANKS * _NUM_MAX_CHANNELS * _INT64_BYTES
    n += _NUM_MAX_RANKS * _NUM_MAX_CHANNELS * _INT_BYTES
    n += 2 * 2 * _INT64_BYTES
    n += (_NUM_MAX_INFLIGHT_AGRS + 1) * _NUM_MAX_RANKS * _INT_BYTES
    return _align(n, 32)


def calculate_elastic_buffer_size(
    num_ranks: int,
    num_max_tokens_per_rank: int,
    hidden: int,
    num_topk: int,
    use_fp8_dispatch: bool,
    allow_hybrid_mode: bool,
    allow_multiple_reduction: bool,
) -> int:
    """Bytes of the ``ElasticBuffer`` workspace (the reference's ``calculate_buffer_size``)."""
    _check_int("num_ranks", num_ranks, 1)
    _check_int("num_max_tokens_per_rank", num_max_tokens_per_rank, 0)
    _check_int("hidden", hidden, 0)
    _check_int("num_topk", num_topk, 0)
    num_topk = max(1, num_topk)
    dtype_bytes = 1 if use_fp8_dispatch else 2
    scale_bytes = _ceil_div(hidden, 128) * 4 if use_fp8_dispatch else 0
    token_bytes = _align(hidden * dtype_bytes, 32) + _align(scale_bytes, 32)
    metadata_bytes = _align(num_topk * (_INT_BYTES + _FLOAT_BYTES) + (1 + num_topk) * _INT_BYTES, 32)
    per_slot_bytes = token_bytes + metadata_bytes
    dispatch_bytes = num_ranks * num_max_tokens_per_rank * num_topk * per_slot_bytes * 2
    combine_bytes = dispatch_bytes * (3 if allow_multiple_reduction else 4)
    hybrid_factor = 2 if allow_hybrid_mode and num_ranks > 1 else 1
    # The workspace and an equal-sized scratch area for RDMA atomic responses come first.
    return 2 * elastic_workspace_num_bytes() + hybrid_factor * (dispatch_bytes + combine_bytes)


def get_engram_storage_size_hint(num_entries: int, hidden: int, num_max_tokens_per_rank: int, itemsize: int) -> int:
    """Bytes for an engram store of ``num_entries`` rows of ``hidden`` elements of ``itemsize``."""
    num_sf_packs = _ceil_div(hidden, 128) if itemsize <= 1 else 0
    return _align(hidden * itemsize + num_sf_packs * 4, 32) * (num_entries + num_max_tokens_per_rank)


def get_pp_buffer_size_hint(num_max_tensor_bytes: int, num_max_inflight_tensors: int) -> int:
    return _align(num_max_tensor_bytes, 32) * num_max_inflight_tensors * 2 * 2
