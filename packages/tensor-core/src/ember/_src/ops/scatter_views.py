"""The ``*_scatter`` ops: a copy of the input with one view of it replaced by ``src``.

``slice_scatter(x, src, ...)`` is the out-of-place form of ``x[...] = src``. Each clones the
input, takes the view on the clone and copies ``src`` into it, so autograd records the clone
and the in-place copy into a view (its view rebase): ``src`` gets the gradient of the view,
the input the gradient outside it. No new op, so no new derivative.
"""

from __future__ import annotations

from ..shapes import numel
from ..tensor import Tensor
from . import views as vw
from ._common import write_out
from .view_copies import slice_view

__all__ = ["as_strided_scatter", "diagonal_scatter", "select_scatter", "slice_scatter"]

TENSOR_METHODS = tuple(__all__)


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


def _clone_preserving_storage(input: Tensor) -> Tensor:
    """A copy with ``input``'s sizes, strides and offset over a copy of its whole storage, so
    that an ``as_strided`` on it addresses the same elements it would on ``input``."""
    if _has_internal_overlap(input):
        return vw.clone(input)
    n = input._storage.nbytes() // input.dtype.itemsize
    whole = vw.as_strided_op(input, (n,), (1,), 0)
    return vw.as_strided_op(vw.clone(whole), input._shape, input._stride, input._offset)


def _has_internal_overlap(t: Tensor) -> bool:
    return any(st == 0 and s > 1 for s, st in zip(t._shape, t._stride))


def as_strided_scatter(input: Tensor, src: Tensor, size, stride, storage_offset=None, *, out=None) -> Tensor:
    _check_args("as_strided_scatter", input, src)
    result = _clone_preserving_storage(input)
    view = vw.as_strided_op(result, size, stride, storage_offset)
    if numel(view._shape) and _has_internal_overlap(view):
        raise RuntimeError("as_strided_scatter: the view of self must not have overlapping elements")
    return write_out(_fill_view(result, view, src), out)
