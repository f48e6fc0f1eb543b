"""``mooncake.ep``: expert-parallel MoE dispatch and combine (the reference's Mooncake EP).

``Buffer`` is the reference's low-latency buffer (``mooncake.mooncake_ep_buffer.Buffer``),
``ElasticBuffer`` its DeepEP-elastic one (``mooncake.mooncake_elastic_buffer.ElasticBuffer``).
Both run on the fallback path over any ``torch.distributed`` process group (gloo, our
``mooncake-cpu``): docs/ep.md says what runs where. Importing this package needs no torch; the
buffers import it when first used. The size hints are plain arithmetic and need no torch either.
"""

from __future__ import annotations

from typing import Any

from mooncake.ep._sizes import (
    MAX_QP_COUNT,
    calculate_elastic_buffer_size,
    get_ep_buffer_size_hint,
)

__all__ = [
    "MAX_QP_COUNT",
    "Buffer",
    "ElasticBuffer",
    "EPHandle",
    "EventOverlap",
    "calculate_elastic_buffer_size",
    "get_active_ranks",
    "get_ep_buffer_size_hint",
]

_LAZY = {
    "Buffer": "mooncake.ep._buffer",
    "ElasticBuffer": "mooncake.ep._elastic",
    "EPHandle": "mooncake.ep._elastic",
    "EventOverlap": "mooncake.ep._common",
}


def get_active_ranks(backend: Any) -> Any:
    """The process group's active-rank tensor (``mooncake.pg.get_active_ranks``), as the
    reference's ``mooncake.ep`` re-exports it; all ranks on a group without that notion."""
    import torch

    from mooncake.ep._common import backend_active_ranks

    return torch.tensor(backend_active_ranks(backend, backend.size()), dtype=torch.int32)


def __getattr__(name: str) -> Any:  # PEP 562: torch is imported only when a buffer is used
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    try:
        value = getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as e:
        if e.name != "torch":
            raise
        raise ImportError(
            f"mooncake.ep.{name} needs torch, which is not installed (pip install 'mooncake-c[tensor]')"
        ) from e
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_LAZY))
