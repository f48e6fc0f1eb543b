"""Mooncake in C: KVCache transfer engine and distributed KV cache store.

Importing this package loads no native module; ``mooncake.engine`` and ``mooncake.store`` load
their own extension when imported.
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("mooncake-c")
except _metadata.PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
