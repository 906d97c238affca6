"""Op family: sorting and searching. sort, argsort, topk, kthvalue, median, nanmedian, mode,
unique, unique_consecutive, searchsorted, bucketize, histc, bincount.

The native kernels (csrc/cpu/sort.cpp) order every dtype through one order-preserving key
(NaN largest, -0.0 == 0.0) and sort stably, so ``stable=False`` gives the stable result too.
float16/bfloat16 are handled as float32: the conversion is exact both ways.
"""

from __future__ import annotations

import operator

from ... import dtypes
from ..._native import _C
from ...dispatch import define
from ...optable import declare
from ...shapes import numel, wrap_dim
from ...tensor import Tensor, new_empty_tensor
from .._common import HALF_TYPES, convert, return_type, type_meta_name, type_name, write_out
from ..creation.factories import full, scalar_tensor
from ..shape import views
from .subscripts import DataDependentOutputShape, index_select

# PyTorch's torch.return_types: tuples with named fields.
sort_result = return_type("sort", ["values", "indices"])
topk_result = return_type("topk", ["values", "indices"])
kthvalue_result = return_type("kthvalue", ["values", "indices"])
median_result = return_type("median", ["values", "indices"])
nanmedian_result = return_type("nanmedian", ["values", "indices"])
mode_result = return_type("mode", ["values", "indices"])


def _write_pair(result_type, pair, out, input=None):
    """``out=(values, indices)`` for the ops returning both (values must not partially overlap input)."""
    if out is None:
        return result_type(*pair)
    write_out(pair[0], out[0], (input,), exact_dtype=True)
    write_out(pair[1], out[1], exact_dtype=True)
    return result_type(out[0], out[1])


def _work(t: Tensor) -> Tensor:
    if t.dtype.is_complex:  # complex numbers have no order
        raise RuntimeError(" Sort does not support complex dtypes on CPU")  # PyTorch's text, space included
    return convert(t, dtypes.float32) if t.dtype in HALF_TYPES else t


def _pair(self: Tensor, shape: tuple, dtype=None):
    return (new_empty_tensor(shape, dtype or self.dtype, self._device),
            new_empty_tensor(shape, dtypes.int64, self._device))


def _back(values: Tensor, dtype) -> Tensor:
    return convert(values, dtype) if values.dtype is not dtype else values


def _declare(schema: str, cpu, meta):
    op = define(schema)
    op.kernels["cpu"] = cpu
    op.kernels["meta"] = meta
    op.meta = meta
    return op


# -- sort / argsort ----------------------------------------------------------------------------------

def _sort_meta(self: Tensor, *, stable=None, dim: int = -1, descending: bool = False):
    if self.dtype.is_complex:
        _work(self)  # raises
    wrap_dim(dim, max(self.ndim, 1))
    return _pair(self, self._shape)


def _sort_cpu(self: Tensor, *, stable=None, dim: int = -1, descending: bool = False):
    d = wrap_dim(dim, max(self.ndim, 1))
    work = _work(self)
    values, indices = _pair(work, self._shape)
    if self.ndim == 0:
        _C.copy_(values, work)
        _C.fill_(indices, 0)
    else:
        _C.sort(values, indices, work, d, bool(descending))
    return _back(values, self.dtype), indices


sort_op = _declare("sort(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> (Tensor, Tensor)",
                   _sort_cpu, _sort_meta)


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool | None = False, *, out=None):
    """Sorts along ``dim`` (NaN largest); returns (values, indices)."""
    return _write_pair(sort_result, sort_op(input, stable=stable, dim=dim, descending=descending), out, input)


def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    return sort_op(input, stable=stable, dim=dim, descending=descending)[1]


def msort(input: Tensor, *, out=None) -> Tensor:
    return write_out(sort_op(input, stable=False, dim=0, descending=False)[0], out, (input,))


# -- topk, kthvalue, median, mode -------------------------------------------------------------------

def _reduced_shape(self: Tensor, d: int, keepdim: bool, size: int = 1) -> tuple:
    if not self.ndim:
        return ()
    shape = list(self._shape)
    if keepdim or size != 1:
        shape[d] = size
    else:
        del shape[d]
    return tuple(shape)


def _topk_check(self: Tensor, k: int, dim: int) -> int:
    d = wrap_dim(dim, max(self.ndim, 1))
    size = self._shape[d] if self.ndim else 1
    if not 0 <= k <= size:
        raise RuntimeError("selected index k out of range")
    return d


def _topk_meta(self: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    d = _topk_check(self, k, dim)
    shape = list(self._shape)
    if shape:
        shape[d] = k
    return _pair(self, tuple(shape))


def _topk_cpu(self: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    d = _topk_check(self, k, dim)
    work = _work(self)
    values, indices = _topk_meta(work, k, dim)
    if self.ndim == 0:
        _C.copy_(values, work)
        _C.fill_(indices, 0)
    else:
        _C.topk(values, indices, work, k, d, bool(largest))
    return _back(values, self.dtype), indices


topk_op = _declare("topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor, Tensor)",
                   _topk_cpu, _topk_meta)


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True, *, out=None):
    """The ``k`` largest (or smallest) elements along ``dim``, best first."""
    if input.dtype is dtypes.bool:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    return _write_pair(topk_result, topk_op(input, operator.index(k), dim, largest, sorted), out, input)


_KIND = {"kthvalue": 0, "median": 1, "nanmedian": 2}


def _select_meta(self: Tensor, dim: int, keepdim: bool, k: int, name: str):
    if self.dtype is dtypes.bool:  # PyTorch's kernels have no bool instance (its names for them)
        kernel = "kthvalue_cpu" if name == "kthvalue" else "median_out"
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")
    d = wrap_dim(dim, max(self.ndim, 1))
    size = self._shape[d] if self.ndim else 1
    if size == 0:  # checked before k, as PyTorch does (IndexError, not k's RuntimeError)
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    if name == "kthvalue" and not 0 <= k < size:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    return d, _pair(self, _reduced_shape(self, d, keepdim))


def _select_cpu(self: Tensor, dim: int, keepdim: bool, k: int, name: str):
    d, (values, indices) = _select_meta(self, dim, keepdim, k, name)
    work = _work(self)
    kept = _pair(work, _reduced_shape(self, d, True))
    if self.ndim == 0:
        _C.copy_(kept[0], work)
        _C.fill_(kept[1], 0)
    elif numel(self._shape):
        _C.select_kth(kept[0], kept[1], work, d, k, _KIND[name])
    vals, idx = (views.reshape(kept[0], values._shape), views.reshape(kept[1], indices._shape))
    return _back(vals, self.dtype), idx


kthvalue_op = _declare(
    "kthvalue(Tensor self, int k, int dim=-1, bool keepdim=False) -> (Tensor, Tensor)",
    lambda self, k, dim=-1, keepdim=False: _select_cpu(self, dim, keepdim, k - 1, "kthvalue"),
    lambda self, k, dim=-1, keepdim=False: _select_meta(self, dim, keepdim, k - 1, "kthvalue")[1],
)
median_op = _declare(
    "median(Tensor self, int dim, bool keepdim=False) -> (Tensor, Tensor)",
    lambda self, dim, keepdim=False: _select_cpu(self, dim, keepdim, 0, "median"),
    lambda self, dim, keepdim=False: _select_meta(self, dim, keepdim, 0, "median")[1],
)
nanmedian_op = _declare(
    "nanmedian(Tensor self, int dim, bool keepdim=False) -> (Tensor, Tensor)",
    lambda self, dim, keepdim=False: _select_cpu(self, dim, keepdim, 0, "nanmedian"),
    lambda self, dim, keepdim=False: _select_meta(self, dim, keepdim, 0, "nanmedian")[1],
)


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False, *, out=None):
    """The ``k``-th smallest element along ``dim`` (1-based ``k``) and its index."""
    return _write_pair(kthvalue_result, kthvalue_op(input, operator.index(k), dim, keepdim), out, input)


def _median_all(input: Tensor, op, name: str) -> Tensor:
    if input.dtype is dtypes.bool:
        raise NotImplementedError("\"median_cpu\" not implemented for 'Bool'")
    if numel(input._shape) == 0:
        return full((), float("nan"), dtype=input.dtype, device=input._device)
    return op(views.reshape(input, (-1,)), 0)[0]


def median(input: Tensor, dim=None, keepdim: bool = False, *, out=None):
    """The lower median: of all elements (dim=None) or along ``dim`` with its index. NaN propagates."""
    if dim is None:
        return write_out(_median_all(input, median_op, "median"), out)
    return _write_pair(median_result, median_op(input, dim, keepdim), out, input)


def nanmedian(input: Tensor, dim=None, keepdim: bool = False, *, out=None):
    """median ignoring NaN values (NaN only where a whole slice is NaN)."""
    if dim is None:
        return write_out(_median_all(input, nanmedian_op, "nanmedian"), out)
    return _write_pair(nanmedian_result, nanmedian_op(input, dim, keepdim), out, input)


def _mode_meta(self: Tensor, dim: int = -1, keepdim: bool = False):
    return _select_meta(self, dim, keepdim, 0, "mode")[1]


def _mode_cpu(self: Tensor, dim: int = -1, keepdim: bool = False):
    d, (values, indices) = _select_meta(self, dim, keepdim, 0, "mode")
    work = _work(self)
    kept = _pair(work, _reduced_shape(self, d, True))
    if self.ndim == 0:
        _C.copy_(kept[0], work)
        _C.fill_(kept[1], 0)
    elif numel(self._shape):
        _C.mode(kept[0], kept[1], work, d)
    return _back(views.reshape(kept[0], values._shape), self.dtype), views.reshape(kept[1], indices._shape)


mode_op = _declare("mode(Tensor self, int dim=-1, bool keepdim=False) -> (Tensor, Tensor)", _mode_cpu, _mode_meta)


def mode(input: Tensor, dim: int = -1, keepdim: bool = False, *, out=None):
    """The most frequent value along ``dim`` (the smallest on ties) and an index where it occurs.

    PyTorch's choice among a value's positions depends on its unstable sort; ember gives the last one.
    """
    return _write_pair(mode_result, mode_op(input, dim, keepdim), out, input)


# -- unique ------------------------------------------------------------------------------------------

def _data_dependent(*args, **kwargs):
    raise DataDependentOutputShape("unique has a data-dependent output shape: it cannot run on the meta device")


def _group_rows(rows: Tensor, sort_rows: bool):
    """(first position, inverse, counts) of the groups of equal rows of a 2-d tensor."""
    work = views.contiguous(_work(rows))
    n = rows._shape[0]
    first, inverse, counts = (new_empty_tensor((n,), dtypes.int64) for _ in range(3))
    groups = _C.unique_rows(first, inverse, counts, work, bool(sort_rows))
    return views.narrow(first, 0, 0, groups), inverse, views.narrow(counts, 0, 0, groups)


def _unique_cpu(self: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
                dim=None, consecutive: bool = False):
    if dim is None:
        if numel(self._shape) == 0:
            empty = new_empty_tensor((0,), dtypes.int64, self._device)
            return new_empty_tensor((0,), self.dtype, self._device), views.reshape(empty, self._shape), empty
        flat = views.reshape(self, (-1, 1))
        first, inverse, counts = _group_rows(flat, not consecutive)
        values = index_select(views.reshape(flat, (-1,)), 0, first)
        return values, views.reshape(inverse, self._shape), counts
    d = wrap_dim(dim, max(self.ndim, 1))
    if self.ndim and self._shape[d] == 0:
        return views.clone_op(self), new_empty_tensor((0,), dtypes.int64), new_empty_tensor((0,), dtypes.int64)
    moved = views.movedim(self, d, 0) if self.ndim else views.reshape(self, (1,))
    rows = (
        views.reshape(moved, (moved._shape[0], -1))
        if numel(moved._shape)
        else views.reshape(moved, (moved._shape[0], 0))
    )
    first, inverse, counts = _group_rows(rows, not consecutive)
    values = index_select(self, d, first) if self.ndim else views.clone_op(self)
    return values, inverse, counts


unique_op = _declare(
    "_unique2(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False, int? dim=None, "
    "bool consecutive=False) -> (Tensor, Tensor, Tensor)", _unique_cpu, _data_dependent)


def _unique_result(result, return_inverse: bool, return_counts: bool):
    values, inverse, counts = result
    if return_inverse and return_counts:
        return values, inverse, counts
    if return_inverse:
        return values, inverse
    if return_counts:
        return values, counts
    return values


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
           dim: int | None = None):
    """The distinct values (or slices along ``dim``), sorted, with optional inverse and counts."""
    return _unique_result(unique_op(input, sorted, return_inverse, return_counts, dim, False),
                          return_inverse, return_counts)


def unique_consecutive(input: Tensor, return_inverse: bool = False, return_counts: bool = False,
                       dim: int | None = None):
    """Collapses runs of equal consecutive values (or slices along ``dim``)."""
    return _unique_result(unique_op(input, True, return_inverse, return_counts, dim, True),
                          return_inverse, return_counts)


# -- searchsorted, bucketize ---------------------------------------------------------------------------

def _search_plan(seq: Tensor, values: Tensor, side, right: bool, sorter):
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side of left "
                               "while right was True")
        right = side == "right"
    if seq.ndim == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions "
                           "of boundaries tensor and input value tensor must match, but we got boundaries tensor "
                           f"{list(seq._shape)} and input value tensor {list(values._shape)}")
    if seq.ndim > 1 and (values.ndim != seq.ndim or values._shape[:-1] != seq._shape[:-1]):
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions "
                           "of boundaries tensor and input value tensor must match, but we got boundaries tensor "
                           f"{list(seq._shape)} and input value tensor {list(values._shape)}")
    if sorter is not None:
        if sorter.dtype is not dtypes.int64:
            raise RuntimeError("torch.searchsorted(): sorter must be a tensor of long dtype but it got "
                               f"{type_name(sorter.dtype)}")
        if sorter._shape != seq._shape:
            raise RuntimeError("torch.searchsorted(): boundary and sorter must have the same size, but got boundary "
                               f"tensor {list(seq._shape)}and got sorter tensor {list(sorter._shape)}")
    return bool(right)


def _searchsorted_cpu(sorted_sequence: Tensor, self: Tensor, *, out_int32: bool = False, right: bool = False,
                      side=None, sorter=None) -> Tensor:
    right = _search_plan(sorted_sequence, self, side, right, sorter)
    common = dtypes.promote_types(sorted_sequence.dtype, self.dtype)
    seq, values = _work(convert(sorted_sequence, common)), _work(convert(self, common))
    out = new_empty_tensor(self._shape, dtypes.int32 if out_int32 else dtypes.int64, self._device)
    m = sorted_sequence._shape[-1]
    rows = 1 if sorted_sequence.ndim == 1 else numel(sorted_sequence._shape[:-1])
    seq2 = views.contiguous(views.reshape(seq, (rows, m)))
    value_rows = rows if sorted_sequence.ndim > 1 else 1
    vals2 = views.contiguous(views.reshape(values, (value_rows, numel(self._shape) // value_rows if value_rows else 0)))
    out2 = views.reshape(out, vals2._shape)
    srt = None if sorter is None else views.contiguous(views.reshape(sorter, (rows, m)))
    _C.searchsorted(out2, seq2, vals2, srt, right)
    return out


def _searchsorted_meta(sorted_sequence: Tensor, self: Tensor, *, out_int32: bool = False, right: bool = False,
                       side=None, sorter=None) -> Tensor:
    _search_plan(sorted_sequence, self, side, right, sorter)
    return new_empty_tensor(self._shape, dtypes.int32 if out_int32 else dtypes.int64, self._device)


searchsorted_op = _declare(
    "searchsorted(Tensor sorted_sequence, Tensor self, *, bool out_int32=False, bool right=False, str? side=None, "
    "Tensor? sorter=None) -> Tensor", _searchsorted_cpu, _searchsorted_meta)


def _as_tensor(value, like: Tensor) -> Tensor:
    if isinstance(value, Tensor):
        return value

    return scalar_tensor(value, dtype=dtypes.scalar_dtype(value), device=like._device)


def searchsorted(sorted_sequence: Tensor, input, *, out_int32: bool = False, right: bool = False, side=None,
                 out=None, sorter=None) -> Tensor:
    """Indices where ``input`` would be inserted into the innermost dim of ``sorted_sequence``."""
    result = searchsorted_op(sorted_sequence, _as_tensor(input, sorted_sequence), out_int32=out_int32, right=right,
                             side=side, sorter=sorter)
    if isinstance(out, Tensor) and out.dtype is not result.dtype:
        raise RuntimeError(f"torch.searchsorted(): output tensor's dtype is wrong, it can only be Int(int32) or "
                           f"Long(int64) depending on whether out_int32 flag is True, but we got output tensor's "
                           f"dtype {type_name(out.dtype)} and out_int32 flag is {bool(out_int32)}")
    return write_out(result, out)


def bucketize(input, boundaries: Tensor, *, out_int32: bool = False, right: bool = False, out=None) -> Tensor:
    """The bucket of each element of ``input`` given 1-d sorted ``boundaries``."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right, out=out)


# -- histc, bincount -------------------------------------------------------------------------------------

def _histc_check(self: Tensor, bins: int, min, max) -> None:
    if not self.dtype.is_floating_point:
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{type_name(self.dtype)}'")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    if min > max:
        raise RuntimeError("torch.histc: max must be larger than min")


def _histc_cpu(self: Tensor, bins: int = 100, min=0, max=0) -> Tensor:
    _histc_check(self, bins, min, max)
    work = views.contiguous(_work(self))
    out = new_empty_tensor((bins,), work.dtype, self._device)
    try:
        _C.histc(out, work, bins, float(min), float(max))
    except RuntimeError as e:
        raise RuntimeError(str(e).replace("torch.histogram", "torch.histc")) from None
    return _back(out, self.dtype)


def _histc_meta(self: Tensor, bins: int = 100, min=0, max=0) -> Tensor:
    _histc_check(self, bins, min, max)
    return new_empty_tensor((bins,), self.dtype, self._device)


histc_op = _declare("histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor", _histc_cpu, _histc_meta)


def histc(input: Tensor, bins: int = 100, min=0, max=0, *, out=None) -> Tensor:
    """Histogram with ``bins`` equal bins over [min, max] (the data range when min == max)."""
    if isinstance(out, Tensor) and isinstance(input, Tensor) and out.dtype is not input.dtype:
        raise RuntimeError(f"torch.histogram: input tensor and hist tensor should have the same dtype, but got input "
                           f"{type_meta_name(input.dtype)} and hist {type_meta_name(out.dtype)}")
    return write_out(histc_op(input, bins, min, max), out, overlap=False)


def _bincount_cpu(self: Tensor, weights=None, minlength: int = 0) -> Tensor:
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if self.ndim != 1 or self.dtype.is_floating_point or self.dtype is dtypes.bool:
        if self.dtype.is_floating_point:
            raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{type_name(self.dtype)}'")
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and (weights.ndim != 1 or weights._shape[0] != self._shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    size = max(_C.bincount_size(self), minlength)
    if weights is None:
        out_dtype = dtypes.int64
    else:
        out_dtype = weights.dtype if weights.dtype.is_floating_point else dtypes.float64
    work_dtype = dtypes.float32 if out_dtype in HALF_TYPES else out_dtype
    out = new_empty_tensor((size,), work_dtype, self._device)
    w = None if weights is None else views.contiguous(convert(weights, work_dtype))
    _C.bincount(out, views.contiguous(convert(self, dtypes.int64)), w)
    return _back(out, out_dtype)


bincount_op = _declare("bincount(Tensor self, Tensor? weights=None, int minlength=0) -> Tensor", _bincount_cpu,
                       lambda *args, **kwargs: _data_dependent())


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """Counts of each non-negative integer in ``input`` (weighted sums with ``weights``)."""
    return bincount_op(input, weights, minlength)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
argsort                     function method
bincount                    function method
bucketize                   function method
histc                       function method
kthvalue                    function method
median                      function method
mode                        function method
msort                       function method
nanmedian                   function method
searchsorted                function method
sort                        function method
topk                        function method
unique                      function method
unique_consecutive          function method
""")
