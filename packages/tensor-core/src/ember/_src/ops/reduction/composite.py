"""The rest of the reduction family: var/std, norm, logsumexp, any/all, count_nonzero, the
scans (cumsum/cumprod) and softmax/log_softmax. Re-exported by ``reduction``.
"""

from __future__ import annotations

import builtins
import math
import warnings

from ... import dtypes
from ..._native import _C
from ...device import META
from ...optable import declare
from ...tensor import Tensor, make_tensor
from .._common import compute_dtype, convert, empty, return_type, type_name, write_out
from ..pointwise import complex as _complex_numbers
from ..pointwise import elementwise
from .reduce import (
    _check_tensor,
    _count,
    _declare,
    _dims,
    _native,
    _one_dim,
    _out_shape,
    _reduce_to,
    sum_op,
)

_U = elementwise.UNARY_OPS


# -- var / std ---------------------------------------------------------------------------


def _var_result(x, dim, correction, keepdim, name):
    _check_tensor(x, name)
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError("std and var only support floating point and complex dtypes")
    dims = _dims(dim, x.ndim, name)
    return dims, _out_shape(x._shape, dims, keepdim)


def _var_cpu(x, dims, correction, keepdim, name, take_sqrt=False):
    """(var, mean) with PyTorch's two-pass formula: sum((x - mean)^2) / max(0, N - correction);
    with ``take_sqrt`` (std) the first is the standard deviation.

    Computed in float64 like PyTorch's CPU kernel (double accumulators): squared deviations of
    large float32 values overflow float32 even when the std itself is representable, so std
    takes the square root of the double variance before rounding (std of [3e38, -1] is finite).
    """
    fast = _var_native(x, dims, correction, keepdim, name, take_sqrt)
    if fast is not None:
        return fast
    xc = convert(x, dtypes.float64)
    n = _count(x._shape, dims)
    mean = elementwise.div_op(_native("sum", xc, dims, True, xc.dtype), n)
    sq = _native("sum_sq", elementwise.sub_op(xc, mean), dims, keepdim, xc.dtype)
    dof = builtins.max(0, n - correction)
    if dof <= 0:
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than the "
                      "reduction factor (input numel divided by output numel).", UserWarning, stacklevel=4)
    var = elementwise.div_op(sq, dof)
    if take_sqrt:
        var = _U["sqrt"][0](var)
    if not keepdim:
        mean = make_tensor(mean._storage, var._shape, var._stride, 0, mean.dtype, mean._device)
    return var, mean


def _var_native(x, dims, correction, keepdim, name, take_sqrt=False):
    """(var or std, mean) in one native kernel (``_C.var_mean``: double accumulators) when the
    reduced dims are one contiguous range of a contiguous real tensor; None otherwise. The
    result has x's compute dtype (float32 for half types)."""
    if not dims or x._device.type != "cpu" or not x.dtype.is_floating_point or not x.is_contiguous():
        return None  # (the kernel reads host memory: other devices take the composite)
    d0, d1 = builtins.min(dims), builtins.max(dims) + 1
    if d1 - d0 != len(dims):
        return None
    shape = x._shape
    xc = convert(x, compute_dtype(x.dtype))
    outer, n, inner = _count(shape, tuple(range(d0))), _count(shape, dims), _count(shape, tuple(range(d1, len(shape))))
    if n - correction <= 0:
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than the "
                      "reduction factor (input numel divided by output numel).", UserWarning, stacklevel=5)
    out_shape = _out_shape(shape, dims, keepdim)
    var, mean = empty(out_shape, xc.dtype, x._device), empty(out_shape, xc.dtype, x._device)
    _C.var_mean(var, mean, xc, outer, n, inner, float(correction), take_sqrt)
    return var, mean


def _declare_var(name: str, sqrt: bool, with_mean: bool):
    def meta(x, dim=None, correction=1, keepdim=False):
        _, shape = _var_result(x, dim, correction, keepdim, name)
        out = empty(shape, x.dtype.to_real(), META)
        return (out, empty(shape, x.dtype, META)) if with_mean else out

    def cpu(x, dim=None, correction=1, keepdim=False):
        dims, _ = _var_result(x, dim, correction, keepdim, name)
        if x.dtype.is_complex:  # the variance of each part, added: a real result
            parts_var, parts_mean = _var_cpu(_complex_numbers.view_as_real_op(x), dims, correction, keepdim, name)
            var = _native("sum", parts_var, (parts_var.ndim - 1,), False, parts_var.dtype)
            mean = _complex_numbers.view_as_complex_op(parts_mean)
            if sqrt:
                var = _U["sqrt"][0](var)
        else:
            var, mean = _var_cpu(x, dims, correction, keepdim, name, sqrt)
        var = convert(var, x.dtype.to_real())
        return (var, convert(mean, x.dtype)) if with_mean else var

    returns = "(Tensor, Tensor)" if with_mean else "Tensor"
    return _declare(f"{name}(Tensor self, int[]? dim=None, *, float? correction=1, bool keepdim=False) -> {returns}",
                    meta, cpu)


var_op = _declare_var("var", False, False)
std_op = _declare_var("std", True, False)
var_mean_op = _declare_var("var_mean", False, True)
std_mean_op = _declare_var("std_mean", True, True)


def _var_args(dim, unbiased, keepdim, correction, name):
    if isinstance(dim, builtins.bool):  # var(input, unbiased)
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise RuntimeError(f"{name}: can't specify both correction and unbiased arguments")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return dim, correction, keepdim


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    dim, c, keepdim = _var_args(dim, unbiased, keepdim, correction, "var")
    return write_out(var_op(input, dim, c, keepdim), out, overlap=False)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    dim, c, keepdim = _var_args(dim, unbiased, keepdim, correction, "std")
    return write_out(std_op(input, dim, c, keepdim), out, overlap=False)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    dim, c, keepdim = _var_args(dim, unbiased, keepdim, correction, "var_mean")
    return var_mean_op(input, dim, c, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    dim, c, keepdim = _var_args(dim, unbiased, keepdim, correction, "std_mean")
    return std_mean_op(input, dim, c, keepdim)


# -- norm / logsumexp --------------------------------------------------------------------


def _no_identity(p: float) -> bool:
    """Orders whose reduction has no identity (inf: a max, negative: through 1/0), so an empty
    reduced dim is an error."""
    return p < 0 or p == math.inf


def _ord_text(p: float) -> str:
    return str(int(p)) if math.isfinite(p) and p.is_integer() else str(p)


def _check_inf_norm_dims(x, p, dim):
    if _no_identity(p) and dim is not None and x.ndim:
        # PyTorch checks the dims one by one, in the given order: an empty one stops it before a
        # later dim out of range.
        for d in (dim if isinstance(dim, (list, tuple)) else [dim]):
            if x._shape[_dims(d, x.ndim, "norm")[0]] == 0:
                raise RuntimeError(f"linalg.vector_norm cannot compute the {_ord_text(p)} norm on the "
                                   f"dimension {d}because this dimension is empty and the operation does not have "
                                   "an identity")


def _norm_result(x, p, dim, keepdim, dtype):
    _check_tensor(x, "norm")
    if x.numel() == 0 and not isinstance(p, str) and p is not None:
        _check_inf_norm_dims(x, float(p), dim)  # PyTorch's empty-input checks come before its dtype check
    rd = dtypes.to_dtype(dtype) if dtype is not None else x.dtype
    if not (rd.is_floating_point or rd.is_complex):
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {type_name(rd)}")
    if dtype is not None and x.dtype.is_floating_point:
        if rd.is_complex:
            raise RuntimeError("linalg.vector_norm: dtype should be real")
        if dtypes.promote_types(x.dtype, rd) is not rd:
            raise RuntimeError(f"linalg.vector_norm: the dtype of the input ({type_name(x.dtype)}) should be "
                               f"convertible without narrowing to the specified dtype ({type_name(rd)})")
    if isinstance(p, str):
        if p != "fro":
            # PyTorch hands every other string order to linalg.matrix_norm, which names it
            raise RuntimeError(f"linalg.matrix_norm: Order {p} not supported.")
        if isinstance(dim, (list, tuple)) and len(dim) > 2:  # PyTorch hands these to matrix_norm
            if x.ndim < 2:
                raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
            raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(str(d) for d in dim)}")
        p = 2.0
    p = float(p)
    _check_inf_norm_dims(x, p, dim)
    dims = _dims(dim, x.ndim, "norm")
    if _no_identity(p) and builtins.any(x._shape[d] == 0 for d in dims):
        raise RuntimeError(f"linalg.vector_norm cannot compute the {_ord_text(p)} norm on an empty tensor because "
                           "the operation does not have an identity")
    return p, dims, _out_shape(x._shape, dims, keepdim), rd.to_real()


def _norm_meta(x, p="fro", dim=None, keepdim=False, dtype=None):
    _, _, shape, rd = _norm_result(x, p, dim, keepdim, dtype)
    return empty(shape, rd, META)


def _norm_cpu(x, p="fro", dim=None, keepdim=False, dtype=None):
    p, dims, _, rd = _norm_result(x, p, dim, keepdim, dtype)
    if x.dtype.is_complex or (dtype is not None and dtypes.to_dtype(dtype).is_complex):
        # A complex vector's norm is the norm of its magnitudes.
        x = elementwise.UNARY_OPS["abs"][0](convert(x, dtypes.to_dtype(dtype)) if dtype is not None else x)
    xc = convert(convert(x, rd), compute_dtype(rd))
    acc = xc.dtype
    if p == 2:
        r = _U["sqrt"][0](_native("sum_sq", xc, dims, keepdim, acc))
    elif p == 1:
        r = _native("abs_sum", xc, dims, keepdim, acc)
    elif p == math.inf:
        r = _native("abs_max", xc, dims, keepdim, acc)
    elif p == -math.inf:
        r = _native("abs_min", xc, dims, keepdim, acc)
    elif p == 0:
        r = convert(_native("count_nonzero", xc, dims, keepdim, dtypes.int64), acc)
    else:
        r = elementwise.pow_op(_native("pow_sum", xc, dims, keepdim, acc, p), 1.0 / p)
    return convert(r, rd)


norm_op = _declare("norm(Tensor self, Scalar? p=2, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) "
                   "-> Tensor", _norm_meta, _norm_cpu)


def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    if isinstance(p, str) and p == "nuc":  # PyTorch's norm hands the nuclear norm to nuclear_norm
        from ..linalg.lowrank import nuclear_norm

        # through linalg.matrix_norm, which checks the rank, then the dims (all of them when None)
        if isinstance(input, Tensor) and input.ndim < 2:
            raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
        if isinstance(input, Tensor):
            dims = list(range(input.ndim)) if dim is None else (list(dim) if isinstance(dim, (list, tuple)) else [dim])
            if len(dims) != 2:
                raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(map(str, dims))}")
        result = nuclear_norm(input, dim, keepdim=keepdim)
        return write_out(result if dtype is None else result.to(dtype), out, overlap=False)
    return write_out(norm_op(input, p, dim, keepdim, dtype), out, overlap=False, exact_dtype=True)


def _lse_result(x, dim, keepdim):
    _check_tensor(x, "logsumexp")
    rd = x.dtype if (x.dtype.is_floating_point or x.dtype.is_complex) else dtypes.get_default_dtype()
    dims = _dims(dim, x.ndim, "logsumexp")
    return dims, _out_shape(x._shape, dims, keepdim), rd


def _lse_meta(x, dim, keepdim=False):
    _, shape, rd = _lse_result(x, dim, keepdim)
    return empty(shape, rd, META)


def _lse_cpu(x, dim, keepdim=False):
    dims, _, rd = _lse_result(x, dim, keepdim)
    xc = convert(x, compute_dtype(rd))
    if xc.dtype.is_complex:
        return _lse_complex(xc, dims, keepdim)
    if x.numel() == 0:
        return convert(_U["log"][0](_native("sum", _U["exp"][0](xc), dims, keepdim, xc.dtype)), rd)
    # Shift by the max (0 where it is infinite, so inf - inf never appears), as PyTorch does.
    m = _native("max", xc, dims, True, xc.dtype)
    m = elementwise.where(_U["isinf"][0](m), 0.0, m)
    s = _native("sum", _U["exp"][0](elementwise.sub_op(xc, m)), dims, keepdim, xc.dtype)
    shift = m if keepdim else make_tensor(m._storage, s._shape, s._stride, 0, m.dtype, m._device)
    return convert(elementwise.add_op(_U["log"][0](s), shift), rd)


def _lse_complex(x, dims, keepdim):
    """log(sum(exp(x))), shifted by the largest real part as PyTorch does for complex inputs."""

    parts_real = _complex_numbers.real(x)
    if x.numel() == 0:
        return _U["log"][0](sum_op(_U["exp"][0](x), dims, keepdim))
    m = _native("max", parts_real, dims, True, parts_real.dtype)
    m = elementwise.where(_U["isinf"][0](m), 0.0, m)
    s = sum_op(_U["exp"][0](elementwise.sub_op(x, m)), dims, keepdim)
    shift = m if keepdim else make_tensor(m._storage, s._shape, tuple(m._stride[i] for i in range(len(m._shape))
                                                                       if i not in dims), 0, m.dtype, m._device)
    return elementwise.add_op(_U["log"][0](s), shift)


logsumexp_op = _declare("logsumexp(Tensor self, int[] dim, bool keepdim=False) -> Tensor", _lse_meta, _lse_cpu)


def logsumexp(input, dim, keepdim=False, *, out=None):
    return write_out(logsumexp_op(input, dim, keepdim), out)


# -- any / all / count_nonzero -----------------------------------------------------------


def _logical(name: str):
    def result(x, dim, keepdim):
        _check_tensor(x, name)
        dims = _dims(dim, x.ndim, name)
        # uint8 keeps its dtype (PyTorch's backward-compatible rule); everything else gives bool.
        return dims, _out_shape(x._shape, dims, keepdim), dtypes.uint8 if x.dtype is dtypes.uint8 else dtypes.bool

    def meta(x, dim=None, keepdim=False):
        _, shape, rd = result(x, dim, keepdim)
        return empty(shape, rd, META)

    def cpu(x, dim=None, keepdim=False):
        dims, _, rd = result(x, dim, keepdim)
        if x.dtype.is_complex:
            x = elementwise.ne_op(x, 0)
        return _reduce_to(name, x, dims, keepdim, rd, acc=dtypes.bool)

    return _declare(f"{name}(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor", meta, cpu)


any_op = _logical("any")
all_op = _logical("all")


def _check_bool_out(out, name: str) -> None:
    if isinstance(out, Tensor) and out.dtype not in (dtypes.bool, dtypes.uint8):
        raise RuntimeError(f"{name} only supports bool tensor for result, got: {type_name(out.dtype)}")


def any(input, dim=None, keepdim=False, *, out=None):
    _check_bool_out(out, "any")
    return write_out(any_op(input, dim, keepdim), out, overlap=False)


def all(input, dim=None, keepdim=False, *, out=None):
    _check_bool_out(out, "all")
    return write_out(all_op(input, dim, keepdim), out, overlap=False)


def _cnz_meta(x, dim=None):
    _check_tensor(x, "count_nonzero")
    return empty(_out_shape(x._shape, _dims(dim, x.ndim, "count_nonzero"), False), dtypes.int64, META)


def _cnz_cpu(x, dim=None):
    _check_tensor(x, "count_nonzero")
    if x.dtype.is_complex:
        x = elementwise.ne_op(x, 0)
    return _reduce_to("count_nonzero", x, _dims(dim, x.ndim, "count_nonzero"), False, dtypes.int64, acc=dtypes.int64)


count_nonzero_op = _declare("count_nonzero(Tensor self, int[]? dim=None) -> Tensor", _cnz_meta, _cnz_cpu)


def count_nonzero(input, dim=None):
    return count_nonzero_op(input, dim)


# -- cumsum / cumprod --------------------------------------------------------------------


def _last_view(t: Tensor, d: int) -> Tensor:
    """``t`` viewed with dim ``d`` moved last (a 0-d tensor as shape (1,))."""
    if t.ndim == 0:
        return make_tensor(t._storage, (1,), (1,), t._offset, t.dtype, t._device)
    order = [i for i in range(t.ndim) if i != d] + [d]
    return make_tensor(t._storage, tuple(t._shape[i] for i in order), tuple(t._stride[i] for i in order),
                       t._offset, t.dtype, t._device)


def _declare_scan(name: str, code: int):
    def result(x, dim, dtype):
        _check_tensor(x, name)
        d = _one_dim(dim, x.ndim, name)
        if dtype is not None:
            rd = dtypes.to_dtype(dtype)
        else:
            rd = dtypes.int64 if dtypes.is_integral(x.dtype, include_bool=True) else x.dtype
        return d, rd

    def meta(x, dim, dtype=None):
        _, rd = result(x, dim, dtype)
        return empty(x._shape, rd, META)

    def cpu(x, dim, dtype=None):
        d, rd = result(x, dim, dtype)
        cd = compute_dtype(rd)
        if cd is dtypes.bool:  # a bool scan runs in int64 and is cast back
            cd = dtypes.int64
        xc = convert(convert(x, rd), cd)
        if cd.is_complex:
            if code != 0:
                raise NotImplementedError(f"\"{name}\" not implemented for '{type_name(cd)}'")
            # A running sum adds the parts separately: scan the (real, imag) float view.
            parts = _complex_numbers.view_as_real_op(xc)
            out = empty(parts._shape, parts.dtype, x._device)
            _C.scan(code, _last_view(out, d), _last_view(parts, d))
            return convert(_complex_numbers.view_as_complex_op(out), rd)
        out = empty(x._shape, cd, x._device)
        _C.scan(code, _last_view(out, d), _last_view(xc, d))
        return convert(out, rd)

    return _declare(f"{name}(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", meta, cpu)


cumsum_op = _declare_scan("cumsum", 0)
cumprod_op = _declare_scan("cumprod", 1)


def cumsum(input, dim, *, dtype=None, out=None):
    if dtype is None and isinstance(out, Tensor):
        dtype = out.dtype  # accumulated in out's dtype, as PyTorch
    return write_out(cumsum_op(input, dim, dtype), out, (input,))


def cumprod(input, dim, *, dtype=None, out=None):
    if dtype is None and isinstance(out, Tensor):
        dtype = out.dtype
    return write_out(cumprod_op(input, dim, dtype), out, (input,))


cummax_result = return_type("cummax", ["values", "indices"])
cummin_result = return_type("cummin", ["values", "indices"])


def _declare_cum_extreme(name: str, is_max: bool):
    def meta(x, dim):
        _check_tensor(x, name)
        _one_dim(dim, x.ndim, name)
        return empty(x._shape, x.dtype, META), empty(x._shape, dtypes.int64, META)

    def cpu(x, dim):
        _check_tensor(x, name)
        d = _one_dim(dim, x.ndim, name)
        xc = convert(x, compute_dtype(x.dtype))
        values = empty(x._shape, xc.dtype, x._device)
        indices = empty(x._shape, dtypes.int64, x._device)
        if x.numel() > 0:
            _C.scan_indexed(is_max, _last_view(values, d), _last_view(indices, d), _last_view(xc, d))
        return convert(values, x.dtype), indices

    return _declare(f"{name}(Tensor self, int dim) -> (Tensor values, Tensor indices)", meta, cpu)


cummax_op = _declare_cum_extreme("cummax", True)
cummin_op = _declare_cum_extreme("cummin", False)


def _write_pair(result_type, pair, out):
    """``out=(values, indices)`` of cummax/cummin: each must have the result's dtype, as in PyTorch."""
    if out is None:
        return result_type(*pair)
    for result, target in zip(pair, out):
        if isinstance(target, Tensor) and target.dtype is not result.dtype:
            raise RuntimeError(f"expected scalar_type {type_name(result.dtype)} but found {type_name(target.dtype)}")
        write_out(result, target)
    return result_type(*out)


def cummax(input, dim, *, out=None):
    return _write_pair(cummax_result, cummax_op(input, dim), out)


def cummin(input, dim, *, out=None):
    return _write_pair(cummin_result, cummin_op(input, dim), out)


# -- softmax / log_softmax ---------------------------------------------------------------


def _declare_softmax(name: str, log: bool):
    def result(x, dim, dtype):
        _check_tensor(x, name)
        d = _one_dim(dim, x.ndim, name)
        rd = dtypes.to_dtype(dtype) if dtype is not None else x.dtype
        if not rd.is_floating_point:
            raise NotImplementedError(f"\"{name}_lastdim_kernel_impl\" not implemented for '{type_name(rd)}'")
        return d, rd

    def meta(x, dim, dtype=None):
        _, rd = result(x, dim, dtype)
        return empty(x._shape, rd, META)

    def cpu(x, dim, dtype=None):
        d, rd = result(x, dim, dtype)
        xc = convert(convert(x, rd), compute_dtype(rd)).contiguous()
        shape = x._shape
        outer = _count(shape, tuple(range(d)))
        inner = _count(shape, tuple(range(d + 1, len(shape))))
        n = shape[d] if shape else 1
        out = empty(shape, xc.dtype, x._device)
        _C.softmax(out, xc, outer, n, inner, log)
        return convert(out, rd)

    return _declare(f"{name}(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", meta, cpu)


softmax_op = _declare_softmax("softmax", False)
log_softmax_op = _declare_softmax("log_softmax", True)


def softmax(input, dim, dtype=None):
    return softmax_op(input, dim, dtype)


def log_softmax(input, dim, dtype=None):
    return log_softmax_op(input, dim, dtype)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
all                         function method
any                         function method
count_nonzero               function method
cummax                      function method
cummin                      function method
cumprod                     function method
cumsum                      function method
log_softmax                 function method
logsumexp                   function method
norm                        function method
softmax                     function method
std                         function method
std_mean                    function method
var                         function method
var_mean                    function method
""")
