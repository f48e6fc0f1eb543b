"""Structured objects and DataProto bundles in the Mooncake store.

Moves tensors, numpy arrays and DataProto bundles (verl's batch type: ``batch`` tensors,
``non_tensor_batch`` per-row values, ``meta_info``) between RL roles through the store: each
object is a manifest plus payload objects, readable whole, by member, by row slice or by row
gather, into fresh or caller-provided memory. Needs numpy (``pip install
'mooncake-c[structured]'``); torch only when tensors are stored or read. See
docs/structured-object-store.md.

The implementation lives in ``mooncake._structured``; this module is its public face.
"""

from mooncake._structured import _deps  # first: a clear ImportError without numpy
from mooncake._structured.bundle import PayloadMissingError
from mooncake._structured.handles import (
    HANDLE_TYPE as DATAPROTO_REF_HANDLE_TYPE,
    HANDLE_VERSION as DATAPROTO_REF_HANDLE_VERSION,
    export_dataproto_ref,
    import_dataproto_ref,
    is_dataproto_ref_handle,
)
from mooncake._structured.inference import MISSING, choose_leaf_codec, escape_key, infer_structure
from mooncake._structured.manifest import FIELD_SPECS_KEY as STRUCTURED_FIELD_SPECS_KEY
from mooncake._structured.manifest import ManifestError, decode_json, encode_json
from mooncake._structured.transfer import MooncakeBundleTransfer
from mooncake._structured.model import (
    AUTO_PARALLEL_MIN_BYTES,
    AUTO_PARALLEL_MIN_CHUNKS,
    DEFAULT_BUNDLE_CHUNK_BYTES,
    BundleTransferPolicy,
    FieldSchema,
    MooncakeDataProtoRef,
    RemoteBundleRef,
    StructuredFieldLocation,
    StructuredMemberSlice,
    StructuredObjectPayload,
    StructuredObjectReadSpec,
    StructuredObjectResult,
    raw_destination,
    tensor_object_buffer,
)

# The reference's structure-inference and codec helpers under its private names (its
# tests/test_put_get_tensor.py and test_structured_object_store.py call them).
from mooncake._structured.refnames import (  # noqa: E402,F401
    _decode_msgpack_ragged_values,
    _decode_typed_ragged_values,
    _encode_msgpack_ragged_values,
    _encode_typed_ragged_regular_ndarray_rows,
    _encode_typed_ragged_values,
    _encode_with_schema,
)

# The reference's write-path internals under its private names: its payload types, the native
# gather copy and the tensor-codec probe (module attributes a caller may replace: the
# implementation reads them from here at each use, see mooncake._structured.hooks), and its
# config expansion.
from mooncake._structured.calls import config_for_keys as _config_for_grouped_keys  # noqa: E402
from mooncake._structured.hooks import (  # noqa: E402
    default_has_tensor_codec_helpers as _has_tensor_codec_helpers,
    native_concat_arrays_into as _concat_arrays_into,
)
from mooncake._structured.model import (  # noqa: E402
    DirectCopyPayload as _DirectCopyPayload,
    MultiBufferPayload as _MultiBufferPayload,
    TensorPayload as _TensorPayload,
)

_choose_leaf_codec = choose_leaf_codec
_escape_key = escape_key


def _encode_manifest(manifest):
    """A bundle manifest's stored bytes (compact JSON), as the reference's private helper."""
    return encode_json(manifest, "bundle manifest")


def _decode_manifest(payload):
    """A stored bundle manifest back as a dict (ManifestError if it is not a JSON object)."""
    return decode_json(payload, "bundle manifest")


export_ref = export_dataproto_ref
del _deps
import_ref = import_dataproto_ref

__all__ = [
    "AUTO_PARALLEL_MIN_BYTES",
    "AUTO_PARALLEL_MIN_CHUNKS",
    "BundleTransferPolicy",
    "DATAPROTO_REF_HANDLE_TYPE",
    "DATAPROTO_REF_HANDLE_VERSION",
    "DEFAULT_BUNDLE_CHUNK_BYTES",
    "FieldSchema",
    "MISSING",
    "ManifestError",
    "MooncakeBundleTransfer",
    "MooncakeDataProtoRef",
    "PayloadMissingError",
    "RemoteBundleRef",
    "STRUCTURED_FIELD_SPECS_KEY",
    "StructuredFieldLocation",
    "StructuredMemberSlice",
    "StructuredObjectPayload",
    "StructuredObjectReadSpec",
    "StructuredObjectResult",
    "export_dataproto_ref",
    "export_ref",
    "import_dataproto_ref",
    "import_ref",
    "infer_structure",
    "is_dataproto_ref_handle",
    "raw_destination",
    "choose_leaf_codec",
    "tensor_object_buffer",
]
