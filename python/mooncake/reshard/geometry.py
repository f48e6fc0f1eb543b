"""N-D logical-box checks for reshard planners, independent of any resource.

A box is ``(offset, shape)``: a tuple of begins and a tuple of extents of the same rank, the
half-open range ``[offset[d], offset[d] + shape[d])`` in each dimension ``d``. Resource adapters
hand in their own objects through the structural :class:`LogicalBox` and :class:`OverlapRegion`
protocols. Ranks that differ are a ValueError.

:func:`boxes_overlap` is a sweep: over one coordinate in 1-D, over x with the live y-intervals
kept sorted in 2-D (both O(n log n) for the live set a valid layout has), and in higher ranks over
the most varied dimension with pairwise tests of the boxes live at each step. That last one is
bounded: past ``_MAX_HIGH_DIMENSIONAL_PAIRWISE_COMPARISONS`` tests it raises ValueError instead of
doing unbounded work on behalf of an untrusted manifest.
"""

from bisect import bisect_left, bisect_right
from math import prod
from typing import Iterable, Protocol, Sequence

from ._compat import _strict_zip

__all__ = [
    "LogicalBox",
    "OverlapRegion",
    "box_contains",
    "boxes_exactly_cover",
    "boxes_overlap",
    "regions_exactly_cover",
]

_MAX_HIGH_DIMENSIONAL_PAIRWISE_COMPARISONS = 1_000_000


class LogicalBox(Protocol):
    """A box a resource adapter supplies: where it starts and its extent in each dimension."""

    @property
    def global_offset(self) -> tuple: ...

    @property
    def local_shape(self) -> tuple: ...


class OverlapRegion(Protocol):
    """The logical part of a transfer region: the box where a source and a target overlap."""

    @property
    def overlap_offset(self) -> tuple: ...

    @property
    def overlap_shape(self) -> tuple: ...


def box_contains(outer_offset, outer_shape, inner_offset, inner_shape) -> bool:
    """Whether the inner box lies wholly inside the outer one."""
    for ob, oe, ib, ie in _strict_zip(outer_offset, outer_shape, inner_offset, inner_shape):
        if ib < ob or ib + ie > ob + oe:
            return False
    return True


def _intersect(a_offset, a_shape, b_offset, b_shape):
    for ab, ae, bb, be in _strict_zip(a_offset, a_shape, b_offset, b_shape):
        if not (ab < bb + be and bb < ab + ae):
            return False
    return True


def boxes_overlap(boxes: Sequence) -> bool:
    """Whether any two of the boxes share a point."""
    if len(boxes) < 2:
        return False
    rank = len(boxes[0][0])
    for offset, shape in boxes:
        if len(offset) != rank or len(shape) != rank:
            raise ValueError(f"boxes of different ranks: {len(offset)}/{len(shape)} and {rank}")
    if rank == 1:
        return _overlap_1d(boxes)
    if rank == 2:
        return _overlap_2d(boxes)
    return _overlap_nd(boxes)


def _overlap_1d(boxes):
    reach = None
    for begin, end in sorted((o[0], o[0] + s[0]) for o, s in boxes):
        if reach is not None and begin < reach:
            return True
        reach = end if reach is None else max(reach, end)
    return False


def _overlap_2d(boxes):
    # Sweep along x. At each x the live boxes' y-intervals must be disjoint, so they are kept as
    # one sorted list of starts (and their ends); a new interval meets a live one exactly when it
    # meets its neighbour on either side. Ends sort before starts at the same x (half-open).
    events = []
    for i, (o, s) in enumerate(boxes):
        events.append((o[0] + s[0], 0, i))
        events.append((o[0], 1, i))
    events.sort()
    starts, ends = [], []
    for _, is_start, i in events:
        (_, y0), (_, h) = boxes[i]
        y1 = y0 + h
        if not is_start:
            at = bisect_left(starts, y0)
            while at < len(starts) and (starts[at] != y0 or ends[at] != y1):
                at += 1
            if at < len(starts):
                del starts[at], ends[at]
            continue
        at = bisect_right(starts, y0)
        if at > 0 and ends[at - 1] > y0:
            return True
        if at < len(starts) and starts[at] < y1:
            return True
        starts.insert(at, y0)
        ends.insert(at, y1)
    return False


def _overlap_nd(boxes):
    rank = len(boxes[0][0])
    dim = max(range(rank), key=lambda d: len({o[d] for o, _ in boxes}))
    order = sorted(range(len(boxes)), key=lambda i: boxes[i][0][dim])
    budget = _MAX_HIGH_DIMENSIONAL_PAIRWISE_COMPARISONS
    tests = 0
    live = []  # (end along dim, index)
    for i in order:
        offset, shape = boxes[i]
        begin = offset[dim]
        live = [(end, j) for end, j in live if end > begin]
        for _, j in live:
            if tests >= budget:
                raise ValueError(f"high-dimensional overlap budget exceeded before validation "
                                 f"({budget} pairwise tests)")
            tests += 1
            if _intersect(boxes[j][0], boxes[j][1], offset, shape):
                return True
        live.append((begin + shape[dim], i))
    return False


def boxes_exactly_cover(container_offset, container_shape, boxes: Sequence) -> bool:
    """Whether the boxes tile the container exactly: at least one, each inside it, volumes that
    add up to its volume, and no two overlapping."""
    if not boxes:
        return False
    for offset, shape in boxes:
        if not box_contains(container_offset, container_shape, offset, shape):
            return False
    if sum(prod(shape) for _, shape in boxes) != prod(container_shape):
        return False
    return not boxes_overlap(boxes)


def regions_exactly_cover(target: LogicalBox, regions: Iterable[OverlapRegion]) -> bool:
    """Whether the regions' overlap boxes tile the target box exactly."""
    return boxes_exactly_cover(target.global_offset, target.local_shape,
                               tuple((r.overlap_offset, r.overlap_shape) for r in regions))
