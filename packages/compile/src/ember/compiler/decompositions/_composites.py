"""Decompositions of ember's composite ops into pointwise ops, reductions and views.

Each follows its eager kernel's arithmetic (compute dtype, accumulation precision, formula)
so that a compiled graph agrees with eager within rounding; see Note [Compute dtype] in
inductor/_ir.py for why half inputs are widened once.
"""

from __future__ import annotations

from ember._src import dtypes as dt

from ._registry import ops, register_decomposition

_HALF = (dt.float16, dt.bfloat16)


def _compute(x):
    """``x`` in the dtype eager kernels compute it in (float32 for half types)."""
    return ops._to_copy(x, dtype=dt.float32) if x.dtype in _HALF else x


def _to(x, dtype):
    return x if x.dtype is dtype else ops._to_copy(x, dtype=dtype)


def _dims(dim, ndim):
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(ndim))
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    return sorted(d % ndim if ndim else 0 for d in dims)


def _count(shape, dims) -> int:
    n = 1
    for d in dims:
        n *= shape[d]
    return n


def _float_only(x, name):
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"\"{name}\" not implemented for '{x.dtype}'")


# -- softmax family ---------------------------------------------------------------------------

@register_decomposition("softmax")
def softmax(x, dim, dtype=None):
    result = dt.to_dtype(dtype) if dtype is not None else x.dtype
    _float_only(_to(x, result) if dtype is not None else x, "softmax_lastdim_kernel_impl")
    xc = _compute(_to(x, result))
    shifted = ops.sub(xc, ops.amax(xc, [dim], True))
    e = ops.exp(shifted)
    return _to(ops.div(e, ops.sum(e, [dim], True)), result)


@register_decomposition("log_softmax")
def log_softmax(x, dim, dtype=None):
    result = dt.to_dtype(dtype) if dtype is not None else x.dtype
    _float_only(_to(x, result) if dtype is not None else x, "log_softmax_lastdim_kernel_impl")
    xc = _compute(_to(x, result))
    shifted = ops.sub(xc, ops.amax(xc, [dim], True))
    lse = ops.log(ops.sum(ops.exp(shifted), [dim], True))
    return _to(ops.sub(shifted, lse), result)


@register_decomposition("logsumexp")
def logsumexp(x, dim, keepdim=False):
    xc = _compute(x if x.dtype.is_floating_point else _to(x, dt.get_default_dtype()))
    dims = _dims(dim, x.ndim)
    m = ops.amax(xc, dims, True)
    # an infinite max would give inf - inf: shift by 0 there (PyTorch's rule)
    safe = ops.where(ops.isinf(m), 0.0, m)
    total = ops.log(ops.sum(ops.exp(ops.sub(xc, safe)), dims, True))
    out = ops.add(total, safe)
    if not keepdim:
        out = ops.squeeze(out, dims)
    return _to(out, x.dtype if x.dtype.is_floating_point else dt.get_default_dtype())


# -- normalization ----------------------------------------------------------------------------

@register_decomposition("native_layer_norm")
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    axis = input.ndim - len(normalized_shape)
    dims = list(range(axis, input.ndim))
    x = _compute(input)
    mean = ops.mean(x, dims, True)
    centered = ops.sub(x, mean)
    var = ops.mean(ops.mul(centered, centered), dims, True)
    rstd = ops.rsqrt(ops.add(var, eps))
    out = ops.mul(centered, rstd)
    if weight is not None:
        out = ops.mul(out, _compute(weight))
    if bias is not None:
        out = ops.add(out, _compute(bias))
    return _to(out, input.dtype), _to(mean, input.dtype), _to(rstd, input.dtype)


@register_decomposition("native_layer_norm_backward")
def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    # With x_hat = (x - mean) * rstd and h = grad_out * weight over the N normalized elements of a
    # row: dx = rstd / N * (N * h - sum(h) - x_hat * sum(h * x_hat)), dweight = sum over the
    # leading dims of grad_out * x_hat, dbias = sum of grad_out. Pointwise and row/column sums:
    # inductor fuses them (the compiled backward of a LayerNorm is no library call).
    axis = input.ndim - len(normalized_shape)
    inner, outer = list(range(axis, input.ndim)), list(range(axis))
    n = _count(input.shape, inner)
    g = _compute(grad_out)
    x_hat = ops.mul(ops.sub(_compute(input), _compute(mean)), _compute(rstd))
    dx = dw = db = None
    if output_mask[0]:
        h = ops.mul(g, _compute(weight)) if weight is not None else g
        row_sum = ops.sum(h, inner, True)
        row_dot = ops.sum(ops.mul(h, x_hat), inner, True)
        dx = ops.sub(ops.sub(ops.mul(h, n), row_sum), ops.mul(x_hat, row_dot))
        dx = _to(ops.mul(dx, ops.div(_compute(rstd), n)), input.dtype)
    if output_mask[1] and weight is not None:
        gx = ops.mul(g, x_hat)
        dw = _to(ops.sum(gx, outer, False) if outer else gx, weight.dtype)
    if output_mask[2] and bias is not None:
        db = _to(ops.sum(g, outer, False) if outer else g, bias.dtype)
    return dx, dw, db


@register_decomposition("_fused_rms_norm")
def fused_rms_norm(input, normalized_shape, weight, eps):
    axis = input.ndim - len(normalized_shape)
    dims = list(range(axis, input.ndim))
    x = _compute(input)
    rstd = ops.rsqrt(ops.add(ops.mean(ops.mul(x, x), dims, True), eps))
    out = ops.mul(x, rstd)
    if weight is not None:
        out = ops.mul(out, _compute(weight))
    return _to(out, input.dtype), _to(rstd, input.dtype)


def _variance(x, dim, correction, keepdim):
    """(var, mean) by eager's two-pass formula, in float64 as its CPU kernel accumulates."""
    dims = _dims(dim, x.ndim)
    n = _count(x.shape, dims)
    xd = _to(x, dt.float64)
    mean = ops.div(ops.sum(xd, dims, True), n)
    centered = ops.sub(xd, mean)
    dof = max(0, n - (1 if correction is None else correction))
    var = ops.div(ops.sum(ops.mul(centered, centered), dims, keepdim), dof)
    if not keepdim:
        mean = ops.squeeze(mean, dims)
    return var, mean


def _var_family(sqrt: bool, with_mean: bool):
    def decomposition(x, dim=None, correction=1, keepdim=False):
        _float_only(x, "var")
        var, mean = _variance(x, dim, correction, keepdim)
        if sqrt:
            var = ops.sqrt(var)
        var = _to(var, x.dtype)
        return (var, _to(mean, x.dtype)) if with_mean else var

    return decomposition


register_decomposition("var")(_var_family(False, False))
register_decomposition("std")(_var_family(True, False))
register_decomposition("var_mean")(_var_family(False, True))
register_decomposition("std_mean")(_var_family(True, True))


# -- fused pointwise ops and activations ------------------------------------------------------

@register_decomposition("add_scaled")
def add_scaled(x, other, alpha):
    return ops.add(x, ops.mul(other, alpha))


@register_decomposition("addcmul")
def addcmul(x, tensor1, tensor2, value=1):
    return ops.add(x, ops.mul(ops.mul(tensor1, tensor2), value))


@register_decomposition("addcdiv")
def addcdiv(x, tensor1, tensor2, value=1):
    return ops.add(x, ops.mul(ops.div(tensor1, tensor2), value))


@register_decomposition("silu")
def silu(x):
    _float_only(x, "silu")
    return ops.mul(x, ops.sigmoid(x))


@register_decomposition("mish")
def mish(x):
    _float_only(x, "mish")
    return ops.mul(x, ops.tanh(ops.softplus(x, 1.0, 20.0)))


@register_decomposition("hardsigmoid")
def hardsigmoid(x):
    _float_only(x, "hardsigmoid")
    return ops.div(ops.clamp(ops.add(x, 3.0), 0.0, 6.0), 6.0)


@register_decomposition("hardswish")
def hardswish(x):
    _float_only(x, "hardswish")
    return ops.mul(x, hardsigmoid(x))


@register_decomposition("relu6")
def relu6(x):
    return ops.clamp(x, 0, 6)


@register_decomposition("softsign")
def softsign(x):
    return ops.div(x, ops.add(ops.abs(x), 1))


@register_decomposition("tanhshrink")
def tanhshrink(x):
    return ops.sub(x, ops.tanh(x))
