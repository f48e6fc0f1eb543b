"""``ElasticBuffer``: the reference's DeepEP-elastic EP buffer, on the fallback path.

Dispatch sends each token once to every rank owning at least one of its experts. The receiver
keeps rows grouped by the sender's scale-up index, then sender, then token
(``psum_num_recv_tokens_per_scaleup_rank`` counts them), with the routing converted to local
expert ids (-1 where the expert lives elsewhere). With ``do_expand`` the rows are instead one
per (token, local expert), grouped by expert, each expert's block starting at a multiple of
``expert_alignment``. Combine sends each received row (expanded rows first reduced per token,
weighted by ``topk_weights``) back to its sender, which sums the rows of all destinations.
"""

from __future__ import annotations

import os
from typing import Any, List, Optional, Tuple, Union

import torch
import torch.distributed as dist

from mooncake.ep import _sizes
from mooncake.ep._common import (
    CompletedEvent,
    EventOverlap,
    Exchange,
    active_mask,
    check_count,
    check_engine,
    check_tensor,
    check_topk,
    connect_rows,
    group_rank_size,
    require,
)

Tokens = Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]


class EPHandle:
    """The reference's elastic handle: the same fields, plus the fallback's own routing record."""

    def __init__(
        self,
        do_expand: bool,
        num_experts: int,
        expert_alignment: int,
        num_max_tokens_per_rank: int,
        num_sms: int,
        topk_idx: torch.Tensor,
        num_recv_tokens_per_expert_list: List[int],
        psum_num_recv_tokens_per_scaleup_rank: torch.Tensor,
        psum_num_recv_tokens_per_expert: torch.Tensor,
        recv_src_metadata: torch.Tensor,
        dst_buffer_slot_idx: torch.Tensor,
        token_metadata_at_forward: Optional[torch.Tensor],
        channel_linked_list: Optional[torch.Tensor],
        native_handle: Optional[Any] = None,
    ) -> None:
        self.do_expand = do_expand
        self.num_experts = num_experts
        self.expert_alignment = expert_alignment
        self.num_max_tokens_per_rank = num_max_tokens_per_rank
        self.num_sms = num_sms
        self.topk_idx = topk_idx
        self.num_recv_tokens_per_expert_list = num_recv_tokens_per_expert_list
        self.psum_num_recv_tokens_per_scaleup_rank = psum_num_recv_tokens_per_scaleup_rank
        self.psum_num_recv_tokens_per_expert = psum_num_recv_tokens_per_expert
        self.recv_src_metadata = recv_src_metadata
        self.dst_buffer_slot_idx = dst_buffer_slot_idx
        self.token_metadata_at_forward = token_metadata_at_forward
        self.channel_linked_list = channel_linked_list
        self.native_handle = native_handle
        self.num_recv_tokens = int(recv_src_metadata.shape[0])


class _Route:
    """What combine needs from a dispatch: who sent which rows, and where expanded rows sit."""

    def __init__(self) -> None:
        self.sent_tokens = torch.empty(0, dtype=torch.int64)  # per sent row, the local token
        self.send_counts: List[int] = []
        self.recv_counts: List[int] = []  # rows received per source, in receive-buffer order
        self.recv_order = torch.empty(0, dtype=torch.int64)  # receive-buffer row -> arrival row
        self.expanded_rows = torch.empty(0, dtype=torch.int64)  # [R, k] expanded row, -1 if none
        self.num_output = 0
        self.num_recv = 0
        self.mask: List[int] = []


def _physical_domain(num_ranks: int) -> Tuple[int, int]:
    local = int(os.getenv("MOONCAKE_EP_NUM_LOCAL_RANKS", "0") or 0)
    if local <= 0:
        local = max(1, min(num_ranks, torch.cuda.device_count())) if torch.cuda.is_available() else 1
    local = max(1, min(local, num_ranks))
    return (num_ranks + local - 1) // local, local


class ElasticBuffer:
    """The reference's ``mooncake.mooncake_elastic_buffer.ElasticBuffer`` on the fallback path;
    ``engine`` (ours, keyword only) as ``Buffer``'s."""

    def __init__(
        self,
        group: Any,
        num_bytes: Optional[int] = None,
        num_max_tokens_per_rank: int = 0,
        hidden: int = 0,
        num_topk: int = 0,
        use_fp8_dispatch: bool = False,
        deterministic: bool = False,
        allow_hybrid_mode: bool = True,
        allow_multiple_reduction: bool = True,
        prefer_overlap_with_compute: bool = True,
        sl_idx: int = 3,
        num_allocated_qps: int = 0,
        num_cpu_timeout_secs: int = 300,
        num_gpu_timeout_secs: int = 100,
        explicitly_destroy: bool = False,
        *,
        engine: Optional[Any] = None,
    ) -> None:
        if not allow_multiple_reduction:
            raise NotImplementedError("Mooncake ElasticBuffer supports only allow_multiple_reduction=True")
        self.rank_idx, self.num_ranks = group_rank_size(group)
        self.group = group
        self.backend = group
        self.num_max_tokens_per_rank = check_count("num_max_tokens_per_rank", num_max_tokens_per_rank, 0)
        self.hidden = check_count("hidden", hidden, 0)
        self.num_topk = check_count("num_topk", num_topk, 0)
        self.use_fp8_dispatch = bool(use_fp8_dispatch)
        self.deterministic = bool(deterministic)
        self.allow_hybrid_mode = bool(allow_hybrid_mode)
        self.allow_multiple_reduction = True
        self.prefer_overlap_with_compute = bool(prefer_overlap_with_compute)
        self.sl_idx = int(os.getenv("EP_OVERRIDE_RDMA_SL", sl_idx))
        self.num_allocated_qps = num_allocated_qps
        self.num_cpu_timeout_secs = check_count("num_cpu_timeout_secs", num_cpu_timeout_secs, 1)
        self.num_gpu_timeout_secs = num_gpu_timeout_secs
        self.explicitly_destroy = explicitly_destroy
        if num_bytes is None:
            num_bytes = self.get_buffer_size_hint(
                group, self.num_max_tokens_per_rank, self.hidden, self.num_topk, self.use_fp8_dispatch, allow_hybrid_mode
            )
        self.num_bytes = check_count("num_bytes", num_bytes, 0)
        self.num_rdma_ranks, self.num_nvlink_ranks = _physical_domain(self.num_ranks)
        if self.allow_hybrid_mode and self.num_rdma_ranks > 1:
            self.num_scaleout_ranks, self.num_scaleup_ranks = self.num_rdma_ranks, self.num_nvlink_ranks
        else:
            self.num_scaleout_ranks, self.num_scaleup_ranks = 1, self.num_ranks
        self.scaleout_rank_idx = self.rank_idx // self.num_scaleup_ranks
        self.scaleup_rank_idx = self.rank_idx % self.num_scaleup_ranks
        self.runtime: Optional[str] = "fallback"  # no native EP runtime in this build
        self._exchange = Exchange(group, self.rank_idx, self.num_ranks)
        self._exchange.timeout_s = float(self.num_cpu_timeout_secs)
        self._engine = check_engine(engine)
        self.transport_name = "process group"  # how rows travel: set at connect (Buffer's docstring)
        self._connect()
        self.barrier()

    # --- membership -------------------------------------------------------------------------
    def _connect(self) -> None:
        self._exchange.agree([0] * self.num_ranks, [1] * self.num_ranks, [self.num_ranks], ["the group size"])
        self.transport_name = connect_rows(self._exchange, self._engine, "ElasticBuffer")

    def update_ep_member(self) -> None:
        """Re-check the group after a membership change; every call reads the active ranks anew."""
        self._live()
        self._connect()

    def destroy(self) -> None:
        self.runtime = None
        if self._exchange.transport is not None:  # its registered regions go back to the engine
            self._exchange.transport.close()
            self._exchange.transport = None

    def _live(self) -> None:
        if self.runtime is None:
            raise RuntimeError("ElasticBuffer has been destroyed")

    def barrier(self, use_comm_stream: bool = True, with_cpu_sync: bool = False) -> None:
        self._live()
        if with_cpu_sync and torch.cuda.is_available():
            torch.cuda.synchronize()
        dist.barrier(group=self.group)

    @staticmethod
    def capture() -> CompletedEvent:
        return CompletedEvent(torch.device("cpu"))

    # --- sizes ------------------------------------------------------------------------------
    @staticmethod
    def get_buffer_size_hint(
        group: Any,
        num_max_tokens_per_rank: int,
        hidden: int,
        num_topk: int = 0,
        use_fp8_dispatch: bool = False,
        allow_hybrid_mode: bool = True,
        allow_multiple_reduction: bool = True,
    ) -> int:
        _, num_ranks = group_rank_size(group)
        return _sizes.calculate_elastic_buffer_size(
            num_ranks, num_max_tokens_per_rank, hidden, num_topk, use_fp8_dispatch, allow_hybrid_mode,
            allow_multiple_reduction,
        )  # fmt: skip

    @staticmethod
    def get_engram_storage_size_hint(
        num_entries: int, hidden: int, num_max_tokens_per_rank: int, dtype: torch.dtype = torch.bfloat16
    ) -> int:
        itemsize = torch.empty((), dtype=dtype).element_size()
        return _sizes.get_engram_storage_size_hint(num_entries, hidden, num_max_tokens_per_rank, itemsize)

    @staticmethod
    def get_pp_buffer_size_hint(num_max_tensor_bytes: int, num_max_inflight_tensors: int) -> int:
        return _sizes.get_pp_buffer_size_hint(num_max_tensor_bytes, num_max_inflight_tensors)

    @staticmethod
    def get_agrs_buffer_size_hint(group: Any, num_max_session_bytes: int) -> int:
        return num_max_session_bytes

    def get_physical_domain_size(self) -> Tuple[int, int]:
        return self.num_rdma_ranks, self.num_nvlink_ranks

    def get_logical_domain_size(self) -> Tuple[int, int]:
        return self.num_scaleout_ranks, self.num_scaleup_ranks

    def get_theoretical_num_sms(self, num_experts: int, num_topk: int) -> int:
        if not torch.cuda.is_available():
            return 1  # no SMs on the fallback path; the value is only carried in the handle
        sm_count = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
        if self.prefer_overlap_with_compute:
            return max(1, min(24, sm_count // 4))
        return max(1, min(40, sm_count // 2, num_experts * max(1, num_topk)))

    # --- dispatch ---------------------------------------------------------------------------
    def dispatch(
        self,
        x: Tokens,
        topk_idx: Optional[torch.Tensor] = None,
        topk_weights: Optional[torch.Tensor] = None,
        num_experts: Optional[int] = None,
        num_max_tokens_per_rank: Optional[int] = None,
        expert_alignment: Optional[int] = None,
        handle: Optional[EPHandle] = None,
        do_expand: bool = False,
        do_cpu_sync: Optional[bool] = None,
        num_sms: Optional[int] = None,
        async_with_compute_stream: bool = False,
        active_ranks: Optional[torch.Tensor] = None,
    ) -> Tuple[Tokens, torch.Tensor, Optional[torch.Tensor], EPHandle, EventOverlap]:
        self._live()
        n, me = self.num_ranks, self.rank_idx
        if handle is not None:
            require(isinstance(handle, EPHandle), f"handle must be an EPHandle, got {type(handle).__name__}", TypeError)
            require(
                topk_idx is None and topk_weights is None,
                "topk_idx and topk_weights must be None when a cached handle is given",
            )
            require(not do_cpu_sync, "a dispatch with a cached handle cannot do a CPU sync")
            require(not do_expand and not handle.do_expand, "a cached handle supports only do_expand=False")
            topk_idx = handle.topk_idx
            num_max_tokens_per_rank = num_max_tokens_per_rank or handle.num_max_tokens_per_rank
            num_experts = num_experts or handle.num_experts
            expert_alignment = handle.expert_alignment if expert_alignment is None else expert_alignment
            num_sms = handle.num_sms if num_sms is None else num_sms
            do_cpu_sync = False
        else:
            require(topk_idx is not None, "topk_idx must be given when no cached handle is")
            do_cpu_sync = True if do_cpu_sync is None else bool(do_cpu_sync)
        assert topk_idx is not None
        data, sf = (x[0], x[1]) if isinstance(x, tuple) else (x, None)
        check_tensor("x", data, 2, (torch.bfloat16, torch.float8_e4m3fn) if sf is not None else (torch.bfloat16,))
        if sf is not None:
            check_tensor("x scales", sf, 2, (torch.float32, torch.int32))
            require(sf.shape[0] == data.shape[0], f"x scales have {sf.shape[0]} rows but x has {data.shape[0]}")
        num_tokens, hidden = int(data.shape[0]), int(data.shape[1])
        if num_experts is None:
            require(topk_idx.numel() > 0, "num_experts must be given when topk_idx is empty")
            num_experts = int(topk_idx.max()) + 1
        check_count("num_experts", num_experts, 1)
        require(num_experts % n == 0, f"num_experts ({num_experts}) must be divisible by the number of ranks ({n})")
        check_topk(topk_idx, num_tokens, num_experts)
        num_topk = int(topk_idx.shape[1])
        if num_max_tokens_per_rank is None:
            num_max_tokens_per_rank = self.num_max_tokens_per_rank or num_tokens
        max_tokens = check_count("num_max_tokens_per_rank", num_max_tokens_per_rank, 1)
        require(num_tokens <= max_tokens, f"x has {num_tokens} tokens, more than num_max_tokens_per_rank={max_tokens}")
        alignment = check_count("expert_alignment", 1 if expert_alignment is None else expert_alignment, 1)
        if topk_weights is not None:
            check_tensor("topk_weights", topk_weights, 2, (torch.float32,))
            require(
                tuple(topk_weights.shape) == tuple(topk_idx.shape),
                f"topk_weights must have topk_idx's shape {tuple(topk_idx.shape)}, got {tuple(topk_weights.shape)}",
            )
        need = _sizes.calculate_elastic_buffer_size(
            n, max_tokens, hidden, num_topk, sf is not None, self.allow_hybrid_mode, True
        )
        require(
            need <= self.num_bytes,
            f"the elastic buffer holds {self.num_bytes} bytes but these shapes need {need} "
            f"(get_buffer_size_hint(group, {max_tokens}, {hidden}, {num_topk}))",
        )
        if num_sms is None:
            num_sms = self.get_theoretical_num_sms(num_experts, num_topk)
        num_local = num_experts // n
        mask = active_mask(self.group, active_ranks, n)

        # One row per (token, destination rank owning one of its experts), by destination, token.
        owner = torch.where(topk_idx >= 0, topk_idx // num_local, torch.full_like(topk_idx, -1))
        hits = torch.zeros((num_tokens, n), dtype=torch.bool)
        if num_tokens:
            rows_i, cols_i = (owner >= 0).nonzero(as_tuple=True)
            hits[rows_i, owner[rows_i, cols_i]] = True
        if not mask[me]:
            hits[:] = False
        hits &= torch.tensor(mask, dtype=torch.bool).unsqueeze(0)
        dest, tok = hits.t().nonzero(as_tuple=True)
        agreed, recv_counts = self._exchange.agree(
            torch.bincount(dest, minlength=n).tolist(),
            mask,
            [num_experts, max_tokens, hidden, num_topk, int(sf is not None), int(topk_weights is not None), int(do_expand)],
            ["num_experts", "num_max_tokens_per_rank", "hidden", "num_topk", "fp8 input", "topk_weights given",
             "do_expand"],
            row_bytes=(hidden * data.element_size() + 8 * num_topk + 8
                       + (sf.shape[1] * sf.element_size() if sf is not None else 0)
                       + (4 * num_topk if topk_weights is not None else 0)),
        )  # fmt: skip
        keep = torch.tensor(self._exchange.sends_to(agreed), dtype=torch.bool)[dest]
        dest, tok = dest[keep], tok[keep]
        send_counts = torch.bincount(dest, minlength=n).tolist()

        payloads = [data.index_select(0, tok), topk_idx.index_select(0, tok), tok.unsqueeze(1)]
        payloads += [sf.index_select(0, tok)] if sf is not None else []
        payloads += [topk_weights.index_select(0, tok)] if topk_weights is not None else []
        got = self._exchange.rows_of(payloads, send_counts, recv_counts)
        got_x, got_idx, got_tok = got[0], got[1], got[2].view(-1)
        got_sf = got[3] if sf is not None else None
        got_w = got[-1] if topk_weights is not None else None
        src = torch.repeat_interleave(torch.arange(n), torch.tensor(recv_counts, dtype=torch.int64))
        # Receive-buffer order: by the sender's scale-up index, then sender (stable: by token).
        order = torch.sort(src % self.num_scaleup_ranks, stable=True).indices
        num_recv = int(order.numel())
        per_scaleup = torch.bincount(src % self.num_scaleup_ranks, minlength=self.num_scaleup_ranks)
        psum_scaleup = torch.cumsum(per_scaleup, 0).to(torch.int32)

        src_o, tok_o, idx_o = src[order], got_tok[order], got_idx[order]
        is_local = (idx_o >= 0) & (idx_o // num_local == me)
        local_idx = torch.where(is_local, idx_o - me * num_local, torch.full_like(idx_o, -1))
        per_expert = torch.bincount(local_idx[is_local], minlength=num_local)[:num_local] if num_recv else (
            torch.zeros(num_local, dtype=torch.int64)
        )  # fmt: skip
        metadata = torch.full((num_recv, num_topk + 2), -1, dtype=torch.int32)
        metadata[:, 0] = (src_o * max_tokens + tok_o).to(torch.int32)
        metadata[:, 1] = src_o.to(torch.int32)

        route = _Route()
        route.sent_tokens, route.send_counts, route.mask = tok, send_counts, agreed
        route.recv_counts, route.recv_order, route.num_recv = recv_counts, order, num_recv
        capacity = max_tokens * n
        if do_expand:
            # Expanded rows: each local expert's (token) rows in receive order, blocks aligned.
            ends: List[int] = []
            start = 0
            slot = torch.full((num_recv, num_topk), -1, dtype=torch.int64)
            for le in range(num_local):
                start = -(-start // alignment) * alignment
                r, j = (local_idx == le).nonzero(as_tuple=True)
                slot[r, j] = torch.arange(start, start + r.numel())
                start += int(r.numel())
                ends.append(start)
            num_output = ends[-1] if ends else 0
            metadata[:, 2:] = slot.to(torch.int32)
            psum_expert = torch.tensor(ends + [num_output], dtype=torch.int32)
            out_rows = num_output if do_cpu_sync else capacity * num_topk
            recv_x = torch.zeros((out_rows, hidden), dtype=data.dtype)
            filled = slot >= 0
            rr = torch.arange(num_recv).unsqueeze(1).expand_as(slot)[filled]
            recv_x[slot[filled]] = got_x[order][rr]
            recv_sf = None
            if got_sf is not None:
                recv_sf = torch.zeros((out_rows, sf.shape[1]), dtype=got_sf.dtype)  # type: ignore[union-attr]
                recv_sf[slot[filled]] = got_sf[order][rr]
            recv_w = None
            if got_w is not None:
                recv_w = torch.zeros((out_rows,), dtype=torch.float32)
                recv_w[slot[filled]] = got_w[order][filled]
            route.expanded_rows, route.num_output = slot, num_output
            counts_list = [ends[0]] + [ends[i] - -(-ends[i - 1] // alignment) * alignment for i in range(1, num_local)]
        else:
            out_rows = num_recv if do_cpu_sync else capacity
            recv_x = torch.zeros((out_rows, hidden), dtype=data.dtype)
            recv_x[:num_recv] = got_x[order]
            recv_sf = None
            if got_sf is not None:
                recv_sf = torch.zeros((out_rows, sf.shape[1]), dtype=got_sf.dtype)  # type: ignore[union-attr]
                recv_sf[:num_recv] = got_sf[order]
            recv_w = None
            if got_w is not None:
                recv_w = torch.zeros((out_rows, num_topk), dtype=torch.float32)
                recv_w[:num_recv] = torch.where(is_local, got_w[order], torch.zeros_like(got_w[order]))
            psum_expert = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(per_expert, 0)]).to(torch.int32)
            counts_list = per_expert.tolist()
        meta_rows = num_recv if do_cpu_sync else capacity
        recv_topk_idx = torch.full((meta_rows, num_topk), -1, dtype=torch.int64)
        recv_topk_idx[:num_recv] = local_idx
        recv_src_metadata = torch.full((meta_rows, num_topk + 2), -1, dtype=torch.int32)
        recv_src_metadata[:num_recv] = metadata

        new_handle = EPHandle(
            do_expand=do_expand,
            num_experts=num_experts,
            expert_alignment=alignment,
            num_max_tokens_per_rank=max_tokens,
            num_sms=num_sms,
            topk_idx=handle.topk_idx if handle is not None else topk_idx.clone(),
            num_recv_tokens_per_expert_list=[int(c) for c in counts_list] if do_cpu_sync else [],
            psum_num_recv_tokens_per_scaleup_rank=psum_scaleup,
            psum_num_recv_tokens_per_expert=psum_expert if do_expand else psum_expert[1:],
            recv_src_metadata=recv_src_metadata,
            dst_buffer_slot_idx=torch.empty((0, num_topk), dtype=torch.int32),
            token_metadata_at_forward=None,
            channel_linked_list=None,
            native_handle=route,
        )
        if active_ranks is not None:
            active_ranks.copy_(torch.tensor(agreed, dtype=torch.int32))
        recv_out: Tokens = (recv_x, recv_sf) if recv_sf is not None else recv_x
        event = EventOverlap(CompletedEvent(data.device), (data, topk_idx) if async_with_compute_stream else None)
        return recv_out, recv_topk_idx, recv_w, new_handle, event

    # --- combine ----------------------------------------------------------------------------
    def combine(
        self,
        x: torch.Tensor,
        handle: EPHandle,
        topk_weights: Optional[torch.Tensor] = None,
        num_sms: Optional[int] = None,
        async_with_compute_stream: bool = False,
        active_ranks: Optional[torch.Tensor] = None,
    ) -> Tuple[torch.Tensor, Optional[torch.Tensor], EventOverlap]:
        self._live()
        n = self.num_ranks
        require(isinstance(handle, EPHandle), f"handle must be an EPHandle, got {type(handle).__name__}", TypeError)
        route = handle.native_handle
        require(isinstance(route, _Route), "handle was not made by this package's ElasticBuffer.dispatch", TypeError)
        assert isinstance(route, _Route)
        check_tensor("x", x, 2, (torch.bfloat16,))
        rows_needed = route.num_output if handle.do_expand else route.num_recv
        require(
            x.shape[0] >= rows_needed,
            f"x has {x.shape[0]} rows but this rank received {rows_needed} in dispatch",
        )
        hidden = int(x.shape[1])
        xf = x.float()
        if handle.do_expand:
            slot = route.expanded_rows
            if topk_weights is None:
                w = torch.ones((route.num_output,), dtype=torch.float32)
            else:
                check_tensor("topk_weights", topk_weights, 1, (torch.float32,))
                require(
                    topk_weights.shape[0] >= route.num_output,
                    f"topk_weights has {topk_weights.shape[0]} rows, fewer than the {route.num_output} expanded rows",
                )
                w = topk_weights
            per_token = torch.zeros((route.num_recv, hidden), dtype=torch.float32)
            filled = slot >= 0
            rr = torch.arange(route.num_recv).unsqueeze(1).expand_as(slot)[filled]
            per_token.index_add_(0, rr, xf[slot[filled]] * w[slot[filled]].unsqueeze(1))
        else:
            per_token = xf[: route.num_recv]
        # Back to arrival order (by source), the order each source sent its rows in.
        back = torch.empty_like(per_token)
        back[route.recv_order] = per_token
        mask = [a & b for a, b in zip(active_mask(self.group, active_ranks, n), route.mask)]
        agreed, got_counts = self._exchange.agree(
            route.recv_counts if mask[self.rank_idx] else [0] * n,
            mask,
            [hidden],
            ["hidden"],
            row_bytes=2 * hidden,
        )
        sends = self._exchange.sends_to(agreed)
        starts = [sum(route.recv_counts[:s]) for s in range(n)]
        parts = [back[starts[s] : starts[s] + route.recv_counts[s]] for s in range(n) if sends[s]]
        send_counts = [route.recv_counts[s] if sends[s] else 0 for s in range(n)]
        send = torch.cat(parts) if parts else back[:0]
        got = self._exchange.rows(send, send_counts, got_counts)
        require(
            all(got_counts[d] in (0, route.send_counts[d]) for d in range(n)),
            "a destination returned a different number of rows than it was sent",
            RuntimeError,
        )
        dest_of_sent = torch.repeat_interleave(torch.arange(n), torch.tensor(route.send_counts, dtype=torch.int64))
        answered = torch.tensor([got_counts[d] > 0 for d in range(n)], dtype=torch.bool)
        toks = route.sent_tokens[answered[dest_of_sent]] if route.sent_tokens.numel() else route.sent_tokens
        num_tokens = int(handle.topk_idx.shape[0])
        acc = torch.zeros((num_tokens, hidden), dtype=torch.float32)
        acc.index_add_(0, toks, got)
        combined = acc.to(torch.bfloat16)
        if active_ranks is not None:
            active_ranks.copy_(torch.tensor(agreed, dtype=torch.int32))
        event = EventOverlap(CompletedEvent(x.device), (x, combined) if async_with_compute_stream else None)
        return combined, None, event
