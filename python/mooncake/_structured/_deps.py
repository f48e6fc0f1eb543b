"""Optional dependencies of the structured object store: numpy is required (the ``structured``
extra), torch is imported only when a tensor is actually passed or requested."""

import sys

try:
    import numpy
except ImportError as error:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(
        "mooncake.structured_object_store needs numpy: pip install 'mooncake-c[structured]'"
    ) from error

NUMPY_VERSION = numpy.__version__


def torch_module():
    """The torch module if it is already imported by the caller (a tensor can only exist
    then), else None. Never imports torch itself."""
    return sys.modules.get("torch")


def require_torch():
    """Import torch for a read that must produce a tensor."""
    try:
        import torch
    except ImportError as error:
        raise ImportError(
            "this structured object holds torch tensors; reading it needs torch"
        ) from error
    return torch


def is_tensor(value):
    torch = torch_module()
    return torch is not None and isinstance(value, torch.Tensor)


def msgpack_module():
    """msgpack (the ``structured`` extra), or None when it is not installed: objects are then
    written with ``json_ragged`` (which the reference reads too) and ``msgpack_ragged`` fields
    cannot be read."""
    try:
        import msgpack
    except ImportError:
        return None
    return msgpack


def require_msgpack():
    m = msgpack_module()
    if m is None:
        raise ImportError("this structured object has msgpack_ragged fields; reading them needs "
                          "msgpack: pip install 'mooncake-c[structured]'")
    return m
