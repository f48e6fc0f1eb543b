"""The torch process group over the C core: a ``torch.distributed.ProcessGroup`` written in
Python (torch calls its methods from Python and, through its trampoline, from C++: DDP's
reducer), so nothing here is compiled against torch.

Collectives run in the calling thread (the C call releases the GIL) and return completed Work
objects; sends and receives run on one worker thread per (direction, peer), so ``isend`` and
``irecv`` pairs in any order cannot block each other.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import math
import threading
from datetime import timedelta
from typing import Optional

import torch
import torch.distributed as dist

from . import _membership, _native
from ._native import check, hint_array

_DTYPES = {
    torch.int8: 0,
    torch.uint8: 1,
    torch.int16: 2,
    torch.int32: 4,
    torch.int64: 6,
    torch.float16: 8,
    torch.float32: 9,
    torch.float64: 10,
    torch.bfloat16: 11,
    torch.bool: 12,
}
for _name, _code in (
    ("uint16", 3),
    ("uint32", 5),
    ("uint64", 7),
    ("float8_e4m3fn", 13),
    ("float8_e5m2", 14),
    ("float8_e4m3fnuz", 15),
    ("float8_e5m2fnuz", 16),
    ("float8_e8m0fnu", 17),
):
    if hasattr(torch, _name):
        _DTYPES[getattr(torch, _name)] = _code

_OPS = {
    dist.ReduceOp.SUM: 0,
    dist.ReduceOp.AVG: 1,
    dist.ReduceOp.PRODUCT: 2,
    dist.ReduceOp.MIN: 3,
    dist.ReduceOp.MAX: 4,
}


def _dtype(t: torch.Tensor) -> int:
    code = _DTYPES.get(t.dtype)
    if code is None:
        raise TypeError(f"mooncake-cpu: unsupported dtype {t.dtype}")
    return code


def _op(op) -> int:
    op = getattr(op, "op", op)  # ReduceOp wraps a RedOpType
    for k, v in _OPS.items():
        if op == k:
            return v
    raise ValueError(f"mooncake-cpu: unsupported reduce op {op}")


def _cpu(t: torch.Tensor) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"mooncake-cpu: expected a tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(f"mooncake-cpu: tensors must be on the CPU, got {t.device}")
    return t


def _one(tensors, what: str) -> torch.Tensor:
    if len(tensors) != 1:
        raise ValueError(f"mooncake-cpu: {what} takes exactly one tensor, got {len(tensors)}")
    return _cpu(tensors[0])


def _split_rows(t, splits, n, what):
    """t's rows cut into n blocks of splits[k] rows each (equal blocks when splits is empty)."""
    rows = t.shape[0] if t.dim() else 1
    row = math.prod(t.shape[1:]) if t.dim() else 1
    if not splits:
        if rows % n:
            raise ValueError(f"mooncake-cpu: all_to_all_single {what} has {rows} rows, not divisible by {n}")
        splits = [rows // n] * n
    splits = [int(s) for s in splits]
    if len(splits) != n or any(s < 0 for s in splits) or sum(splits) != rows:
        raise ValueError(
            f"mooncake-cpu: all_to_all_single {what} split sizes {splits} must be {n} "
            f"non-negative counts summing to its {rows} rows"
        )
    return list(t.reshape(-1).split([s * row for s in splits]))


class _Dense:
    """A contiguous view of t for the C call; copies back into t on exit when it had to copy."""

    def __init__(self, t: torch.Tensor, writeback: bool = True):
        self.t = t
        self.c = t if t.is_contiguous() else t.contiguous()
        self.writeback = writeback and self.c is not t

    def __enter__(self):
        return self.c

    def __exit__(self, *exc):
        if self.writeback and exc[0] is None:
            self.t.copy_(self.c)


def _ptr(t: torch.Tensor) -> int:
    return t.data_ptr() if t.numel() else 0


class MooncakeWork(dist.Work):
    """A finished (collective) or running (send/recv) operation with its failed-ranks hint."""

    def __init__(self, result, hint=None, cfuture=None, seats: int = 0):
        super().__init__()
        self._result = result
        self._hint = hint
        self._seats = seats
        self._cfuture = cfuture
        self._future = torch.futures.Future()
        self._error: BaseException | None = None
        if cfuture is None:
            self._future.set_result(result)
        else:
            cfuture.add_done_callback(self._finish)

    def _finish(self, cf):
        try:
            cf.result()
        except BaseException as e:  # a bad argument in the worker: wait() raises it
            self._error = e
            self._future.set_exception(e)
            return
        self._future.set_result(self._result)

    def wait(self, timeout: timedelta | None = None) -> bool:
        if self._cfuture is not None:
            secs = timeout.total_seconds() if timeout else None
            try:
                self._cfuture.result(timeout=secs if secs else None)
            except concurrent.futures.TimeoutError:
                raise RuntimeError("mooncake-cpu: wait timed out") from None
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self) -> bool:
        return self._cfuture is None or self._cfuture.done()

    def is_success(self) -> bool:
        return self.is_completed() and self._error is None and self.local_success()

    def exception(self):
        return self._error

    def result(self):
        return self._result

    def get_future(self) -> torch.futures.Future:
        return self._future

    def failed_ranks_hint(self) -> torch.Tensor:
        self.wait()
        h = self._hint
        if h is None:
            return torch.zeros(self._seats, dtype=torch.int32)
        return torch.tensor(list(h[: self._seats]), dtype=torch.int32)

    def local_success(self) -> bool:
        self.wait()
        return self._hint is None or not any(self._hint[: self._seats])


class MooncakeProcessGroup(dist.ProcessGroup):
    """One rank's communicator in a group, for CPU tensors (backend ``mooncake-cpu``)."""

    def __init__(self, store, rank: int, size: int, options, config: dict, group_id: str = ""):
        super().__init__(rank, size)
        self._lib = _native.lib()
        self._comm: Optional[ctypes.c_void_p] = ctypes.c_void_p()
        seats = options.max_group_size if options and options.max_group_size else size
        if seats < size:
            raise ValueError(f"max_group_size ({seats}) is smaller than the group size ({size})")
        self._seats = seats
        self._options = options
        o = _native.Options()
        o.rank, o.size, o.max_group_size = rank, size, seats
        o.engine = config.get("engine") or None
        host = config.get("host_ip")
        o.host_ip = host.encode() if host else None
        o.protocol = None
        o.collective_timeout_ms = config["collective_timeout_ms"]
        o.p2p_timeout_ms = config["p2p_timeout_ms"]
        o.slot_bytes = config.get("slot_bytes", 0)
        o.auto_deactivate_on_failure = 1 if (options is None or options.auto_deactivate_on_failure) else 0
        check(self._lib.mc_pg_create(ctypes.byref(o), ctypes.byref(self._comm)), "mc_pg_create")
        self._declared_size = size
        self._membership_timeout_s = max(60.0, 2 * config["collective_timeout_ms"] / 1000)
        extension = bool(options is not None and options.is_extension)
        # A rank joining a running group (is_extension) meets nobody yet: it runs alone
        # (collectives over itself) until join_group admits it.
        self._joined = not extension
        try:
            _membership.create(self, store, rank, size, extension, config.get("host_ip") or "127.0.0.1")
        except BaseException:
            self._lib.mc_pg_destroy(self._comm)
            self._comm = None
            raise
        self._group_id = group_id
        self._coll_lock = threading.Lock()
        self._p2p: dict = {}
        self._p2p_lock = threading.Lock()

    # --- identity ---
    def size(self) -> int:
        """The rank space: up to the highest active seat (it grows when an extension is
        admitted); a rank that has not joined yet reports the size it was created with."""
        if not self._comm or not self._joined:
            return self._declared_size
        active = self.active_ranks().tolist()
        return max([i + 1 for i, a in enumerate(active) if a] + [1])

    def getBackendName(self) -> str:
        return "mooncake"

    def name(self) -> str:
        return "mooncake"

    @property
    def max_group_size(self) -> int:
        return self._seats

    def _handle(self):
        if not self._comm:
            raise RuntimeError("mooncake-cpu: the process group was shut down")
        return self._comm

    def shutdown(self) -> None:
        with self._p2p_lock:
            for ex in self._p2p.values():
                ex.shutdown(wait=True)
            self._p2p.clear()
        if self._comm:
            self._lib.mc_pg_destroy(self._comm)
            self._comm = None

    def abort(self) -> None:
        self.shutdown()

    def __del__(self):
        try:
            self.shutdown()
        except Exception:
            pass

    # --- running ---
    def _run(self, fn, *args, result=None) -> MooncakeWork:
        """Runs one C collective; the Work's future holds result (the output tensors: DDP's
        reducer reads the all-reduced gradients from it)."""
        hint = hint_array()
        with self._coll_lock:
            rc = fn(self._handle(), *args, hint)
        check(rc, fn.__name__)
        return MooncakeWork(result if result is not None else [], hint, seats=self._seats)

    def _check_root(self, root: int) -> int:
        if not 0 <= root < self.size():
            raise ValueError(f"mooncake-cpu: root {root} outside the group of {self.size()}")
        return root

    # --- collectives ---
    def broadcast(self, tensors, opts=None):
        t = _one(tensors, "broadcast")
        root = self._check_root(opts.rootRank if opts is not None else 0)
        with _Dense(t) as c:
            p = _ptr(c)
            return self._run(self._lib.mc_pg_broadcast, p, p, c.numel(), _dtype(c), root, result=[t])

    def allreduce(self, tensors, opts=None):
        op = _op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        work = None
        for t in tensors:
            with _Dense(_cpu(t)) as c:
                p = _ptr(c)
                work = self._run(self._lib.mc_pg_all_reduce, p, p, c.numel(), _dtype(c), op)
        return MooncakeWork(list(tensors), work._hint if work else None, seats=self._seats)

    def allreduce_coalesced(self, tensors, opts=None):
        return self.allreduce(tensors, opts)

    def reduce(self, tensors, opts=None):
        t = _one(tensors, "reduce")
        root = self._check_root(opts.rootRank if opts is not None else 0)
        op = _op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        with _Dense(t) as c:
            p = _ptr(c)
            return self._run(self._lib.mc_pg_reduce, p, p, c.numel(), _dtype(c), op, root, result=[t])

    def _blocks(self, total: int, block: int, what: str, dtype_ok: bool) -> int:
        """How many rank blocks a single-buffer all_gather / reduce_scatter tensor holds: the
        rank space (size()), or any count from this rank's seat up to max_group_size -- the
        caller may size it for the ranks it knows alive (a highest rank that failed but that
        this rank has not seen fail yet) or for every seat. Block k is seat k's; blocks past the
        rank space are left as they are (all_gather) or ignored (reduce_scatter)."""
        n = self.size()
        k = total // block if block else n
        if not dtype_ok or k * block != total or not self.rank() + 1 <= k <= self._seats:
            raise ValueError(
                f"mooncake-cpu: {what} must hold {n} x {block} elements of the input's dtype, got {total}"
            )
        return k

    def _gather_into(self, out: torch.Tensor, inp: torch.Tensor):
        inp = _cpu(inp)
        k = self._blocks(out.numel(), inp.numel(), "all_gather output", out.dtype == inp.dtype)
        n = self.size()
        full = out if k == n else torch.empty(n * inp.numel(), dtype=inp.dtype)
        with _Dense(inp, writeback=False) as i, _Dense(_cpu(full)) as o:
            work = self._run(self._lib.mc_pg_all_gather, _ptr(i), _ptr(o), i.numel(), _dtype(i), result=[out])
        if full is not out:
            m = min(k, n) * inp.numel()
            with _Dense(_cpu(out)) as o:
                o.view(-1)[:m].copy_(full[:m])
        return work

    def allgather(self, output_lists, input_tensors, opts=None):
        inp = _one(input_tensors, "allgather")
        outs = output_lists[0]
        if len(output_lists) != 1 or not self.rank() + 1 <= len(outs) <= self._seats:
            raise ValueError(f"mooncake-cpu: allgather needs one list of {self.size()} tensors")
        flat = torch.empty(len(outs) * inp.numel(), dtype=inp.dtype)  # as _gather_into takes it
        work = self._gather_into(flat, inp)
        for k, o in enumerate(outs):
            o.copy_(flat[k * inp.numel() : (k + 1) * inp.numel()].view_as(o))
        return work

    def all_gather_single(self, output, input, opts=None):
        return self._gather_into(output, input)

    _allgather_base = all_gather_single

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        work = None
        for outs, inp in zip(output_lists, input_list):
            work = self.allgather([outs], [inp], opts)
        return work

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        work = None
        for o, i in zip(outputs, inputs):
            work = self._gather_into(o, i)
        return work

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def gather(self, output_lists, input_tensors, opts=None):
        inp = _one(input_tensors, "gather")
        root = self._check_root(opts.rootRank if opts is not None else 0)
        n = inp.numel()
        flat = torch.empty(self.size() * n if self.rank() == root else n, dtype=inp.dtype)
        if self.rank() == root and (len(output_lists) != 1 or len(output_lists[0]) != self.size()):
            raise ValueError(f"mooncake-cpu: gather's root needs one list of {self.size()} tensors")
        with _Dense(inp, writeback=False) as i:
            work = self._run(self._lib.mc_pg_gather, _ptr(i), _ptr(flat), n, _dtype(i), root)
        if self.rank() == root:
            for k, o in enumerate(output_lists[0]):
                o.copy_(flat[k * n : (k + 1) * n].view_as(o))
        return work

    def scatter(self, output_tensors, input_lists, opts=None):
        out = _one(output_tensors, "scatter")
        root = self._check_root(opts.rootRank if opts is not None else 0)
        n = out.numel()
        if self.rank() == root:
            if len(input_lists) != 1 or len(input_lists[0]) != self.size():
                raise ValueError(f"mooncake-cpu: scatter's root needs one list of {self.size()} tensors")
            flat = torch.cat([_cpu(t).reshape(-1) for t in input_lists[0]])
        else:
            flat = torch.empty(0, dtype=out.dtype)
        with _Dense(out) as o:
            src = _ptr(flat) if self.rank() == root else 0
            return self._run(self._lib.mc_pg_scatter, src, _ptr(o), n, _dtype(o), root)

    def _reduce_scatter_flat(self, out: torch.Tensor, flat: torch.Tensor, op: int):
        k = self._blocks(flat.numel(), out.numel(), "reduce_scatter input", flat.dtype == out.dtype)
        n = self.size()
        if k < n:  # blocks for seats past the buffer: nothing of this rank's goes there
            flat = torch.cat([_cpu(flat).reshape(-1), torch.zeros((n - k) * out.numel(), dtype=flat.dtype)])
        elif k > n:  # blocks for seats past the rank space go nowhere
            flat = _cpu(flat).reshape(-1)[: n * out.numel()]
        with _Dense(_cpu(flat), writeback=False) as i, _Dense(_cpu(out)) as o:
            return self._run(self._lib.mc_pg_reduce_scatter, _ptr(i), _ptr(o), o.numel(), _dtype(o), op)

    def reduce_scatter(self, output_tensors, input_lists, opts=None):
        out = _one(output_tensors, "reduce_scatter")
        op = _op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        if len(input_lists) != 1 or len(input_lists[0]) != self.size():
            raise ValueError(f"mooncake-cpu: reduce_scatter needs one list of {self.size()} tensors")
        flat = torch.cat([_cpu(t).reshape(-1) for t in input_lists[0]])
        return self._reduce_scatter_flat(out, flat, op)

    def reduce_scatter_single(self, output, input, opts=None):
        op = _op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        return self._reduce_scatter_flat(output, input.reshape(-1) if input.is_contiguous() else input.contiguous().reshape(-1), op)

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        work = None
        for o, i in zip(outputs, inputs):
            work = self.reduce_scatter_single(o, i, opts)
        return work

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    def _all_to_all_blocks(self, outs, ins):
        """Blocks of any sizes: padded to the largest, moved by one all_to_all."""
        dtype = ins[0].dtype
        width = max([t.numel() for t in ins] + [t.numel() for t in outs] + [0])
        send = torch.zeros(self.size() * width, dtype=dtype)
        for k, t in enumerate(ins):
            send[k * width : k * width + t.numel()] = _cpu(t).reshape(-1)
        recv = torch.empty_like(send)
        work = self._run(self._lib.mc_pg_all_to_all, _ptr(send), _ptr(recv), width, _dtype(send))
        for k, t in enumerate(outs):
            t.copy_(recv[k * width : k * width + t.numel()].view_as(t))
        return work

    def all_to_all_single(self, output, input, output_split_sizes=None, input_split_sizes=None, opts=None):
        output, input = _cpu(output), _cpu(input)
        n = self.size()
        if not output_split_sizes and not input_split_sizes:
            if input.numel() % n or output.numel() != input.numel():
                raise ValueError(f"mooncake-cpu: all_to_all_single needs equal tensors divisible by {n}")
            with _Dense(input, writeback=False) as i, _Dense(output) as o:
                return self._run(self._lib.mc_pg_all_to_all, _ptr(i), _ptr(o), i.numel() // n, _dtype(i))
        if not output.is_contiguous():
            raise ValueError("mooncake-cpu: all_to_all_single with splits needs a contiguous output")
        # A row is everything past dim 0, from the shape: a rank may send or receive no rows.
        ins = _split_rows(input, input_split_sizes, n, "input")
        outs = _split_rows(output, output_split_sizes, n, "output")
        return self._all_to_all_blocks(outs, ins)

    alltoall_base = all_to_all_single

    def alltoall(self, output_tensors, input_tensors, opts=None):
        if len(output_tensors) != self.size() or len(input_tensors) != self.size():
            raise ValueError(f"mooncake-cpu: alltoall needs {self.size()} input and output tensors")
        return self._all_to_all_blocks(output_tensors, input_tensors)

    def barrier(self, opts=None):
        return self._run(self._lib.mc_pg_barrier)

    # --- point to point ---
    def _executor(self, kind: str, peer: int):
        with self._p2p_lock:
            ex = self._p2p.get((kind, peer))
            if ex is None:
                ex = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"mooncake-pg-{kind}{peer}")
                self._p2p[(kind, peer)] = ex
            return ex

    def _p2p_op(self, kind: str, tensors, peer: int):
        t = _one(tensors, kind)
        if not 0 <= peer < self.size() or peer == self.rank():
            raise ValueError(f"mooncake-cpu: {kind} peer {peer} is not another rank of the group")
        c = t if t.is_contiguous() else t.contiguous()
        hint = hint_array()
        comm = self._handle()
        fn = self._lib.mc_pg_send if kind == "send" else self._lib.mc_pg_recv

        def go():
            # a peer that does not answer within the p2p timeout fails only this message: the
            # hint says which, and wait() returns as collectives' do
            fn(comm, _ptr(c), c.numel() * c.element_size(), peer, hint)
            if kind == "recv" and c is not t:
                t.copy_(c)

        fut = self._executor(kind, peer).submit(go)
        return MooncakeWork([t], hint, cfuture=fut, seats=self._seats)

    def send(self, tensors, dst: int, tag: int = 0):
        return self._p2p_op("send", tensors, dst)

    def recv(self, tensors, src: int, tag: int = 0):
        return self._p2p_op("recv", tensors, src)

    def recv_anysource(self, tensors, tag: int = 0):
        raise NotImplementedError("mooncake-cpu: recv from any source is not supported")

    def set_timeouts(self, collective_us: int = 0, p2p_us: int = 0) -> None:
        """This group's timeouts from now on (0 leaves one as it is); the module's setters
        only apply to groups created after them."""
        for v in (collective_us, p2p_us):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError("timeouts are non-negative ints of microseconds")
        ms = lambda us: (us + 999) // 1000 if us else 0  # noqa: E731
        check(self._lib.mc_pg_set_timeouts(self._handle(), ms(collective_us), ms(p2p_us)), "mc_pg_set_timeouts")

    # --- membership ---
    def _inject_link_fault(self, peer: int, on: bool) -> None:
        """Test failpoint: while on, this rank's transfers to seat peer (-1: all) fail."""
        check(self._lib.mc_pg_inject_link_fault(self._handle(), int(peer), 1 if on else 0), "mc_pg_inject_link_fault")

    def active_ranks(self) -> torch.Tensor:
        arr = hint_array()
        check(self._lib.mc_pg_active_ranks(self._handle(), arr, _native.MAX_RANKS), "mc_pg_active_ranks")
        return torch.tensor(list(arr[: self._seats]), dtype=torch.int32)
