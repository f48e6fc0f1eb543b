"""``Buffer``: the reference's low-latency EP buffer (DeepEP's low-latency dispatch/combine).

Dispatch sends each (token, expert) selection to the rank owning the expert; the receiver packs
them per local expert, grouped by source rank (``layout_range[e, src] = begin << 32 | count``,
``src_info[e, i]`` = the token's index on its source), padded to ``num_ranks *
num_max_dispatch_tokens_per_rank`` rows. Combine returns every expert row to its source in the
order it was sent, and the source sums them weighted by its ``topk_weights``.

Rows travel between ranks through the Transfer Engine's registered buffers when every rank has
an engine (_te.py), else by ``all_to_all_single`` of the buffer's group. The local token
movement (selecting, counting and packing the rows to send, packing the rows received per expert,
the weighted sum of combine) runs on mooncake-ep's kernels when their library is loaded and the
tensors are on its device (_kernels.py: the CUDA build for CUDA tensors), else on the reference's
pure-PyTorch fallback below. ``Buffer.last_path`` names the path the last call took.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple, Union

import torch

from mooncake.ep import _kernels, _sizes
from mooncake.ep._common import (
    CompletedEvent,
    EventOverlap,
    Exchange,
    Hook,
    active_mask,
    check_count,
    check_engine,
    check_tensor,
    check_topk,
    connect_rows,
    fp8_cast,
    group_rank_size,
    no_op_hook,
    require,
    timeout_s,
)

_ZERO_COPY_NEEDS_BUFFER = (
    "combine(zero_copy=True) reads the tensor returned by get_next_combine_buffer(handle) for this "
    "handle; call get_next_combine_buffer first"
)


def _dispatch_row_bytes(hidden: int) -> int:
    """A dispatched row on the wire: the token's bf16 data, then (local expert, token) as int64."""
    return 2 * hidden + 16


class _DispatchHandle(tuple):
    """The reference's 5-tuple handle (src_info, layout_range, num_max_dispatch_tokens_per_rank,
    hidden, num_experts) plus what the source side needs to place the returned rows."""

    plan: "_SendPlan"


class _SendPlan:
    def __init__(self, tokens: torch.Tensor, experts: torch.Tensor, send_counts: List[int], mask: List[int]) -> None:
        self.tokens = tokens  # per sent row, the local token index, grouped by destination rank
        self.experts = experts  # per sent row, the global expert id
        self.send_counts = send_counts
        self.recv_counts: List[int] = []
        self.mask = mask
        self.num_tokens = 0
        self.num_topk = 0
        # The kernels path's record instead of tokens/experts: each slot's send row, the library.
        self.slot_pos: Optional[torch.Tensor] = None
        self.topk_idx: Optional[torch.Tensor] = None
        self.kernels: Optional[_kernels.Kernels] = None


class Buffer:
    """The reference's ``mooncake.mooncake_ep_buffer.Buffer`` on the fallback path. ``engine``
    (ours, keyword only): a started ``mooncake.engine.TransferEngine`` for the rows to travel
    through; without it the group's engine or the process's own is used (docs/ep.md)."""

    def __init__(
        self, group: Any, num_ep_buffer_bytes: int = 0, disable_p2p: bool = False, *, engine: Optional[Any] = None
    ) -> None:
        self.rank, self.group_size = group_rank_size(group)
        self.group = group
        self.backend = group
        self.num_ep_buffer_bytes = check_count("num_ep_buffer_bytes", num_ep_buffer_bytes, 0)
        self.disable_p2p = bool(disable_p2p)
        self.runtime = None  # no native EP runtime in this build: always the fallback path
        self._use_fallback = True
        # "fallback" or the kernels library's name, set by every dispatch and combine (logged at
        # the first call and whenever it changes).
        self.last_path: Optional[str] = None
        self._next_combine_buffer: Optional[Tuple[_DispatchHandle, torch.Tensor]] = None
        self._exchange = Exchange(group, self.rank, self.group_size)
        self._engine = check_engine(engine)
        # How rows travel between ranks: "process group" (all_to_all_single) or "Transfer Engine
        # (protocol)" (registered buffers, _te.py); chosen at connect, alike on every rank.
        self.transport_name = "process group"
        self.connect()

    def connect(self, is_update: bool = False) -> None:
        """Check that every rank built its buffer on the same group size, then set up the rows'
        transport: the Transfer Engine's registered buffers where every rank has an engine."""
        self._exchange.agree([0] * self.group_size, [1] * self.group_size, [self.group_size], ["the group size"])
        self.transport_name = connect_rows(self._exchange, self._engine, "Buffer")

    def update_ep_member(self) -> None:
        """Re-run the connection after the process group's membership changed. The fallback reads
        the group's active ranks on every call, so this only re-checks the group."""
        self.connect(True)

    def ibgda_disabled(self) -> bool:
        return True

    def p2p_enabled(self) -> bool:
        return False

    @staticmethod
    def get_ep_buffer_size_hint(
        num_max_dispatch_tokens_per_rank: int, hidden: int, num_ranks: int, num_experts: int
    ) -> int:
        return _sizes.get_ep_buffer_size_hint(num_max_dispatch_tokens_per_rank, hidden, num_ranks, num_experts)

    def _check_capacity(self, max_tokens: int, hidden: int, num_experts: int) -> None:
        if self.num_ep_buffer_bytes == 0:  # the reference's fallback runs without a workspace
            return
        need = _sizes.get_ep_buffer_size_hint(max_tokens, hidden, self.group_size, num_experts)
        require(
            need <= self.num_ep_buffer_bytes,
            f"the EP buffer holds {self.num_ep_buffer_bytes} bytes but these shapes need {need} "
            f"(get_ep_buffer_size_hint({max_tokens}, {hidden}, {self.group_size}, {num_experts}))",
        )

    def dispatch(
        self,
        x: torch.Tensor,
        topk_idx: torch.Tensor,
        active_ranks: Optional[torch.Tensor],
        num_max_dispatch_tokens_per_rank: int,
        num_experts: int,
        timeout_us: int = -1,
        use_fp8: Optional[bool] = None,
        async_finish: bool = False,
        return_recv_hook: bool = False,
    ) -> Tuple[
        Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]], torch.Tensor, _DispatchHandle, EventOverlap, Hook
    ]:
        n = self.group_size
        check_tensor("x", x, 2, (torch.bfloat16,))
        max_tokens = check_count("num_max_dispatch_tokens_per_rank", num_max_dispatch_tokens_per_rank, 1)
        check_count("num_experts", num_experts, 1)
        check_count("timeout_us", timeout_us, -1)
        num_tokens, hidden = int(x.shape[0]), int(x.shape[1])
        check_topk(topk_idx, num_tokens, num_experts)
        require(
            num_tokens <= max_tokens,
            f"x has {num_tokens} tokens, more than num_max_dispatch_tokens_per_rank={max_tokens}",
        )
        require(hidden > 0 and hidden % 128 == 0, f"hidden (x.shape[1]) must be a positive multiple of 128, got {hidden}")
        require(num_experts % n == 0, f"num_experts ({num_experts}) must be divisible by the number of ranks ({n})")
        num_local = num_experts // n
        require(
            num_local <= _sizes.NUM_MAX_LOCAL_EXPERTS,
            f"{num_local} experts per rank exceed the limit of {_sizes.NUM_MAX_LOCAL_EXPERTS}",
        )
        self._check_capacity(max_tokens, hidden, num_experts)
        self._exchange.timeout_s = timeout_s(timeout_us)
        if use_fp8 is None:
            use_fp8 = True  # the reference's default on CUDA builds
        mask = active_mask(self.group, active_ranks, self.group_size)
        kern = _kernels.for_tensor(x)
        self._note_path("dispatch", kern)
        if kern is not None:
            return self._dispatch_kernels(kern, x, topk_idx, active_ranks, mask, max_tokens, num_experts, use_fp8,
                                          async_finish)  # fmt: skip

        # (token, expert) selections, one per distinct expert of a token, ordered by destination
        # rank, then expert, then token: the receiver's per-expert, per-source packing order.
        sel = topk_idx >= 0
        tok = torch.arange(num_tokens, dtype=torch.int64).unsqueeze(1).expand_as(topk_idx)[sel]
        exp = topk_idx[sel]
        keys = torch.unique(exp * max(num_tokens, 1) + tok)  # sorted, one per distinct pair
        exp = keys // max(num_tokens, 1)
        tok = keys % max(num_tokens, 1)
        dest = exp // num_local
        keep = torch.tensor(mask, dtype=torch.bool)[dest] if mask[self.rank] else torch.zeros_like(dest, dtype=torch.bool)
        exp, tok, dest = exp[keep], tok[keep], dest[keep]
        send_counts = torch.bincount(dest, minlength=n).tolist()

        agreed, recv_counts = self._exchange.agree(
            send_counts,
            mask,
            [num_experts, max_tokens, hidden, int(use_fp8)],
            ["num_experts", "num_max_dispatch_tokens_per_rank", "hidden", "use_fp8"],
            row_bytes=_dispatch_row_bytes(hidden),
        )
        # A rank that any rank sees inactive sends and receives nothing, on every rank alike.
        keep = torch.tensor(self._exchange.sends_to(agreed), dtype=torch.bool)[dest]
        exp, tok, dest = exp[keep], tok[keep], dest[keep]
        send_counts = torch.bincount(dest, minlength=n).tolist()

        rows = x.index_select(0, tok)
        meta = torch.stack([exp % num_local, tok], dim=1)
        recv_rows, recv_meta = self._exchange.rows_of([rows, meta], send_counts, recv_counts)

        capacity = n * max_tokens
        packed = torch.zeros((num_local, capacity, hidden), dtype=torch.bfloat16, device=x.device)
        count = torch.zeros((num_local,), dtype=torch.int32)
        src_info = torch.full((num_local, capacity), -1, dtype=torch.int32)
        layout = torch.zeros((num_local, n), dtype=torch.int64)
        src_of_row = torch.repeat_interleave(torch.arange(n), torch.tensor(recv_counts, dtype=torch.int64))
        for le in range(num_local):
            rows_e = (recv_meta[:, 0] == le).nonzero().view(-1)  # already in source order
            c = int(rows_e.numel())
            count[le] = c
            if c == 0:
                continue
            packed[le, :c] = recv_rows.index_select(0, rows_e)
            src_info[le, :c] = recv_meta[rows_e, 1].to(torch.int32)
            per_src = torch.bincount(src_of_row[rows_e], minlength=n).tolist()
            begin = 0
            for s in range(n):
                if per_src[s]:
                    layout[le, s] = (begin << 32) | per_src[s]
                begin += per_src[s]

        plan = _SendPlan(tok, exp, send_counts, agreed)
        return self._dispatch_result(x, topk_idx, active_ranks, plan, recv_counts, packed, count, src_info, layout,
                                     max_tokens, num_experts, use_fp8, async_finish)  # fmt: skip

    def _dispatch_kernels(
        self, kern: "_kernels.Kernels", x: torch.Tensor, topk_idx: torch.Tensor, active_ranks: Optional[torch.Tensor],
        mask: List[int], max_tokens: int, num_experts: int, use_fp8: bool, async_finish: bool,
    ) -> Any:  # fmt: skip
        """dispatch with the kernels doing the fallback's local work: the same rows, layout, handle."""
        n, hidden = self.group_size, int(x.shape[1])
        num_local = num_experts // n
        count_e, slot_rank = kern.dispatch_count(topk_idx, num_experts)
        per_dest = count_e.view(n, num_local).sum(dim=1).tolist()
        agreed, recv_counts = self._exchange.agree(
            [c if mask[self.rank] and mask[d] else 0 for d, c in enumerate(per_dest)],
            mask,
            [num_experts, max_tokens, hidden, int(use_fp8)],
            ["num_experts", "num_max_dispatch_tokens_per_rank", "hidden", "use_fp8"],
            row_bytes=_dispatch_row_bytes(hidden),
        )
        sends = self._exchange.sends_to(agreed)
        send_counts = [c if sends[d] else 0 for d, c in enumerate(per_dest)]
        rows, meta, slot_pos = kern.dispatch_pack(
            x, topk_idx, num_experts, n, count_e, slot_rank, sends, sum(send_counts)
        )
        recv_rows, recv_meta = self._exchange.rows_of([rows, meta], send_counts, recv_counts)
        packed, count, src_info, layout = kern.dispatch_recv(recv_rows, recv_meta, recv_counts, num_local, n,
                                                             n * max_tokens)  # fmt: skip
        # Combine places the returned rows by slot_pos, so the plan carries no global expert ids.
        plan = _SendPlan(meta[:, 1], torch.empty((0,), dtype=torch.int64), send_counts, agreed)
        plan.slot_pos, plan.topk_idx, plan.kernels = slot_pos, topk_idx, kern
        return self._dispatch_result(x, topk_idx, active_ranks, plan, recv_counts, packed, count, src_info, layout,
                                     max_tokens, num_experts, use_fp8, async_finish)  # fmt: skip

    def _dispatch_result(
        self, x: torch.Tensor, topk_idx: torch.Tensor, active_ranks: Optional[torch.Tensor], plan: _SendPlan,
        recv_counts: List[int], packed: torch.Tensor, count: torch.Tensor, src_info: torch.Tensor,
        layout: torch.Tensor, max_tokens: int, num_experts: int, use_fp8: bool, async_finish: bool,
    ) -> Any:  # fmt: skip
        num_local, capacity, hidden = num_experts // self.group_size, self.group_size * max_tokens, int(x.shape[1])
        plan.recv_counts = recv_counts
        plan.num_tokens, plan.num_topk = int(x.shape[0]), int(topk_idx.shape[1])
        handle = _DispatchHandle((src_info, layout, max_tokens, hidden, num_experts))
        handle.plan = plan
        if active_ranks is not None:
            active_ranks.copy_(torch.tensor(plan.mask, dtype=torch.int32))
        recv_x: Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]] = packed
        if use_fp8:
            q, scales = fp8_cast(packed.view(-1, hidden))
            recv_x = (q.view(num_local, capacity, hidden), scales.view(num_local, capacity, hidden // 128))
        event = EventOverlap(CompletedEvent(x.device), (x, topk_idx) if async_finish else None)
        return recv_x, count, handle, event, no_op_hook

    def _note_path(self, call: str, kern: Optional["_kernels.Kernels"]) -> None:
        """Record (and log, when it changes) which path a call runs on."""
        path = "fallback" if kern is None else kern.name
        if path != self.last_path:
            where = "the pure-PyTorch fallback" if kern is None else f"{kern.name} ({kern.path})"
            _kernels.log.info("mooncake.ep: Buffer.%s on rank %d runs on %s", call, self.rank, where)
        self.last_path = path
        self._use_fallback = kern is None

    def get_next_combine_buffer(self, handle: Any) -> torch.Tensor:
        """The tensor ``combine(zero_copy=True)`` reads: expert outputs in the dispatch layout."""
        h = self._check_handle(handle)
        src_info, _, max_tokens, hidden, num_experts = h
        buf = torch.zeros((num_experts // self.group_size, self.group_size * max_tokens, hidden), dtype=torch.bfloat16)
        self._next_combine_buffer = (h, buf)
        return buf

    def _check_handle(self, handle: Any) -> _DispatchHandle:
        require(
            isinstance(handle, _DispatchHandle),
            f"handle must be the handle returned by this package's Buffer.dispatch, got {type(handle).__name__}",
            TypeError,
        )
        assert isinstance(handle, _DispatchHandle)
        return handle

    def combine(
        self,
        x: torch.Tensor,
        topk_idx: torch.Tensor,
        topk_weights: torch.Tensor,
        active_ranks: Optional[torch.Tensor],
        timeout_us: int,
        handle: Any,
        zero_copy: bool = False,
        async_finish: bool = False,
        return_recv_hook: bool = False,
        out: Optional[torch.Tensor] = None,
    ) -> Tuple[torch.Tensor, EventOverlap, Hook]:
        n = self.group_size
        h = self._check_handle(handle)
        src_info, layout, max_tokens, hidden, num_experts = h
        plan = h.plan
        num_local = num_experts // n
        if zero_copy:
            require(
                self._next_combine_buffer is not None and self._next_combine_buffer[0] is h, _ZERO_COPY_NEEDS_BUFFER
            )
            assert self._next_combine_buffer is not None
            x = self._next_combine_buffer[1]
        check_tensor("x", x, 3, (torch.bfloat16,))
        require(
            tuple(x.shape) == (num_local, n * max_tokens, hidden),
            f"x must have the dispatch layout {(num_local, n * max_tokens, hidden)}, got {tuple(x.shape)}",
        )
        check_tensor("topk_idx", topk_idx, 2, (torch.int64,))
        check_tensor("topk_weights", topk_weights, 2, (torch.float32,))
        require(
            tuple(topk_idx.shape) == tuple(topk_weights.shape) == (plan.num_tokens, plan.num_topk),
            f"topk_idx and topk_weights must have the dispatch's shape {(plan.num_tokens, plan.num_topk)}, "
            f"got {tuple(topk_idx.shape)} and {tuple(topk_weights.shape)}",
        )
        check_count("timeout_us", timeout_us, -1)
        self._exchange.timeout_s = timeout_s(timeout_us)
        if out is not None:
            check_tensor("out", out, 2, (torch.bfloat16,))
            require(
                tuple(out.shape) == (plan.num_tokens, hidden),
                f"out must have shape {(plan.num_tokens, hidden)}, got {tuple(out.shape)}",
            )

        # Rows go back to each source in the order it sent them: per local expert, that source's
        # contiguous block of the dispatch layout.
        mask = [a & b for a, b in zip(active_mask(self.group, active_ranks, self.group_size), plan.mask)]
        blocks: List[List[torch.Tensor]] = [[] for _ in range(n)]
        back_counts = [0] * n
        for le in range(num_local):
            for s in range(n):
                entry = int(layout[le, s])
                begin, c = entry >> 32, entry & 0xFFFFFFFF
                if c:
                    blocks[s].append(x[le, begin : begin + c])
                    back_counts[s] += c
        require(
            back_counts == plan.recv_counts,
            "handle's layout_range does not match the rows this rank received in dispatch",
        )
        agreed, got_counts = self._exchange.agree(
            [c if mask[s] and mask[self.rank] else 0 for s, c in enumerate(back_counts)],
            mask,
            [num_experts, max_tokens, hidden],
            ["num_experts", "num_max_dispatch_tokens_per_rank", "hidden"],
            row_bytes=2 * hidden,
        )
        sends = self._exchange.sends_to(agreed)
        send_counts = [c if sends[s] else 0 for s, c in enumerate(back_counts)]
        send = torch.cat(
            [torch.cat(blocks[s]) if blocks[s] and send_counts[s] else x.new_zeros((0, hidden)) for s in range(n)]
        )
        got = self._exchange.rows(send, send_counts, got_counts)
        require(
            all(got_counts[d] in (0, plan.send_counts[d]) for d in range(n)),
            "a destination returned a different number of rows than it was sent",
            RuntimeError,
        )
        answered = [got_counts[d] == plan.send_counts[d] and got_counts[d] > 0 for d in range(n)]
        self._note_path("combine", plan.kernels)
        if plan.kernels is not None:
            combined = self._combine_kernels(plan, got, answered, topk_idx, topk_weights, num_local, hidden)
        else:
            combined = self._combine_fallback(plan, got, answered, topk_idx, topk_weights, hidden)
        if out is not None:
            out.copy_(combined)
            combined = out
        if active_ranks is not None:
            active_ranks.copy_(torch.tensor(agreed, dtype=torch.int32))
        event = EventOverlap(CompletedEvent(combined.device), (x, combined) if async_finish else None)
        return combined, event, no_op_hook

    def _combine_kernels(
        self, plan: _SendPlan, got: torch.Tensor, answered: List[bool], topk_idx: torch.Tensor,
        topk_weights: torch.Tensor, num_local: int, hidden: int,
    ) -> torch.Tensor:  # fmt: skip
        assert plan.kernels is not None and plan.slot_pos is not None and plan.topk_idx is not None
        require(
            torch.equal(topk_idx, plan.topk_idx),
            "combine's topk_idx must be the topk_idx its dispatch was given (the kernels place rows by it)",
        )
        # got holds the rows of the answering destinations only: a send row of destination d sits
        # dest_shift[d] rows earlier in it (-1: d's rows add nothing).
        shift, skipped = [], 0
        for d in range(self.group_size):
            shift.append(skipped if answered[d] else -1)
            skipped += 0 if answered[d] else plan.send_counts[d]
        return plan.kernels.combine(got, topk_idx, topk_weights, plan.slot_pos, shift, num_local, hidden)

    def _combine_fallback(
        self, plan: _SendPlan, got_rows: torch.Tensor, answered_list: List[bool], topk_idx: torch.Tensor,
        topk_weights: torch.Tensor, hidden: int,
    ) -> torch.Tensor:  # fmt: skip
        n = self.group_size
        got = got_rows.float()

        # Keep the rows sent to destinations that answered; weight each by the token's weight for
        # that expert (summed if a token lists an expert twice, as the reference does).
        dest_of_sent = torch.repeat_interleave(torch.arange(n), torch.tensor(plan.send_counts, dtype=torch.int64))
        answered = torch.tensor(answered_list, dtype=torch.bool)
        keep = answered[dest_of_sent] if plan.tokens.numel() else torch.zeros((0,), dtype=torch.bool)
        toks, exps = plan.tokens[keep], plan.experts[keep]
        w = (topk_weights.index_select(0, toks) * (topk_idx.index_select(0, toks) == exps.unsqueeze(1))).sum(dim=1)
        acc = torch.zeros((plan.num_tokens, hidden), dtype=torch.float32)
        acc.index_add_(0, toks, got * w.unsqueeze(1))
        return acc.to(torch.bfloat16)
