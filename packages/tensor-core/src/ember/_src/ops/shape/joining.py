"""Joining ops: cat/concat/concatenate, stack, hstack, vstack, dstack, column_stack.

The result is allocated once and each input is copied into its slice by the native copy
kernel (one call per input, no per-element work in Python).
"""

from __future__ import annotations

from ... import dtypes
from ... import memory_format as mf
from ..._native import _C
from ...device import META
from ...dispatch import define
from ...optable import declare
from ...shapes import wrap_dim
from ...tensor import Tensor, make_view
from .._common import label_as_op, type_name, write_out
from .reorder import atleast_3d

cat_op = define("cat(Tensor[] tensors, int dim=0) -> Tensor", ())


def _check_list(tensors, name: str) -> list:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{name}(): argument 'tensors' must be tuple of Tensors, not {type(tensors).__name__}")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {type(t).__name__}")
    if not tensors:
        # PyTorch's Python binding of cat raises ValueError; the C++ checks of the others RuntimeError.
        if name == "cat":
            raise ValueError("torch.cat(): expected a non-empty list of Tensors")
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    return list(tensors)


def _cat_plan(tensors, dim: int):
    """(result shape, dtype, inputs that take part) with PyTorch's checks."""
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    # Legacy rule: 1-D empty tensors are skipped whatever the other shapes are.
    parts = [(i, t) for i, t in enumerate(tensors) if not (t.ndim == 1 and t._shape[0] == 0)]
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = dtypes.promote_types(dtype, t.dtype)
    device = tensors[0]._device
    for t in tensors[1:]:
        if t._device != device:
            if META in (device, t._device):  # PyTorch's TensorIterator wording when meta is involved
                raise RuntimeError(f"Tensor on device {t._device} is not on the expected device {device}!")
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, {device} and "
                f"{t._device}!"
            )
    if not parts:
        return (0,), dtype, [], device
    ref = parts[0][1]
    d = wrap_dim(dim, ref.ndim)
    total = 0
    for i, t in parts:
        if t.ndim != ref.ndim:
            raise RuntimeError(
                f"Tensors must have same number of dimensions: got {ref.ndim} and {t.ndim}"
            )
        for k in range(ref.ndim):
            if k != d and t._shape[k] != ref._shape[k]:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size {ref._shape[k]} but got "
                    f"size {t._shape[k]} for tensor number {i} in the list."
                )
        total += t._shape[d]
    shape = ref._shape[:d] + (total,) + ref._shape[d + 1:]
    return shape, dtype, [t for _, t in parts], device


def _cat_format(parts):
    """PyTorch's layout of a cat result: the format its inputs all suggest, else contiguous."""
    if not parts or parts[0].ndim not in (4, 5):
        return mf.contiguous_format
    fmt = mf.suggest(parts[0])
    for t in parts[1:]:
        if mf.suggest(t) is not fmt:
            return mf.contiguous_format
    return fmt


def _cat_meta(tensors, dim=0):
    shape, dtype, parts, _ = _cat_plan(tensors, dim)
    return mf.empty_in(shape, dtype, META, _cat_format(parts))


cat_op.meta = _cat_meta
cat_op.kernels["meta"] = _cat_meta


@cat_op.kernel("cpu")
def _cat_cpu(tensors, dim=0):
    shape, dtype, parts, device = _cat_plan(tensors, dim)
    out = mf.empty_in(shape, dtype, device, _cat_format(parts))
    if not parts:
        return out
    d = wrap_dim(dim, len(shape))
    offset = 0
    for t in parts:
        n = t._shape[d]
        if n:
            region = make_view(out, out._shape[:d] + (n,) + out._shape[d + 1:], out._stride,
                               offset * out._stride[d])
            _C.copy_(region, t)
        offset += n
    return out


def cat(tensors, dim: int = 0, *, out=None) -> Tensor:
    """Concatenates tensors along an existing dim (dtypes promoted)."""

    tensors = _check_list(tensors, "cat")
    result = cat_op(tensors, dim)
    # PyTorch resizes a mismatched out first (fresh memory), then refuses any overlap with an input.
    checked = isinstance(out, Tensor) and out._shape == result._shape
    if isinstance(out, Tensor) and not dtypes.can_cast(result.dtype, out.dtype):
        raise TypeError(f"torch.cat(): input types can't be cast to the desired output type {type_name(out.dtype)}")
    return write_out(result, out, distinct=tensors, overlap=checked)


concat = concatenate = cat


def stack(tensors, dim: int = 0, *, out=None) -> Tensor:
    """Joins same-shaped tensors along a new dim."""
    tensors = _check_list(tensors, "stack")
    ref = tensors[0]._shape
    d = wrap_dim(dim, len(ref) + 1)  # PyTorch checks dim before the shapes
    for i, t in enumerate(tensors):
        if t._shape != ref:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(ref)} at entry 0 and {list(t._shape)} "
                f"at entry {i}"
            )
    result = cat([t.unsqueeze(d) for t in tensors], d, out=out)
    return result if out is not None else label_as_op(result, "stack")


def hstack(tensors, *, out=None) -> Tensor:
    tensors = _check_list(tensors, "hstack")
    tensors = [t.reshape(1) if t.ndim == 0 else t for t in tensors]
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1, out=out)


def vstack(tensors, *, out=None) -> Tensor:
    tensors = _check_list(tensors, "vstack")
    return cat([t.reshape(1, -1) if t.ndim < 2 else t for t in tensors], 0, out=out)


row_stack = vstack


def dstack(tensors, *, out=None) -> Tensor:
    tensors = _check_list(tensors, "dstack")
    return cat(list(atleast_3d(tensors)), 2, out=out)


def column_stack(tensors, *, out=None) -> Tensor:
    tensors = _check_list(tensors, "column_stack")
    return cat([t.reshape(-1, 1) if t.ndim < 2 else t for t in tensors], 1, out=out)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
cat                         function alias=concat,concatenate
column_stack                function
dstack                      function
hstack                      function
stack                       function
vstack                      function alias=row_stack
""")
