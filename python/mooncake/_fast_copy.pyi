# mooncake._fast_copy (mooncake-integration/fast_copy/fast_copy.c): the reference's gather copy.
from collections.abc import Sequence

from typing_extensions import Buffer

def concat_arrays_into(
    arrays: Sequence[Buffer],
    dest_ptr: int,
    dest_size: int,
    start: int = 0,
    count: int = -1,
    nthreads: int = 1,
    /,
) -> int: ...
