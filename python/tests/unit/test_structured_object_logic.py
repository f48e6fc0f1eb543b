"""The store-independent parts of mooncake.structured_object_store and mooncake.dataproto_catalog:
row codecs, manifest validation, key layout, ref handles, row and field selection, flat-dict
sections, the catalog, and the import contract (numpy needed, named by the extra; nothing heavy
for ``import mooncake``). Everything that touches a store is in
python/tests/integration/store/test_structured_object_store.py (a real master)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from mooncake._structured import codecs, dataproto, keys
from mooncake._structured import manifest as mf
from mooncake._structured.bundle import Parts, split_parts
from mooncake.dataproto_catalog import DataProtoCatalog
from mooncake.structured_object_store import (
    BundleTransferPolicy,
    FieldSchema,
    MooncakeDataProtoRef,
    RemoteBundleRef,
    StructuredFieldLocation,
    StructuredMemberSlice,
    export_dataproto_ref,
    import_dataproto_ref,
    is_dataproto_ref_handle,
)


def stored(encoded):
    """The payloads as a reader sees them (Parts joined into bytes)."""
    return {k: b"".join(bytes(v) for v in p.views) if isinstance(p, Parts) else p
            for k, p in encoded.payload.items()}


def round_trip(values, codec=None, rows=None, **kw):
    enc = codecs.encode("f", values, codec, **kw)
    src = codecs.MemorySource(stored(enc))
    wanted = list(range(len(values))) if rows is None else rows
    return enc, codecs.decode({"codec": enc.codec, "metadata": enc.metadata}, src, wanted,
                              len(values))


@pytest.mark.parametrize("values,codec", [
    ([1, None, 3, True], "ndarray"),
    ([1.5, 2, None], "ndarray"),
    (["héllo", None, "", "x" * 1000], "utf8_ragged"),
    ([b"a", None, bytearray(b"bc"), memoryview(b"def")], "bytes_ragged"),
    ([{"a": [1, 2]}, None, [1, "x"], {"b": {"c": None}}], "msgpack_ragged"),
    ([[1, 2, 3], None, [], [4]], "typed_ragged"),
    ([None, None], "msgpack_ragged"),
])
def test_codecs_round_trip_and_inference(values, codec):
    enc, got = round_trip(values)
    assert enc.codec == codec
    want = [bytes(v) if isinstance(v, (bytearray, memoryview)) else v for v in values]
    assert got == want
    _, picked = round_trip(values, rows=[len(values) - 1, 0, 0])
    assert picked == [want[-1], want[0], want[0]]


def test_typed_ragged_keeps_dtype_shape_and_ndarray_rows():
    values = [np.arange(6, dtype=np.int16).reshape(2, 3), None, np.zeros((0, 3), np.int16)]
    enc, got = round_trip(values)
    assert enc.codec == "typed_ragged" and enc.metadata["dtype"] == "int16"  # the reference's
    assert got[0].dtype == np.int16 and got[0].shape == (2, 3) and got[1] is None
    assert got[2].shape == (0, 3)
    _, hinted = round_trip([np.arange(3)], "typed_ragged", dtype_hint="float32")
    assert hinted[0].dtype == np.float32
    mixed = [np.asarray(7), np.arange(2), np.zeros((1, 2))]
    _, got = round_trip(mixed, "typed_ragged")
    assert [g.shape for g in got] == [(), (2,), (1, 2)] and got[0] == 7


def test_recursive_rows_keep_structure_and_leaves():
    torch = pytest.importorskip("torch")
    values = [{"tok": torch.arange(2), "img": [b"ab", np.arange(3, dtype=np.int8)], "s": 1.5},
              None, {"tok": None}, [torch.ones(1, dtype=torch.float16), {"k": "v"}]]
    enc, got = round_trip(values)
    assert enc.codec == "structured_recursive" and len(enc.metadata["groups"]) == 4
    assert torch.equal(got[0]["tok"], values[0]["tok"]) and got[0]["img"][0] == b"ab"
    assert got[0]["img"][1].dtype == np.int8 and got[0]["s"] == 1.5
    assert got[1] is None and got[2] == {"tok": None}
    assert torch.equal(got[3][0], values[3][0]) and got[3][1] == {"k": "v"}
    _, picked = round_trip(values, rows=[3])
    assert torch.equal(picked[0][0], values[3][0])
    # Rows mixing dicts and lists have no common structure: skeletons and leaf groups, where
    # the leaf marker key is reserved.
    with pytest.raises(ValueError, match="reserved key"):
        codecs.encode("f", [{codecs.LEAF_KEY: 1, "t": b"x"}, [b"y"]])
    with pytest.raises(ValueError, match="dict keys must be str"):
        codecs.encode("f", [{1: b"x"}])


def test_recursive_rows_of_one_structure_use_the_references_nodes_and_leaves():
    torch = pytest.importorskip("torch")
    values = [{"tok": torch.arange(1.0), "score": 0.0, "img": [{"b": b"a"}]},
              {"tok": torch.arange(2.0), "score": None, "img": [{"b": b"d"}, {"b": b"ef"}]},
              None, {"tok": None, "score": 3.0}]
    enc, got = round_trip(values)
    meta = enc.metadata
    assert enc.codec == "structured_recursive" and meta["root_path"] == "f"
    assert {n["path"]: n["node_type"] for n in meta["nodes"]} == {
        "f": "dict", "f.img": "list", "f.img[0]": "dict", "f.img[1]": "dict"}
    leaves = {leaf["path"]: leaf["codec"] for leaf in meta["leaves"]}
    assert leaves == {"f.tok": "ragged_tensor", "f.score": "ndarray",
                      "f.img[0].b": "bytes_ragged", "f.img[1].b": "bytes_ragged"}
    assert all(leaf["payload_members"]["missing"] == f"leaf.{leaf['id']}.missing"
               for leaf in meta["leaves"])
    assert torch.equal(got[1]["tok"], values[1]["tok"]) and got[1]["img"] == values[1]["img"]
    assert got[0]["img"] == [{"b": b"a"}] and got[2] is None and got[0]["score"] == 0.0
    assert got[3] == {"tok": None, "score": 3.0}  # a key a row lacks stays absent
    _, picked = round_trip(values, rows=[3, 1])
    assert picked[0] == got[3] and picked[1]["img"] == values[1]["img"]


def test_ragged_tensors():
    torch = pytest.importorskip("torch")
    values = [torch.arange(3, dtype=torch.bfloat16), None, torch.zeros(0, dtype=torch.bfloat16)]
    enc, got = round_trip(values)
    assert enc.codec == "ragged_tensor" and enc.metadata["dtype"] == "torch.bfloat16"
    assert torch.equal(got[0], values[0]) and got[1] is None and got[2].shape == (0,)
    with pytest.raises(ValueError, match="mixed tensor dtype"):
        codecs.encode("f", [torch.zeros(1), torch.zeros(1, dtype=torch.int64)])


def test_ragged_tensor_dict_schema():
    torch = pytest.importorskip("torch")
    rows = [{"image": torch.ones(2, 2)}, None, {}, {"image": torch.zeros(3), "audio":
                                                  torch.ones(1)}]
    enc, got = round_trip(rows, "ragged_tensor_dict")
    assert enc.metadata["keys"] == ["image", "audio"]
    assert torch.equal(got[0]["image"], rows[0]["image"]) and got[1] is None and got[2] == {}
    assert set(got[3]) == {"image", "audio"} and torch.equal(got[3]["audio"], torch.ones(1))
    _, picked = round_trip(rows, "ragged_tensor_dict", rows=[3])
    assert torch.equal(picked[0]["image"], rows[3]["image"])
    for bad, err, msg in (([{"a.b": torch.ones(1)}], ValueError, "must not contain"),
                          ([{"": torch.ones(1)}], ValueError, "must not contain"),
                          ([{"image": None}], TypeError, "explicit None"),
                          ([["x"]], TypeError, "dicts or None")):
        with pytest.raises(err, match=msg):
            codecs.encode("f", bad, "ragged_tensor_dict")
    with pytest.raises(ValueError, match="keys not declared"):
        codecs.encode("f", [{"audio": torch.ones(1)}], "ragged_tensor_dict",
                      options={"keys": ["image"]})
    enc = codecs.encode("f", [None, None], "ragged_tensor_dict", options={"keys": ["image"]})
    assert "image.data" in enc.payload


def test_codec_errors():
    with pytest.raises(ValueError, match="unsupported structured non-tensor field f"):
        codecs.encode("f", [object()])
    with pytest.raises(ValueError, match="unsupported structured non-tensor field f"):
        codecs.encode("f", [1, "a"])
    with pytest.raises(ValueError, match="unsupported structured non-tensor field f"):
        codecs.encode("f", [{"a": object()}])
    with pytest.raises(TypeError, match="must be str"):
        codecs.encode("f", [1], "utf8_ragged")
    with pytest.raises(ValueError, match="not nullable"):
        codecs.encode("f", ["a", None], "utf8_ragged", nullable=False)
    with pytest.raises(ValueError, match="unsupported schema codec"):
        codecs.encode("f", ["a"], "zip")
    enc = codecs.encode("f", ["a", "b"])
    payload = stored(enc)
    payload["offsets"] = payload["offsets"][:2]
    with pytest.raises(ValueError, match="offsets length"):
        codecs.decode({"codec": enc.codec}, codecs.MemorySource(payload), [0], 2)
    payload = stored(enc)
    payload["offsets"] = np.asarray([0, 2, 1])
    with pytest.raises(ValueError, match="non-decreasing"):
        codecs.decode({"codec": enc.codec}, codecs.MemorySource(payload), [0], 2)
    with pytest.raises(ValueError, match="unsupported structured non-tensor codec"):
        codecs.decode({"codec": "zip"}, codecs.MemorySource(stored(enc)), [0], 2)


def test_msgpack_ragged_is_the_references_layout_and_json_ragged_still_reads():
    """msgpack_ragged (the reference's default) holds one msgpack value per row back to back,
    offsets in bytes and empty spans for nulls; our older json_ragged objects still decode; a
    typed_ragged field names the reference's contiguous_flat layout and refuses another."""
    msgpack = pytest.importorskip("msgpack")
    rows = [{"a": [1, 2], "b": "x"}, None, [True, None, 1.5], {}]
    enc = codecs.encode("f", rows)
    assert enc.codec == "msgpack_ragged"
    data = stored(enc)
    live = [r for r in rows if r is not None]
    assert data["data"] == b"".join(msgpack.packb(r, use_bin_type=True) for r in live)
    sizes = [0 if r is None else len(msgpack.packb(r, use_bin_type=True)) for r in rows]
    assert list(data["offsets"]) == list(np.cumsum([0] + sizes))
    assert list(data["nulls"]) == [0, 1, 0, 0]
    _, got = round_trip(rows, codec="json_ragged")
    assert got == rows
    enc, got = round_trip([np.arange(3), None])
    assert enc.metadata["physical_layout"] == "contiguous_flat"
    src = codecs.MemorySource(stored(enc))
    with pytest.raises(ValueError, match="physical_layout"):
        codecs.decode({"codec": "typed_ragged",
                       "metadata": {**enc.metadata, "physical_layout": "strided"}}, src, [0], 2)
    with pytest.raises(ValueError, match="unsupported structured non-tensor"):
        codecs.encode("f", [{"a": object()}], "msgpack_ragged")


def test_structure_inference():
    from mooncake._structured.inference import MISSING, choose_leaf_codec, escape_key, \
        infer_structure

    assert [choose_leaf_codec(v).codec for v in (["a", None], [b"x"], [1, 2.5], [[1], [2, 3]],
                                                 [{"a": 1}], [{"a": b"x"}])] == [
        "utf8_ragged", "bytes_ragged", "ndarray", "typed_ragged", "msgpack_ragged",
        "structured_recursive"]
    for bad in ([], [None], [object()], [{"a": object()}], ["a", 1],
                [np.asarray(["x"], dtype=object)]):
        assert not choose_leaf_codec(bad).accepted, bad
    assert escape_key("a.b[0]\\") == "a\\.b\\[0]\\\\"
    leaves, nodes = [], []
    infer_structure("r", [{"x": None, "l": [{"k": 1}]}, {"y": 2, "l": []}, None], leaves, nodes)
    by = {leaf.path: leaf for leaf in leaves}
    assert [n.node_type for n in nodes] == ["dict", "list", "dict"]
    assert nodes[0].children == ["x", "l", "y"] and nodes[0].row_mask == [True, True, False]
    assert nodes[1].lengths == [1, 0, 0]
    assert by["r.x"].values[:2] == [None, MISSING] and by["r.x"].values[2] is None
    assert by["r.l[0].k"].values[0] == 1 and by["r.y"].decision.codec == "ndarray"
    deep = 1
    for _ in range(40):
        deep = {"a": deep}
    with pytest.raises(ValueError, match="deeper"):
        infer_structure("r", [deep], [], [])
    import mooncake.structured_object_store as sos

    assert sos._choose_leaf_codec is choose_leaf_codec and sos.MISSING is MISSING


def test_split_parts_covers_every_byte_once():
    views = [memoryview(bytes(range(i, i + n))) for i, n in ((0, 5), (10, 0), (20, 9), (40, 1))]
    chunks = split_parts(views, 4)
    assert [sum(p.nbytes for p in c) for c in chunks] == [4, 4, 4, 3]
    assert b"".join(bytes(p) for c in chunks for p in c) == b"".join(bytes(v) for v in views)


# -- manifests and keys ------------------------------------------------------------------------

def manifest(**changes):
    m = {"version": 1, "layout": "bundle", "object_id": "p/x",
         "meta": {"key": "pre/p/x/meta", "bytes": 3, "chunks": [{"key": "pre/p/x/meta",
                                                                 "bytes": 3}]},
         "buffers": {"b": {"key": "pre/p/x/buffer/b", "bytes": 4,
                           "chunks": [{"key": "pre/p/x/buffer/b/chunk/0", "bytes": 2},
                                      {"key": "pre/p/x/buffer/b/chunk/1", "bytes": 2}]}}}
    m.update(changes)
    return m


def test_manifest_validation():
    assert mf.validate(manifest(), "pre")
    assert mf.manifest_keys(manifest()) == ["pre/p/x/meta", "pre/p/x/buffer/b/chunk/0",
                                            "pre/p/x/buffer/b/chunk/1"]
    cases = [
        (manifest(version=2), "invalid bundle manifest"),
        (manifest(layout="x"), "invalid bundle manifest"),
        (manifest(object_id=3), "object_id"),
        (manifest(buffers=[]), "buffers must be a dict"),
        (manifest(buffers={"a/b": manifest()["buffers"]["b"]}), "buffer name"),
        (manifest(cleanup_keys=["other/p/x/meta"]), "cleanup_keys"),
        (manifest(buffer_object_ids="p/x"), "buffer_object_ids"),
        (manifest(meta={"key": "pre/p/y/meta", "bytes": 0, "chunks": []}), "namespace"),
    ]
    b = manifest()["buffers"]["b"]
    for chunks, msg in (([{"key": "pre/p/x/buffer/bb", "bytes": 4}], "payload namespace"),
                        ([{"key": "pre/p/x/buffer/b", "bytes": 2}] * 2, "unique"),
                        ([{"key": "pre/p/x/buffer/b", "bytes": 3}], "total 3 bytes, expected 4"),
                        ([{"key": "pre/p/x/buffer/b", "bytes": True}], "integer"),
                        ([{"key": "pre/p/x/buffer/b", "bytes": 0}], "positive"),
                        ([], "chunks are invalid"), ("x", "chunks are invalid"), ([7], "dict")):
        cases.append((manifest(buffers={"b": {**b, "chunks": chunks}}), msg))
    for bad, msg in cases:
        with pytest.raises(mf.ManifestError, match=msg):
            mf.validate(bad, "pre")
    with pytest.raises(mf.ManifestError, match="must decode to a dict"):
        mf.decode_json(b"[]", "bundle manifest")
    with pytest.raises(mf.ManifestError, match="not valid JSON"):
        mf.decode_json(b"\xff", "bundle manifest")
    with pytest.raises(TypeError, match="JSON-serializable"):
        mf.encode_json({"x": float("nan")}, "structured metadata")


def test_key_layout():
    k = keys.BundleKeys("pre", "part")
    assert k.manifest == f"pre/{k.object_id}/manifest" and k.object_id.startswith("part/")
    assert keys.object_id_of("pre", k.buffer("b") + "/chunk/3") == k.object_id
    assert keys.object_id_of("pre", k.meta) == k.object_id
    assert keys.object_id_of("other", k.meta) is None
    assert keys.normalize_prefix("/a/b/") == "a/b"
    for bad in ("", "/", "a\nb", 3):
        with pytest.raises(ValueError, match="key_prefix"):
            keys.normalize_prefix(bad)
    for bad in ("", "a/b", "a\x00", None):
        with pytest.raises(ValueError, match="invalid bundle partition"):
            keys.check_segment(bad, "partition")
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="chunk_bytes"):
            keys.check_chunk_bytes(bad)


def test_policy_and_slices():
    assert BundleTransferPolicy().checked(3).max_inflight_put == 3
    for bad, msg in ((BundleTransferPolicy(max_inflight_put=0), "max_inflight_put"),
                     (BundleTransferPolicy(put_mode="x"), "put_mode"),
                     (BundleTransferPolicy(copy_mode="x"), "copy_mode")):
        with pytest.raises(ValueError, match=msg):
            bad.checked()
    assert BundleTransferPolicy(copy_mode="zero_copy").for_control().copy_mode == "copy"
    assert StructuredMemberSlice(0, 2, 100, 3).count(10) == 3
    assert StructuredMemberSlice(0, -3, 100).bounds(10) == (7, 10, 1)
    with pytest.raises(ValueError, match="axis=0"):
        StructuredMemberSlice(1, 0, 1).bounds(3)
    with pytest.raises(ValueError, match="step must be positive"):
        StructuredMemberSlice(0, 0, 1, 0).bounds(3)


# -- handles, selections, flat dicts -----------------------------------------------------------

def a_ref():
    return MooncakeDataProtoRef(
        batch_size=4,
        stage_refs={"s": RemoteBundleRef("pre/p/x/manifest", {"ignored": True})},
        field_index={"a": StructuredFieldLocation("s", "batch.a", "batch"),
                     "t": StructuredFieldLocation("s", "non_tensor_batch.t", "non_tensor_batch")},
        meta_info={"n": np.int64(3), "v": np.arange(2)},
        encoded_non_tensor={"t": {"codec": "utf8_ragged", "rows": 4, "metadata": {},
                                  "payload_members": {"data": "non_tensor_batch.t.data"}}},
        _storage_group_id="g")


def test_handles_round_trip_and_validation():
    handle = export_dataproto_ref(a_ref())
    assert is_dataproto_ref_handle(handle) and not is_dataproto_ref_handle({"type": "x"})
    assert json.loads(json.dumps(handle)) == handle and handle["meta_info"] == {"n": 3,
                                                                                "v": [0, 1]}
    back = import_dataproto_ref(handle)
    assert back.stage_refs["s"].manifest == {} and back._storage_group_id == "g"
    assert back.field_index == a_ref().field_index
    assert import_dataproto_ref({**handle, "version": 2})._storage_group_id == "g"

    def broken(**changes):
        h = json.loads(json.dumps(handle))
        for path, value in changes.items():
            target = h
            *head, last = path.split("__")
            for part in head:
                target = target[part]
            target[last] = value
        return h

    for bad, msg in (
            (broken(type="x"), "not a Mooncake DataProto ref handle"),
            (broken(version=3), "unsupported DataProto ref handle version"),
            (broken(kind="x"), "unsupported DataProto ref handle kind"),
            (broken(batch_size=-1), "batch_size"),
            (broken(stage_refs=[]), "stage_refs must be a mapping"),
            (broken(stage_refs__s__manifest_key=""), "non-empty"),
            (broken(field_index__a__section="meta"), "invalid DataProto field section"),
            (broken(field_index__a__member=""), "non-empty"),
            (broken(field_index__a__stage="q"), "unknown stage"),
            (broken(storage_group_id=""), "storage_group_id"),
            (broken(global_indexes="0,1"), "global_indexes"),
            (broken(global_indexes=[True]), "global_indexes"),
            (broken(encoded_non_tensor__t="x"), "encoded_non_tensor"),
            (broken(meta_info=[]), "meta_info must be a mapping")):
        with pytest.raises(ValueError, match=msg):
            import_dataproto_ref(bad)
    with pytest.raises(TypeError, match="MooncakeDataProtoRef"):
        export_dataproto_ref(handle)
    ref = a_ref()
    ref.meta_info["bad"] = object()
    with pytest.raises(TypeError, match="JSON-safe"):
        export_dataproto_ref(ref)


def test_row_and_field_selection():
    ref = a_ref()
    assert dataproto.row_selection(slice(1, None, 2), 4).row_list(4) == [1, 3]
    assert dataproto.row_selection([-1, 0, 0], 4).indices == (3, 0, 0)
    assert dataproto.row_selection(range(2), 4).count == 2
    with pytest.raises(IndexError, match="out of range"):
        dataproto.row_selection([4], 4)
    with pytest.raises(TypeError, match="integers"):
        dataproto.row_selection([1.0], 4)
    with pytest.raises(TypeError, match="slice, StructuredMemberSlice"):
        dataproto.row_selection("1", 4)
    with pytest.raises(ValueError, match="step must be positive"):
        dataproto.row_selection(slice(None, None, -1), 4)
    assert dataproto.select_fields(ref, None, None, None) == (["a"], ["t"])
    assert dataproto.select_fields(ref, ["t", "a"], None, None) == (["a"], ["t"])
    assert dataproto.select_fields(ref, None, ["a"], None) == (["a"], [])
    with pytest.raises(ValueError, match="cannot be combined"):
        dataproto.select_fields(ref, ["a"], ["a"], None)
    with pytest.raises(KeyError, match="unknown DataProto fields"):
        dataproto.select_fields(ref, ["zz"], None, None)
    with pytest.raises(KeyError, match="other section"):
        dataproto.select_fields(ref, None, ["t"], None)
    with pytest.raises(TypeError, match="not a string"):
        dataproto.select_fields(ref, "a", None, None)


def test_split_and_flat_dict_sections():
    class DP:
        batch = {"a": np.zeros(2)}
        non_tensor_batch = None
        meta_info = {"m": 1}

    assert dataproto.split(DP()) == ({"a": DP.batch["a"]}, {}, {"m": 1})
    assert dataproto.split({"batch": {"x": 1}})[0] == {"x": 1}
    assert dataproto.split({"batch": 3, "y": 1})[0] == {"batch": 3, "y": 1}
    with pytest.raises(TypeError, match="DataProto-like"):
        dataproto.split(42)
    env = dataproto.flat_to_envelope({"ids": np.zeros((3, 2)), "uid": ["a", "b", "c"],
                                      "tags": ["x", "y"], "step": 1})
    assert set(env["batch"]) == {"ids"} and set(env["non_tensor_batch"]) == {"uid"}
    assert set(env["meta_info"]) == {"tags", "step"}
    env = dataproto.flat_to_envelope(
        {"uid": ["a", "b"], "tags": ["x", "y"]},
        {"tags": FieldSchema("auto", metadata={"section": "meta_info"}),
         "uid": FieldSchema("auto", metadata={"section": "non_tensor_batch"})})
    assert env["meta_info"] == {"tags": ["x", "y"]}
    with pytest.raises(ValueError, match="ambiguous batch sizes"):
        dataproto.flat_to_envelope({"a": np.zeros(2), "b": np.zeros(3)})
    with pytest.raises(ValueError, match="must be one of"):
        dataproto.flat_to_envelope({"a": [1]}, {"a": FieldSchema("auto", metadata={
            "section": "elsewhere"})})
    assert dataproto.envelope_to_flat({"batch": {"a": 1}, "meta_info": {"b": 2},
                                       "non_tensor_batch": {"c": np.asarray(["x"], object)}}) \
        == {"a": 1, "b": 2, "c": ["x"]}
    with pytest.raises(ValueError, match="Duplicate keys"):
        dataproto.envelope_to_flat({"batch": {"a": 1}, "meta_info": {"a": 2}})
    with pytest.raises(ValueError, match="declares section"):
        dataproto.check_schema_sections({"a": 1}, {}, {}, {"a": FieldSchema(
            "auto", metadata={"section": "meta_info"})})


# -- the catalog -------------------------------------------------------------------------------

def handle(name, fields, rows=2):
    return {"type": "mooncake_dataproto_ref", "version": 1, "kind": "bundle_stages",
            "batch_size": rows, "stage_refs": {"s": {"manifest_key": f"m/{name}"}},
            "field_index": {f: {"stage": "s", "member": f"batch.{f}", "section": "batch"}
                            for f in fields}}


def test_catalog_publishes_merges_and_forgets():
    cat = DataProtoCatalog()
    out = cat.update("p", ["k1", "k2"], tags=[{"st": 1}, {"st": 1, "x": 0}],
                     handle=handle("base", ["ids", "mask"]))
    assert out == {"keys": ["k1", "k2"], "tags": [{"st": 1}, {"st": 1, "x": 0}],
                   "fields": ["ids", "mask"]}
    cat.update("p", ["k2", "k1"], tags=[{"st": 2}, {"st": 2}], handle=handle("lp", ["lp"]))
    plan = cat.resolve("p", ["k1", "k2"], ["lp", "ids", "mask"])
    assert plan["field_groups"] == [
        {"fields": ["lp"], "locations": [("m/lp", 1), ("m/lp", 0)]},
        {"fields": ["ids", "mask"], "locations": [("m/base", 0), ("m/base", 1)]}]
    assert set(plan["handles"]) == {"m/base", "m/lp"} and plan["tags"][1] == {"st": 2, "x": 0}
    assert cat.resolve("p", ["k2"])["fields"] == ["ids", "mask", "lp"]
    # Replacing every location of a fragment forgets it.
    cat.update("p", ["k1", "k2"], handle=handle("lp2", ["lp"]))
    assert set(cat.resolve("p", ["k1", "k2"])["handles"]) == {"m/base", "m/lp2"}
    assert "m/lp" not in cat._handles
    cat.remove("p", ["k1"])
    assert cat.list() == {"p": {"k2": {"st": 2, "x": 0}}}
    cat.remove("p", ["k2"])
    cat.remove("nowhere", ["k2"])
    assert cat.list() == {} and cat._handles == {} and cat._refs == {}


def test_catalog_refuses_bad_input_without_change():
    cat = DataProtoCatalog()
    cat.update("p", ["a", "b"], tags=[{}, {}])
    cat.update("p", ["a"], handle=handle("one", ["v"], rows=1))
    before = (cat.list(), dict(cat._handles), dict(cat._refs))
    for call, err, msg in (
            (lambda: cat.resolve("p", ["zz"]), ValueError, "were not found"),
            (lambda: cat.resolve("p", ["a", "b"], ["v"]), ValueError, "not ready"),
            (lambda: cat.resolve("p", ["b"]), ValueError, "do not contain any fields"),
            (lambda: cat.resolve("p", "a"), ValueError, "sequence"),
            (lambda: cat.resolve("p", ["a", "a"]), ValueError, "unique"),
            (lambda: cat.resolve("", ["a"]), ValueError, "partition"),
            (lambda: cat.update("p", ["a", "b"], tags=[{}]), ValueError, "same length"),
            (lambda: cat.update("p", ["a"], tags=[3]), TypeError, "mappings"),
            (lambda: cat.update("p", ["a"]), ValueError, "requires tags or a DataProto handle"),
            (lambda: cat.update("p", ["a", "b"], handle=handle("one", ["v"], rows=1)),
             ValueError, "does not match 2 logical keys"),
            (lambda: cat.update("p", ["a"], handle=handle("one", ["w"], rows=1)),
             ValueError, "fragment id collision"),
            (lambda: cat.update("p", ["a"], handle=handle("e", [], rows=1)),
             ValueError, "cannot be empty"),
            (lambda: cat.update("p", ["a"], handle={**handle("v", ["v"], rows=1),
                                                    "version": 99}),
             ValueError, "unsupported.*version"),
            (lambda: cat.update("p", ["a"], handle={**handle("v", ["v"], rows=1), "stage_refs": {
                "s": {"manifest_key": "m/1"}, "t": {"manifest_key": "m/2"}}}),
             ValueError, "exactly one DataProto stage")):
        with pytest.raises(err, match=msg):
            call()
    assert (cat.list(), dict(cat._handles), dict(cat._refs)) == before


# -- imports -----------------------------------------------------------------------------------

def run(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_without_numpy_the_import_names_the_extra():
    out = run("import sys; sys.modules['numpy'] = None\n"
              "import mooncake.structured_object_store")
    assert out.returncode != 0
    assert "ImportError" in out.stderr and "mooncake-c[structured]" in out.stderr


def test_light_imports():
    out = run("import sys, mooncake, mooncake.dataproto_catalog\n"
              "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'torch')"
              " or m == 'mooncake._store'))")
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
    out = run("import sys, mooncake.structured_object_store\n"
              "print('torch' in sys.modules, 'mooncake._store' in sys.modules)")
    assert out.returncode == 0 and out.stdout.split() == ["False", "False"], out.stderr


# -- docs/compatibility.md stays true for these modules ----------------------------------------

def _doc_rows(heading):
    import pathlib
    import re

    doc = pathlib.Path(__file__).resolve().parents[3] / "docs" / "compatibility.md"
    inside = False
    for line in doc.read_text().splitlines():
        if line.startswith("#"):
            inside = line.strip() == heading
            continue
        if not inside or not line.startswith("| "):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) < 2 or not cells[1].startswith(("yes", "no")):
            continue
        first = re.sub(r"\([^()]*\)", "", re.sub(r"\([^()]*\)", "", cells[0]))
        for token in re.findall(r"`([^`]+)`", first):
            name = re.match(r"\.?[A-Za-z_][A-Za-z0-9_.]*", token)
            if name:
                yield name.group(0), cells[1].startswith("yes")


def test_compatibility_rows_match_the_modules():
    import mooncake.structured_object_store as sos
    from mooncake.dataproto_catalog import DataProtoCatalog

    rows = list(_doc_rows("### `mooncake.structured_object_store`"))
    assert len(rows) > 30
    for name, present in rows:
        owner, attr = sos, name
        if name.startswith("."):
            owner, attr = sos.MooncakeBundleTransfer, name[1:]
        elif "." in name:
            head, attr = name.split(".", 1)
            owner = getattr(sos, head, None) if present else None
            if owner is None:
                assert not present, name
                continue
            attr = attr.split(".")[-1]
        assert hasattr(owner, attr) == present, name
    rows = list(_doc_rows("### `mooncake.dataproto_catalog`"))
    assert rows and all(present for _, present in rows)
    for name in ("update", "resolve", "list", "remove"):
        assert callable(getattr(DataProtoCatalog, name))


# --- the reference's private codec helpers (mooncake._structured.refnames) --------------------

def test_reference_msgpack_ragged_helpers_round_trip_and_check_rows():
    import mooncake.structured_object_store as sos

    rows = [{"a": 1}, None, [1, "x"], b"\x00"]
    payload, meta = sos._encode_msgpack_ragged_values("nt.f", rows)
    assert meta == {} and list(payload["offsets"])[0] == 0 and len(payload["offsets"]) == 5
    assert sos._decode_msgpack_ragged_values(payload, 4) == rows
    with pytest.raises(ValueError, match="offsets length"):
        sos._decode_msgpack_ragged_values(payload, 3)
    with pytest.raises(ValueError, match="unsupported structured non-tensor field nt.g"):
        sos._encode_msgpack_ragged_values("nt.g", [object()])


def test_reference_typed_ragged_helpers_views_and_copies():
    import mooncake.structured_object_store as sos

    rows = [np.arange(6, dtype=np.int32).reshape(2, 3), None, np.arange(3, dtype=np.int32)]
    payload, meta = sos._encode_typed_ragged_values(rows, np.int32)
    assert meta["physical_layout"] == "contiguous_flat" and meta["dtype"] == "int32"
    assert meta["shape_policy"] == "ragged" and meta["row_format"] == "ndarray"
    assert payload["data"].shape == (9,)  # gathered at write time (the reference's layout)
    flat = np.frombuffer(bytearray(codecs.joined(payload["data"])), dtype=np.int32)
    got = sos._decode_typed_ragged_values({**payload, "data": flat}, 3, meta)
    assert got[1] is None and [got[0].tolist(), got[2].tolist()] == [rows[0].tolist(), [0, 1, 2]]
    assert np.shares_memory(got[0], flat) and np.shares_memory(got[2], flat)  # no copy
    # read-only bytes (what a whole-object get returns) decode to writable copies
    got = sos._decode_typed_ragged_values({**payload, "data": flat.tobytes()}, 3, meta)
    assert got[0].flags.writeable and got[0].tolist() == rows[0].tolist()
    with pytest.raises(ValueError, match="entries"):
        sos._decode_typed_ragged_values({**payload, "data": flat}, 2, meta)


@pytest.mark.parametrize("rows,accepted", [
    ([np.zeros((2, 2), np.int32), np.ones((2, 2), np.int32)], True),
    ([np.zeros((2, 2), np.int32)], False),                               # one row
    ([np.zeros((2, 2), np.int32), None], False),                         # a null
    ([np.zeros((2, 2), np.int32), np.zeros((2, 3), np.int32)], False),   # another shape
    ([np.zeros(2, np.int32), np.zeros(2, np.int64)], False),             # another dtype
    ([np.zeros((2, 2), np.int32), np.zeros((2, 2), np.int32).T], False),  # not C-contiguous
])
def test_reference_regular_ndarray_rows_helper(rows, accepted):
    import mooncake.structured_object_store as sos

    out = sos._encode_typed_ragged_regular_ndarray_rows(rows, np.dtype(np.int32))
    assert (out is not None) == accepted
    if accepted:
        payload, meta = out
        assert list(payload["offsets"]) == [0, 4, 8] and meta["physical_layout"] == "contiguous_flat"


def test_reference_encode_with_schema():
    import mooncake.structured_object_store as sos

    values = np.asarray([object(), None], dtype=object)
    with pytest.raises(ValueError, match="unable to infer a safe codec"):
        sos._encode_with_schema("non_tensor_batch.f", values, FieldSchema(codec="auto"))
    payload, _ = sos._encode_with_schema("non_tensor_batch.t", ["ab", None, "c"],
                                         FieldSchema(codec="utf8_ragged"))
    assert list(payload["offsets"]) == [0, 2, 2, 3]
    with pytest.raises(TypeError, match="must be str"):
        sos._encode_with_schema("non_tensor_batch.t", [1], FieldSchema(codec="utf8_ragged"))


def test_malformed_reference_layouts_are_refused():
    """Bad metadata of the reference's layouts is a clear ValueError, never a wrong value."""
    from mooncake._structured.members import MemberReader

    with pytest.raises(mf.ManifestError, match="invalid part metadata"):
        MemberReader._nested_from_parts("n", b"x" * 10, {"part_bytes": [4, 4]})
    with pytest.raises(mf.ManifestError, match="invalid part metadata"):
        MemberReader._nested_from_parts("n", b"x" * 8, {"part_bytes": [8], "has_lengths": True})
    src = codecs.MemorySource({"leaf.0.missing": np.zeros(1, dtype=bool)})
    leaf = {"path": "f.a", "codec": "utf8_ragged", "payload_members": {"missing": "leaf.0.missing"}}
    for meta, message in (({"nodes": [], "root_path": "f"}, "no nodes, leaves"),
                          ({"nodes": [], "leaves": [{"path": "f.a", "codec": "ndarray",
                                                     "payload_members": {}}], "root_path": "f"},
                           "has no payloads"),
                          ({"nodes": [], "leaves": [leaf], "root_path": "f"},
                           "has no 'nulls' payload"),
                          ({"nodes": [], "leaves": [], "root_path": "f"}, "does not cover")):
        with pytest.raises(ValueError, match=message):
            codecs.decode({"codec": "structured_recursive", "metadata": meta}, src, [0], 1)
