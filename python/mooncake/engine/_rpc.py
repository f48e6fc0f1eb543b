"""The reference's RPC helpers (``RpcInterface``, ``create_rpc_server``, ``create_rpc_client``)
over the C RPC channel (``mooncake/rpc_channel.h``). This module only reshapes arguments: the
tensor forms take a tensor's pointer, size, dtype and shape, the asyncio forms run the blocking
call on a small shared thread pool and settle a future on the caller's loop."""

import asyncio
import atexit
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

from mooncake import _engine

__all__ = [
    "RpcInterface",
    "CoroRPCInterface",
    "ReceivedData",
    "ReceivedTensor",
    "create_rpc_client",
    "create_rpc_server",
]

# Sends started from asyncio run here, a few at a time, never one thread per call.
_POOL_WORKERS = 4
_pool = None
_pool_lock = threading.Lock()
# Servers still running at interpreter exit are stopped while threads can still take the GIL.
_serving: "weakref.WeakSet[RpcInterface]" = weakref.WeakSet()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_POOL_WORKERS, thread_name_prefix="mooncake-rpc")
        return _pool


@atexit.register
def _stop_all() -> None:
    for server in list(_serving):
        server.stop_server()
    if _pool is not None:
        _pool.shutdown(wait=False)


class _Received:
    """What both kinds of received message have: the sender's address and the bytes."""

    __slots__ = ("source_address", "_data")

    def __init__(self, source_address: str, data: bytes):
        self.source_address = source_address
        self._data = data

    def get_memory_view(self) -> memoryview:
        return memoryview(self._data)


class ReceivedData(_Received):
    """A received message, as the reference names it: ``source_address``, ``data_size``,
    ``get_bytes()``, ``get_memory_view()`` (read-only)."""

    __slots__ = ()

    @property
    def data_size(self) -> int:
        return len(self._data)

    def get_bytes(self) -> bytes:
        return self._data


class ReceivedTensor(_Received):
    """A received tensor: ``source_address``, ``shape`` (list of int), ``dtype`` (the sender's
    ``str(tensor.dtype)``, e.g. ``"torch.float32"``), ``total_bytes``, and its bytes through
    ``get_data_size()``, ``get_data_as_bytes()``, ``get_memory_view()``."""

    __slots__ = ("shape", "dtype")

    def __init__(self, source_address: str, data: bytes, shape, dtype: str):
        super().__init__(source_address, data)
        self.shape = list(shape)
        self.dtype = dtype

    @property
    def total_bytes(self) -> int:
        return len(self._data)

    def get_data_size(self) -> int:
        return len(self._data)

    def get_data_as_bytes(self) -> bytes:
        return self._data

    def __repr__(self) -> str:
        return (f"ReceivedTensor(source_address={self.source_address!r}, shape={self.shape}, "
                f"dtype={self.dtype!r}, total_bytes={self.total_bytes})")


def _tensor_parts(tensor):
    """(data_ptr, nbytes, dtype, shape) of a torch-like tensor; TypeError for anything else."""
    for attr in ("data_ptr", "numel", "element_size", "shape", "dtype"):
        if not hasattr(tensor, attr):
            raise TypeError(f"tensor must be a torch.Tensor-like object (no .{attr}): "
                            f"{type(tensor).__name__}")
    device = getattr(tensor, "device", None)
    kind = getattr(device, "type", device)
    if kind is not None and str(kind) != "cpu":
        raise ValueError(f"send_tensor sends host memory; the tensor is on {device}")
    is_contiguous = getattr(tensor, "is_contiguous", None)
    if is_contiguous is not None and not is_contiguous():
        raise ValueError("send_tensor needs a contiguous tensor (call .contiguous())")
    nbytes = int(tensor.numel()) * int(tensor.element_size())
    return int(tensor.data_ptr()), nbytes, str(tensor.dtype), [int(d) for d in tensor.shape]


class RpcInterface(_engine.RpcInterface):
    """Sends whole messages to another process's RpcInterface server, the reference's
    ``mooncake.engine.RpcInterface``::

        server = RpcInterface()
        server.initialize_server("0.0.0.0:9004")
        server.set_data_receive_callback(lambda msg: print(msg["source"], len(msg["data"])))
        server.start_server_async()

        client = RpcInterface()
        client.initialize_client()
        client.send_data("10.0.0.2:9004", b"payload")   # 0 once the server's callback returned

    Return conventions are the reference's: ``initialize*`` and ``start_server*`` return bool,
    ``send_*`` return 0 or a negative code, ``send_*_async`` return an ``asyncio.Future`` that
    resolves to 0 or fails with ``RuntimeError``. Callbacks run on a server thread.
    """

    def start_server_async(self) -> bool:
        ok = super().start_server_async()
        if ok:
            _serving.add(self)
        return ok

    def start_server(self) -> bool:
        _serving.add(self)
        try:
            return super().start_server()
        finally:
            _serving.discard(self)

    def stop_server(self) -> None:
        super().stop_server()
        _serving.discard(self)

    def send_tensor(self, target_address: str, tensor) -> int:
        """Sends a contiguous host tensor (torch.Tensor or alike: ``data_ptr()``, ``numel()``,
        ``element_size()``, ``shape``, ``dtype``); the receiver's tensor callback gets a
        ReceivedTensor with the same shape and dtype name. 0 or a negative code."""
        if not isinstance(target_address, str):
            raise TypeError(f"target_address must be str, not {type(target_address).__name__}")
        ptr, nbytes, dtype, shape = _tensor_parts(tensor)
        # the tensor object stays referenced (and its memory alive) for the whole call
        return self._send_tensor(target_address, ptr, nbytes, dtype, shape)

    def set_tensor_receive_callback(self, callback) -> None:
        """callback(ReceivedTensor) for each tensor received; None removes it."""
        if callback is None:
            self._set_tensor_callback(None)
            return
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")

        def deliver(source, data, shape, dtype):
            callback(ReceivedTensor(source, data, shape, dtype))

        self._set_tensor_callback(deliver)

    def _submit(self, loop, what: str, fn, *args):
        if loop is None:
            loop = asyncio.get_event_loop()
        future = loop.create_future()

        def settle(rc):
            if future.cancelled():
                return
            if isinstance(rc, BaseException):
                future.set_exception(rc)
            elif rc >= 0:
                future.set_result(rc)
            else:
                future.set_exception(RuntimeError(f"Send {what} failed ({rc})"))

        def work():
            try:
                rc = fn(*args)
            except Exception as exc:  # handed to the awaiting coroutine
                rc = exc
            loop.call_soon_threadsafe(settle, rc)

        _executor().submit(work)
        return future

    def send_data_async(self, target_address: str, data, loop):
        """send_data on a worker thread: an asyncio.Future (of loop) resolving to 0, or failing
        with RuntimeError."""
        if not isinstance(target_address, str):
            raise TypeError(f"target_address must be str, not {type(target_address).__name__}")
        data = bytes(memoryview(data))  # TypeError now, and the caller may reuse its buffer
        return self._submit(loop, "data", self.send_data, target_address, data)

    def send_tensor_async(self, target_address: str, tensor, loop):
        """send_tensor on a worker thread; the Future keeps the tensor alive until sent."""
        if not isinstance(target_address, str):
            raise TypeError(f"target_address must be str, not {type(target_address).__name__}")
        _tensor_parts(tensor)  # wrong input fails here, not inside the future
        return self._submit(loop, "tensor", self.send_tensor, target_address, tensor)


# The reference keeps its coroutine-based name as an alias of the same class.
CoroRPCInterface = RpcInterface


def create_rpc_client(local_rank: int = 0, world_size: int = 1) -> RpcInterface:
    """An initialized client (10 pooled connections per target, 30 s timeout), as the
    reference's factory makes it; local_rank and world_size are accepted and unused there too."""
    client = RpcInterface()
    client.initialize("", 0, 30, 10)
    return client


def create_rpc_server(local_rank: int = 0, world_size: int = 1) -> RpcInterface:
    """A server initialized on 0.0.0.0:8080 (the reference's fixed default), not yet started:
    call start_server_async()."""
    server = RpcInterface()
    server.initialize("0.0.0.0:8080", 0, 30, 10)
    return server
