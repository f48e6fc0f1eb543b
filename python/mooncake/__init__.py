"""Mooncake in C: KVCache transfer engine and distributed KV cache store.

Importing this package loads no native module; ``mooncake.engine`` and ``mooncake.store`` load
their own extension when imported. The reference's top-level names ``BufferPool`` and
``RegisteredBufferPool`` (from the pure-Python ``mooncake.buffer_pool``) are resolved on first use.
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("mooncake-c")
except _metadata.PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__", "BufferPool", "RegisteredBufferPool"]

_LAZY = frozenset({"BufferPool", "RegisteredBufferPool"})


def __getattr__(name):  # PEP 562: imported on first access, so `import mooncake` stays light
    if name in _LAZY:
        from mooncake import buffer_pool

        value = getattr(buffer_pool, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _LAZY)
