"""Op family: gather and scatter. gather, scatter(_add/_reduce), index_add/copy/fill, masked_scatter.

One native scatter kernel serves every writing op here: ``index_add``/``index_copy``/
``index_fill`` pass their 1-d index viewed along ``dim`` and expanded (stride 0) over the
source's shape, so they become scatters. The kernel walks each row along ``dim`` on one
thread, which keeps duplicate indices exact (see csrc/cpu/scatter.cpp).
The out-of-place forms clone ``self`` and run the in-place op.
"""

from __future__ import annotations

from ... import dtypes
from ..._native import _C
from ...autocast import composite as _autocast_composite
from ...device import META
from ...dispatch import define
from ...optable import declare
from ...shapes import broadcast_shapes, numel, wrap_dim
from ...tensor import Tensor, make_view, new_empty_tensor
from .._common import HALF_TYPES, convert, fresh_result, type_name, write_out
from .._common import check_internal_overlap as _check_internal_overlap
from .._common import check_no_overlap as _check_no_overlap
from ..pointwise.elementwise import add, mul, where
from ..shape import views
from .subscripts import _as_value

_REDUCE_CODES = {"sum": 1, "prod": 2, "mean": 3, "amax": 4, "amin": 5}
# scatter_reduce's kernel also takes "max" and "min" for amax/amin, as PyTorch's forward does (its
# backward refuses them: autograd/formulas/scatter.py)
_SCATTER_REDUCE_CODES = dict(_REDUCE_CODES, max=4, min=5)
_LEGACY_REDUCE = {"add": "sum", "multiply": "prod"}
_INDEX_DTYPES = (dtypes.int64, dtypes.int32)


def _shape_str(t: Tensor) -> str:
    return str(list(t._shape))


def _check_gather(self: Tensor, dim: int, index: Tensor) -> int:
    d = wrap_dim(dim, max(self.ndim, 1))
    if index.dtype not in _INDEX_DTYPES:
        raise RuntimeError("gather(): Expected dtype int32/int64 for index")
    if max(index.ndim, 1) != max(self.ndim, 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    if numel(index._shape):
        for i in range(self.ndim):
            if i != d and index._shape[i] > self._shape[i]:
                raise RuntimeError(f"Size does not match at dimension {i} expected index {_shape_str(index)} to be "
                                   f"no larger than self {_shape_str(self)} apart from dimension {d}")
    return d


def _check_scatter(self: Tensor, dim: int, index: Tensor, src: Tensor, name: str = "scatter") -> int:
    d = wrap_dim(dim, max(self.ndim, 1))
    # PyTorch's scatter_add/scatter_reduce share scatter's dtype checks and their "scatter():" prefix
    if index.dtype not in _INDEX_DTYPES:
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    if src.dtype is not self.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if max(index.ndim, 1) != max(self.ndim, 1) or max(src.ndim, 1) != max(self.ndim, 1):
        other = "self" if max(index.ndim, 1) != max(self.ndim, 1) else "src"
        raise RuntimeError(f"Index tensor must have the same number of dimensions as {other} tensor")
    if numel(index._shape):
        ishape, sshape = index._shape or (1,), src._shape or (1,)
        for i in range(len(ishape)):
            if (i != d and ishape[i] > (self._shape or (1,))[i]) or ishape[i] > sshape[i]:
                raise RuntimeError(f"Expected index {_shape_str(index)} to be no larger than self {_shape_str(self)} "
                                   f"apart from dimension {d} and to be no larger size than src {_shape_str(src)}")
    return d


# -- gather --------------------------------------------------------------------------------------

gather_op = define("gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor")


@gather_op.kernel("cpu")
def _gather_cpu(self: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    d = _check_gather(self, dim, index)
    out = new_empty_tensor(index._shape, self.dtype, self._device)
    _C.gather(_as_1d(out), _as_1d(self), _as_1d(index), d)
    return out


@gather_op.kernel("meta")
def _gather_meta(self: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    _check_gather(self, dim, index)
    return new_empty_tensor(index._shape, self.dtype, self._device)


gather_op.meta = _gather_meta


def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False, out=None) -> Tensor:
    """Values of ``input`` along ``dim`` at ``index`` (the result has index's shape)."""
    return write_out(gather_op(input, dim, index, sparse_grad=sparse_grad), out, (index,), distinct=(input,),
                     exact_dtype=True)


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None, *, out=None) -> Tensor:
    if indices.dtype is not dtypes.int64:
        raise RuntimeError("torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{type_name(indices.dtype)}")
    if dim is None:
        return write_out(gather(views.reshape(input, (-1,)), 0, views.reshape(indices, (-1,))), out)
    if input.ndim != indices.ndim:
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same number of dimensions, "
                           f"but got {input.ndim} dimensions for input, and {indices.ndim} dimensions for indices")
    d = wrap_dim(dim, max(input.ndim, 1))
    # Every dim but `dim` broadcasts between input and indices.
    shape_in, shape_idx = list(input._shape), list(indices._shape)
    if input.ndim:
        shape_in[d], shape_idx[d] = 1, 1
    common = list(broadcast_shapes(tuple(shape_in), tuple(shape_idx)))
    in_shape, idx_shape = list(common), list(common)
    if input.ndim:
        in_shape[d], idx_shape[d] = input._shape[d], indices._shape[d]
    return write_out(
        gather(views.expand_op(input, tuple(in_shape)), d, views.expand_op(indices, tuple(idx_shape))), out
    )


# -- the scattering ops (in place) -----------------------------------------------------------------

def _as_1d(t: Tensor) -> Tensor:
    """A 0-d tensor as the one-element vector PyTorch's gather/scatter kernels read it as (self,
    index and src of a 1-d self may be 0-d there); other tensors unchanged."""
    return t if t.ndim else make_view(t, (1,), (1,), t._offset)


def _run_scatter(self: Tensor, d: int, index: Tensor, src: Tensor, code: int, include_self: bool = True) -> Tensor:
    if self._device is META:
        return self
    if self.dtype.is_complex:
        raise NotImplementedError(f"scatter: complex tensors are not supported yet (got {self.dtype})")
    work = convert(self, dtypes.float32) if self.dtype in HALF_TYPES else self
    src = convert(src, work.dtype)
    if src._storage is self._storage:
        src = views.clone_op(src)  # reading what we write
    counts = None
    if code == 3:
        counts = new_empty_tensor(self._shape, dtypes.int64)
        _C.fill_(counts, 1)
    if counts is not None:
        counts = _as_1d(counts)
    _C.scatter(_as_1d(work), d, _as_1d(index), _as_1d(src), code, bool(include_self), counts)
    if work is not self:
        _C.copy_(self, work)
    self._bump_version()
    return self


scatter_inplace_op = define(
    "scatter_(Tensor(a!) self, int dim, Tensor index, Tensor src, *, str? reduce=None) -> Tensor(a!)", ("inplace",)
)
scatter_add_inplace_op = define(
    "scatter_add_(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)", ("inplace",)
)
scatter_reduce_inplace_op = define(
    "scatter_reduce_(Tensor(a!) self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) "
    "-> Tensor(a!)", ("inplace",)
)


def _check_written(self: Tensor, inputs=(), internal: bool = True) -> None:
    """PyTorch's memory-overlap checks of these ops (real devices only): no input (src, index) may overlap
    self, even fully; ``internal``: self must not be expanded either."""
    if self._device is not META:
        if internal:
            _check_internal_overlap(self)
        _check_no_overlap(self, inputs)


def _legacy_code(reduce) -> int:
    if reduce is None:
        return 0
    if reduce not in _LEGACY_REDUCE:
        raise RuntimeError("reduce argument must be either add or multiply.")
    return _REDUCE_CODES[_LEGACY_REDUCE[reduce]]


def _scatter_kernel(self, dim, index, src, *, reduce=None):
    d = _check_scatter(self, dim, index, src)
    _check_written(self, (src, index))
    return _run_scatter(self, d, index, src, _legacy_code(reduce))


def _scatter_add_kernel(self, dim, index, src):
    d = _check_scatter(self, dim, index, src, "scatter_add")
    _check_written(self, (src, index))
    return _run_scatter(self, d, index, src, 1)


def _scatter_reduce_kernel(self, dim, index, src, reduce, *, include_self=True):
    if reduce not in _SCATTER_REDUCE_CODES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    d = _check_scatter(self, dim, index, src, "scatter_reduce")
    if reduce == "mean" and self.dtype is dtypes.bool:
        raise NotImplementedError("\"scatter_gather_tensor_cpu_reduce_mean\" not implemented for 'Bool'")
    _check_written(self, (src, index))
    return _run_scatter(self, d, index, src, _SCATTER_REDUCE_CODES[reduce], include_self)


for _op, _fn in ((scatter_inplace_op, _scatter_kernel), (scatter_add_inplace_op, _scatter_add_kernel),
                 (scatter_reduce_inplace_op, _scatter_reduce_kernel)):
    _op.kernels["cpu"] = _fn
    _op.kernels["meta"] = _fn  # _run_scatter only validates on meta
    _op.meta = _fn


def _value_src(self: Tensor, index: Tensor, value) -> Tensor:
    """A scalar (or 0-d tensor) value as a src of index's shape that reads one element."""
    v = convert(_as_value(value, self), self.dtype)
    return views.expand_op(views.reshape(v, ()), index._shape)


def scatter_(self: Tensor, dim: int, index: Tensor, src=None, *, value=None, reduce=None) -> Tensor:
    if src is None:
        src = value
    if not isinstance(src, Tensor):
        src = _value_src(self, index, src)
    elif reduce is not None:
        import warnings

        warnings.warn("The reduce argument of torch.scatter with Tensor src is deprecated and will be removed in a "
                      "future PyTorch release. Use torch.scatter_reduce instead for more reduction options.",
                      UserWarning, stacklevel=2)
    return scatter_inplace_op(self, dim, index, src, reduce=reduce)


def scatter(input: Tensor, dim: int, index: Tensor, src=None, *, value=None, reduce=None, out=None) -> Tensor:
    """``input`` with ``src`` (a tensor or a scalar value) written along ``dim`` at ``index``."""
    return write_out(fresh_result(scatter_(views.clone_op(input), dim, index, src, value=value, reduce=reduce)), out)


def scatter_add_(self: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    return scatter_add_inplace_op(self, dim, index, src)


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor, *, out=None) -> Tensor:
    return write_out(fresh_result(scatter_add_inplace_op(views.clone_op(input), dim, index, src)), out)


def scatter_reduce_(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                    include_self: bool = True) -> Tensor:
    return scatter_reduce_inplace_op(self, dim, index, src, reduce, include_self=include_self)


def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *, include_self: bool = True,
                   out=None) -> Tensor:
    result = scatter_reduce_inplace_op(views.clone_op(input), dim, index, src, reduce, include_self=include_self)
    return write_out(fresh_result(result), out)


# -- index_add / index_copy / index_fill: scatters with an index expanded along dim ---------------

def _check_index_vector(name: str, index: Tensor) -> None:
    if index.ndim > 1:
        raise IndexError(f"{name}(): Index is supposed to be a vector, but got dim: {index.ndim} with type: "
                         f"{type_name(index.dtype)} and size: {list(index._shape)}")


def _expanded_index(index: Tensor, d: int, shape: tuple) -> Tensor:
    """The 1-d index laid along dim ``d`` and broadcast over ``shape``."""
    if not shape:
        return views.reshape(index, ())
    view = [1] * len(shape)
    view[d] = numel(index._shape)
    return views.expand_op(views.reshape(index, tuple(view)), shape)


def _check_source(name: str, self: Tensor, d: int, index: Tensor, source: Tensor) -> None:
    n = numel(index._shape)
    # index_add_ takes a 0-d source only for a 0-d self (index_copy_ reads it as one element).
    strict = name == "index_add_" and source.ndim != self.ndim
    if strict or source.ndim and self.ndim and (source.ndim != self.ndim or any(
            source._shape[i] != self._shape[i] for i in range(self.ndim) if i != d)):
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the specified dimension. "
                           f"Got self.shape = {list(self._shape)} source.shape = {list(source._shape)}")
    size = source._shape[d] if source.ndim else 1
    if size != n:
        raise RuntimeError(f"{name}(): Number of indices ({n}) should be equal to source.size(dim): ({size}), "
                           f"for dim: {d}")


index_add_inplace_op = define(
    "index_add_(Tensor(a!) self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor(a!)", ("inplace",)
)


def _index_add_kernel(self, dim, index, source, *, alpha=1):
    d = wrap_dim(dim, max(self.ndim, 1))
    _check_index_vector("index_add_", index)
    if index.dtype not in _INDEX_DTYPES:
        raise RuntimeError(f"index_add_(): Expected dtype int32/int64 for index but got: {type_name(index.dtype)}")
    if source.dtype is not self.dtype:
        raise RuntimeError(f"index_add_(): self ({type_name(self.dtype)}) and source ({type_name(source.dtype)}) "
                           "must have the same scalar type")
    _check_source("index_add_", self, d, index, source)
    _check_written(self, (source, index))
    if isinstance(alpha, float) and not (self.dtype.is_floating_point or self.dtype.is_complex):
        # PyTorch converts alpha to self's type first: 0.5 adds nothing to an integer tensor.
        alpha = bool(alpha) if self.dtype is dtypes.bool else int(alpha)
    if alpha != 1 and self._device is not META:
        source = mul(source, alpha)
    try:
        return _run_scatter(self, d, _expanded_index(index, d, source._shape), source, 1)
    except RuntimeError as e:
        # PyTorch's kernel checks indices with an IndexError, except along the first or last
        # dim of a tensor of 2+ dims (its scatter-based path), which keeps the RuntimeError.
        if "out of bounds" in str(e) and (self.ndim <= 1 or 0 < d < self.ndim - 1):
            raise IndexError("index out of range in self") from None
        raise


index_copy_inplace_op = define("index_copy_(Tensor(a!) self, int dim, Tensor index, Tensor source) -> Tensor(a!)",
                               ("inplace",))


def _index_copy_kernel(self, dim, index, source):
    d = wrap_dim(dim, max(self.ndim, 1))
    _check_index_vector("index_copy_", index)
    if index.dtype is not dtypes.int64:
        raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got {type_name(index.dtype)}")
    if source.dtype is not self.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, but got (self) "
                           f"{type_name(self.dtype)} and (source) {type_name(source.dtype)}")
    n = numel(index._shape)
    size = source._shape[d] if source.ndim else 1
    if size != n:
        raise IndexError(f"index_copy_(): Number of indices ({n}) should be equal to source.size(dim) ({size})")
    _check_source("index_copy_", self, d, index, source)
    _check_written(self, (source, index))
    try:
        return _run_scatter(self, d, _expanded_index(index, d, source._shape), source, 0)
    except RuntimeError as e:
        raise IndexError(f"index_copy_(): {e}") from None


index_fill_inplace_op = define("index_fill_(Tensor(a!) self, int dim, Tensor index, Tensor value) -> Tensor(a!)",
                               ("inplace",))


def _index_fill_kernel(self, dim, index, value):
    d = wrap_dim(dim, max(self.ndim, 1))
    if index.ndim > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    if index.dtype is not dtypes.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    if value.ndim:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    if self._device is META:
        return self
    _check_written(self, (index,), internal=False)
    size = self._shape[d] if self.ndim else 1

    index = where(index < 0, add(index, size), index)  # index_fill wraps negative indices
    shape = list(self._shape)
    if shape:
        shape[d] = numel(index._shape)
    idx = _expanded_index(index, d, tuple(shape))
    try:
        return _run_scatter(self, d, idx, _value_src(self, idx, value), 0)
    except RuntimeError as e:
        wrapped = int(str(e).split()[1])  # name the caller's index, before wrapping
        original = wrapped - size if wrapped < 0 else wrapped
        raise IndexError(f"index {original} is out of bounds for dimension {d} with size {size}") from None


for _op, _fn in ((index_add_inplace_op, _index_add_kernel), (index_copy_inplace_op, _index_copy_kernel),
                 (index_fill_inplace_op, _index_fill_kernel)):
    _op.kernels["cpu"] = _fn
    _op.kernels["meta"] = _fn
    _op.meta = _fn


def index_add_(self: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    return index_add_inplace_op(self, dim, index, source, alpha=alpha)


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1, out=None) -> Tensor:
    return write_out(fresh_result(index_add_inplace_op(views.clone_op(input), dim, index, source, alpha=alpha)), out,
                     exact_dtype=True)


def index_copy_(self: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    return index_copy_inplace_op(self, dim, index, source)


@_autocast_composite("promote")
def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor, *, out=None) -> Tensor:
    return write_out(fresh_result(index_copy_inplace_op(views.clone_op(input), dim, index, source)), out)


def index_fill_(self: Tensor, dim: int, index: Tensor, value) -> Tensor:
    return index_fill_inplace_op(self, dim, index, _as_value(value, self))


def index_fill(input: Tensor, dim: int, index: Tensor, value) -> Tensor:
    return fresh_result(index_fill_inplace_op(views.clone_op(input), dim, index, _as_value(value, input)))


# -- masked_scatter ------------------------------------------------------------------------------------

masked_scatter_inplace_op = define("masked_scatter_(Tensor(a!) self, Tensor mask, Tensor source) -> Tensor(a!)",
                                   ("inplace",))


def _masked_scatter_kernel(self: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    if mask.dtype is not dtypes.bool:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                           f"{type_name(mask.dtype)}")
    if source.dtype is not self.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but got"
                           f"{type_name(self.dtype)} and {type_name(source.dtype)}")
    shape = broadcast_shapes(self._shape, mask._shape)
    if shape != self._shape:
        raise RuntimeError(f"output with shape {list(self._shape)} doesn't match the broadcast shape {list(shape)}")
    if self._device is META:
        return self
    _check_internal_overlap(self)
    _C.masked_scatter(self, mask, views.contiguous(source))
    self._bump_version()
    return self


masked_scatter_inplace_op.kernels["cpu"] = _masked_scatter_kernel
masked_scatter_inplace_op.kernels["meta"] = _masked_scatter_kernel
masked_scatter_inplace_op.meta = _masked_scatter_kernel


def masked_scatter_(self: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    return masked_scatter_inplace_op(self, mask, source)


def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    shape = broadcast_shapes(input._shape, mask._shape)
    base = views.expand_op(input, shape) if shape != input._shape else input
    return fresh_result(masked_scatter_inplace_op(views.clone_op(base), mask, source))


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
gather                      function method
index_add                   function method
index_add_                  function method
index_copy                  function method
index_copy_                 function method
index_fill                  function method
index_fill_                 function method
masked_scatter              function method
masked_scatter_             function method
scatter                     function method
scatter_                    function method
scatter_add                 function method
scatter_add_                function method
scatter_reduce              function method
scatter_reduce_             function method
take_along_dim              function method
""")
