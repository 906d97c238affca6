"""The ``*_scatter`` ops: a copy of the input with one view of it replaced by ``src``.

``slice_scatter(x, src, ...)`` is the out-of-place form of ``x[...] = src``. Each clones the
input, takes the view on the clone and copies ``src`` into it, so autograd records the clone
and the in-place copy into a view (its view rebase): ``src`` gets the gradient of the view,
the input the gradient outside it. No new op, so no new derivative.
"""

from __future__ import annotations

from ..optable import declare
from ..shapes import numel
from ..tensor import Tensor
from . import views as vw
from ._common import write_out
from .view_copies import slice_view


def _check_args(name: str, input, src) -> None:
    for arg, pos, what in ((input, 1, "input"), (src, 2, "src")):
        if not isinstance(arg, Tensor):
            raise TypeError(f"{name}(): argument '{what}' (position {pos}) must be Tensor, not {type(arg).__name__}")
    if input._device != src._device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{input._device} and {src._device}!")


def _fill_view(out: Tensor, view: Tensor, src: Tensor) -> Tensor:
    if view._shape != src._shape:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src._shape)}, "
                           f"slice size = {list(view._shape)}")
    vw.copy_(view, src)  # casts src to the input's dtype, as PyTorch does
    return out


def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start=None, end=None, step: int = 1, *,
                  out=None) -> Tensor:
    _check_args("slice_scatter", input, src)
    result = vw.clone(input)
    return write_out(_fill_view(result, slice_view(result, dim, start, end, step), src), out)


def select_scatter(input: Tensor, src: Tensor, dim: int, index: int, *, out=None) -> Tensor:
    _check_args("select_scatter", input, src)
    result = vw.clone(input)
    return write_out(_fill_view(result, vw.select_op(result, dim, index), src), out)


def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1, *,
                     out=None) -> Tensor:
    _check_args("diagonal_scatter", input, src)
    result = vw.clone(input)
    return write_out(_fill_view(result, vw.diagonal_op(result, offset, dim1, dim2), src), out)


def _has_internal_overlap(t: Tensor) -> bool:
    return any(st == 0 and s > 1 for s, st in zip(t._shape, t._stride))


def as_strided_scatter(input: Tensor, src: Tensor, size, stride, storage_offset=None, *, out=None) -> Tensor:
    """``input`` with the elements an ``as_strided(size, stride, storage_offset)`` view of it
    would show replaced by ``src``. As in PyTorch the view is taken in storage coordinates:
    the result has ``input``'s sizes, strides and offset over a copy of its whole storage.

    Written out of place in those coordinates (the whole storage as a flat vector, an
    index_put at the view's positions, an as_strided back), so autograd never sees an
    in-place write into a tensor that an as_strided saved for its backward.
    """
    _check_args("as_strided_scatter", input, src)
    from .creation import arange
    from .indexing import index_put

    base = vw.clone(input) if _has_internal_overlap(input) else input  # PyTorch copies an overlapping input
    n = base._storage.nbytes() // base.dtype.itemsize
    flat = vw.as_strided_op(base, (n,), (1,), 0)
    positions = vw.as_strided_op(arange(n, device=base._device), size, stride, storage_offset)
    if numel(positions._shape) and _has_internal_overlap(positions):
        raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a "
                           "single memory location. Please clone() the tensor before performing the operation.")
    if positions._shape != src._shape:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src._shape)}, "
                           f"slice size = {list(positions._shape)}")
    values = vw.reshape(vw.to(src, base.dtype), (-1,))
    flat = index_put(flat, (vw.reshape(positions, (-1,)),), values)
    return write_out(vw.as_strided_op(flat, base._shape, base._stride, base._offset), out)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
as_strided_scatter          function method
diagonal_scatter            function method
select_scatter              function method
slice_scatter               function method
""")
