"""Box and byte geometry of transfer regions, and the index that finds the source boxes a
target box meets."""

from bisect import bisect_left
from math import prod

from ..storage_manifest import StoredFragment
from ..types import canonical_strides_bytes

__all__ = []


def _fragment_itemsize(fragment):
    """Bytes per element of a fragment (nbytes over its element count)."""
    elements = prod(fragment.local_shape)
    if elements <= 0 or fragment.nbytes % elements:
        raise ValueError("transfer region fragment byte size is invalid")
    return fragment.nbytes // elements


def _validate_outer_strides(counts, strides, inner_bytes, side):
    """ValueError when the outer loops would write one byte twice: each stride, innermost first,
    must step past everything the loops inside it cover."""
    span = inner_bytes
    for count, stride in zip(reversed(counts), reversed(strides)):
        if count > 1 and stride < span:
            raise ValueError(f"transfer region {side} strides overlap")
        span += (count - 1) * stride


def _geometry_key(fragment):
    return fragment.tensor_id, fragment.global_offset, fragment.local_shape


def _source_sort_key(fragment):
    """Which of several sources of one box comes first: a stored one by object, a placement
    one by rank (dp, pp, ep, tp), then by ID."""
    if isinstance(fragment, StoredFragment):
        return (0, 0, 0, 0, fragment.object_key, fragment.fragment_id)
    r = fragment.rank
    return (r.dp, r.pp, r.ep, r.tp, fragment.fragment_id)


class _CandidateBoxIndex:
    """Groups of same-box source fragments of one tensor, indexed on the dimension where their
    boxes differ most: a query returns the groups whose extent on that dimension meets the
    target's (sorted begins and the longest extent bound the window searched)."""

    def __init__(self, dimension, groups):
        self.dimension = dimension
        self._groups = sorted(groups, key=lambda g: g[0].global_offset[dimension])
        self._begins = [g[0].global_offset[dimension] for g in self._groups]
        self._longest = max(g[0].local_shape[dimension] for g in self._groups)

    @classmethod
    def build(cls, groups):
        if not groups:
            raise ValueError("candidate box index requires source fragments")
        rank = len(groups[0][0].global_offset)

        def spread(d):
            return (len({(g[0].global_offset[d], g[0].local_shape[d]) for g in groups}), -d)

        return cls(max(range(rank), key=spread), groups)

    def query(self, target):
        d = self.dimension
        begin = target.global_offset[d]
        end = begin + target.local_shape[d]
        lo = bisect_left(self._begins, begin - self._longest + 1)
        hi = bisect_left(self._begins, end)
        return tuple(g for g in self._groups[lo:hi]
                     if g[0].global_offset[d] + g[0].local_shape[d] > begin)


def _overlap_box(source, target):
    """(offset, shape) of the boxes' intersection, or None when it is empty."""
    offset, shape = [], []
    for sb, se, tb, te in zip(source.global_offset, source.local_shape, target.global_offset,
                              target.local_shape):
        b, e = max(sb, tb), min(sb + se, tb + te)
        if e <= b:
            return None
        offset.append(b)
        shape.append(e - b)
    return tuple(offset), tuple(shape)


def _derive_region_geometry(source, target, overlap_offset, overlap_shape):
    """How the overlap box lies in both fragments' dense row-major bytes: (source base offset,
    target base offset, inner contiguous bytes, outer loop counts, source strides, target
    strides). Trailing dimensions that are whole in both fragments merge into the inner run."""
    itemsize = _fragment_itemsize(source)
    if _fragment_itemsize(target) != itemsize:
        raise ValueError("transfer region source and target itemsize differ")
    s_strides = canonical_strides_bytes(source.local_shape, itemsize)
    t_strides = canonical_strides_bytes(target.local_shape, itemsize)
    s_base = sum((o - b) * st for o, b, st in zip(overlap_offset, source.global_offset,
                                                  s_strides))
    t_base = sum((o - b) * st for o, b, st in zip(overlap_offset, target.global_offset,
                                                  t_strides))
    rank = len(overlap_shape)
    inner = overlap_shape[-1] * itemsize
    first = rank - 1  # the first dimension inside the contiguous run
    for d in range(rank - 2, -1, -1):
        if s_strides[d] != inner or t_strides[d] != inner:
            break
        inner *= overlap_shape[d]
        first = d
    return (s_base, t_base, inner, tuple(overlap_shape[:first]), s_strides[:first],
            t_strides[:first])


def _transfer_region(tensor, source, target, overlap_offset, overlap_shape):
    from .contracts import TransferRegion

    if _fragment_itemsize(source) != tensor.itemsize or \
            _fragment_itemsize(target) != tensor.itemsize:
        raise ValueError("transfer region fragment itemsize differs from descriptor")
    s_base, t_base, inner, counts, s_strides, t_strides = _derive_region_geometry(
        source, target, overlap_offset, overlap_shape)
    return TransferRegion(tensor_id=tensor.tensor_id, source=source, target=target,
                          overlap_offset=overlap_offset, overlap_shape=overlap_shape,
                          source_base_offset=s_base, target_base_offset=t_base,
                          inner_bytes=inner, outer_loop_counts=counts, source_strides=s_strides,
                          target_strides=t_strides)
