"""Shape utilities built on the view ops: ravel, the h/v/dsplit family, split_with_sizes and the
``unsafe_*`` splits, sum_to_size, broadcast_shapes, dim_order, type_as, is_same_size.

All compose differentiable ops (views, reshape, sum, ``_to_copy``), so autograd needs no new
formula.
"""

from __future__ import annotations

import builtins
import operator

from ...optable import declare
from ...shapes import Size, as_shape, insertion_sorted_dims
from ...tensor import Tensor
from ..reduction.reduce import sum as sum_
from . import views


def ravel(input: Tensor) -> Tensor:
    """The elements in row-major order: a view when ``input`` is contiguous, else a copy."""
    return views.view_op(views.contiguous(input), (-1,))


def _dir_split(name: str, input: Tensor, indices_or_sections, min_dims: int, dim: int):
    if input.ndim < min_dims:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {min_dims} dimension, but got a tensor "
                           f"with {input.ndim} dimensions!")
    if isinstance(indices_or_sections, Tensor) or not isinstance(indices_or_sections, (int, list, tuple)):
        raise TypeError(f"{name}(): argument 'indices_or_sections' must be int or tuple of ints, not "
                        f"{type(indices_or_sections).__name__}")
    if isinstance(indices_or_sections, int):
        size = input._shape[dim]
        if indices_or_sections == 0 or size % indices_or_sections:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the size of the "
                               f"dimension {size} is not divisible by the split_size {indices_or_sections}!")
        return views.tensor_split(input, indices_or_sections, dim)
    return views.tensor_split(input, [operator.index(i) for i in indices_or_sections], dim)


def hsplit(input: Tensor, indices_or_sections):
    """Splits along dim 1 (dim 0 for a 1-d tensor), as NumPy's hsplit."""
    return _dir_split("hsplit", input, indices_or_sections, 1, 0 if input.ndim == 1 else 1)


def vsplit(input: Tensor, indices_or_sections):
    return _dir_split("vsplit", input, indices_or_sections, 2, 0)


def dsplit(input: Tensor, indices_or_sections):
    return _dir_split("dsplit", input, indices_or_sections, 3, 2)


def split_with_sizes(input: Tensor, split_sizes, dim: int = 0):
    if isinstance(split_sizes, int) or not isinstance(split_sizes, (list, tuple, Size)):
        raise TypeError(f"split_with_sizes(): argument 'split_sizes' must be tuple of ints, not "
                        f"{type(split_sizes).__name__}")
    return views.split(input, [operator.index(s) for s in split_sizes], dim)


def unsafe_split(input: Tensor, split_size, dim: int = 0):
    """``split``; PyTorch's "unsafe" variants only skip its view checks, which ember does not make."""
    return views.split(input, split_size, dim)


def unsafe_split_with_sizes(input: Tensor, split_sizes, dim: int = 0):
    return split_with_sizes(input, split_sizes, dim)


def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0):
    return views.chunk(input, chunks, dim)


def sum_to_size(self: Tensor, *size) -> Tensor:
    """Sums ``self`` down to ``size``, a shape ``self`` could be expanded from."""
    if not size:
        raise TypeError('sum_to_size() missing 1 required positional arguments: "size"')
    shape = as_shape(size)
    lead = self.ndim - len(shape)
    expandable = lead >= 0 and all(s == t or s == 1 for s, t in zip(shape, self._shape[lead:]))
    if not expandable:
        raise RuntimeError(f"size {{{list(shape)}}} is not expandable to size {{{list(self._shape)}}}.")
    if shape == self._shape:
        return self

    keep = tuple(lead + i for i, s in enumerate(shape) if s == 1 and self._shape[lead + i] != 1)
    result = sum_(self, keep, keepdim=True) if keep else self
    if lead:
        result = sum_(result, tuple(builtins.range(lead)))
    return result


def broadcast_shapes(*shapes) -> Size:
    """The shape tensors of ``shapes`` broadcast to (ints count as 1-d shapes), without tensors."""
    sizes = []
    given = shapes  # the error names an argument as the caller wrote it (a tuple, a Size)
    for s in shapes:
        if isinstance(s, int) and not isinstance(s, builtins.bool):
            s = (s,)
        elif not isinstance(s, (list, tuple)):
            raise RuntimeError(f"Input shapes should be of type ints, a tuple of ints, or a list of ints, got {s!r}")
        try:
            s = tuple(operator.index(v) for v in s)
        except TypeError:
            raise TypeError(f"broadcast_shapes(): expected a sequence of ints, got {s!r}") from None
        if any(v < 0 for v in s):
            raise ValueError("Attempting to broadcast a dimension with negative length!")
        sizes.append(s)
    ndim = max((len(s) for s in sizes), default=0)
    result = [1] * ndim
    for k, s in enumerate(sizes):
        for i in reversed(range(len(s))):  # from the last dim: the mismatch PyTorch reports first
            v = s[i]
            j = ndim - len(s) + i
            if v == result[j] or v == 1:
                continue
            if result[j] != 1:
                raise RuntimeError(f"Attempting to broadcast a dimension of length {v} at {i - len(s)}! Mismatching "
                                   f"argument at index {k} had {given[k]}; but expected shape should be broadcastable "
                                   f"to {result}")
            result[j] = v
    return Size(result)


def is_same_size(input: Tensor, other: Tensor) -> bool:
    if not isinstance(other, Tensor):
        raise TypeError(f"is_same_size(): argument 'other' must be Tensor, not {type(other).__name__}")
    return input._shape == other._shape


def type_as(self: Tensor, other: Tensor) -> Tensor:
    """``self`` cast to ``other``'s dtype (itself when it already has it)."""
    if not isinstance(other, Tensor):
        raise TypeError(f"type_as(): argument 'other' must be Tensor, not {type(other).__name__}")
    return views.to(self, other.dtype)


def _dense_in_order(shape: tuple, stride: tuple, order) -> bool:
    """Whether the strides are those of a dense tensor laid out outermost-first in ``order``
    (dims of size 1 may have any stride, and an empty tensor is dense, as in PyTorch)."""
    if 0 in shape:
        return True
    expected = 1
    for d in reversed(order):
        if shape[d] != 1:
            if stride[d] != expected:
                return False
            expected *= shape[d]
    return True


def _ge(a: int, b: int) -> bool:
    return b == 0 or (a != 0 and (a >= b or a % b == 0))


def _logical_to_physical(shape: tuple, stride: tuple, ambiguity_check: bool) -> tuple:
    """PyTorch's dim order (its elementwise-output permutation): dims sorted outermost-first by
    stride; stride-0 dims and ties keep their logical order. Returns (order, ambiguous)."""
    ndim = len(shape)
    if ndim < 2:
        return tuple(builtins.range(ndim)), False
    natural = tuple(builtins.range(ndim))
    cl = (0, 2, 3, 1) if ndim == 4 else None
    contiguous = _dense_in_order(shape, stride, natural)
    channels_last = cl is not None and _dense_in_order(shape, stride, cl)
    if contiguous and not channels_last:
        return natural, False
    if channels_last and not contiguous:
        return cl, False

    def should_swap(a, b):
        sa, sb = stride[a], stride[b]
        if sa == 0 or sb == 0:
            return 0
        if sa == sb:
            return 0 if _ge(shape[b], shape[a]) else 1
        return -1 if _ge(sb, sa) else 1

    perm = insertion_sorted_dims(ndim, should_swap)  # innermost first
    ambiguous = ambiguity_check and any(should_swap(perm[i], perm[i + 1]) != -1 for i in builtins.range(ndim - 1))
    return tuple(reversed(perm)), ambiguous


def dim_order(self: Tensor, *, ambiguity_check=False) -> tuple:
    """The dims from outermost to innermost in memory.

    ``ambiguity_check=True`` raises when the order is not unique (equal strides or size-1
    dims); ember has no memory-format objects, so a list of formats must be empty.
    """
    if not isinstance(ambiguity_check, (builtins.bool, list)):
        raise TypeError("The ambiguity_check argument must be a bool or a list of memory formats.")
    if isinstance(ambiguity_check, list) and ambiguity_check:
        raise TypeError("The ambiguity_check list must contain memory formats, which ember does not define")
    shape, stride = self._shape, self._stride
    if ambiguity_check is not False:
        duplicates = any(a == b for a, b in zip(stride, stride[1:]))
        if duplicates or any(s == 1 for s in shape):
            raise RuntimeError("The tensor does not have unique dim order, or cannot map to exact one of the given "
                               "memory formats.")
    order, ambiguous = _logical_to_physical(shape, stride, ambiguity_check is not False)
    if ambiguous:
        raise RuntimeError("The tensor does not have unique dim order.")
    return order


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
broadcast_shapes            function
dim_order                   method
dsplit                      function method
hsplit                      function method
is_same_size                function method
ravel                       function method
split_with_sizes            function method
sum_to_size                 method
type_as                     method
unsafe_chunk                function method
unsafe_split                function method
unsafe_split_with_sizes     function method
vsplit                      function method
""")
