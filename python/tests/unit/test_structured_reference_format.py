"""Objects the reference's ``mooncake.structured_object_store`` wrote are read by ours.

``data/reference_structured_objects.json`` holds the store objects (key -> base64 bytes) that
the reference's module (mooncake-wheel 0.3.13) wrote for one DataProto and one structured
object, captured from a run of it over an in-memory store in which a tensor object is also
readable as its bytes (header + data, as in a real store), plus the DataProto handle it
exported. The values it stored are the ones ``expected()`` builds. Reading them exercises the
reference's tensor format (``kind: "tensor"`` store tensor objects with ``metadata_bytes``,
nested ``tensor_parts``), its codecs' payloads and metadata (``typed_ragged``,
``ragged_tensor``, ``msgpack_ragged``, the recursive ``nodes`` / ``leaves`` layout) and its
manifests, whole and by rows. (That the reference reads what ours writes was checked the same
way with the reference's module, which is not part of this repository.)
"""

import base64
import json
import pathlib

import numpy as np
import pytest

from mooncake.structured_object_store import MooncakeBundleTransfer, import_dataproto_ref

torch = pytest.importorskip("torch")
FIXTURE = pathlib.Path(__file__).parent / "data" / "reference_structured_objects.json"


class BytesStore:
    """The captured objects; tensor objects are read back through the store's codec."""

    def __init__(self, objects):
        self.objects = objects

    def get(self, key):
        return self.objects.get(key, b"")

    def get_tensor(self, key):
        from mooncake.store import _deserialize_tensor

        return _deserialize_tensor(self.objects[key])

    def put(self, key, value, config=None):  # pragma: no cover - nothing is written
        raise AssertionError("read-only")


def expected():
    typed = [np.arange(2, dtype=np.int32), None, np.arange(6, dtype=np.int32).reshape(2, 3),
             np.asarray(7, dtype=np.int32)]
    return {
        "batch": {"ids": torch.arange(12).reshape(4, 3), "arr": np.arange(8.0).reshape(4, 2),
                  "scalar_t": torch.arange(4.0)},
        "nested": [torch.arange(2), torch.arange(3), torch.arange(1), torch.arange(4)],
        "non_tensor_batch": {
            "text": ["a", "bb", None, "d"],
            "json": [{"i": 1}, [1, 2], None, {"x": "y"}],
            "typed": typed,
            "ragged": [torch.arange(1.0), None, torch.arange(3.0), torch.arange(2.0)],
            "samples": [{"tokens": torch.arange(1.0), "score": 0.0},
                        {"tokens": torch.arange(2.0), "score": 1.0},
                        {"tokens": torch.arange(3.0), "score": None},
                        {"tokens": None, "score": 3.0}],
        },
    }


def plain(value):
    if isinstance(value, (np.ndarray, torch.Tensor)):
        return ("array", str(value.dtype).removeprefix("torch."), value.tolist())
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


@pytest.fixture(scope="module")
def stored():
    raw = json.loads(FIXTURE.read_text())
    store = BytesStore({k: base64.b64decode(v) for k, v in raw["objects"].items()})
    return MooncakeBundleTransfer(store, key_prefix="ref"), raw


@pytest.mark.parametrize("rows", [None, [3, 0, 2], slice(1, 3)])
def test_reads_a_dataproto_the_reference_wrote(stored, rows):
    transfer, raw = stored
    ref = import_dataproto_ref(raw["dataproto_handle"])
    manifest = json.loads(transfer.store.objects[ref.stage_refs["rollout"].manifest_key])
    spec = manifest["buffers"]["batch.ids"]
    assert spec["kind"] == "tensor" and spec["metadata_bytes"] == 304
    got = transfer.get_dataproto(ref, rows=rows)
    want = expected()
    idx = list(range(4)) if rows is None else (
        list(range(4))[rows] if isinstance(rows, slice) else rows)
    for name, value in want["batch"].items():
        assert plain(got["batch"][name]) == plain(value[idx]), name
    assert plain(list(got["batch"]["nested"].unbind())) == plain([want["nested"][i] for i in idx])
    for name, values in want["non_tensor_batch"].items():
        assert plain(list(got["non_tensor_batch"][name])) == plain([values[i] for i in idx]), name
    assert got["meta_info"] == {"step": 3}


def test_reads_a_structured_object_the_reference_wrote(stored):
    transfer, raw = stored
    spec = transfer.read_spec({"manifest_key": raw["object_manifest_key"]})
    got = transfer.materialize(spec)
    t = torch.arange(48).reshape(12, 4)
    assert got.metadata["k"] == 1 and torch.equal(got.objects["t"], t)
    assert got.objects["a"].tolist() == list(range(10)) and got.objects["b"] == b"xyz"
    part = transfer.materialize(spec.select_members(["t"]).slice_member("t", 0, 3, 9))
    assert torch.equal(part.objects["t"], t[3:9])


def test_a_tensor_header_that_disagrees_with_its_field_spec_is_refused(stored):
    from mooncake.structured_object_store import ManifestError

    transfer, raw = stored
    ref = import_dataproto_ref(raw["dataproto_handle"])
    key = json.loads(transfer.store.objects[ref.stage_refs["rollout"].manifest_key])[
        "buffers"]["batch.ids"]["key"]
    objects = dict(transfer.store.objects)
    blob = bytearray(objects[key])
    blob[8] = 0  # the header's dtype code: float32 where the field spec says int64
    objects[key] = bytes(blob)
    tampered = MooncakeBundleTransfer(BytesStore(objects), key_prefix="ref")
    with pytest.raises(ManifestError, match="does not match its field spec"):
        tampered.get_dataproto(ref, rows=[1], batch_fields=["ids"])
