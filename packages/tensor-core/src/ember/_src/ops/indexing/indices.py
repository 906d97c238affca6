"""Index helpers: tril_indices/triu_indices, unravel_index, nonzero_static.

All are compositions of existing kernels (arange, comparisons, nonzero, floor_divide,
remainder, cat); none is differentiable (their results are integer indices).
"""

from __future__ import annotations

import builtins
import itertools
import operator

from ... import dispatch, dtypes
from ...device import META
from ...optable import declare
from ...tensor import Tensor, new_empty_tensor
from .._common import type_name, write_out
from ..creation.factories import _resolve, arange, full, tensor
from ..pointwise.elementwise import floor_divide, ge_op, le_op, remainder, sub_op
from ..shape import views
from ..shape.joining import cat, stack
from .subscripts import nonzero, nonzero_op


def _triangle_indices(name: str, row, col, offset, dtype, device, lower: bool) -> Tensor:
    row, col, offset = operator.index(row), operator.index(col), operator.index(offset)
    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")
    d, dev = _resolve(dtypes.int64 if dtype is None else dtype, device)
    if d not in (dtypes.int32, dtypes.int64):
        raise NotImplementedError(f'"{name}" not implemented for \'{type_name(d)}\'')
    if dev is META:
        return new_empty_tensor((2, _triangle_count(row, col, offset, lower)), d, dev)

    # Row-major positions (i, j) with j - i <= offset (lower) or >= offset (upper): nonzero
    # lists them in exactly PyTorch's order.
    diff = sub_op(arange(col, device=dev), views.unsqueeze_op(arange(row, device=dev), 1))
    mask = le_op(diff, offset) if lower else ge_op(diff, offset)
    return views.to_dtype_op(views.t(nonzero_op(mask)), dtype=d)


def _triangle_count(row: int, col: int, offset: int, lower: bool) -> int:
    if lower:
        return builtins.sum(min(max(i + offset + 1, 0), col) for i in range(row))
    return builtins.sum(col - min(max(i + offset, 0), col) for i in range(row))


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None, layout=None) -> Tensor:
    """The (2, N) coordinates of the lower triangle of a row x col matrix, row by row."""
    return _triangle_indices("tril_indices", row, col, offset, dtype, device, lower=True)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None, layout=None) -> Tensor:
    """The (2, N) coordinates of the upper triangle of a row x col matrix, row by row."""
    return _triangle_indices("triu_indices", row, col, offset, dtype, device, lower=False)


def unravel_index(indices: Tensor, shape):
    """The coordinates, one tensor per dim of ``shape``, of flat indices into a tensor of that shape.

    As PyTorch: floor division and modulo, so indices outside [0, numel) wrap around.
    """
    if not isinstance(indices, Tensor):
        raise TypeError(f"unravel_index(): expected 'indices' to be a Tensor, got {type(indices).__name__}")
    if indices.dtype.is_floating_point or indices.dtype.is_complex or indices.dtype is dtypes.bool:
        raise TypeError(f"expected 'indices' to be integer dtype, but got ember.{indices.dtype.name}")
    if isinstance(shape, int) and not isinstance(shape, builtins.bool):
        shape = (shape,)
    elif not isinstance(shape, (list, tuple)):
        raise TypeError(f"expected 'shape' to be int or sequence of ints, but got {type(shape)}")
    for s in shape:
        if not isinstance(s, int) or isinstance(s, builtins.bool):
            raise TypeError(f"expected 'shape' sequence to only contain ints, but got {type(s)}")
    shape = tuple(shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {shape}")

    coefs = list(itertools.accumulate(reversed(shape[1:] + (1,)), operator.mul))[::-1]
    dev = indices._device
    flat = floor_divide(views.unsqueeze_op(indices, -1), tensor(coefs, dtype=dtypes.int64, device=dev))
    coords = remainder(flat, tensor(list(shape), dtype=dtypes.int64, device=dev))
    return views.unbind(coords, -1)


def _nonzero_static_traced(input: Tensor, size: int, fill_value: int) -> Tensor:
    """nonzero_static from ops of static shape (under a tracer the data is unknown): the k-th
    nonzero's flat position is scattered to row k (positions past ``size`` to a discarded row),
    then unravelled into coordinates; rows with no nonzero get ``fill_value``."""
    from ..pointwise.elementwise import lt, ne, where
    from ..reduction.composite import cumsum
    from .gather_scatter import scatter

    shape = tuple(input._shape)
    dev = input._device
    flat = ne(views.reshape(input, (-1,)), 0)
    count = flat._shape[0]
    rank = sub_op(cumsum(views.to_dtype_op(flat, dtype=dtypes.int64), 0), 1)
    keep = flat & lt(rank, size)
    slot = where(keep, rank, size)
    rows = scatter(full((size + 1,), -1, dtype=dtypes.int64, device=dev), 0, slot,
                   arange(count, dtype=dtypes.int64, device=dev))
    rows = views.narrow_op(rows, 0, 0, size)
    if not shape or any(type(d) is int and d == 0 for d in shape):  # no dims, or no elements
        return full((size, len(shape)), fill_value, dtype=dtypes.int64, device=dev)
    # Unravelled dim by dim with scalar sizes: symbolic sizes stay symbolic (no tensor of them).
    rest = where(ge_op(rows, 0), rows, 0)
    parts = []
    for size_d in reversed(shape):
        parts.append(remainder(rest, size_d))
        rest = floor_divide(rest, size_d)
    coords = stack(parts[::-1], -1)
    return where(views.unsqueeze_op(ge_op(rows, 0), -1), coords, fill_value)


def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1, out=None) -> Tensor:
    """``nonzero`` with a fixed number of rows: truncated, or padded with ``fill_value``."""
    if not isinstance(input, Tensor):
        raise TypeError(f"nonzero_static(): argument 'input' must be Tensor, not {type(input).__name__}")
    if isinstance(size, builtins.bool) or not isinstance(size, int) or size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")
    fill_value = operator.index(fill_value)
    ndim = input.ndim
    if input._device is META:
        return write_out(new_empty_tensor((size, ndim), dtypes.int64, META), out)
    if dispatch._MODES.stack:
        return write_out(_nonzero_static_traced(input, size, fill_value), out)

    found = nonzero(input)
    n = found._shape[0]
    if n >= size:
        result = views.to_dtype_op(views.narrow_op(found, 0, 0, size), dtype=dtypes.int64)
    else:
        pad = full((size - n, ndim), fill_value, dtype=dtypes.int64, device=input._device)
        result = cat((found, pad), 0)
    return write_out(result, out)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
nonzero_static              function method
tril_indices                function
triu_indices                function
unravel_index               function
""")
