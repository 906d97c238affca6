"""The ``*_copy`` variants of the view ops: a view's values in a fresh contiguous tensor.

PyTorch defines them for functionalization, and programs call them to take a view's values
without aliasing the input. Each is the view op followed by a contiguous copy
(``_to_copy``), so autograd differentiates them through the view's own formula: no new op
and no new derivative.
"""

from __future__ import annotations

import operator

from .. import dtypes as dt
from ..optable import declare
from ..shapes import as_shape, infer_size, numel, wrap_dim
from ..tensor import Tensor
from . import complex as cx
from . import views as vw
from ._common import write_out


def _check_input(input, name: str) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")


def _copy(view: Tensor, out: Tensor | None = None) -> Tensor:
    """A contiguous copy of ``view`` (differentiable: ``_to_copy`` passes the gradient through)."""
    return write_out(vw.to_dtype_op(view, dtype=view.dtype), out)


def _copies(views, out) -> tuple:
    results = tuple(vw.to_dtype_op(v, dtype=v.dtype) for v in views)
    if out is None:
        return results
    if not isinstance(out, (list, tuple)) or len(out) != len(results):
        raise RuntimeError(f"expected out to be a list of {len(results)} tensors, got {out!r:.60}")
    for r, o in zip(results, out):
        write_out(r, o)
    return None


def view_copy(input: Tensor, size, *, out=None) -> Tensor:
    _check_input(input, "view_copy")
    if isinstance(size, dt.dtype):
        return _copy(vw.view_dtype_op(input, size), out)
    shape = infer_size(as_shape((size,)), numel(input._shape))
    # The values a view would show; a layout no view can express is reshaped (a copy anyway).
    return _copy(vw.reshape(input, shape), out)


def permute_copy(input: Tensor, dims, *, out=None) -> Tensor:
    _check_input(input, "permute_copy")
    return _copy(vw.permute_op(input, as_shape((dims,))), out)


def expand_copy(input: Tensor, size, *, implicit: bool = False, out=None) -> Tensor:
    _check_input(input, "expand_copy")
    return _copy(vw.expand_op(input, as_shape((size,))), out)


def select_copy(input: Tensor, dim: int, index: int, *, out=None) -> Tensor:
    _check_input(input, "select_copy")
    return _copy(vw.select_op(input, dim, index), out)


def slice_bounds(size: int, start, end, step) -> tuple:
    """PyTorch's slice arguments clamped to [0, size]: None is the whole dim, negatives wrap."""
    step = operator.index(step)
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    start = 0 if start is None else operator.index(start)
    end = size if end is None else operator.index(end)
    if start < 0:
        start += size
    if end < 0:
        end += size
    start = min(max(start, 0), size)
    end = min(max(end, start), size)
    return start, end, step


def slice_view(input: Tensor, dim: int, start, end, step) -> Tensor:
    if input.ndim == 0:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, input.ndim)
    start, end, step = slice_bounds(input._shape[d], start, end, step)
    return vw.slice_op(input, d, start, end, step)


def slice_copy(input: Tensor, dim: int = 0, start=None, end=None, step: int = 1, *, out=None) -> Tensor:
    _check_input(input, "slice_copy")
    return _copy(slice_view(input, dim, start, end, step), out)


def diagonal_copy(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1, *, out=None) -> Tensor:
    _check_input(input, "diagonal_copy")
    return _copy(vw.diagonal_op(input, offset, dim1, dim2), out)


def t_copy(input: Tensor, *, out=None) -> Tensor:
    _check_input(input, "t_copy")
    return _copy(vw.t(input), out)


def transpose_copy(input: Tensor, dim0: int, dim1: int, *, out=None) -> Tensor:
    _check_input(input, "transpose_copy")
    return _copy(vw.transpose_op(input, dim0, dim1), out)


def squeeze_copy(input: Tensor, dim=None, *, out=None) -> Tensor:
    _check_input(input, "squeeze_copy")
    return _copy(vw.squeeze(input, dim), out)


def unsqueeze_copy(input: Tensor, dim: int, *, out=None) -> Tensor:
    _check_input(input, "unsqueeze_copy")
    return _copy(vw.unsqueeze_op(input, dim), out)


def unfold_copy(input: Tensor, dimension: int, size: int, step: int, *, out=None) -> Tensor:
    _check_input(input, "unfold_copy")
    return _copy(vw.unfold_op(input, dimension, size, step), out)


def as_strided_copy(input: Tensor, size, stride, storage_offset=None, *, out=None) -> Tensor:
    _check_input(input, "as_strided_copy")
    return _copy(vw.as_strided_op(input, size, stride, storage_offset), out)


def alias_copy(input: Tensor, *, out=None) -> Tensor:
    _check_input(input, "alias_copy")
    return _copy(vw.alias_op(input), out)


def detach_copy(input: Tensor, *, out=None) -> Tensor:
    _check_input(input, "detach_copy")
    return _copy(vw.detach(input), out)


def view_as_real_copy(input: Tensor, *, out=None) -> Tensor:
    _check_input(input, "view_as_real_copy")
    return _copy(cx.view_as_real(input), out)


def view_as_complex_copy(input: Tensor, *, out=None) -> Tensor:
    _check_input(input, "view_as_complex_copy")
    return _copy(cx.view_as_complex(input), out)


def narrow_copy(input: Tensor, dim: int, start: int, length: int, *, out=None) -> Tensor:
    _check_input(input, "narrow_copy")
    return _copy(vw.narrow_op(input, dim, start, length), out)


def unbind_copy(input: Tensor, dim: int = 0, *, out=None):
    _check_input(input, "unbind_copy")
    return _copies(vw.unbind(input, dim), out)


def split_copy(input: Tensor, split_size: int, dim: int = 0, *, out=None):
    _check_input(input, "split_copy")
    return _copies(vw.split(input, operator.index(split_size), dim), out)


def split_with_sizes_copy(input: Tensor, split_sizes, dim: int = 0, *, out=None):
    _check_input(input, "split_with_sizes_copy")
    return _copies(vw.split(input, list(split_sizes), dim), out)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
alias_copy                  function
as_strided_copy             function
detach_copy                 function
diagonal_copy               function
expand_copy                 function
narrow_copy                 function method
permute_copy                function
select_copy                 function
slice_copy                  function
split_copy                  function
split_with_sizes_copy       function
squeeze_copy                function
t_copy                      function
transpose_copy              function
unbind_copy                 function
unfold_copy                 function
unsqueeze_copy              function
view_as_complex_copy        function
view_as_real_copy           function
view_copy                   function
""")
