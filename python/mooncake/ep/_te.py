"""The EP buffers' rows through Transfer Engine registered buffers instead of ``all_to_all_single``.

Every rank registers a receive region with its engine and tells the others (through the process
group, once, and again whenever a region grows) where it is. A dispatch or combine still starts
with the fallback's metadata round over the group (row counts, active ranks, shapes), from which
every rank knows the whole matrix of rows per (source, destination). Then each source writes its
rows for destination ``d`` straight into ``d``'s region, at the offset the matrix gives (the rows
of lower sources come first: the same order ``all_to_all_single`` returns), with one batch write
per destination; once those completed, it writes the call's sequence number into its slot of
``d``'s flag words. The receiver polls its flag words (host memory, even when the rows land in
device memory) until every source that has rows for it has said so, and copies the rows out.

Why the region can be reused without another round: a source writes the next call's rows only
after that call's metadata round, which a receiver enters only after it copied this call's rows.

The metadata round stays on the group (a few words per rank). Which path runs is chosen once, at
the buffer's connect: ``$MC_EP_TRANSPORT`` = ``auto`` (default: the engine when every rank can
start one, else the group), ``te`` (the engine, or an error) or ``pg`` (the group). docs/ep.md
says what runs where.
"""

from __future__ import annotations

import ctypes
import importlib
import logging
import os
import threading
import time
import weakref
from typing import Any, List, Optional, Tuple

import torch
import torch.distributed as dist

log = logging.getLogger("mooncake.ep")

MODES = ("auto", "te", "pg")
_NAME_BYTES = 256  # a segment name ("host:port") in the connect round
_MIN_REGION = 1 << 16

_shared_lock = threading.Lock()
_shared: dict = {}  # (host, protocol, $MC_DEVMEM) -> the process's own engine for EP, started on first use


def transport_mode() -> str:
    mode = os.environ.get("MC_EP_TRANSPORT", "auto").strip().lower() or "auto"
    if mode not in MODES:
        raise ValueError(f"MC_EP_TRANSPORT must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def _shared_engine() -> Any:
    """One engine per process for the EP buffers that were given none: P2P handshake on a port the
    kernel picks, at ``$MC_EP_TE_HOST`` (else ``mooncake.pg.set_host_ip``'s address, else
    127.0.0.1), protocol ``$MC_EP_TE_PROTOCOL``."""
    host = os.environ.get("MC_EP_TE_HOST") or _pg_config().get("host_ip") or "127.0.0.1"
    protocol = os.environ.get("MC_EP_TE_PROTOCOL", "auto")
    key = (host, protocol, os.environ.get("MC_DEVMEM", ""))  # the device table is the engine's too
    with _shared_lock:
        engine = _shared.get(key)
        if engine is None:
            from mooncake.engine import TransferEngine, strerror

            engine = TransferEngine()
            rc = engine.initialize(host if ":" in host else f"{host}:0", "P2PHANDSHAKE", protocol, "")
            if rc != 0:
                raise RuntimeError(f"TransferEngine.initialize({host!r}, P2PHANDSHAKE, {protocol!r}): {strerror(rc)}")
            _shared[key] = engine
        return engine


def _pg_config() -> dict:
    """mooncake.pg's process-wide settings (its engine, its host address), if that module loads."""
    try:
        return dict(getattr(importlib.import_module("mooncake.pg"), "_config", {}))
    except ImportError:
        return {}


def _group_engine(group: Any) -> Optional[Any]:
    """The engine our ``mooncake`` PG backends were told to use (``mooncake.pg.set_transfer_engine``)."""
    try:
        name = str(dist.get_backend(group))
    except (RuntimeError, ValueError, AttributeError):
        return None
    if not name.startswith("mooncake"):
        return None
    return _pg_config().get("engine_obj")


class _Region:
    """A registered buffer: host memory (engine-managed, so same-host peers may use shm), or a
    tensor registered under a device location (``cuda:N``; the fake device backend's too)."""

    def __init__(self, engine: Any, nbytes: int, location: str, device: torch.device) -> None:
        self.engine, self.nbytes, self.location = engine, nbytes, location
        self._managed = location == "cpu" and device.type == "cpu"
        if self._managed:
            self.addr = int(engine.allocate_managed_buffer(nbytes))
            if not self.addr:
                raise RuntimeError(f"mooncake.ep: the Transfer Engine could not allocate {nbytes} bytes")
            raw = (ctypes.c_uint8 * nbytes).from_address(self.addr)
            self.tensor = torch.frombuffer(raw, dtype=torch.uint8)
        else:
            self.tensor = torch.zeros((nbytes,), dtype=torch.uint8, device=device)
            self.addr = int(self.tensor.data_ptr())
            rc = engine.register_memory(self.addr, nbytes, location)
            if rc != 0:
                from mooncake.engine import strerror

                raise RuntimeError(f"mooncake.ep: registering {nbytes} bytes at {location}: {strerror(rc)}")
        self._finalizer = weakref.finalize(self, _Region._release, engine, self.addr, nbytes, self._managed,
                                           self.tensor)  # fmt: skip

    @staticmethod
    def _release(engine: Any, addr: int, nbytes: int, managed: bool, tensor: torch.Tensor) -> None:
        try:
            if managed:
                engine.free_managed_buffer(addr, nbytes)
            else:
                engine.unregister_memory(addr)
        except Exception:  # an engine already closed at interpreter exit: nothing left to release
            pass

    def release(self) -> None:
        self._finalizer()


class TERows:
    """Moves an exchange's rows through registered buffers (module docstring)."""

    def __init__(
        self, exchange: Any, engine: Any, names: List[str], flag_addrs: List[int], flags: _Region, protocol: str
    ) -> None:
        # Weakly: the exchange holds this transport, and a cycle would keep the regions registered
        # until the cyclic collector ran instead of when the buffer goes.
        self._exchange = weakref.ref(exchange)
        self.engine = engine
        self.rank, self.num_ranks = exchange.rank, exchange.num_ranks
        self.names = names  # each rank's segment name
        self.flag_addrs = flag_addrs  # each rank's flag words: one per source, then its own outgoing one
        self.flags = flags
        self.flag_words = flags.tensor[: 8 * (self.num_ranks + 1)].view(torch.int64)
        self.caps = [0] * self.num_ranks  # each rank's receive region's size, known alike by every rank
        self.send_caps = [0] * self.num_ranks  # and its send region's
        self.data_addrs = [0] * self.num_ranks
        self.recv: Optional[_Region] = None
        self.send: Optional[_Region] = None
        self.seq = 0
        self.name = f"Transfer Engine ({protocol})" if protocol else "Transfer Engine"

    # --- connect ----------------------------------------------------------------------------
    @classmethod
    def connect(cls, exchange: Any, engine: Optional[Any], who: str) -> Optional["TERows"]:
        """Collective: every rank starts (or is given) an engine and says where its flag words
        are. Returns the transport when every rank could, None when any could not (the group's
        ``all_to_all_single`` then carries the rows on every rank alike). ``MC_EP_TRANSPORT=te``
        makes a rank that could not an error on every rank; ``pg`` skips the engine."""
        mode = transport_mode()
        if mode == "pg":
            return None
        n, me = exchange.num_ranks, exchange.rank
        reason, flags, name, protocol = "", None, "", ""
        try:
            engine = engine if engine is not None else _group_engine(exchange.group)
            if engine is None:  # the process's own: its protocol is known (a given engine's is not)
                engine, protocol = _shared_engine(), os.environ.get("MC_EP_TE_PROTOCOL", "auto")
            name = str(engine.get_local_segment_name())
            flags = _Region(engine, max(64, 8 * (n + 1)), "cpu", torch.device("cpu"))
        except Exception as e:  # no engine in this build or on this host: the group carries rows
            reason = f"{type(e).__name__}: {e}"
        word = torch.zeros((n, 16 + _NAME_BYTES), dtype=torch.uint8)
        info = word[:, :16].view(torch.int64)
        info[:, 0] = 1 if flags is not None else 0
        info[:, 1] = flags.addr if flags is not None else 0
        encoded = name.encode()[:_NAME_BYTES]
        if encoded:
            word[:, 16 : 16 + len(encoded)] = torch.frombuffer(bytearray(encoded), dtype=torch.uint8)
        got = exchange.meta_rows(word, [1] * n, [1] * n)
        ok = [int(v) for v in got[:, :16].contiguous().view(torch.int64)[:, 0].tolist()]
        if not all(ok):
            missing = [r for r in range(n) if not ok[r]]
            if reason:
                log.warning("mooncake.ep: %s on rank %d cannot use a Transfer Engine: %s", who, me, reason)
            if flags is not None:
                flags.release()
            if mode == "te":
                raise RuntimeError(
                    f"MC_EP_TRANSPORT=te but ranks {missing} could not start a Transfer Engine"
                    + (f" (this rank: {reason})" if reason else "")
                )
            log.info("mooncake.ep: %s on rank %d moves rows through the process group (ranks %s have no "
                     "Transfer Engine)", who, me, missing)  # fmt: skip
            return None
        names = [bytes(got[r, 16:].tolist()).rstrip(b"\0").decode() for r in range(n)]
        addrs = [int(v) for v in got[:, :16].contiguous().view(torch.int64)[:, 1].tolist()]
        assert flags is not None and engine is not None
        # Every rank must reach every other's engine (a segment named 127.0.0.1 on a group that
        # spans hosts does not): one probe each, then one round so all ranks decide alike.
        unreachable = [r for r in range(n) if r != me and engine.send_probe(names[r]) != 0]
        verdict = torch.full((n, 8), len(unreachable), dtype=torch.int64).view(torch.uint8)
        counts = exchange.meta_rows(verdict, [1] * n, [1] * n).contiguous().view(torch.int64)[:, 0].tolist()
        blind = [r for r in range(n) if counts[r]]
        if blind:
            flags.release()
            if unreachable:
                log.warning("mooncake.ep: %s on rank %d cannot reach the Transfer Engines of ranks %s (%s); set "
                            "MC_EP_TE_HOST to an address the others reach", who, me, unreachable,
                            ", ".join(names[r] for r in unreachable))  # fmt: skip
            if mode == "te":
                raise RuntimeError(f"MC_EP_TRANSPORT=te but ranks {blind} cannot reach every rank's Transfer Engine")
            log.info("mooncake.ep: %s on rank %d moves rows through the process group (ranks %s cannot reach "
                     "every Transfer Engine)", who, me, blind)  # fmt: skip
            return None
        rows = cls(exchange, engine, names, addrs, flags, protocol)
        log.info("mooncake.ep: %s on rank %d moves rows through the %s, segment %s", who, me, rows.name, name)
        return rows

    def close(self) -> None:
        for region in (self.recv, self.send, self.flags):
            if region is not None:
                region.release()
        self.recv = self.send = None

    # --- regions ----------------------------------------------------------------------------
    def _location(self, device: torch.device) -> str:
        if device.type == "cuda":
            return f"cuda:{device.index if device.index is not None else torch.cuda.current_device()}"
        return os.environ.get("MC_EP_TE_LOCATION", "") or "cpu"  # read at each allocation

    def prepare(self, num_rows: int, rb: int, device: torch.device, plan: List[List[int]]) -> torch.Tensor:
        """Regions big enough for this call, and ``[num_rows, rb]`` bytes of the send region for
        the caller to pack its rows into before ``move``.

        Every rank computes every rank's receive and send need from the agreed matrix, so all
        agree on whether any region grows (to at least twice its size); only then is there a
        round, which shares the new receive addresses and whether each rank could register its
        regions. A rank that could not fails the call on every rank and stays at size 0 in every
        rank's books, so a later call grows it again: the ranks never disagree."""
        n, me = self.num_ranks, self.rank
        recv_need = [sum(plan[s][d] for s in range(n)) * rb for d in range(n)]
        send_need = [sum(plan[s][d] for d in range(n)) * rb for s in range(n)]
        grow_r = [recv_need[d] > self.caps[d] for d in range(n)]
        grow_s = [send_need[d] > self.send_caps[d] for d in range(n)]
        if any(grow_r) or any(grow_s):
            want_r = [_round_up(max(recv_need[d], 2 * self.caps[d], _MIN_REGION)) if grow_r[d] else self.caps[d]
                      for d in range(n)]  # fmt: skip
            want_s = [_round_up(max(send_need[d], 2 * self.send_caps[d], _MIN_REGION)) if grow_s[d]
                      else self.send_caps[d] for d in range(n)]  # fmt: skip
            error = ""
            try:
                if grow_r[me]:
                    if self.recv is not None:
                        self.recv.release()
                        self.recv = None
                    self.recv = _Region(self.engine, want_r[me], self._location(device), device)
                if grow_s[me]:
                    if self.send is not None:
                        self.send.release()
                        self.send = None
                    self.send = _Region(self.engine, want_s[me], self._location(device), device)
            except Exception as e:  # shared below, so every rank fails this call alike
                error = f"{type(e).__name__}: {e}"
            ok = 0 if error else 1
            mine = [ok, self.recv.addr if self.recv is not None else 0, want_r[me] if ok else 0, want_s[me] if ok else 0]
            words = torch.tensor([mine] * n, dtype=torch.int64).view(torch.uint8)
            exchange = self._exchange()
            assert exchange is not None  # the exchange calls this, so it is alive
            got = exchange.meta_rows(words, [1] * n, [1] * n).contiguous().view(torch.int64).tolist()
            for d in range(n):
                self.data_addrs[d], self.caps[d], self.send_caps[d] = int(got[d][1]), int(got[d][2]), int(got[d][3])
            bad = [d for d in range(n) if not got[d][0]]
            if bad:
                if error:  # this rank's regions are gone: the next call that needs them allocates anew
                    for region in (self.recv, self.send):
                        if region is not None:
                            region.release()
                    self.recv = self.send = None
                raise RuntimeError(
                    f"mooncake.ep: ranks {bad} could not register their {self.name} regions"
                    + (f" (this rank: {error})" if error else "")
                )
        if self.send is None:  # nothing to send, ever yet: no region
            return torch.empty((num_rows, rb), dtype=torch.uint8, device=device)
        return self.send.tensor[: num_rows * rb].view(num_rows, rb)

    def move(
        self, send_b: torch.Tensor, send_counts: List[int], recv_counts: List[int], plan: List[List[int]],
        timeout_s: float,
    ) -> torch.Tensor:  # fmt: skip
        """Rows ``send_b`` ([rows, bytes], grouped by destination; best ``prepare``'s view) to their
        destinations; returns the rows received, grouped by source (what ``all_to_all_single``
        would have returned) as a view of the receive region, valid until the next call."""
        n, me = self.num_ranks, self.rank
        rb = int(send_b.shape[1])
        if [plan[me][d] for d in range(n)] != list(send_counts) or [plan[s][me] for s in range(n)] != list(recv_counts):
            raise RuntimeError("mooncake.ep: the rows to move do not match the counts the ranks agreed on")
        region = self.prepare(int(send_b.shape[0]), rb, send_b.device, plan)
        if send_b.numel() and send_b.data_ptr() != region.data_ptr():  # not packed in place by the caller
            region.copy_(send_b)
        self.seq += 1
        send_addr = self.send.addr if self.send is not None else 0  # None only with nothing to send
        flat = region.reshape(-1)
        if send_b.device.type == "cuda":
            # The packing ran on the caller's stream; the engine's device copies must see it done.
            torch.cuda.current_stream(send_b.device).synchronize()
        pending: List[Tuple[int, int, int]] = []  # (destination, batch id, bytes)
        own: Optional[Tuple[int, int, int]] = None  # this rank's rows to itself: (from, to, bytes)
        pos = 0
        for d in range(n):
            nbytes = send_counts[d] * rb
            if nbytes:
                offset = sum(plan[s][d] for s in range(me)) * rb
                if d == me:
                    own = (pos, offset, nbytes)
                else:
                    bid = self.engine.batch_transfer_async_write(
                        self.names[d], [send_addr + pos], [self.data_addrs[d] + offset], [nbytes]
                    )
                    if not bid:
                        self._fail_after(pending, f"submitting {nbytes} bytes of rows to rank {d} ({self.names[d]})")
                    pending.append((d, int(bid), nbytes))
            pos += nbytes
        if own is not None:  # a local copy into its own region, while the writes are under way
            assert self.recv is not None
            src, dst, nbytes = own
            self.recv.tensor[dst : dst + nbytes].copy_(flat[src : src + nbytes])
        self._wait(pending, "rows")
        # Then the flags: this call's number into this rank's slot of each destination's words.
        self.flag_words[n] = self.seq
        flagged: List[Tuple[int, int, int]] = []
        for d, _, _ in pending:
            bid = self.engine.batch_transfer_async_write(
                self.names[d], [self.flags.addr + 8 * n], [self.flag_addrs[d] + 8 * me], [8]
            )
            if not bid:
                self._fail_after(flagged, f"submitting the landed flag to rank {d} ({self.names[d]})")
            flagged.append((d, int(bid), 8))
        self._wait(flagged, "the landed flag")
        self._await_sources([s for s in range(n) if s != me and recv_counts[s]], timeout_s)
        total_recv = sum(recv_counts)
        if not total_recv:
            return torch.empty((0, rb), dtype=torch.uint8, device=send_b.device)
        assert self.recv is not None
        return self.recv.tensor[: total_recv * rb].view(total_recv, rb)

    def _wait(self, pending: List[Tuple[int, int, int]], what: str) -> None:
        failed = [(d, nbytes) for d, bid, nbytes in pending if self.engine.get_batch_transfer_status([bid]) != 0]
        if failed:
            where = ", ".join(f"rank {d} ({self.names[d]}, {nbytes} bytes)" for d, nbytes in failed)
            raise RuntimeError(f"mooncake.ep: writing {what} through the {self.name} failed to {where}")

    def _fail_after(self, pending: List[Tuple[int, int, int]], what: str) -> None:
        for _, bid, _ in pending:  # the ids already submitted still end (and are freed) first
            self.engine.get_batch_transfer_status([bid])
        raise RuntimeError(f"mooncake.ep: {what} through the {self.name} failed")

    def _await_sources(self, sources: List[int], timeout_s: float) -> None:
        """Until every source with rows for this rank has flagged this call; polls host memory
        (a spin first, then sleeps growing to 1 ms, so a busy host keeps its cores)."""
        if not sources:
            return
        deadline = time.monotonic() + timeout_s
        spins, nap = 0, 20e-6
        while True:
            words = self.flag_words[: self.num_ranks].tolist()
            missing = [s for s in sources if words[s] < self.seq]
            if not missing:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"mooncake.ep: rows from ranks {missing} did not land within {timeout_s:g} s (call {self.seq} "
                    "of this buffer): a peer failed to write them, or died"
                )
            spins += 1
            if spins > 64:
                time.sleep(nap)
                nap = min(nap * 2, 1e-3)


def _round_up(nbytes: int, unit: int = 4096) -> int:
    return -(-nbytes // unit) * unit
