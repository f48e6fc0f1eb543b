"""mooncake.reshard: the resource-neutral contracts and the N-D box geometry."""

import pickle
import random
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from typing import Protocol

import pytest

from mooncake import reshard
from mooncake.reshard import geometry
from mooncake.reshard._compat import _strict_zip
from mooncake.reshard.contracts import (PlacementManifest, ResourceKind, ResourceManifest,
                                        RuntimeBindingFragment, RuntimeBindingManifest,
                                        validate_resource_binding_identity)
from mooncake.reshard.geometry import (box_contains, boxes_exactly_cover, boxes_overlap,
                                       regions_exactly_cover)


# ---- package surface -----------------------------------------------------------------------------

def test_top_level_names_only_the_resource_neutral_contracts():
    assert reshard.__all__ == ["ResourceKind", "ResourceManifest", "PlacementManifest",
                               "RuntimeBindingManifest"]
    assert ResourceKind("model_weight") is ResourceKind.MODEL_WEIGHT
    assert ResourceKind.KV_CACHE == "kv_cache"
    with pytest.raises(ValueError):
        ResourceKind("weights")


def test_manifests_are_structural_protocols():
    for p in (ResourceManifest, PlacementManifest, RuntimeBindingManifest):
        assert issubclass(p, Protocol)


def test_importing_reshard_loads_no_native_code_and_no_framework():
    code = ("import sys, mooncake.reshard, mooncake.reshard.contracts, mooncake.reshard.geometry;"
            "bad = [m for m in ('mooncake._store', 'mooncake._engine', 'torch', 'numpy')"
            " if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_strict_zip():
    assert list(_strict_zip((1, 2), "ab")) == [(1, "a"), (2, "b")]
    assert list(_strict_zip()) == []
    with pytest.raises(ValueError, match="different lengths"):
        list(_strict_zip((1,), (2, 3)))
    with pytest.raises(ValueError, match="different lengths"):
        list(_strict_zip((1, 2), (3,)))


# ---- binding identity ----------------------------------------------------------------------------

@dataclass(frozen=True)
class _Placement:
    resource_id: str = "model"
    resource_kind: ResourceKind = ResourceKind.MODEL_WEIGHT
    placement_id: str = "p1"
    digest: str = "d1"


@dataclass(frozen=True)
class _Binding:
    resource_id: str = "model"
    resource_kind: ResourceKind = ResourceKind.MODEL_WEIGHT
    placement_id: str = "p1"
    placement_digest: str = "d1"
    instance_id: str = "i"
    generation: int = 1
    lease_id: str = "l"


def test_binding_identity_fence():
    validate_resource_binding_identity(_Placement(), _Binding())
    for change, word in ((dict(resource_kind=ResourceKind.KV_CACHE), "resource_kind"),
                         (dict(resource_id="other"), "resource_id"),
                         (dict(placement_id="p2"), "placement_id"),
                         (dict(placement_digest="d2"), "digest")):
        with pytest.raises(ValueError, match=word):
            validate_resource_binding_identity(_Placement(), replace(_Binding(), **change))


# ---- RuntimeBindingFragment ----------------------------------------------------------------------

def _fragment(**kw):
    args = dict(placement_fragment_id="pf", fragment_id="rf", address=0x1000 + 64, nbytes=256,
                worker_id="w0", endpoint="127.0.0.1:1", device="cuda:0", itemsize=2,
                local_shape=(8, 16), strides_bytes=(32, 2), storage_address=0x1000,
                storage_nbytes=4096, storage_offset_bytes=64)
    args.update(kw)
    return RuntimeBindingFragment(**args)


def test_fragment_valid_and_normalized():
    f = _fragment(local_shape=[1, 16], strides_bytes=[999, 2], nbytes=32)
    assert f.local_shape == (1, 16) and f.strides_bytes == (32, 2)
    assert f == _fragment(local_shape=(1, 16), strides_bytes=(7, 2), nbytes=32)


def test_fragment_owner_is_not_compared_or_pickled():
    owner = object()
    f = _fragment(owner=owner)
    assert f == _fragment() and "owner" not in repr(f)
    g = pickle.loads(pickle.dumps(f))
    assert g == f and g.owner is None


@pytest.mark.parametrize("kw,msg", [
    (dict(worker_id=""), "worker_id must be a non-empty string"),
    (dict(device=3), "device must be a non-empty string"),
    (dict(address=0), "address must be at least 1"),
    (dict(nbytes=True), "nbytes must be an integer"),
    (dict(address=1 << 64), "unsigned 64-bit"),
    (dict(itemsize=0), "itemsize must be at least 1"),
    (dict(local_shape="ab"), "must be a tuple or list"),
    (dict(local_shape=(8, 0)), r"local_shape\[1\] must be at least 1"),
    (dict(strides_bytes=(32,)), "stride rank differs"),
    (dict(strides_bytes=(0, 2)), "stride must be positive"),
    (dict(storage_offset_bytes=0), "address must equal storage_address plus"),
    (dict(storage_nbytes=128), "exceeds storage allocation bounds"),
    (dict(storage_offset_bytes=-1), "storage_offset_bytes must be at least 0"),
])
def test_fragment_rejects(kw, msg):
    with pytest.raises(ValueError, match=msg):
        _fragment(**kw)


# ---- geometry ------------------------------------------------------------------------------------

def _brute_overlap(boxes):
    return any(all(a < c + d and c < a + b for a, b, c, d in zip(o1, s1, o2, s2))
               for i, (o1, s1) in enumerate(boxes) for o2, s2 in boxes[i + 1:])


@pytest.mark.parametrize("rank", [1, 2, 3, 4])
def test_overlap_matches_brute_force(rank):
    rng = random.Random(1000 + rank)
    seen = {True: 0, False: 0}
    for _ in range(600):
        boxes = [(tuple(rng.randint(0, 7) for _ in range(rank)),
                  tuple(rng.randint(1, 4) for _ in range(rank)))
                 for _ in range(rng.randint(0, 8))]
        want = _brute_overlap(boxes)
        assert boxes_overlap(boxes) is want, boxes
        seen[want] += 1
    assert seen[True] > 50 and seen[False] > 50  # both answers were exercised


def _grid(shape, cuts):
    """The boxes of a grid over [0, shape) cut at the given positions per dimension."""
    edges = [[0, *sorted(c), n] for n, c in zip(shape, cuts)]
    boxes = [((), ())]
    for e in edges:
        boxes = [(o + (a,), s + (b - a,)) for o, s in boxes for a, b in zip(e, e[1:])]
    return boxes


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_exact_cover_of_random_grids(rank):
    rng = random.Random(rank)
    for _ in range(100):
        shape = tuple(rng.randint(2, 9) for _ in range(rank))
        cuts = [rng.sample(range(1, n), rng.randint(0, min(3, n - 1))) for n in shape]
        boxes = _grid(shape, cuts)
        origin = (0,) * rank
        assert boxes_exactly_cover(origin, shape, boxes)
        if len(boxes) > 1:
            assert not boxes_exactly_cover(origin, shape, boxes[1:])  # a hole
            assert not boxes_exactly_cover(origin, shape, boxes + boxes[:1])  # a double
        o, s = boxes[-1]
        outside = (o, tuple(x + 1 for x in s))  # reaches past the container
        assert not boxes_exactly_cover(origin, shape, boxes[:-1] + [outside])


def test_exact_cover_needs_a_box_and_matching_volume():
    assert not boxes_exactly_cover((0, 0), (2, 2), [])
    # Same total volume, inside the container, but two boxes overlap and a cell is missing.
    assert not boxes_exactly_cover((0,), (4,), [((0,), (2,)), ((1,), (2,))])
    assert box_contains((2, 2), (4, 4), (3, 2), (3, 4))
    assert not box_contains((2, 2), (4, 4), (1, 2), (1, 1))


def test_ranks_must_agree():
    with pytest.raises(ValueError):
        boxes_overlap([((0,), (1,)), ((0, 0), (1, 1))])
    with pytest.raises(ValueError):
        box_contains((0, 0), (1, 1), (0,), (1,))


@dataclass(frozen=True)
class _Box:
    global_offset: tuple
    local_shape: tuple


@dataclass(frozen=True)
class _Region:
    overlap_offset: tuple
    overlap_shape: tuple


def test_regions_exactly_cover_takes_any_structural_object():
    target = _Box((8, 4), (2, 6))
    halves = (_Region((8, 4), (1, 6)), _Region((9, 4), (1, 6)))
    assert regions_exactly_cover(target, halves)
    assert regions_exactly_cover(target, iter(halves))
    assert not regions_exactly_cover(target, halves[:1])


def test_two_dimensional_sweep_is_fast_on_a_large_layout():
    # 4096 rows, each split at a different column: 8192 boxes that tile exactly.
    n = 4096
    boxes = []
    for row in range(n):
        cut = row + 1
        boxes.append(((0, row), (cut, 1)))
        boxes.append(((cut, row), (n + 1 - cut, 1)))
    start = time.perf_counter()
    assert boxes_exactly_cover((0, 0), (n + 1, n), boxes)
    assert time.perf_counter() - start < 2.0


def test_high_dimensional_check_has_a_budget(monkeypatch):
    boxes = [((0, r, 0), (1, 1, 1)) for r in range(4)] + [((1, r, 0), (2, 1, 1)) for r in range(4)]
    assert not boxes_overlap(boxes)
    monkeypatch.setattr(geometry, "_MAX_HIGH_DIMENSIONAL_PAIRWISE_COMPARISONS", 0)
    with pytest.raises(ValueError, match="high-dimensional overlap budget"):
        boxes_overlap(boxes)
