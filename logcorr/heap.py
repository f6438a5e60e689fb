"""Giving freed memory back to the system while a large set is read.

The line core allocates each chunk's text and columns with the C allocator (glibc's malloc on
Linux) on its worker threads, and polars frees them later on another thread. glibc keeps what
is freed in its per-thread arenas for reuse, and the big blocks a chunk is made of leave holes
that later, smaller allocations keep from being returned: the process's resident memory grew
with the set (a parquet export: 1.0 GB on 10M lines, 1.3 GB on 16M, 1.8 GB on 42M) though what
is alive does not. `release_if_above` asks glibc to return its free pages (`malloc_trim`)
whenever the resident size passes RESIDENT_LIMIT; below it, nothing is done, so a small set
pays nothing. Elsewhere (no glibc, no /proc) it does nothing.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

RESIDENT_LIMIT = 768 << 20  # resident bytes above which freed memory is given back


def _trimmer() -> tuple[Callable[[int], int], int] | None:
    try:
        trim = ctypes.CDLL(None).malloc_trim  # (the C library the interpreter runs on)
        page = os.sysconf("SC_PAGE_SIZE")
        with open("/proc/self/statm", "rb"):
            pass
    except (OSError, AttributeError, ValueError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim, page


_TRIM = _trimmer()


def resident() -> int:
    """The process's resident bytes (0 where /proc is not there)."""
    if _TRIM is None:
        return 0
    with open("/proc/self/statm", "rb") as statm:
        return int(statm.read().split()[1]) * _TRIM[1]


def release_if_above(limit: int | None = None) -> bool:
    """Give the allocator's free pages back when more than `limit` bytes (RESIDENT_LIMIT)
    are resident."""
    if _TRIM is None or resident() <= (RESIDENT_LIMIT if limit is None else limit):
        return False
    _TRIM[0](0)
    return True


def release() -> None:
    """Give the allocator's free pages back (at the end of a pass: what its chunks freed)."""
    if _TRIM is not None:
        _TRIM[0](0)
