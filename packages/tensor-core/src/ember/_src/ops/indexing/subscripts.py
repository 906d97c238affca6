"""Op family: indexing. ``Tensor.__getitem__``/``__setitem__``, index_put, masks, nonzero.

Indexing follows PyTorch's two stages. Basic items (ints, slices, None, Ellipsis, 0-d
integer tensors) become view ops (select/slice/unsqueeze) applied left to right; tensor
items (integer tensors, lists, bool masks, Python bools) are recorded against the dims of
that view and then applied at once by the ``index`` op (aten::index), which copies. Bool
masks are turned into long index tensors with ``nonzero``.
"""

from __future__ import annotations

import operator
import warnings

from ... import dtypes
from ..._native import _C
from ...device import META
from ...dispatch import define
from ...optable import declare
from ...shapes import broadcast_shapes, is_contiguous, numel, wrap_dim
from ...tensor import Tensor, make_tensor, new_empty_tensor
from .._common import (
    check_int64_arg,
    check_out_dtype,
    check_scalar_fits,
    convert,
    fresh_result,
    type_name,
    write_out,
)
from .._common import check_internal_overlap as _check_internal_overlap
from .._common import check_no_overlap as _check_no_overlap
from .._common import check_partial_overlap as _check_partial_overlap
from ..creation.factories import as_tensor, scalar_tensor, tensor
from ..pointwise.elementwise import ne_op
from ..shape import views

_INDEX_DTYPES = (dtypes.int64, dtypes.int32)
_MASK_DTYPES = (dtypes.bool, dtypes.uint8)
_BAD_INDEX = "tensors used as indices must be long, int, byte or bool tensors"


# -- the index op (aten::index): a list of optional index tensors aligned with self's dims --------

def _check_index_dtype(t: Tensor) -> None:
    if t.dtype not in _INDEX_DTYPES and t.dtype not in _MASK_DTYPES:
        raise IndexError(_BAD_INDEX)


def _expand_masks(self: Tensor, indices) -> list:
    """Replaces each k-dim bool/uint8 mask by k long tensors (its nonzero coordinates)."""
    out = []
    for idx in indices:
        if idx is None or idx.dtype not in _MASK_DTYPES:
            out.append(idx)
            continue
        if idx.dtype is dtypes.uint8:
            warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool "
                          "instead.", UserWarning, stacklevel=4)
        src = len(out)
        for j, size in enumerate(idx._shape):
            if src + j >= self.ndim or self._shape[src + j] != size:
                raise IndexError(
                    f"The shape of the mask {list(idx._shape)} at index {j} does not match the shape of the indexed "
                    f"tensor {list(self._shape)} at index {src + j}"
                )
        coords = _nonzero_cpu(idx) if idx._device is not META else _data_dependent("index with a bool mask")
        out.extend(views.select_op(coords, 1, j) for j in range(idx.ndim))
    return out


def _plan(self: Tensor, indices):
    """(indexed dims, their long/int tensors, broadcast index shape, the other dims, result shape,
    position of the broadcast dims in the result)."""
    ndim = len(self._shape)
    if len(indices) > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim} (got {len(indices)})")
    has_mask = False
    for idx in indices:
        if idx is not None:
            if not isinstance(idx, Tensor):
                raise TypeError(f"expected Tensor as element of indices, but got {type(idx).__name__}")
            if idx.dtype in _MASK_DTYPES:
                has_mask = True
            elif idx.dtype not in _INDEX_DTYPES:
                raise IndexError(_BAD_INDEX)
    if has_mask:
        indices = _expand_masks(self, indices)
        if len(indices) > ndim:
            raise IndexError(f"too many indices for tensor of dimension {ndim} (got {len(indices)})")
    dims, tensors = [], []
    for d, idx in enumerate(indices):
        if idx is not None:
            dims.append(d)
            tensors.append(idx)
    if not tensors:
        raise RuntimeError("at least one index tensor must be given")
    if len(tensors) == 1:
        bshape = tensors[0]._shape
    else:
        try:
            bshape = broadcast_shapes(*(t._shape for t in tensors))
        except RuntimeError:
            shapes = ", ".join(str(list(t._shape)) for t in tensors)
            raise IndexError(
                f"shape mismatch: indexing tensors could not be broadcast together with shapes {shapes}"
            ) from None
    rest = [d for d in range(ndim) if d not in dims]
    # Adjacent index dims stay in place; separated ones go first (PyTorch's and NumPy's rule).
    pos = dims[0] if dims[-1] - dims[0] == len(dims) - 1 else 0
    rest_shape = [self._shape[d] for d in rest]
    result = tuple(rest_shape[:pos]) + bshape + tuple(rest_shape[pos:])
    return dims, tensors, bshape, rest, result, pos


def _offsets(self: Tensor, dims, tensors, bshape, result, pos, wrap: bool = True) -> Tensor:
    """int64 element offsets into ``self`` per index position, viewed to broadcast over ``result``."""
    off = new_empty_tensor(bshape, dtypes.int64)
    _C.index_offsets(off, self, tensors, dims, wrap)
    nb = len(bshape)
    shape = (1,) * pos + bshape + (1,) * (len(result) - pos - nb)
    stride = (0,) * pos + off._stride + (0,) * (len(result) - pos - nb)
    return make_tensor(off._storage, shape, stride, 0, dtypes.int64, off._device)


def _restride(self: Tensor, rest, result, pos, nb) -> Tensor:
    """``self`` seen with the result's rank: its non-indexed dims, size 1 where the index dims go."""
    strides = [self._stride[d] for d in rest]
    shape = tuple(result[:pos]) + (1,) * nb + tuple(result[pos + nb:])
    stride = tuple(strides[:pos]) + (0,) * nb + tuple(strides[pos:])
    return make_tensor(self._storage, shape, stride, self._offset, self.dtype, self._device)


index_op = define("index(Tensor self, Tensor?[] indices) -> Tensor")


@index_op.kernel("cpu")
def _index_cpu(self: Tensor, indices) -> Tensor:
    return _gather(self, *_plan(self, list(indices)))


def _gather(self: Tensor, dims, tensors, bshape, rest, result, pos, wrap: bool = True) -> Tensor:
    out = new_empty_tensor(result, self.dtype, self._device)
    off = _offsets(self, dims, tensors, bshape, result, pos, wrap)  # validates the indices
    if numel(result):  # an empty result may come from an empty self: no view of its storage to take
        _C.index_gather(out, _restride(self, rest, result, pos, len(bshape)), off)
    return out


@index_op.kernel("meta")
def _index_meta(self: Tensor, indices) -> Tensor:
    result = _plan(self, list(indices))[4]
    return new_empty_tensor(result, self.dtype, self._device)


index_op.meta = _index_meta


index_put_op = define(
    "index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor(a!)", ("inplace",)
)


def _warn_internal_overlap(self: Tensor, what: str) -> None:
    for size, stride in zip(self._shape, self._stride):
        if stride == 0 and size > 1:
            warnings.warn(f"Use of {what} on expanded tensors is deprecated. Please clone() the tensor before "
                          "performing this operation.", UserWarning, stacklevel=4)
            return


def _put_plan(self: Tensor, indices, values: Tensor):
    _warn_internal_overlap(self, "index_put_")
    plan = _plan(self, list(indices))
    result = plan[4]
    try:
        vshape = broadcast_shapes(result, values._shape)
    except RuntimeError:
        vshape = None
    if vshape != tuple(result):
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(values._shape)} cannot be broadcast to "
                           f"indexing result of shape {list(result)}")
    return plan


@index_put_op.kernel("cpu")
def _index_put_cpu(self: Tensor, indices, values: Tensor, accumulate: bool = False) -> Tensor:
    dims, tensors, bshape, rest, result, pos = _put_plan(self, indices, values)
    _check_no_overlap(self, (values, *indices))  # PyTorch: neither values nor indices may overlap self
    values = views.expand_op(convert(values, self.dtype), result)
    if values._storage is self._storage:
        values = views.clone_op(values)  # writing self while reading it
    off = _offsets(self, dims, tensors, bshape, result, pos)
    if numel(result):  # see _gather
        _C.index_put(_restride(self, rest, result, pos, len(bshape)), values, off, bool(accumulate))
    self._bump_version()
    return self


@index_put_op.kernel("meta")
def _index_put_meta(self: Tensor, indices, values: Tensor, accumulate: bool = False) -> Tensor:
    _put_plan(self, indices, values)
    return self


index_put_op.meta = _index_put_meta


def _check_put_args(indices, values) -> tuple:
    if not isinstance(values, Tensor):
        raise TypeError(f"index_put(): argument 'values' (position 2) must be Tensor, not {type(values).__name__}")
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put(): argument 'indices' must be tuple of Tensors, not {type(indices).__name__}")
    for i, idx in enumerate(indices):
        if not isinstance(idx, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {type(idx).__name__}")
    return tuple(indices)


def _fill_mask(self: Tensor, indices, values: Tensor):
    """PyTorch's shortcut: one mask (other entries None) and a one-element value is a masked_fill_."""
    if numel(values._shape) != 1:
        return None
    mask, n = None, 0
    for idx in indices:
        if idx is None:
            n += 1
            continue
        if idx.dtype not in _MASK_DTYPES or mask is not None:
            return None
        mask = idx
        for j, size in enumerate(idx._shape):
            if n + j >= self.ndim or self._shape[n + j] != size:
                raise IndexError(
                    f"The shape of the mask {list(idx._shape)} at index {j} does not match the shape of the indexed "
                    f"tensor {list(self._shape)} at index {n + j}"
                )
        n += idx.ndim
    if mask is None:
        return None
    return views.view_op(mask, mask._shape + (1,) * (self.ndim - n))  # align the mask's dims with self's


def _put(self: Tensor, indices, values: Tensor, accumulate: bool) -> Tensor:
    mask = None if accumulate else _fill_mask(self, indices, values)
    if mask is not None:
        return masked_fill_op(self, mask, views.reshape(values, ()))  # converts the value's dtype, as PyTorch
    if values.dtype is not self.dtype:
        _check_put_shapes_first(self, indices, values, accumulate)
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{type_name(self.dtype)} for the destination and {type_name(values.dtype)} for the source.")
    return index_put_op(self, indices, values, accumulate)


def _check_put_shapes_first(self: Tensor, indices, values: Tensor, accumulate: bool) -> None:
    """PyTorch checks that values broadcast to the indexed shape before it checks their dtype: the
    shape check runs on meta copies (no data), and any other problem is left to the dtype error."""
    if any(isinstance(i, Tensor) and i.dtype in (dtypes.bool, dtypes.uint8) for i in indices or ()):
        return  # a mask's indexed shape depends on its data
    try:
        meta = [i.to("meta") if isinstance(i, Tensor) else i for i in indices]
        index_put_op(self.to("meta"), meta, values.to(device="meta", dtype=self.dtype), accumulate)
    except RuntimeError as exc:
        if str(exc).startswith("shape mismatch"):
            raise
    except Exception:  # noqa: BLE001 - only the shape error is wanted here
        return


def index_put_(self: Tensor, indices, values: Tensor, accumulate: bool = False) -> Tensor:
    return _put(self, _check_put_args(indices, values), values, accumulate)


def index_put(input: Tensor, indices, values: Tensor, accumulate: bool = False) -> Tensor:
    return fresh_result(_put(views.clone_op(input), _check_put_args(indices, values), values, accumulate))


# -- nonzero, masks -------------------------------------------------------------------------------

class DataDependentOutputShape(NotImplementedError):
    """A meta kernel that cannot know its output's shape without the data (nonzero, a bool mask,
    unique): capture runs such an op for real."""


def _data_dependent(what: str):
    raise DataDependentOutputShape(f"{what} has a data-dependent output shape: it cannot run on the meta device")


nonzero_op = define("nonzero(Tensor self) -> Tensor")


@nonzero_op.kernel("cpu")
def _nonzero_cpu(self: Tensor) -> Tensor:
    count = _C.count_nonzero_all(self)
    out = new_empty_tensor((count, self.ndim), dtypes.int64)
    _C.nonzero_fill(out, self)
    return out


@nonzero_op.kernel("meta")
def _nonzero_meta(self: Tensor) -> Tensor:
    _data_dependent("aten::nonzero")


nonzero_op.meta = _nonzero_meta


def nonzero(input: Tensor, *, out=None, as_tuple: bool = False):
    if isinstance(input, Tensor) and input.dtype.is_complex:
        input = ne_op(input, 0)
    if as_tuple:
        coords = nonzero_op(input if input.ndim else views.unsqueeze_op(input, 0))
        return tuple(views.select_op(coords, 1, j) for j in range(max(input.ndim, 1)))
    if isinstance(out, Tensor) and out.dtype is not dtypes.int64:
        raise RuntimeError(f"nonzero: Expected out tensor to have scalar type Long but got scalar type"
                           f"{type_name(out.dtype)}")  # sic: PyTorch's message has no space
    return write_out(nonzero_op(input), out)


def argwhere(input: Tensor) -> Tensor:
    return nonzero_op(input)


masked_fill_op = define("masked_fill_(Tensor(a!) self, Tensor mask, Tensor value) -> Tensor(a!)",
                        ("inplace",))


def _check_mask(self: Tensor, mask: Tensor, value: Tensor) -> None:
    _warn_internal_overlap(self, "masked_fill_")
    if mask.dtype is not dtypes.bool:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{_C_TYPE_NAMES.get(mask.dtype.name, mask.dtype.name)}")
    if value.ndim != 0:
        raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    shape = broadcast_shapes(self._shape, mask._shape)
    if shape != self._shape:
        raise RuntimeError(f"output with shape {list(self._shape)} doesn't match the broadcast shape {list(shape)}")


_C_TYPE_NAMES = {"uint8": "unsigned char", "int8": "signed char", "int16": "short int", "int32": "int",
                 "int64": "long int", "float16": "c10::Half", "bfloat16": "c10::BFloat16", "float32": "float",
                 "float64": "double"}


@masked_fill_op.kernel("cpu")
def _masked_fill_cpu(self: Tensor, mask: Tensor, value: Tensor) -> Tensor:
    _check_mask(self, mask, value)
    _check_partial_overlap(self, (mask,))
    _C.masked_copy(self, mask, convert(value, self.dtype))
    self._bump_version()
    return self


@masked_fill_op.kernel("meta")
def _masked_fill_meta(self: Tensor, mask: Tensor, value: Tensor) -> Tensor:
    _check_mask(self, mask, value)
    return self


masked_fill_op.meta = _masked_fill_meta


def _as_value(value, like: Tensor) -> Tensor:
    if isinstance(value, Tensor):
        return value
    check_scalar_fits(value, like.dtype)  # masked_fill/index_fill check the number (float16 1e6 raises)
    return scalar_tensor(value, dtype=like.dtype, device=like._device)


def masked_fill_(self: Tensor, mask: Tensor, value) -> Tensor:
    return masked_fill_op(self, mask, _as_value(value, self))


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    shape = broadcast_shapes(mask._shape, input._shape)  # mask first, as PyTorch's mismatch message
    base = views.expand_op(input, shape) if shape != input._shape else input
    copy = views.clone_op(base)
    if not is_contiguous(copy._shape, copy._stride):
        copy = views.contiguous(copy)  # PyTorch fills a contiguous copy whatever the input's layout
    return fresh_result(masked_fill_op(copy, mask, _as_value(value, input)))


def masked_select(input: Tensor, mask: Tensor, *, out=None) -> Tensor:
    if mask.dtype is not dtypes.bool:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = broadcast_shapes(mask._shape, input._shape)  # mask first, as PyTorch's mismatch message
    x = views.expand_op(input, shape) if input._shape != shape else input
    m = views.expand_op(mask, shape) if mask._shape != shape else mask
    if not shape:
        x, m = views.unsqueeze_op(x, 0), views.unsqueeze_op(m, 0)
    if out is not None:
        check_out_dtype(out, input.dtype, "masked_select(): self and result must have the same scalar type")
    return write_out(index_op(x, (m,)), out, distinct=(input, mask))


index_select_op = define("index_select(Tensor self, int dim, Tensor index) -> Tensor")


def _select_plan(self: Tensor, dim: int, index: Tensor):
    d = wrap_dim(dim, max(self.ndim, 1))
    if self.ndim == 0:
        return [0], [index], index._shape, [], (), 0  # a 0-d input: index must be 0
    if not index.ndim:  # a 0-d index selects as a one-element vector (the dim stays), as in PyTorch
        index = views.view_op(index, (1,))
    result = self._shape[:d] + index._shape + self._shape[d + 1:]
    return [d], [index], index._shape, [r for r in range(self.ndim) if r != d], result, d


@index_select_op.kernel("cpu")
def _index_select_cpu(self: Tensor, dim: int, index: Tensor) -> Tensor:
    x = self if self.ndim else views.unsqueeze_op(self, 0)
    dims, tensors, bshape, rest, result, pos = _select_plan(self, dim, index)
    if not self.ndim:
        index = views.view_op(index, (numel(index._shape),))
        dims, tensors, bshape, rest, result, pos = [0], [index], index._shape, [], index._shape, 0
    try:
        out = _gather(x, dims, tensors, bshape, rest, result, pos, wrap=False)
    except IndexError:
        raise IndexError("index out of range in self") from None
    return views.view_op(out, ()) if not self.ndim else out


@index_select_op.kernel("meta")
def _index_select_meta(self: Tensor, dim: int, index: Tensor) -> Tensor:
    return new_empty_tensor(_select_plan(self, dim, index)[4], self.dtype, self._device)


index_select_op.meta = _index_select_meta


def index_select(input: Tensor, dim: int, index: Tensor, *, out=None) -> Tensor:
    if not isinstance(index, Tensor):
        raise TypeError(f"index_select(): argument 'index' must be Tensor, not {type(index).__name__}")
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if index.dtype not in _INDEX_DTYPES:
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    d = wrap_dim(dim, max(input.ndim, 1))  # the dim is checked first (IndexError), as in PyTorch
    if input.ndim >= 2 and input._shape[d] == 0 and numel(index._shape):  # (1-d: IndexError, below)
        raise RuntimeError("index_select(): self indexing axis dim should be positive")
    if input.ndim == 0 and numel(index._shape) != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got {numel(index._shape)} value(s)")
    if out is not None:
        check_out_dtype(out, input.dtype, "index_select(): self and result must have the same scalar type")
    return write_out(index_select_op(input, dim, index), out, distinct=(input, index))


def take(input: Tensor, index: Tensor, *, out=None) -> Tensor:
    if not isinstance(index, Tensor):
        raise TypeError(f"take(): argument 'index' (position 1) must be Tensor, not {type(index).__name__}")
    if index.dtype is not dtypes.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {type_name(index.dtype)}")
    if out is not None:
        check_out_dtype(out, input.dtype, f"take(): self and out expected to have the same dtype, but got "
                        f"self.dtype = {type_name(input.dtype)} and out.dtype = {type_name(out.dtype)}")
    flat = views.reshape(input, (numel(input._shape),))
    try:
        return write_out(index_op(flat, (index,)), out, distinct=(input, index))
    except IndexError as e:
        bad = str(e).split()[1] if str(e).startswith("index ") else "?"
        raise IndexError(f"out of range: tried to access index {bad} on a tensor of {flat._shape[0]} elements.") from e


# -- __getitem__ / __setitem__ ----------------------------------------------------------------------

def _as_items(index) -> tuple:
    if type(index) is tuple:
        return index
    if isinstance(index, list) and len(index) < 32 and any(
        isinstance(i, (Tensor, list, tuple, slice)) or i is None or i is Ellipsis for i in index
    ):
        # PyTorch still reads such a list as a tuple of indices (NumPy's legacy rule).
        warnings.warn("Using a non-tuple sequence for multidimensional indexing is deprecated; use x[tuple(seq)] "
                      "instead of x[seq].", UserWarning, stacklevel=3)
        return tuple(index)
    return (index,)


def _list_index(seq) -> Tensor:
    if not seq:
        return new_empty_tensor((0,), dtypes.int64)
    t = tensor(seq)
    if t.dtype.is_floating_point:
        raise IndexError(_BAD_INDEX)
    return t


def _bool_index(value: bool) -> Tensor:
    """A Python bool index: a new size-1 dim indexed by [0] (True) or by nothing (False)."""
    t = new_empty_tensor((1 if value else 0,), dtypes.int64)
    if value:
        _C.fill_(t, 0)
    return t


def _index_like(item):
    """numpy integers and other objects with ``__index__``."""
    try:
        return operator.index(item)
    except TypeError:
        if isinstance(item, (str, bytes)):  # PyTorch reads a string as a sequence to make a tensor of
            raise TypeError(f"new(): invalid data type '{type(item).__name__}'") from None
        raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid "
                         f"indices (got {type(item).__name__})") from None


def _normalize(item):
    """One index item as int, slice, None, Ellipsis, bool or a tensor of ndim >= 1."""
    tp = type(item)
    if tp is int or tp is slice or tp is bool or item is None or item is Ellipsis:
        return item
    if isinstance(item, Tensor):
        if item.ndim:
            return item
        if item.dtype is dtypes.bool or item.dtype is dtypes.uint8:
            return bool(item.item())  # a 0-d mask acts like a Python bool
        if item.dtype.is_floating_point:
            raise IndexError(_BAD_INDEX)
        return int(item.item())  # a 0-d integer tensor acts like an int (a view)
    if isinstance(item, (list, tuple)):
        return _list_index(item)
    if tp is range:  # x[range(n), target] (the nn tutorial's nll): a sequence of ints, as a list
        return _list_index(list(item))
    if getattr(item, "ndim", 0) and hasattr(item, "__array__"):  # a NumPy array: a tensor index, as in PyTorch

        return _normalize(as_tensor(item))
    return _index_like(item)


def _slice_indices(item: slice, size):
    """``item.indices(size)``, keeping a symbolic size or bound (an int subclass: compile's SymInt,
    under export) symbolic: the bounds are then arithmetic on it, not plain ints."""
    if type(size) is int and all(type(b) is int or b is None for b in (item.start, item.stop, item.step)):
        return item.indices(size)
    step = 1 if item.step is None else operator.index(item.step)
    hook = views.SYMBOLIC_SLICE_BOUNDS[0]
    if hook is not None and step > 0:
        bounds = hook(size, item.start, item.stop)
        if bounds is not None:
            return (*bounds, step)

    def bound(v, default):
        if v is None:
            return default
        if not isinstance(v, int):  # operator.index would turn a SymInt bound into a plain int
            v = operator.index(v)
        if v < 0:
            v = v + size
            return v if v >= 0 else 0
        return v if v <= size else size

    if step < 0:
        return slice(item.start, item.stop, step).indices(int(size))
    return bound(item.start, 0), bound(item.stop, size), step


def _apply(self: Tensor, items: tuple):
    """Applies the basic items as views; returns (view, aligned index list or None)."""
    ndim = self.ndim
    items = [_normalize(i) for i in items]
    specified = 0
    for item in items:
        tp = type(item)
        if tp is int or tp is slice:
            specified += 1
        elif isinstance(item, Tensor):
            specified += item.ndim if item.dtype in _MASK_DTYPES else 1
    if specified > ndim:
        if ndim == 0:
            raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` "
                             "in C++ to convert a 0-dim tensor to a number")
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    result = self
    dim = 0  # dim of `result` the next item applies to
    real = 0  # dim of `self` (for error messages)
    indices = None
    shift = 0  # a mask takes one slot of the index list for all its dims
    for item in items:
        tp = type(item)
        if tp is slice:
            size = result._shape[dim]
            step = 1 if item.step is None else operator.index(item.step)
            if step <= 0:
                raise ValueError("slice step cannot be zero" if step == 0 else "step must be greater than zero")
            start, stop, _ = _slice_indices(slice(item.start, item.stop, step), size)
            if start != 0 or stop != size or step != 1:
                result = views.slice_op(result, dim, start, stop, step)
            dim += 1
            real += 1
            continue
        if tp is int:
            size = result._shape[dim]
            if item < -size or item >= size:
                check_int64_arg(item)
                raise IndexError(f"index {item} is out of bounds for dimension {real} with size {size}")
            result = views.select_op(result, dim, item)
            real += 1
            continue
        if item is None:
            result = views.unsqueeze_op(result, dim)
            dim += 1
            continue
        if item is Ellipsis:  # as PyTorch, every Ellipsis expands (to 0 dims once the dims are used up)
            dim += ndim - specified
            real += ndim - specified
            continue
        if tp is bool:  # a new size-1 dim, indexed by [0] (True) or by nothing (False)
            result = views.unsqueeze_op(result, dim)
            item, k = _bool_index(item), 0
        else:
            _check_index_dtype(item)
            k = item.ndim if item.dtype in _MASK_DTYPES else 1
        if indices is None:
            indices = []
        pos = dim - shift
        indices.extend([None] * (pos - len(indices)))
        indices.append(item)
        shift += max(k, 1) - 1
        dim += max(k, 1)
        real += k
    if result is self and indices is None:
        result = views.alias_op(self)
    return result, indices


def _getitem(self: Tensor, index):
    # Fast paths for the most common single items: pure metadata.
    if type(index) is int:
        if self.ndim == 0:
            _apply(self, (index,))
        size = self._shape[0]
        if index < -size or index >= size:
            check_int64_arg(index)
            raise IndexError(f"index {index} is out of bounds for dimension 0 with size {size}")
        return views.select_op(self, 0, index)
    if type(index) is slice and self.ndim:
        if index.step is None and type(index.start) in (int, type(None)) and type(index.stop) in (int, type(None)):
            size = self._shape[0]
            start, stop, _ = _slice_indices(index, size)
            return views.slice_op(self, 0, start, stop, 1)
        return _apply(self, (index,))[0]
    if isinstance(index, Tensor) and index.ndim and index.dtype in _INDEX_DTYPES:
        return index_op(self, (index,))
    result, indices = _apply(self, _as_items(index))
    if indices is None:
        return result
    return index_op(result, indices)


def _strip_leading_ones(value: Tensor) -> Tensor:
    # PyTorch drops the value's leading size-1 dims before broadcasting it to the target.
    while value.ndim and value._shape[0] == 1:
        value = views.select_op(value, 0, 0)
    return value


def _is_numpy_scalar(value) -> bool:
    cls = type(value)
    return cls.__module__ == "numpy" and hasattr(value, "dtype") and getattr(value, "ndim", None) == 0


def _overflows_half_type(value, dtype) -> bool:
    """A number too large for a float16/bfloat16 tensor: PyTorch's x[...] = v writes inf there (it
    copies a 0-d tensor in) where fill_ raises, so such a value is copied, not filled."""
    if dtype not in (dtypes.float16, dtypes.bfloat16):
        return False
    try:
        check_scalar_fits(value, dtype)
    except RuntimeError:
        return True
    return False


def _setitem(self: Tensor, index, value) -> None:
    if index is False:
        return  # PyTorch: selects nothing, writes nothing
    if index is True:
        index = None  # PyTorch copies into the whole tensor, converting the value like basic indexing
    view, indices = _apply(self, _as_items(index))
    if not isinstance(value, Tensor):
        if isinstance(value, (bool, int, float)):
            if indices is None and not _overflows_half_type(value, self.dtype):
                _check_internal_overlap(view)  # PyTorch copies the number in: an expanded view is refused
                views.fill_(view, value)
                return

            value = scalar_tensor(value, dtype=self.dtype, device=self._device)
        elif isinstance(value, complex) or _is_numpy_scalar(value):  # NumPy scalars: docs/deviations.md
            if isinstance(value, complex) and not (self.dtype.is_complex or self.dtype is dtypes.bool):
                check_scalar_fits(value, self.dtype)  # x[0] = 1j on a real tensor: PyTorch's RuntimeError
                value = value.real
            value = tensor(value, dtype=self.dtype, device=self._device)
        else:
            # PyTorch assigns only tensors and numbers (a list, an array, None: TypeError).
            cls = type(value)
            name = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
            raise TypeError(f"can't assign a {name} to a {self.type()}")
    if indices is None:
        src = value if value._shape == view._shape else _strip_leading_ones(value)
        if src._shape != view._shape:
            # As PyTorch's setitem: the value broadcast to the view first; a broadcast source (stride 0) is
            # exempt from copy_'s partial-overlap check (x[1:] = x[0] is fine).
            src = views.expand_op(src, view._shape)
        views.copy_(view, src)
        return
    _put(view, indices, _strip_leading_ones(value), False)


# Basic items (ints, slices, None, Ellipsis) are read natively (csrc/common/fast_index.cpp) and
# chain the same view ops; anything else falls back to _getitem.
Tensor.__getitem__ = _C.FastFront(views.select_op, 17, _getitem)
Tensor.__setitem__ = _setitem


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
argwhere                    function method
index_put                   function method
index_put_                  function method
index_select                function method
masked_fill                 function method
masked_fill_                function method
masked_select               function method
nonzero                     function method
take                        function method
""")
