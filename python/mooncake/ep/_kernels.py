"""The kernels path of ``Buffer``: mooncake-ep's token-movement library through ctypes.

Two builds export the same C interface (mooncake-ep/include/mooncake_ep/ep_kernels.h):
``libmooncake_ep_kernels.so``, the CUDA kernels a GPU build makes with
``-DMOONCAKE_BUILD_EP_KERNELS=ON`` (pointers are device memory, work queued on torch's current
stream), and the host reference built from the same per-element header (host pointers), which
exists so the kernels' logic is tested on CPU hosts against the fallback.

Which library: ``$MC_EP_KERNELS_LIB`` when set (a load failure is then an error), else
``libmooncake_ep_kernels.so`` next to this package when present (a load failure is logged and the
fallback runs). The CUDA build serves CUDA tensors, the host reference CPU tensors, and only when
named in ``$MC_EP_KERNELS_LIB``: without it CPU tensors always take the fallback, as before.
The library is loaded on first use, never at import.
"""

from __future__ import annotations

import ctypes
import logging
import os
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

import torch

ENV = "MC_EP_KERNELS_LIB"
LIB_NAME = "libmooncake_ep_kernels.so"
log = logging.getLogger("mooncake.ep")

_P = ctypes.c_void_p
_I64 = ctypes.c_int64
_I32 = ctypes.c_int32
_SIGNATURES = {
    "mc_ep_dispatch_count": [_P, _I64, _I32, _I32, _P, _P, _P],
    "mc_ep_dispatch_pack": [_P, _P, _I64, _I32, _I64, _I32, _I32, _P, _P, _P, _P, _P, _P, _P, _P],
    "mc_ep_dispatch_recv": [_P, _P, _I64, _P, _I64, _I32, _I32, _I64, _P, _P, _P, _P, _P, _P, _P],
    "mc_ep_combine": [_P, _P, _P, _I64, _I32, _I64, _I32, _P, _P, _P, _P],
}
_loaded: Dict[str, Union["Kernels", str]] = {}  # path -> the library, or why it did not load


class Kernels:
    """One loaded library: ``device`` is "cuda" for the CUDA build, "cpu" for the host reference."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lib = ctypes.CDLL(path)
        self._lib.mc_ep_kernels_device.restype = ctypes.c_int
        self._lib.mc_ep_kernels_last_error.restype = ctypes.c_char_p
        for name, args in _SIGNATURES.items():
            fn = getattr(self._lib, name)
            fn.argtypes, fn.restype = args, ctypes.c_int
        self.device = "cuda" if self._lib.mc_ep_kernels_device() == 1 else "cpu"
        self.name = "CUDA kernels" if self.device == "cuda" else "host reference kernels"

    def _call(self, name: str, *args) -> None:
        if getattr(self._lib, name)(*args) != 0:
            why = (self._lib.mc_ep_kernels_last_error() or b"").decode(errors="replace")
            raise RuntimeError(f"mooncake.ep {self.name} ({self.path}): {why}")

    def _stream(self, t: torch.Tensor) -> Optional[int]:
        return torch.cuda.current_stream(t.device).cuda_stream if t.is_cuda else None

    def dispatch_count(self, topk_idx: torch.Tensor, num_experts: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """Per global expert the tokens choosing it, and each slot's rank among them (-1: no selection)."""
        dev = topk_idx.device
        count = torch.empty((num_experts,), dtype=torch.int32, device=dev)
        rank = torch.empty(topk_idx.shape, dtype=torch.int32, device=dev)
        t, k = topk_idx.shape
        self._call("mc_ep_dispatch_count", _ptr(topk_idx), t, k, num_experts, _ptr(count), _ptr(rank),
                   self._stream(topk_idx))  # fmt: skip
        return count, rank

    def dispatch_pack(
        self, x: torch.Tensor, topk_idx: torch.Tensor, num_experts: int, num_ranks: int, count: torch.Tensor,
        rank: torch.Tensor, keep_dest: List[bool], num_rows: int,
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
        """The send rows (by destination, expert, token), their (local expert, token), each slot's row."""
        dev = x.device
        keep = torch.tensor([int(k) for k in keep_dest], dtype=torch.int32, device=dev)
        offsets = torch.empty((num_experts,), dtype=torch.int64, device=dev)
        send_x = torch.empty((num_rows, x.shape[1]), dtype=x.dtype, device=dev)
        send_meta = torch.empty((num_rows, 2), dtype=torch.int64, device=dev)
        slot_pos = torch.empty(topk_idx.shape, dtype=torch.int32, device=dev)
        t, k = topk_idx.shape
        self._call("mc_ep_dispatch_pack", _ptr(x), _ptr(topk_idx), t, k, x.shape[1], num_experts, num_ranks,
                   _ptr(count), _ptr(rank), _ptr(keep), _ptr(offsets), _ptr(send_x), _ptr(send_meta),
                   _ptr(slot_pos), self._stream(x))  # fmt: skip
        return send_x, send_meta, slot_pos

    def dispatch_recv(
        self, recv_x: torch.Tensor, recv_meta: torch.Tensor, recv_counts: List[int], num_local: int, num_ranks: int,
        capacity: int,
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
        """The receiver's packing: (packed rows, count, src_info, layout_range) as the fallback's."""
        dev, hidden = recv_x.device, recv_x.shape[1]
        counts = torch.tensor(recv_counts, dtype=torch.int64, device=dev)
        buckets = torch.empty((num_local * num_ranks,), dtype=torch.int32, device=dev)
        row_rank = torch.empty((recv_x.shape[0],), dtype=torch.int32, device=dev)
        packed = torch.zeros((num_local, capacity, hidden), dtype=recv_x.dtype, device=dev)
        count = torch.empty((num_local,), dtype=torch.int32, device=dev)
        src_info = torch.full((num_local, capacity), -1, dtype=torch.int32, device=dev)
        layout = torch.empty((num_local, num_ranks), dtype=torch.int64, device=dev)
        self._call("mc_ep_dispatch_recv", _ptr(recv_x), _ptr(recv_meta), recv_x.shape[0], _ptr(counts), hidden,
                   num_local, num_ranks, capacity, _ptr(buckets), _ptr(row_rank), _ptr(packed), _ptr(count),
                   _ptr(src_info), _ptr(layout), self._stream(recv_x))  # fmt: skip
        return packed, count, src_info, layout

    def combine(
        self, got: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor, slot_pos: torch.Tensor,
        dest_shift: List[int], num_local: int, hidden: int,
    ) -> torch.Tensor:  # fmt: skip
        """Per token, the weighted sum (float32, then bf16) of the rows its destinations returned."""
        dev = topk_idx.device
        shift = torch.tensor(dest_shift, dtype=torch.int64, device=dev)
        t, k = topk_idx.shape
        out = torch.empty((t, hidden), dtype=torch.bfloat16, device=dev)
        self._call("mc_ep_combine", _ptr(got), _ptr(topk_idx), _ptr(topk_weights), t, k, hidden, num_local,
                   _ptr(slot_pos), _ptr(shift), _ptr(out), self._stream(topk_idx))  # fmt: skip
        return out


def _ptr(t: torch.Tensor) -> int:
    return t.data_ptr()


def _load(path: str, explicit: bool) -> Optional[Kernels]:
    got = _loaded.get(path)
    if got is None:
        try:
            got = Kernels(path)
            log.info("mooncake.ep: loaded %s from %s", got.name, path)
        except (OSError, AttributeError) as e:
            got = f"cannot load {path}: {e}"
            if not explicit:
                log.warning("mooncake.ep: %s; using the fallback path", got)
        _loaded[path] = got
    if isinstance(got, str):
        if explicit:
            raise RuntimeError(f"mooncake.ep: ${ENV}: {got}")
        return None
    return got


def for_tensor(t: torch.Tensor) -> Optional[Kernels]:
    """The library that moves this tensor's tokens, or None for the fallback path."""
    path = os.environ.get(ENV, "")
    explicit = bool(path)
    if not path:
        if not t.is_cuda:
            return None  # CPU tensors take the fallback unless a host reference is named
        path = str(Path(__file__).resolve().parent.parent / LIB_NAME)
        if not os.path.exists(path):
            return None
    kern = _load(path, explicit)
    if kern is None:
        return None
    return kern if kern.device == t.device.type else None
