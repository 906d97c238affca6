"""Reductions, scans and softmax.

Every reduction reaches one native kernel (``_C.reduce``, csrc/cpu/reduce.cpp): the input is
viewed with the reduced dims last, float16/bfloat16 are converted to float32, and the kernel
writes an accumulator-typed result (int64 for integer sums, the float type for floats) that
is then cast to PyTorch's result dtype. Composite ops (mean, var, norm, logsumexp) are built
from those kernels and the pointwise ops, the way PyTorch composes them.
"""

from __future__ import annotations

import builtins
import operator

from ... import dtypes
from ..._native import _C
from ...device import META
from ...dispatch import define
from ...optable import declare
from ...shapes import contiguous_strides, wrap_dim
from ...tensor import Tensor, make_tensor
from .._common import compute_dtype, convert, empty, return_type, type_name, write_out
from ..pointwise import complex as _complex_numbers
from ..pointwise import elementwise

_CODE = _C.reduce_ops

# PyTorch's torch.return_types: tuples with named fields.
max_result = return_type("max", ["values", "indices"])
min_result = return_type("min", ["values", "indices"])
aminmax_result = return_type("aminmax", ["min", "max"])


# -- shape helpers -----------------------------------------------------------------------


def _check_tensor(x, name: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")


def _dims(dim, ndim: int, name: str) -> tuple:
    """Sorted reduced dims; None or () mean every dim (a 0-d tensor has none)."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (list, tuple)):
        items = list(dim)
    else:
        items = [dim]
    wrapped = []
    for d in items:
        if isinstance(d, builtins.bool) or not hasattr(d, "__index__"):
            raise TypeError(f"{name}(): argument 'dim' must be tuple of ints, not {type(d).__name__}")
        w = wrap_dim(operator.index(d), ndim)
        if w in wrapped:
            raise RuntimeError(f"dim {w} appears multiple times in the list of dims")
        wrapped.append(w)
    if not wrapped:
        return tuple(range(ndim))
    return tuple(sorted(wrapped)) if ndim > 0 else ()


def _one_dim(dim, ndim: int, name: str) -> int:
    if isinstance(dim, builtins.bool) or not hasattr(dim, "__index__"):
        raise TypeError(f"{name}(): argument 'dim' must be int, not {type(dim).__name__}")
    return wrap_dim(operator.index(dim), ndim)


def _out_shape(shape: tuple, dims: tuple, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if d in dims else s for d, s in enumerate(shape))
    return tuple(s for d, s in enumerate(shape) if d not in dims)


def _count(shape: tuple, dims: tuple) -> int:
    n = 1
    for d in dims:
        n *= shape[d]
    return n


def _acc_dtype(d):
    """The native accumulator dtype of a sum/prod over a compute dtype."""
    return d if d.is_floating_point else dtypes.int64


def _sum_result_dtype(x: Tensor, dtype):
    if dtype is not None:
        return dtypes.to_dtype(dtype)
    return dtypes.int64 if dtypes.is_integral(x.dtype, include_bool=True) else x.dtype


def _native(code: str, x: Tensor, dims: tuple, keepdim: bool, acc, p: float = 2.0) -> Tensor:
    """Runs the native reduction of the compute-dtype tensor ``x`` over ``dims``."""
    shape = x._shape
    result = empty(_out_shape(shape, dims, keepdim), acc, x._device)
    if x._device is META:
        return result
    kept = [d for d in range(len(shape)) if d not in dims]
    order = kept + list(dims)
    xv = make_tensor(x._storage, tuple(shape[d] for d in order), tuple(x._stride[d] for d in order),
                     x._offset, x.dtype, x._device)
    kept_shape = tuple(shape[d] for d in kept)
    outv = make_tensor(result._storage, kept_shape, contiguous_strides(kept_shape), 0, acc, x._device)
    _C.reduce(_CODE[code], outv, xv, len(dims), float(p))
    return result


def _reduce_to(code: str, x: Tensor, dims: tuple, keepdim: bool, result_dtype, acc=None, p=2.0) -> Tensor:
    xc = convert(x, compute_dtype(x.dtype))
    out = _native(code, xc, dims, keepdim, acc if acc is not None else xc.dtype, p)
    return convert(out, result_dtype)


def _declare(schema: str, meta, cpu):
    op = define(schema, ("reduction",), meta)
    op.kernels["meta"] = meta
    op.kernels["cpu"] = cpu
    return op


# -- sum / nansum / prod / mean / nanmean -------------------------------------------------


def _complex_reduce(code: str, x: Tensor, dims: tuple, keepdim: bool, shape: tuple) -> Tensor:
    """sum/nansum add the (real, imag) float view with the real kernel; prod has a complex kernel."""
    if code == "prod":
        return _complex_numbers._prod_rows(x, dims, shape)
    parts = _complex_numbers.view_as_real_op(x)
    return _complex_numbers.view_as_complex_op(_native(code, parts, dims, keepdim, parts.dtype))


def _sum_like(code: str, name: str):
    def result(x, dim, keepdim, dtype):
        _check_tensor(x, name)
        dims = _dims(dim, x.ndim, name)
        return dims, _out_shape(x._shape, dims, keepdim), _sum_result_dtype(x, dtype)

    def meta(x, dim=None, keepdim=False, dtype=None):
        _, shape, rd = result(x, dim, keepdim, dtype)
        return empty(shape, rd, META)

    def cpu(x, dim=None, keepdim=False, dtype=None):
        dims, shape, rd = result(x, dim, keepdim, dtype)
        xc = convert(convert(x, rd) if dtype is not None else x, compute_dtype(rd if dtype is not None else x.dtype))
        if xc.dtype.is_complex:
            return convert(_complex_reduce(code, xc, dims, keepdim, shape), rd)
        return convert(_native(code, xc, dims, keepdim, _acc_dtype(xc.dtype)), rd)

    return _declare(f"{name}(Tensor self, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
                    meta, cpu)


sum_op = _sum_like("sum", "sum")
nansum_op = _sum_like("nansum", "nansum")
prod_op = _sum_like("prod", "prod")


def _mean_like(name: str, nan: bool):
    def result(x, dim, keepdim, dtype):
        _check_tensor(x, name)
        rd = dtypes.to_dtype(dtype) if dtype is not None else x.dtype
        if nan and not (x.dtype.is_floating_point or x.dtype.is_complex):
            # nanmean checks the input's dtype, whatever dtype= asks for
            raise RuntimeError(f"{name}(): expected input to have floating point or complex dtype but got "
                               f"{type_name(x.dtype)}")
        if not (rd.is_floating_point or rd.is_complex):
            which = "Optional dtype" if dtype is not None else "Input dtype"
            raise RuntimeError(f"{name}(): could not infer output dtype. {which} must be either a floating point "
                               f"or complex dtype. Got: {type_name(rd)}")
        dims = _dims(dim, x.ndim, name)
        return dims, _out_shape(x._shape, dims, keepdim), rd

    def meta(x, dim=None, keepdim=False, dtype=None):
        _, shape, rd = result(x, dim, keepdim, dtype)
        return empty(shape, rd, META)

    def cpu(x, dim=None, keepdim=False, dtype=None):
        dims, _, rd = result(x, dim, keepdim, dtype)
        xc = convert(convert(x, rd), compute_dtype(rd))
        if xc.dtype.is_complex:
            if nan:
                raise NotImplementedError(f"nanmean does not support complex inputs, got {type_name(rd)}")
            total = _complex_reduce("sum", xc, dims, keepdim, None)
            return elementwise.div_op(total, _count(x._shape, dims))
        total = _native("nansum" if nan else "sum", xc, dims, keepdim, xc.dtype)
        if nan:
            count = _native(
                "count_nonzero",
                elementwise.UNARY_OPS["logical_not"][0](elementwise.UNARY_OPS["isnan"][0](xc)),
                dims,
                keepdim,
                dtypes.int64,
            )
            return convert(elementwise.div_op(total, count), rd)
        return convert(elementwise.div_op(total, _count(x._shape, dims)), rd)

    return _declare(f"{name}(Tensor self, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
                    meta, cpu)


mean_op = _mean_like("mean", False)
nanmean_op = _mean_like("nanmean", True)


def sum(input, dim=None, keepdim=False, *, dtype=None, out=None):
    if dtype is None and isinstance(out, Tensor):
        dtype = out.dtype  # PyTorch accumulates in out's dtype: sum(float, out=int32) casts first
    return write_out(sum_op(input, dim, keepdim, dtype), out, overlap=False)


def nansum(input, dim=None, keepdim=False, *, dtype=None, out=None):
    return write_out(nansum_op(input, dim, keepdim, dtype), out, overlap=False)


def prod(input, dim=None, keepdim=False, *, dtype=None, out=None):
    if dim is not None and (isinstance(dim, (list, tuple, builtins.bool)) or not hasattr(dim, "__index__")):
        raise TypeError(f"prod(): argument 'dim' must be int, not {type(dim).__name__}")
    if dtype is None and isinstance(out, Tensor):
        dtype = out.dtype
    return write_out(prod_op(input, dim, keepdim, dtype), out, overlap=False)


def mean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    return write_out(mean_op(input, dim, keepdim, dtype), out)


def nanmean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    return write_out(nanmean_op(input, dim, keepdim, dtype), out)


# The native fast path (csrc/common/fast_reduce.cpp, fast_front.cpp): float sums and means with no
# dtype run in C, and the public sum/mean read their arguments there, falling back to the functions
# above for anything else (dtype=, out=, a mode or subclass, other dtypes).
sum_op._set_fast(9, 0, 0)
mean_op._set_fast(10, 0, 0)
sum = _C.FastFront(sum_op, 1, sum)  # noqa: A001
mean = _C.FastFront(mean_op, 2, mean)

# -- max / min / amax / amin / aminmax / argmax / argmin ----------------------------------


def _extreme(op_name: str, code: str, name: str):
    """amax/amin: value reductions over dims; an empty reduced dim has no identity."""

    def result(x, dim, keepdim):
        _check_tensor(x, name)
        if x.dtype.is_complex:
            raise NotImplementedError(f"\"{op_name}\" not implemented for '{type_name(x.dtype)}'")
        dims = _dims(dim, x.ndim, name)
        if x.numel() == 0:
            if dim is None or dim == () or dim == []:
                raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                                   "Specify the reduction dim with the 'dim' argument.")
            for d in dims:
                if x._shape[d] == 0:
                    raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
        return dims, _out_shape(x._shape, dims, keepdim)

    def meta(x, dim=(), keepdim=False):
        _, shape = result(x, dim, keepdim)
        return empty(shape, x.dtype, META)

    def cpu(x, dim=(), keepdim=False):
        dims, _ = result(x, dim, keepdim)
        return _reduce_to(code, x, dims, keepdim, x.dtype)

    return _declare(f"{op_name}(Tensor self, int[] dim=[], bool keepdim=False) -> Tensor", meta, cpu)


amax_op = _extreme("amax", "max", "amax")
amin_op = _extreme("amin", "min", "amin")
_max_all_op = _extreme("max_all", "max", "max")
_min_all_op = _extreme("min_all", "min", "min")


def _arg_extreme(op_name: str, is_max: bool, with_values: bool, name: str):
    """max.dim/min.dim (values and indices) and argmax/argmin (indices; dim=None flattens)."""

    def result(x, dim, keepdim):
        _check_tensor(x, name)
        if not with_values and x.dtype is dtypes.bool:
            raise RuntimeError(f"{name}(): does not support bool input")
        if x.dtype.is_complex:
            raise RuntimeError(f"{name}(): does not support complex input")
        if dim is None:
            if x.numel() == 0:
                raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")
            dims = tuple(range(x.ndim))
            shape = tuple(1 for _ in x._shape) if keepdim else ()
        else:
            d = _one_dim(dim, x.ndim, name)
            dims = (d,) if x.ndim > 0 else ()
            if x.ndim > 0 and x._shape[d] == 0:
                raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
            shape = _out_shape(x._shape, dims, keepdim)
        return dims, shape

    def run(x, dims, shape, meta):
        device = META if meta else x._device
        values = empty(shape, x.dtype, device)
        indices = empty(shape, dtypes.int64, device)
        if meta:
            return values, indices
        xc = convert(x, compute_dtype(x.dtype))
        shp = x._shape
        kept = [d for d in range(len(shp)) if d not in dims]
        order = kept + list(dims)
        xv = make_tensor(xc._storage, tuple(shp[d] for d in order), tuple(xc._stride[d] for d in order),
                         xc._offset, xc.dtype, xc._device)
        kshape = tuple(shp[d] for d in kept)
        vals = empty(kshape, xc.dtype, x._device)
        idx = make_tensor(indices._storage, kshape, contiguous_strides(kshape), 0, dtypes.int64, x._device)
        _C.arg_reduce(is_max, vals, idx, xv, len(dims))
        _C.copy_(make_tensor(values._storage, kshape, contiguous_strides(kshape), 0, x.dtype, x._device), vals)
        return values, indices

    def meta(x, dim=None, keepdim=False):
        dims, shape = result(x, dim, keepdim)
        out = run(x, dims, shape, True)
        return out if with_values else out[1]

    def cpu(x, dim=None, keepdim=False):
        dims, shape = result(x, dim, keepdim)
        out = run(x, dims, shape, False)
        return out if with_values else out[1]

    schema = (f"{op_name}(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"
              if with_values else f"{op_name}(Tensor self, int? dim=None, bool keepdim=False) -> Tensor")
    return _declare(schema, meta, cpu)


max_dim_op = _arg_extreme("max_dim", True, True, "max")
min_dim_op = _arg_extreme("min_dim", False, True, "min")
argmax_op = _arg_extreme("argmax", True, False, "argmax")
argmin_op = _arg_extreme("argmin", False, False, "argmin")


def _max_min(input, dim, keepdim, out, binary, all_op, dim_op, result_cls, name):
    if isinstance(dim, Tensor):  # max(input, other): the elementwise form
        return write_out(binary(input, dim), out, (input, dim))
    if dim is None:
        if keepdim:
            raise TypeError(f"{name}() received an invalid combination of arguments: keepdim needs dim")
        _check_tensor(input, name)
        return write_out(all_op(input, None), out, overlap=False)
    values, indices = dim_op(input, dim, keepdim)
    if out is not None:
        write_out(values, out[0], (input,), exact_dtype=True)
        write_out(indices, out[1], (input,), exact_dtype=True)
        return result_cls(out[0], out[1])
    return result_cls(values, indices)


def max(input, dim=None, keepdim=False, *, out=None):
    return _max_min(input, dim, keepdim, out, elementwise.maximum_op, _max_all_op, max_dim_op, max_result, "max")


def min(input, dim=None, keepdim=False, *, out=None):
    return _max_min(input, dim, keepdim, out, elementwise.minimum_op, _min_all_op, min_dim_op, min_result, "min")


def amax(input, dim=(), keepdim=False, *, out=None):
    return write_out(_check_same_out(amax_op(input, dim, keepdim), input, out), out, overlap=False)


def amin(input, dim=(), keepdim=False, *, out=None):
    return write_out(_check_same_out(amin_op(input, dim, keepdim), input, out), out, overlap=False)


def aminmax(input, *, dim=None, keepdim=False, out=None):
    pair = _aminmax(input, dim, keepdim)
    if out is None:
        return pair
    for result, target in zip(pair, out):
        write_out(result, target, exact_dtype=True)
    return aminmax_result(*out)


def _aminmax(input, dim, keepdim):
    _check_tensor(input, "aminmax")
    if dim is None and input.numel() == 0:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                           "identity.")
    if dim is not None:
        d = _one_dim(dim, input.ndim, "aminmax")
        if input.ndim > 0 and input._shape[d] == 0:
            raise IndexError(f"aminmax(): Expected reduction dim {d} to have non-zero size.")
    if dim is None and keepdim:
        dims = None
        lo = amin_op(input, dims, True)
        return aminmax_result(lo, amax_op(input, dims, True))
    return aminmax_result(amin_op(input, dim, keepdim), amax_op(input, dim, keepdim))


def _check_same_out(result, input, out):
    """amax/amin: out= must have the input's dtype (PyTorch's check); returns ``result``."""
    if isinstance(out, Tensor) and out.dtype is not input.dtype:
        raise RuntimeError(f"Expected the dtype for input and out to match, but got {type_name(input.dtype)} for "
                           f"input's dtype and {type_name(out.dtype)} for out's dtype.")
    return result


def argmax(input, dim=None, keepdim=False, *, out=None):
    return write_out(argmax_op(input, dim, keepdim), out, overlap=False, exact_dtype=True)


def argmin(input, dim=None, keepdim=False, *, out=None):
    return write_out(argmin_op(input, dim, keepdim), out, overlap=False, exact_dtype=True)


# The second half of the family (var/std, norm, scans, softmax, ...) builds on the helpers above;
# other modules read all/any here with the rest of the reductions.
from .composite import all, any  # noqa: E402,F401

# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
amax                        function method
amin                        function method
aminmax                     function method
argmax                      function method
argmin                      function method
max                         function method
mean                        function method
min                         function method
nanmean                     function method
nansum                      function method
prod                        function method
sum                         function method
""")
