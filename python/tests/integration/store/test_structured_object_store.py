"""mooncake.structured_object_store against a real mooncake_master and storage clients: bundles,
structured objects and DataProto stages written and read through the store (whole, by member, by
row slice and row gather, into caller memory), handed between a writer and a reader process as
JSON handles, and every kind of bad input: malformed or tampered manifests, missing objects,
wrong dtypes and shapes, oversized requests, writes that fail midway (nothing readable is left)."""

import ctypes
import json

import numpy as np
import pytest
from store_helpers import Master, Worker, local_store

from mooncake.structured_object_store import (
    BundleTransferPolicy,
    FieldSchema,
    ManifestError,
    MooncakeBundleTransfer,
    MooncakeDataProtoRef,
    PayloadMissingError,
    RemoteBundleRef,
    StructuredObjectPayload,
    export_dataproto_ref,
    import_dataproto_ref,
    raw_destination,
)

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def env():
    """A master, one storage client process (so data outlives nothing in this process) and a
    store client here; yields (master, store)."""
    master = Master()
    keeper = Worker()
    store = None
    try:
        keeper.setup(master, segment=96 << 20)
        store = local_store(master, segment=96 << 20, buffer=16 << 20)
        yield master, store
    finally:
        if store is not None:
            store.close()
        keeper.close()
        master.stop()


@pytest.fixture
def transfer(env, request):
    _, store = env
    prefix = "sos-" + request.node.name.replace("[", "-").replace("]", "")[:60]
    t = MooncakeBundleTransfer(store, key_prefix=prefix, default_chunk_bytes=1 << 20)
    yield t
    store.remove_by_regex(f"^{prefix}/", True)


def left(transfer):
    """How many objects under the transfer's prefix are in the store (removing them)."""
    return transfer.store.remove_by_regex(f"^{transfer.key_prefix}/", True)


def rollout(rows=6, width=8):
    ids = np.arange(rows * width, dtype=np.int64).reshape(rows, width)
    return {
        "batch": {
            "input_ids": ids,
            "attention_mask": (ids % 3 != 0).astype(np.int32),
            "logits": torch.arange(rows * 4, dtype=torch.bfloat16).reshape(rows, 4),
        },
        "non_tensor_batch": {
            "prompt": np.asarray([f"prompt-{i}" if i % 4 else "" for i in range(rows)],
                                 dtype=object),
            "meta": np.asarray([{"row": i, "tags": ["a", i]} if i != 2 else None
                                for i in range(rows)], dtype=object),
            "reward": np.asarray([float(i) if i != 3 else None for i in range(rows)],
                                 dtype=object),
            "tokens": np.asarray([np.arange(i, dtype=np.int32) for i in range(rows)] + [None],
                                 dtype=object)[:rows],
            "ragged": np.asarray([torch.full((i + 1, 2), i, dtype=torch.float16)
                                  for i in range(rows)] + [None], dtype=object)[:rows],
            "uid": np.arange(rows, dtype=np.int64) + 100,
            "blob": np.asarray([bytes([i]) * i for i in range(rows)] + [None],
                               dtype=object)[:rows],
        },
        "meta_info": {"step": 7, "ids": [1, 2]},
    }


def same_rows(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        if b is None:
            assert a is None
        elif isinstance(b, np.ndarray):
            assert isinstance(a, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
        elif isinstance(b, torch.Tensor):
            assert a.dtype == b.dtype and torch.equal(a, b)
        else:
            assert a == b


def check_dataproto(result, data, rows=None):
    pick = slice(None) if rows is None else rows
    for name, value in result["batch"].items():
        want = data["batch"][name][pick]
        if isinstance(want, torch.Tensor):
            assert value.dtype == want.dtype and torch.equal(value, want)
        else:
            assert value.dtype == want.dtype and np.array_equal(value, want)
    for name, value in result["non_tensor_batch"].items():
        want = data["non_tensor_batch"][name]
        if want.dtype.hasobject:
            idx = range(len(want))[pick] if not isinstance(pick, list) else pick
            same_rows(list(value), [want[i] for i in idx])
        else:
            assert np.array_equal(value, want[pick])


# -- structured objects ------------------------------------------------------------------------

def test_structured_object_round_trip_chunked(transfer):
    arr = np.random.default_rng(1).standard_normal((300, 700)).astype(np.float32)  # 840 KB
    ten = torch.arange(5000, dtype=torch.int16).reshape(50, 100)
    ref = transfer.put_structured_object(
        StructuredObjectPayload(metadata={"kind": "demo"},
                                buffers={"arr": arr, "ten": ten, "raw": b"hello", "empty":
                                         np.zeros((0, 3), dtype=np.int8)}),
        chunk_bytes=64 << 10)
    assert len(ref.manifest["buffers"]["arr"]["chunks"]) == 13  # 840000 bytes / 64 KiB
    got = transfer.materialize(transfer.read_spec({"manifest_key": ref.manifest_key}))
    assert got.metadata["kind"] == "demo"
    assert np.array_equal(got.objects["arr"], arr)
    assert torch.equal(got.objects["ten"], ten)
    assert got.objects["raw"] == b"hello"
    assert got.objects["empty"].shape == (0, 3)
    # A row slice crossing chunk boundaries, with a step, and only the selected member.
    part = transfer.materialize(transfer.read_spec(ref).select_members(["arr", "ten"])
                                .slice_member("arr", 0, 17, 290, 7)
                                .slice_member("ten", 0, 45, 100))
    assert set(part.objects) == {"arr", "ten"}
    assert np.array_equal(part.objects["arr"], arr[17:290:7])
    assert torch.equal(part.objects["ten"], ten[45:])
    # Into caller memory: an ndarray, and raw memory that receives the tensor object (header and
    # data, as the reference's get_tensor_into leaves it).
    assert ref.manifest["buffers"]["ten"]["kind"] == "tensor"  # the reference's format
    dst = np.empty((10, 700), dtype=np.float32)
    raw = ctypes.create_string_buffer(ref.manifest["buffers"]["ten"]["bytes"])
    out = transfer.materialize_into(
        transfer.read_spec(ref).select_members(["arr", "ten"]).slice_member("arr", 0, 5, 15),
        {"arr": dst, "ten": raw_destination(ctypes.addressof(raw), len(raw), raw)})
    assert out.objects["arr"] is dst and np.array_equal(dst, arr[5:15])
    assert torch.equal(out.objects["ten"], ten)
    assert raw.raw[ref.manifest["buffers"]["ten"]["metadata_bytes"]:] == ten.numpy().tobytes()
    # A tensor destination (ours) is filled in place, whole or by rows with a step; a row
    # gather into raw memory gets the tensor object of those rows.
    whole, part = torch.empty(50, 100, dtype=torch.int16), torch.empty(4, 100, dtype=torch.int16)
    got = transfer.materialize_into(transfer.read_spec(ref).select_members(["ten"]),
                                    {"ten": whole}).objects["ten"]
    assert got is whole and torch.equal(whole, ten)
    spec = transfer.read_spec(ref).select_members(["ten"]).slice_member("ten", 0, 3, 40, 10)
    assert transfer.materialize_into(spec, {"ten": part}).objects["ten"] is part
    assert torch.equal(part, ten[3:40:10])
    with pytest.raises(ValueError, match="dtype mismatch"):
        transfer.materialize_into(spec, {"ten": torch.empty(4, 100)})
    assert transfer.get_object(transfer.put_object(arr[:3])).tolist() == arr[:3].tolist()
    transfer.remove_bundle(ref)
    with pytest.raises(PayloadMissingError, match="not in the store"):
        transfer.materialize(transfer.read_spec({"manifest_key": ref.manifest_key}))


def test_reads_into_buffer_pool_leases(env):
    from mooncake.buffer_pool import BufferPool

    _, store = env
    pool = BufferPool(store, local_bytes=4 << 20)
    t = MooncakeBundleTransfer(store, key_prefix="sos-pool", buffer_pool=pool)
    arr = np.arange(300_000, dtype=np.int32).reshape(1000, 300)  # 1.2 MB
    ref = t.put_object({"a": arr, "t": torch.ones(3), "raw": b"x"})
    got = t.get_object(ref)
    # bytes members come back pool-backed too (uint8 arrays), as the reference's
    assert np.array_equal(got["a"], arr) and got["raw"].tobytes() == b"x"
    view = got["a"][10:20]
    assert view._mooncake_pool_owner is got["a"]._mooncake_pool_owner
    part = t.materialize(t.read_spec(ref).slice_member("a", 0, 990, 1000))
    assert np.array_equal(part.objects["a"], arr[990:])
    with pytest.raises(RuntimeError, match="active leases"):
        pool.close()
    MooncakeBundleTransfer.release_result(got)
    MooncakeBundleTransfer.release_result(got)  # once is enough; twice is harmless
    del part, view
    pool.close()  # every lease was given back
    t.remove_bundle(ref)
    assert store.remove_by_regex("^sos-pool/", True) == 0


@pytest.mark.parametrize("policy", [
    BundleTransferPolicy(copy_mode="copy"),
    BundleTransferPolicy(max_inflight_put=4, put_mode="parallel"),
    BundleTransferPolicy(copy_mode="zero_copy"),
])
def test_policies_store_the_same_bytes(transfer, policy):
    data = np.random.default_rng(2).integers(0, 255, 3 << 20, dtype=np.uint8)
    ref = transfer.put_bundle(b"{}", {"p": data}, policy=policy, chunk_bytes=256 << 10)
    assert len(ref.manifest["buffers"]["p"]["chunks"]) == 12
    got = transfer.materialize(transfer.read_spec(ref))
    assert got.objects["p"] == data.tobytes()
    transfer.remove_bundle(ref)
    assert left(transfer) == 0


# -- DataProto ---------------------------------------------------------------------------------

def test_dataproto_put_append_get_rows(transfer):
    data = rollout()
    ref = transfer.put_dataproto(data, namespace="rl", partition="step-1", stage="rollout")
    assert set(ref.encoded_non_tensor) == {"prompt", "meta", "reward", "tokens", "ragged", "blob"}
    assert ref.encoded_non_tensor["meta"]["codec"] == "msgpack_ragged"  # the reference's
    check_dataproto(transfer.get_dataproto(ref), data)
    for rows in (slice(1, 5), slice(0, 6, 2), [5, 0, 3, 3], [], [-1]):
        check_dataproto(transfer.get_dataproto(ref, rows=rows), data, rows)
    old = torch.linspace(-1, 1, 6)
    ref2 = transfer.append_dataproto_fields(
        ref, {"batch": {"old_log_probs": old}, "meta_info": {"lp": True}}, stage="logprob")
    ref3 = transfer.append_dataproto_fields(
        ref2, {"batch": {"values": np.ones(6, np.float32)}}, stage="rollout")
    sub = transfer.get_dataproto(ref3, fields=["old_log_probs", "values", "prompt"],
                                 meta_info_keys=["lp"], rows=[4, 1])
    assert torch.equal(sub["batch"]["old_log_probs"], old[[4, 1]])
    assert sub["batch"]["values"].tolist() == [1.0, 1.0]
    assert sub["non_tensor_batch"]["prompt"].tolist() == ["prompt-1", "prompt-1"][:0] + \
        ["", "prompt-1"]
    assert sub["meta_info"] == {"lp": True}
    view = transfer.dataproto_manifest_view(ref3)
    assert view["batch_fields"]["old_log_probs"]["stage"] == "logprob"
    assert view["batch_fields"]["input_ids"]["spec"]["shape"] == [6, 8]
    assert view["non_tensor_fields"]["tokens"]["spec"]["codec"] == "typed_ragged"
    with pytest.raises(ValueError, match="already exist"):
        transfer.append_dataproto_fields(ref3, {"batch": {"values": np.ones(6)}}, stage="x")
    # A destination for a selected field, filled in place.
    dst = np.empty((2, 8), dtype=np.int64)
    got = transfer.get_dataproto(ref3, batch_fields=["input_ids"], rows=slice(2, 4),
                                 destinations={"input_ids": dst})
    assert got["batch"]["input_ids"] is dst and np.array_equal(dst, data["batch"]["input_ids"][2:4])
    # Gathered rows of a tensor into raw memory: the tensor object of those rows (header
    # rewritten for them, then their bytes), as the reference's.
    logits = data["batch"]["logits"]
    member = view["batch_fields"]["logits"]["member"]
    header = ref3.stage_refs["rollout"].manifest["buffers"][member]["metadata_bytes"]
    raw = ctypes.create_string_buffer(header + 2 * 4 * logits.element_size())
    got = transfer.get_dataproto(ref3, batch_fields=["logits"], rows=[5, 1], destinations={
        "logits": raw_destination(ctypes.addressof(raw), len(raw), raw)})
    assert got["batch"]["logits"].ptr == ctypes.addressof(raw)
    from mooncake.store import _deserialize_tensor

    assert torch.equal(_deserialize_tensor(raw.raw), logits[[5, 1]])
    transfer.cleanup_dataproto(export_dataproto_ref(ref3))
    assert left(transfer) == 0


def test_jagged_tensors_and_recursive_rows(transfer):
    rows = [torch.arange(6).reshape(2, 3), torch.arange(10).reshape(2, 5),
            torch.arange(4).reshape(2, 2)]
    nested = torch.nested.as_nested_tensor(rows, layout=torch.jagged)
    samples = np.asarray([{"img": [b"x" * i], "tok": torch.arange(i)} for i in range(3)],
                         dtype=object)
    ref = transfer.put_dataproto({"batch": {"pos": nested}, "non_tensor_batch": {"s": samples}})
    assert ref.encoded_non_tensor["s"]["codec"] == "structured_recursive"
    for sel, want in ((None, [0, 1, 2]), (slice(1, 3), [1, 2]), ([2, 0], [2, 0]), ([], [])):
        got = transfer.get_dataproto(ref, rows=sel)
        pos = got["batch"]["pos"]
        assert pos.is_nested and len(pos) == len(want)
        for a, i in zip(pos.unbind(), want):
            assert torch.equal(a, rows[i])
        for row, i in zip(got["non_tensor_batch"]["s"], want):
            assert row["img"] == [b"x" * i] and torch.equal(row["tok"], torch.arange(i))
    with pytest.raises(ValueError, match="does not support destinations"):
        transfer.get_dataproto(ref, destinations={"pos": np.empty(1)})
    transfer.cleanup_dataproto(ref)
    assert left(transfer) == 0


def test_flat_dict_and_schemas(transfer):
    data = {"ids": np.arange(12).reshape(4, 3), "text": ["a", "b", None, "d"],
            "lens": [np.arange(2), np.arange(0), None, np.arange(5)], "step": 3}
    ref = transfer.put(data, type="dict", field_schemas={
        "lens": FieldSchema("typed_ragged", metadata={"section": "non_tensor_batch",
                                                     "dtype": "int16"})})
    flat = transfer.get(ref, type="dict")
    assert flat["step"] == 3 and flat["text"] == ["a", "b", None, "d"]
    assert np.array_equal(flat["ids"], data["ids"])
    assert [None if v is None else v.tolist() for v in flat["lens"]] == [[0, 1], [], None,
                                                                         [0, 1, 2, 3, 4]]
    assert flat["lens"][0].dtype == np.int16
    with pytest.raises(ValueError, match="not nullable"):
        transfer.put(data, type="dict", field_schemas={
            "text": FieldSchema("utf8_ragged", nullable=False,
                                metadata={"section": "non_tensor_batch"})})
    transfer.cleanup_dataproto(ref)
    assert left(transfer) == 0


# -- two processes -----------------------------------------------------------------------------

WRITER = """
import json, numpy as np, torch
from mooncake.structured_object_store import MooncakeBundleTransfer, export_dataproto_ref
t = MooncakeBundleTransfer(store, key_prefix="sos-2proc", default_chunk_bytes=1 << 16)
g = torch.Generator().manual_seed(5)
data = {"batch": {"input_ids": torch.randint(0, 50000, (64, 512), generator=g),
                  "mask": np.ones((64, 512), dtype=np.int8)},
        "non_tensor_batch": {"uid": np.asarray([f"u{i}" for i in range(64)], dtype=object),
                             "score": np.asarray([i / 2 for i in range(64)], dtype=object)},
        "meta_info": {"step": 11}}
ns["data"] = data
ref = t.put_dataproto(data, namespace="rl", partition="p", stage="rollout")
result = export_dataproto_ref(ref)
"""

READER = """
import hashlib, numpy as np, torch
from mooncake.structured_object_store import MooncakeBundleTransfer, export_dataproto_ref
t = MooncakeBundleTransfer(store, key_prefix="sos-2proc")
h = HANDLE
got = t.get_dataproto(h, fields=["input_ids", "uid"], rows=slice(8, 40, 3))
ids = got["batch"]["input_ids"]
full = t.get_dataproto(h, batch_fields=["mask"])
new = t.append_dataproto_fields(h, {"batch": {"old_log_probs": ids.float().mean(1).repeat(1)
    .new_zeros(64) + 0.5}}, stage="logprob")
result = {"ids": hashlib.sha256(ids.numpy().tobytes()).hexdigest(), "shape": list(ids.shape),
          "uid": got["non_tensor_batch"]["uid"].tolist(), "mask": int(full["batch"]["mask"].sum()),
          "meta": got["meta_info"], "handle": export_dataproto_ref(new)}
"""

CHECK = """
import hashlib
from mooncake.structured_object_store import MooncakeBundleTransfer
t = MooncakeBundleTransfer(store, key_prefix="sos-2proc")
got = t.get_dataproto(HANDLE, fields=["old_log_probs", "score"])
want = ns["data"]["batch"]["input_ids"][8:40:3]
result = {"lp": got["batch"]["old_log_probs"].tolist(),
          "score": got["non_tensor_batch"]["score"].tolist(),
          "want": hashlib.sha256(want.numpy().tobytes()).hexdigest()}
t.cleanup_dataproto(HANDLE)
result["left"] = store.remove_by_regex("^sos-2proc/", True)
"""


def test_writer_and_reader_processes_share_a_dataproto(env):
    master, _ = env
    writer, reader = Worker(), Worker()
    try:
        writer.setup(master, segment=64 << 20)
        reader.setup(master, segment=0)
        handle = writer.run(WRITER)
        assert json.loads(json.dumps(handle)) == handle and handle["batch_size"] == 64
        got = reader.run(READER.replace("HANDLE", repr(handle)))
        assert got["shape"] == [11, 512] and got["mask"] == 64 * 512
        assert got["uid"] == [f"u{i}" for i in range(8, 40, 3)]
        assert got["meta"] == {"step": 11}
        new = got["handle"]
        assert set(new["stage_refs"]) == {"rollout", "logprob"}
        back = writer.run(CHECK.replace("HANDLE", repr(new)))
        assert back["want"] == got["ids"]
        assert back["lp"] == [0.5] * 64
        assert back["score"] == [i / 2 for i in range(64)]
        assert back["left"] == 0  # the cleanup removed every object of both stages
    finally:
        reader.close()
        writer.close()


# -- bad input ---------------------------------------------------------------------------------

def test_malformed_and_tampered_manifests(transfer):
    store = transfer.store
    key = f"{transfer.key_prefix}/default/x/manifest"
    assert store.put(key, b"{not json") == 0
    with pytest.raises(ManifestError, match="not valid JSON"):
        transfer.materialize(transfer.read_spec({"manifest_key": key}))
    assert store.upsert(key, b"[1, 2]") == 0
    with pytest.raises(ManifestError, match="must decode to a dict"):
        transfer.get_object({"manifest_key": key})
    ref = transfer.put_bundle(b"meta", {"p": b"abcdef"}, chunk_bytes=2)
    bad = json.loads(json.dumps(ref.manifest))
    bad["buffers"]["p"]["chunks"] = [{"key": "elsewhere/secret", "bytes": 6}]
    assert store.upsert(ref.manifest_key, json.dumps(bad).encode()) == 0
    with pytest.raises(ManifestError, match="namespace"):
        transfer.materialize(transfer.read_spec({"manifest_key": ref.manifest_key}))
    with pytest.raises(ManifestError, match="namespace"):
        transfer.remove_bundle({"manifest_key": ref.manifest_key})
    bad = json.loads(json.dumps(ref.manifest))
    bad["buffers"]["p"]["bytes"] = 7
    assert store.upsert(ref.manifest_key, json.dumps(bad).encode()) == 0
    with pytest.raises(ManifestError, match="total 6 bytes, expected 7"):
        transfer.materialize(transfer.read_spec({"manifest_key": ref.manifest_key}))
    with pytest.raises(ManifestError, match="manifest_key"):
        transfer.remove_bundle(RemoteBundleRef(f"{transfer.key_prefix}/other/manifest",
                                               ref.manifest))
    # The store is still fine, and the good ref still removes its objects.
    transfer.remove_bundle(ref)
    store.remove(key, True)
    assert left(transfer) == 0


def test_missing_objects(transfer):
    data = rollout()
    ref = transfer.put_dataproto(data)
    manifest = ref.stage_refs["default"].manifest
    gone = manifest["buffers"]["batch.attention_mask"]["chunks"][0]["key"]
    assert transfer.store.remove(gone, True) == 0
    with pytest.raises(PayloadMissingError, match="not in the store"):
        transfer.get_dataproto(ref, batch_fields=["attention_mask"])
    with pytest.raises(KeyError, match="unknown bundle buffers"):
        transfer.materialize(transfer.read_spec(ref.stage_refs["default"]).select_members(["x"]))
    handle = export_dataproto_ref(ref)
    # Every other field still reads, from the ref and from an imported handle.
    check_dataproto(transfer.get_dataproto(handle, batch_fields=["input_ids"],
                                           non_tensor_fields=["prompt"]), data)
    transfer.cleanup_dataproto(handle)  # a missing payload does not stop the cleanup
    assert left(transfer) == 0
    with pytest.raises(PayloadMissingError, match="bundle manifest .* is not in the store"):
        transfer.get_dataproto(handle)
    with pytest.raises(PayloadMissingError, match="bundle manifest"):
        transfer.cleanup_dataproto(handle)  # twice: nothing left to find the payloads by
    with pytest.raises(KeyError, match="unknown DataProto fields"):
        transfer.get_dataproto(ref, fields=["nope"])


def test_wrong_dtypes_shapes_and_sizes(transfer):
    ref = transfer.put_dataproto({"batch": {"x": np.arange(12, dtype=np.int32).reshape(4, 3)}})
    with pytest.raises(ValueError, match="dtype mismatch"):
        transfer.get_dataproto(ref, destinations={"x": np.empty((4, 3), np.int64)})
    with pytest.raises(ValueError, match="shape mismatch"):
        transfer.get_dataproto(ref, rows=slice(0, 2), destinations={"x": np.empty((4, 3),
                                                                                 np.int32)})
    small = ctypes.create_string_buffer(8)
    with pytest.raises(ValueError, match="expected at least 48"):
        transfer.get_dataproto(ref, destinations={"x": raw_destination(
            ctypes.addressof(small), 8, small)})
    with pytest.raises(KeyError, match="not read"):
        transfer.get_dataproto(ref, destinations={"y": np.empty(1)})
    with pytest.raises(IndexError, match="out of range"):
        transfer.get_dataproto(ref, rows=[4])
    with pytest.raises(ValueError, match="step must be positive"):
        transfer.get_dataproto(ref, rows=slice(None, None, -1))
    with pytest.raises(ValueError, match="inconsistent batch sizes"):
        transfer.put_dataproto({"batch": {"a": np.zeros(3), "b": np.zeros(4)}})
    with pytest.raises(TypeError, match="object array"):
        transfer.put_dataproto({"batch": {"a": np.asarray(["x"], dtype=object)}})
    with pytest.raises(ValueError, match="unsupported structured non-tensor field"):
        transfer.put_dataproto({"non_tensor_batch": {"a": np.asarray([object()], dtype=object)}})
    with pytest.raises(ValueError, match="does not match ref batch size"):
        transfer.append_dataproto_fields(ref, {"batch": {"y": np.zeros(5)}}, stage="s")
    with pytest.raises(TypeError, match="JSON-serializable"):
        transfer.put_structured_object(StructuredObjectPayload({"bad": object()}, {"a": b"x"}))
    with pytest.raises(TypeError, match="JSON-safe"):
        transfer.put_dataproto({"batch": {"a": np.zeros(2)}, "meta_info": {"o": object()}})
    with pytest.raises(ValueError, match="does not support slicing"):
        transfer.materialize(transfer.read_spec(transfer.put_bundle(b"{}", {"r": b"abc"}))
                             .slice_member("r", 0, 0, 1))
    forged = export_dataproto_ref(ref)
    forged["field_index"]["x"]["stage"] = "nowhere"
    with pytest.raises(ValueError, match="unknown stage"):
        transfer.get_dataproto(forged)
    forged = export_dataproto_ref(ref)
    forged["version"] = 9
    with pytest.raises(ValueError, match="unsupported DataProto ref handle version"):
        import_dataproto_ref(forged)
    assert isinstance(import_dataproto_ref(export_dataproto_ref(ref)), MooncakeDataProtoRef)
    transfer.cleanup_dataproto(ref)


def test_a_write_that_fails_midway_leaves_nothing(transfer):
    # 220 MiB cannot fit the two 96 MiB segments: with 4 MiB chunks,
    # some chunks are written before the store refuses one. Nothing stays, and no manifest.
    rows = 220
    # Hard-pinned, so the store cannot make room by evicting the chunks this write made.
    from mooncake.store import ReplicateConfig

    big = np.zeros((rows, 1 << 20), dtype=np.uint8)
    with pytest.raises(RuntimeError, match="failed for .*chunk"):
        transfer.put_dataproto({"batch": {"big": big}, "meta_info": {}},
                               chunk_bytes=4 << 20, config=ReplicateConfig(with_hard_pin=True))
    assert left(transfer) == 0
    # An append that fails keeps the old ref complete and readable (hard-pinned: the store may
    # evict unpinned objects to make room for the refused write).

    ref = transfer.put_dataproto({"batch": {"small": np.arange(rows)}},
                                 config=ReplicateConfig(with_hard_pin=True))
    with pytest.raises(RuntimeError, match="failed for"):
        transfer.append_dataproto_fields(ref, {"batch": {"big": big}}, stage="default",
                                         chunk_bytes=4 << 20,
                                         config=ReplicateConfig(with_hard_pin=True))
    assert transfer.get_dataproto(ref)["batch"]["small"].tolist() == list(range(rows))
    transfer.cleanup_dataproto(ref)
    assert left(transfer) == 0
