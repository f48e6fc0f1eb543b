"""Small helpers the reshard modules share."""

__all__ = ["_strict_zip"]


def _strict_zip(*iterables):
    """zip() that raises ValueError("zip() arguments have different lengths") when one iterable
    ends before the others, instead of stopping silently."""
    iterators = [iter(it) for it in iterables]
    if not iterators:
        return
    while True:
        row = []
        for it in iterators:
            for value in it:
                row.append(value)
                break
        if not row:
            return
        if len(row) != len(iterators):
            raise ValueError("zip() arguments have different lengths")
        yield tuple(row)
