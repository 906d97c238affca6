"""In-place repairs of raw bytes read from a file, done by ember's own kernels."""

from __future__ import annotations

from .._src import dtypes
from .._src.device import CPU
from .._src.tensor import make_tensor


def byteswap(storage, itemsize: int) -> None:
    """Reverses each ``itemsize``-byte element (a big-endian file on a little-endian host)."""
    n = storage.nbytes() // itemsize
    rows = make_tensor(storage, (n, itemsize), (itemsize, 1), 0, dtypes.uint8, CPU)
    rows.copy_(rows.flip(1))


def normalize_bools(storage) -> None:
    """Makes every byte 0 or 1: a C++ ``bool`` holding any other value is undefined behaviour."""
    n = storage.nbytes()
    if n:
        raw = make_tensor(storage, (n,), (1,), 0, dtypes.uint8, CPU)
        raw.copy_(raw.ne(0))
