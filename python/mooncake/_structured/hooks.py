"""The facade's replaceable module functions, looked up where they are used.

``mooncake.structured_object_store._concat_arrays_into`` (the native gather copy of
``mooncake._fast_copy``) and ``._has_tensor_codec_helpers`` are module attributes of the
reference's module that callers patch (its tests replace them to force a short copy or the
``torch_save`` fallback). The implementation therefore reads them from the facade at each use,
not once at import, so a replacement there takes effect here too.
"""

from __future__ import annotations

import sys

FACADE = "mooncake.structured_object_store"

def _native_concat_arrays_into():
    try:
        from mooncake._fast_copy import concat_arrays_into
    except Exception:  # noqa: BLE001 - the extension is optional: writes then join in Python
        return None
    return concat_arrays_into


native_concat_arrays_into = _native_concat_arrays_into()


def default_has_tensor_codec_helpers():
    """Whether ``mooncake.store`` has the tensor-object codec (``_serialize_tensor`` and
    ``_deserialize_tensor``) structured tensor members are stored with."""
    try:
        from mooncake import store
    except Exception:  # noqa: BLE001 - the extension is not importable here
        return False
    return callable(getattr(store, "_serialize_tensor", None)) and \
        callable(getattr(store, "_deserialize_tensor", None))


def _facade_attr(name, default):
    facade = sys.modules.get(FACADE)
    return default if facade is None else getattr(facade, name, default)


def concat_arrays_into():
    """The gather copy in effect (None: not available)."""
    return _facade_attr("_concat_arrays_into", native_concat_arrays_into)


def has_tensor_codec_helpers():
    return bool(_facade_attr("_has_tensor_codec_helpers", default_has_tensor_codec_helpers)())
