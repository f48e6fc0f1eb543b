"""What both EP buffers share on the fallback path: events, rank activeness, the row exchange.

Every exchange is one small metadata round on whatever process group the buffer was built on
(gloo, our ``mooncake-cpu``, ...: counts, the active-rank masks, the call's shape) followed by
one round that moves all of the call's payload tensors together, as raw bytes per row so any
dtype (bf16, fp8, int) crosses any transport: through the Transfer Engine's registered buffers
(_te.py) when the buffer's connect chose it, else the group's ``all_to_all_single``.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist


class EventOverlap:
    """The reference's event wrapper. The fallback finishes synchronously, so there is no event
    to wait for: ``current_stream_wait`` returns at once (after a device sync for CUDA tensors)."""

    def __init__(self, event: Optional[Any] = None, extra_tensors: Optional[Tuple[Any, ...]] = None) -> None:
        self.event = event
        self.extra_tensors = extra_tensors

    def current_stream_wait(self) -> None:
        if self.event is not None:
            self.event.current_stream_wait()

    def __enter__(self) -> "EventOverlap":
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        if self.event is not None:
            self.event.current_stream_wait()


class CompletedEvent:
    """Stands for the native ``EventHandle`` after a fallback call: the work is already done."""

    def __init__(self, device: torch.device) -> None:
        self._device = device

    def current_stream_wait(self, stream_ptr: Optional[int] = None) -> None:
        self.synchronize()

    def synchronize(self) -> None:
        if self._device.type == "cuda":
            torch.cuda.synchronize(self._device)


def no_op_hook() -> None:
    """The receive hook of a fallback call: the data has arrived when the call returns."""


def require(cond: bool, message: str, exc: type = ValueError) -> None:
    if not cond:
        raise exc(message)


def check_tensor(name: str, t: Any, dim: int, dtypes: Sequence[torch.dtype]) -> torch.Tensor:
    require(isinstance(t, torch.Tensor), f"{name} must be a torch.Tensor, got {type(t).__name__}", TypeError)
    require(t.dim() == dim, f"{name} must be {dim}-D, got shape {tuple(t.shape)}")
    names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
    require(t.dtype in dtypes, f"{name} must have dtype {names}, got {str(t.dtype).replace('torch.', '')}", TypeError)
    require(t.is_contiguous(), f"{name} must be contiguous")
    return t


def check_count(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    require(value >= minimum, f"{name} must be >= {minimum}, got {value}")
    return value


def check_topk(topk_idx: Any, num_tokens: int, num_experts: int) -> torch.Tensor:
    """Routing of ``num_tokens`` tokens: int64 expert ids in [-1, num_experts), -1 masking a slot."""
    check_tensor("topk_idx", topk_idx, 2, (torch.int64,))
    require(topk_idx.shape[0] == num_tokens, f"topk_idx has {topk_idx.shape[0]} rows but x has {num_tokens} tokens")
    if topk_idx.numel():
        lo, hi = int(topk_idx.min()), int(topk_idx.max())
        require(
            lo >= -1 and hi < num_experts,
            f"topk_idx values must be in [-1, {num_experts}) (-1 masks a selection), got [{lo}, {hi}]",
        )
    return topk_idx


def active_mask(group: Any, active_ranks: Optional[torch.Tensor], num_ranks: int) -> List[int]:
    """This rank's view of the active ranks: the caller's tensor and the process group's."""
    mine = caller_mask(active_ranks, num_ranks)
    return [a & b for a, b in zip(mine, backend_active_ranks(group, num_ranks))]


def group_rank_size(group: Any) -> Tuple[int, int]:
    require(group is not None, "group must be a torch.distributed ProcessGroup, got None", TypeError)
    try:
        return int(group.rank()), int(group.size())
    except AttributeError:
        raise TypeError(f"group must be a torch.distributed ProcessGroup, got {type(group).__name__}") from None


def backend_active_ranks(group: Any, num_ranks: int) -> List[int]:
    """The process group's own view of which ranks are active: ``mooncake.pg.get_active_ranks`` on
    our PG backends, all ranks on the others (gloo and nccl have no notion of an inactive rank)."""
    try:
        name = str(dist.get_backend(group))
    except (RuntimeError, ValueError, AttributeError):
        name = ""
    if not name.startswith("mooncake"):
        return [1] * num_ranks
    try:
        # Looked up at run time: mooncake.pg is optional here (a build may not carry it).
        mask = importlib.import_module("mooncake.pg").get_active_ranks(group)
    except (ImportError, AttributeError):
        return [1] * num_ranks
    values = [1 if int(v) != 0 else 0 for v in mask.tolist()]
    return (values + [0] * num_ranks)[:num_ranks]


def caller_mask(active_ranks: Optional[torch.Tensor], num_ranks: int) -> List[int]:
    if active_ranks is None:
        return [1] * num_ranks
    check_tensor("active_ranks", active_ranks, 1, (torch.int32,))
    require(
        active_ranks.numel() == num_ranks,
        f"active_ranks must have one entry per rank ({num_ranks}), got {active_ranks.numel()}",
    )
    return [1 if int(v) != 0 else 0 for v in active_ranks.tolist()]


class Exchange:
    """One fallback round: agree on the shape and the active ranks, then move rows between ranks.

    ``agree`` sends every rank the caller's row counts, its active-rank mask and the call's shape
    words; a rank is active only where every rank (and the process group) says so, and any shape
    word that differs between ranks fails the call on every rank with the same message, instead
    of one rank hanging in a collective the others skipped.
    """

    def __init__(self, group: Any, rank: int, num_ranks: int) -> None:
        self.group = group
        self.rank = rank
        self.num_ranks = num_ranks
        # The rows' transport: None is the group's all_to_all_single; _te.TERows moves them
        # through Transfer Engine registered buffers (chosen at the buffer's connect).
        self.transport: Optional[Any] = None
        self.timeout_s = DEFAULT_TIMEOUT_S  # how long the TE path waits for a peer's rows to land
        self.plan: List[List[int]] = []  # the last agree's rows per (source, destination)

    def agree(
        self,
        send_counts: List[int],
        mask: List[int],
        shape: Sequence[int],
        shape_names: Sequence[str],
        row_bytes: Optional[int] = None,
    ) -> Tuple[List[int], List[int]]:
        n = self.num_ranks
        if row_bytes is not None:  # the rows' byte layout must match too: placed by offset on the TE path
            shape, shape_names = list(shape) + [row_bytes], list(shape_names) + ["the row size in bytes"]
        # Per destination: the rows for it, this rank's mask, this rank's whole count vector (every
        # rank learns the full count matrix: the TE path places rows by it), the shape words.
        width = 1 + 2 * n + len(shape)
        out_meta = torch.zeros((n, width), dtype=torch.int64, device=self._meta_device())
        for d in range(n):
            out_meta[d, 0] = send_counts[d]
            out_meta[d, 1 : 1 + n] = torch.tensor(mask, dtype=torch.int64)
            out_meta[d, 1 + n : 1 + 2 * n] = torch.tensor(list(send_counts), dtype=torch.int64)
            out_meta[d, 1 + 2 * n :] = torch.tensor(list(shape), dtype=torch.int64)
        in_meta = torch.empty_like(out_meta)
        dist.all_to_all_single(in_meta, out_meta, group=self.group)
        in_meta = in_meta.cpu()
        for src in range(n):
            theirs = in_meta[src, 1 + 2 * n :].tolist()
            for name, mine, other in zip(shape_names, shape, theirs):
                require(
                    int(mine) == int(other),
                    f"ranks disagree on {name}: rank {self.rank} has {int(mine)}, rank {src} has {int(other)}",
                )
        agreed = [int(v) for v in in_meta[:, 1 : 1 + n].min(dim=0).values.tolist()]
        # A sender counted its rows under its own mask, which holds every rank the agreed mask
        # holds; so rows between two agreed-active ranks were counted and are sent, and all others
        # are dropped by both sides (the sender with ``sends_to``).
        me = agreed[self.rank]
        recv_counts = [int(c) if me and agreed[s] else 0 for s, c in enumerate(in_meta[:, 0].tolist())]
        matrix = in_meta[:, 1 + n : 1 + 2 * n].tolist()
        self.plan = [[int(matrix[s][d]) if agreed[s] and agreed[d] else 0 for d in range(n)] for s in range(n)]
        return agreed, recv_counts

    def _meta_device(self) -> torch.device:
        """Where the metadata round's tensors live: nccl moves only CUDA tensors (the device path
        of docs/ep.md), every other backend here host ones."""
        try:
            name = str(dist.get_backend(self.group))
        except (RuntimeError, ValueError, AttributeError):
            name = ""
        return torch.device("cuda", torch.cuda.current_device()) if name == "nccl" else torch.device("cpu")

    def sends_to(self, agreed: List[int]) -> List[bool]:
        """Per destination, whether this rank sends to it under the agreed mask."""
        me = bool(agreed[self.rank])
        return [me and bool(a) for a in agreed]

    def pg_rows(self, send_b: torch.Tensor, send_counts: List[int], recv_counts: List[int]) -> torch.Tensor:
        """Raw byte rows through the group's ``all_to_all_single`` (the fallback's transport)."""
        recv_b = torch.empty((sum(recv_counts), send_b.shape[1]), dtype=torch.uint8, device=send_b.device)
        dist.all_to_all_single(
            recv_b, send_b, output_split_sizes=recv_counts, input_split_sizes=send_counts, group=self.group
        )
        return recv_b

    def meta_rows(self, send_b: torch.Tensor, send_counts: List[int], recv_counts: List[int]) -> torch.Tensor:
        """``pg_rows`` for host metadata (the TE path's addresses): on the device nccl needs."""
        return self.pg_rows(send_b.to(self._meta_device()), send_counts, recv_counts).cpu()

    def rows(self, send: torch.Tensor, send_counts: List[int], recv_counts: List[int]) -> torch.Tensor:
        """Send ``send`` (rows grouped by destination, ``send_counts`` rows each) and return the
        rows received, grouped by source. Rows travel as bytes so every dtype crosses every PG."""
        return self.rows_of([send], send_counts, recv_counts)[0]

    def rows_of(
        self, payloads: Sequence[torch.Tensor], send_counts: List[int], recv_counts: List[int]
    ) -> List[torch.Tensor]:
        """Like ``rows`` for several tensors with one row each per sent row (a token's data, its
        scales, its routing...): they travel together, one round for all, and come back split."""
        num_rows = int(payloads[0].shape[0])
        tails = [tuple(p.shape[1:]) for p in payloads]
        widths = [_row_bytes(t, p.dtype) for t, p in zip(tails, payloads)]
        parts = [_as_bytes(p, num_rows, w) for p, w in zip(payloads, widths) if w]
        device = payloads[0].device
        rb, total = sum(widths), sum(recv_counts)
        if rb == 0:
            return [p.new_empty((total,) + tail) for p, tail in zip(payloads, tails)]
        if self.transport is not None:
            # Packed straight into the registered send region; the rows come back as a view of the
            # receive region, valid until the next exchange: copied out below.
            send_b = self.transport.prepare(num_rows, rb, device, self.plan)
            torch.cat(parts, dim=1, out=send_b)
            recv_b = self.transport.move(send_b, send_counts, recv_counts, self.plan, self.timeout_s)
        else:
            send_b = torch.cat(parts, dim=1)
            recv_b = self.pg_rows(send_b, send_counts, recv_counts)
        out, col = [], 0
        for p, tail, w in zip(payloads, tails, widths):
            piece = torch.empty((total, w), dtype=torch.uint8, device=device)
            if w:
                piece.copy_(recv_b[:, col : col + w])
            out.append(piece.view(p.dtype).reshape((total,) + tail) if w else p.new_empty((total,) + tail))
            col += w
        return out


def _as_bytes(t: torch.Tensor, num_rows: int, width: int) -> torch.Tensor:
    """``t``'s rows as ``[num_rows, width]`` raw bytes (a view where ``t`` is contiguous)."""
    flat = t.contiguous().reshape(num_rows, -1) if num_rows else t.new_empty((0, 1))
    return flat.view(torch.uint8).reshape(num_rows, width)


def connect_rows(exchange: Exchange, engine: Optional[Any], who: str) -> str:
    """(Re)choose how ``exchange`` moves rows (collective): the Transfer Engine when every rank has
    one (``_te.py``, ``$MC_EP_TRANSPORT``), else the group. Returns the transport's name."""
    from mooncake.ep import _te  # here: _te needs this module's Exchange, never the reverse at import

    if exchange.transport is not None:
        exchange.transport.close()
        exchange.transport = None
    exchange.transport = _te.TERows.connect(exchange, engine, who)
    return "process group" if exchange.transport is None else exchange.transport.name


def check_engine(engine: Any) -> Any:
    """The ``engine=`` a buffer was given: None, or a started ``mooncake.engine.TransferEngine``.
    Checked before any collective, like every other argument."""
    if engine is None:
        return None
    require(
        callable(getattr(engine, "batch_transfer_async_write", None)) and callable(getattr(engine, "get_engine_ptr", None)),
        f"engine must be a mooncake.engine.TransferEngine, got {type(engine).__name__}",
        TypeError,
    )
    require(engine.get_engine_ptr() != 0, "engine must be initialized (TransferEngine.initialize) before it is given")
    return engine


DEFAULT_TIMEOUT_S = 300.0


def timeout_s(timeout_us: int) -> float:
    """How long the TE path waits for peers' rows: the call's ``timeout_us`` when given (> 0)."""
    return timeout_us / 1e6 if timeout_us > 0 else DEFAULT_TIMEOUT_S


def _row_bytes(tail: Tuple[int, ...], dtype: torch.dtype) -> int:
    n = 1
    for d in tail:
        n *= d
    return n * torch.empty((), dtype=dtype).element_size()


def fp8_cast(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Per-128-column block e4m3 quantization with float32 scales (the reference's fallback)."""
    m, n = x.shape
    view = x.view(m, -1, 128).float()
    amax = view.abs().amax(dim=2).clamp(min=1e-4)
    q = (view * (448.0 / amax.unsqueeze(2))).to(torch.float8_e4m3fn).view(m, n)
    return q, (amax / 448.0).view(m, -1)


Hook = Callable[[], None]
