"""Derivatives of the reductions, scans and softmaxes.

A reduction's gradient is broadcast back over the reduced dims (``_restore`` puts the
reduced dims back as size 1 when ``keepdim=False``). Ties follow PyTorch: amax/amin and the
full max()/min() split the gradient evenly among the tied elements; max(dim)/min(dim) and
cummax/cummin send it to the index they returned.
"""

from __future__ import annotations

import math

import ember
from ember._src.sparse._reductions import softmax_backward

from ._common import arg, where_zero
from ._registry import derivative

OPS = ember.ops


def _reduced_dims(dim, ndim: int) -> tuple:
    """The reduced dims, wrapped and sorted; None or [] mean all dims."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, int):
        dim = (dim,)
    dims = tuple(sorted(d % ndim if ndim else 0 for d in dim))
    return dims if dims and ndim else tuple(range(ndim))


def _restore(t, shape: tuple, dims: tuple, keepdim: bool):
    """``t`` (a reduction over ``dims`` of a ``shape`` tensor) with the reduced dims as size 1."""
    if keepdim or not shape:
        return t
    return t.reshape(tuple(1 if d in dims else s for d, s in enumerate(shape)))


def _count(shape: tuple, dims: tuple) -> int:
    return math.prod(shape[d] for d in dims)


def _reduction_args(inputs, dim_default=None):
    x = inputs.args[0]
    dims = _reduced_dims(arg(inputs, 1, "dim", dim_default), x.ndim)
    keepdim = arg(inputs, 2, "keepdim", False)
    return x, dims, keepdim


@derivative("sum", meta_only=True)
def _sum(grads, inputs, outputs):
    x, dims, keepdim = _reduction_args(inputs)
    return (_restore(grads[0], x.shape, dims, keepdim).expand(tuple(x.shape)),)


@derivative("nansum")
def _nansum(grads, inputs, outputs):
    x, dims, keepdim = _reduction_args(inputs)
    return (where_zero(ember.isnan(x), _restore(grads[0], x.shape, dims, keepdim).expand(tuple(x.shape))),)


@derivative("mean", meta_only=True)
def _mean(grads, inputs, outputs):
    x, dims, keepdim = _reduction_args(inputs)
    g = _restore(grads[0], x.shape, dims, keepdim)
    return ((g / _count(x.shape, dims)).expand(tuple(x.shape)),)


@derivative("nanmean")
def _nanmean(grads, inputs, outputs):
    x, dims, keepdim = _reduction_args(inputs)
    g = _restore(grads[0], x.shape, dims, keepdim)
    is_nan = ember.isnan(x)
    count = ember.sum(ember.logical_not(is_nan), dims, keepdim=True)
    return (where_zero(is_nan, g / count),)


@derivative("prod", save_output=True)
def _prod(grads, inputs, outputs):
    # result / x where x != 0; with one zero in a slice, that zero gets the product of the
    # others; with two or more, every gradient in the slice is 0.
    x, dims, keepdim = _reduction_args(inputs)
    g = _restore(grads[0], x.shape, dims, keepdim)
    is_zero = ember.eq(x, 0)
    nonzero_x = ember.where(is_zero, ember.ones((), dtype=x.dtype), x)
    product_of_nonzeros = nonzero_x
    for d in dims:
        product_of_nonzeros = ember.prod(product_of_nonzeros, d, keepdim=True)
    zeros_in_slice = ember.sum(is_zero, dims, keepdim=True)
    only_zero = ember.logical_and(is_zero, ember.eq(zeros_in_slice, 1))
    at_zero = where_zero(ember.logical_not(only_zero), product_of_nonzeros)
    local = ember.where(ember.eq(zeros_in_slice, 0), product_of_nonzeros / nonzero_x, at_zero)
    return (g * local,)


def _evenly_distributed(grads, inputs, outputs):
    # amax/amin/max()/min(): the gradient is shared equally by every element equal to the result.
    x, dims, keepdim = _reduction_args(inputs)
    g = _restore(grads[0], x.shape, dims, keepdim)
    hit = ember.eq(x, _restore(outputs[0], x.shape, dims, keepdim))
    count = ember.sum(hit, dims, keepdim=True)
    # a product, not a select, as PyTorch's scale_grad_by_count: a NaN result (no element equals it)
    # gives NaN gradients there, and an infinite gradient times a missed element is NaN
    return ((g / count) * hit,)


def _evenly_distributed_nan(grads, inputs, outputs):
    # max()/min() of all elements: a NaN result is shared by the NaNs (PyTorch's evenly_distribute_backward);
    # amax/amin compare with == only, as PyTorch's scale_grad_by_count.
    x = inputs.args[0]
    out = outputs[0]
    hit = ember.logical_or(ember.eq(x, out), ember.logical_and(ember.isnan(x), ember.isnan(out)))
    count = ember.sum(hit)
    return (where_zero(ember.logical_not(hit), grads[0] / count),)


for _name in ("amax", "amin"):
    derivative(_name, save_output=True)(_evenly_distributed)
for _name in ("max_all", "min_all"):
    derivative(_name, save_output=True)(_evenly_distributed_nan)


def _index_grids(shape: tuple, dim: int, index):
    """Full advanced-index tensors addressing ``index`` along ``dim`` (a scatter's targets)."""
    grids = []
    for d, n in enumerate(shape):
        if d == dim:
            grids.append(index)
        else:
            view = [1] * len(shape)
            view[d] = n
            grids.append(ember.arange(n, device=index.device).reshape(view))
    return grids


def _scatter_add(shape: tuple, dim: int, index, g):
    """zeros(shape) with ``g`` added at ``index`` along ``dim`` (scatter_add)."""
    zeros = g.new_zeros(shape)
    if not shape:
        return zeros + g
    return ember.index_put(zeros, _index_grids(shape, dim, index), g, accumulate=True)


def _selected_index(grads, inputs, outputs):
    # max(dim)/min(dim): the gradient goes to the element whose index was returned.
    g = grads[0]
    if g is None:
        return (None,)
    x = inputs.args[0]
    dim = arg(inputs, 1, "dim")
    dim = dim % x.ndim if x.ndim else 0
    keepdim = arg(inputs, 2, "keepdim", False)
    indices = _restore(outputs[1], x.shape, (dim,), keepdim)
    return (_scatter_add(x.shape, dim, indices, _restore(g, x.shape, (dim,), keepdim)),)


for _name in ("max_dim", "min_dim"):
    derivative(_name, save_output=True)(_selected_index)


def _cumulative_extremum(grads, inputs, outputs):
    g = grads[0]
    if g is None:
        return (None,)
    x = inputs.args[0]
    dim = arg(inputs, 1, "dim")
    dim = dim % x.ndim if x.ndim else 0
    return (_scatter_add(x.shape, dim, outputs[1], g),)


for _name in ("cummax", "cummin"):
    derivative(_name, save_output=True)(_cumulative_extremum)


# -- var / std ------------------------------------------------------------------------------


def _moment_args(inputs):
    x = inputs.args[0]
    dim = arg(inputs, 1, "dim", None)
    correction = arg(inputs, 2, "correction", 1)
    keepdim = arg(inputs, 3, "keepdim", False)
    return x, dim, 1 if correction is None else correction, keepdim


def _var_grad(g, x, dim, correction, keepdim):
    """PyTorch's var_backward, with its quirks: a full reduction (dim None, or a 0-d input) with
    no degrees of freedom gives inf (NaN where x equals its mean); over dims, 2 / (n - correction)
    is used as is (inf at n == correction, negative beyond), and an empty dim list counts n as 1."""
    if x.ndim == 0 or dim is None:
        mean = ember.mean(x)
        dof = math.prod(x.shape) - correction
        if dof <= 0:
            nan, inf = (ember.full((), v, dtype=x.dtype) for v in (math.nan, math.inf))
            return g * ember.where(ember.eq(x, mean), nan, inf)
        return (2.0 / dof) * g * (x - mean)
    dims = _reduced_dims(dim, x.ndim)
    listed = (dim,) if isinstance(dim, int) else tuple(dim)
    if listed:
        g = _restore(g, x.shape, dims, keepdim)
    dof = _count(x.shape, dims) if listed else 1
    dof -= correction
    factor = 2.0 / dof if dof != 0 else math.inf
    return factor * g * (x - ember.mean(x, dims, keepdim=True))


def _std_grad(g, std, x, dim, correction, keepdim):
    # PyTorch's std_backward: var's gradient of g / (2 std), zero where std is 0.
    return _var_grad(where_zero(ember.eq(std, 0), g / (std * 2)), x, dim, correction, keepdim)


def _mean_grad(g, x, dims):
    return (g / _count(x.shape, dims)).expand(tuple(x.shape))


def _moment_backward(kind: str):
    def backward(grads, inputs, outputs):
        x, dim, correction, keepdim = _moment_args(inputs)
        total = None
        if grads[0] is not None:
            if kind == "var":
                total = _var_grad(grads[0], x, dim, correction, keepdim)
            else:
                total = _std_grad(grads[0], outputs[0], x, dim, correction, keepdim)
        if len(grads) > 1 and grads[1] is not None:
            dims = _reduced_dims(dim, x.ndim)
            part = _mean_grad(_restore(grads[1], x.shape, dims, keepdim), x, dims)
            total = part if total is None else total + part
        return (total,)

    return backward


derivative("var")(_moment_backward("var"))
derivative("var_mean")(_moment_backward("var"))
derivative("std", save_output=True)(_moment_backward("std"))
derivative("std_mean", save_output=True)(_moment_backward("std"))


# -- norm, logsumexp ------------------------------------------------------------------------


@derivative("norm", save_output=True)
def _norm(grads, inputs, outputs):
    x = inputs.args[0]
    p = arg(inputs, 1, "p", 2)
    p = 2.0 if p is None or p == "fro" else float(p)
    dims = _reduced_dims(arg(inputs, 2, "dim", None), x.ndim)
    keepdim = arg(inputs, 3, "keepdim", False)
    g = _restore(grads[0], x.shape, dims, keepdim)
    norm = _restore(outputs[0], x.shape, dims, keepdim).to(x.dtype)
    if p == 0:
        return (ember.zeros(x.shape, dtype=g.dtype),)
    if p == 1:
        return (g * ember.sgn(x),)
    if math.isinf(p):
        # Like amax of |x|: shared evenly among the elements reaching the norm.
        hit = ember.eq(ember.abs(x), norm)
        count = ember.sum(hit, dims, keepdim=True)
        return (where_zero(ember.logical_not(hit), ember.sgn(x) * g / count),)
    if p == 2:
        local = x / norm
    else:
        local = x * ember.pow(ember.abs(x), p - 2) / ember.pow(norm, p - 1)
    return (where_zero(ember.eq(norm, 0), g * local),)


@derivative("logsumexp", save_output=True)
def _logsumexp(grads, inputs, outputs):
    x = inputs.args[0]
    dims = _reduced_dims(arg(inputs, 1, "dim"), x.ndim)
    keepdim = arg(inputs, 2, "keepdim", False)
    g = _restore(grads[0], x.shape, dims, keepdim)
    return (g * ember.exp(x - _restore(outputs[0], x.shape, dims, keepdim)),)


# -- scans and softmax -----------------------------------------------------------------------


def _scan_dim(inputs):
    x = inputs.args[0]
    dim = arg(inputs, 1, "dim")
    return x, dim % x.ndim if x.ndim else 0


def _reverse_cumsum(t, dim):
    return ember.cumsum(t.flip([dim]), dim).flip([dim])


@derivative("cumsum")
def _cumsum(grads, inputs, outputs):
    x, dim = _scan_dim(inputs)
    g = grads[0]
    return (g if x.ndim == 0 else _reverse_cumsum(g, dim),)


@derivative("cumprod", save_output=True)
def _cumprod(grads, inputs, outputs):
    x, dim = _scan_dim(inputs)
    g = grads[0]
    if x.ndim == 0 or x.numel() == 0:
        return (g,)
    if not bool(ember.any(ember.eq(x, 0))):
        return (_reverse_cumsum(g * outputs[0], dim) / x,)
    # With zeros, result/x is undefined: differentiate one position along dim at a time,
    # using the scan of x with that position replaced by 1 (the product of the others).
    n = x.shape[dim]
    pieces = []
    for i in range(n):
        parts = [x.narrow(dim, 0, i), ember.ones_like(x.narrow(dim, i, 1)), x.narrow(dim, i + 1, n - i - 1)]
        others = ember.cat(parts, dim)
        scan = ember.cumprod(others, dim).narrow(dim, i, n - i)
        pieces.append(ember.sum(g.narrow(dim, i, n - i) * scan, dim, keepdim=True))
    return (ember.cat(pieces, dim),)


def _native_softmax_grad(g, y) -> bool:
    """The two-pass native kernels, when no graph of the backward is recorded and both are plain
    floating tensors of a device that has them (double backward and ember.func keep the composite)."""
    return (not ember.is_grad_enabled() and type(g) is ember.Tensor and type(y) is ember.Tensor
            and y.is_floating_point() and g.dtype is y.dtype
            and y.device.type in OPS["_softmax_backward_data"].kernels)


@derivative("softmax", save_output=True)
def _softmax(grads, inputs, outputs):
    x, dim = _scan_dim(inputs)
    y = outputs[0]
    g = grads[0]
    if y.layout is not ember.strided:
        return (softmax_backward(g, y, dim, False),)
    if x.ndim == 0:
        return (g * 0,)
    if _native_softmax_grad(g, y):
        return (OPS["_softmax_backward_data"](g, y, dim, x.dtype),)
    gy = g * y
    return (gy - y * ember.sum(gy, dim, keepdim=True),)


@derivative("log_softmax", save_output=True)
def _log_softmax(grads, inputs, outputs):
    x, dim = _scan_dim(inputs)
    g = grads[0]
    if outputs[0].layout is not ember.strided:
        return (softmax_backward(g, outputs[0], dim, True),)
    if x.ndim == 0:
        return (g * 0,)
    if _native_softmax_grad(g, outputs[0]):
        return (OPS["_log_softmax_backward_data"](g, outputs[0], dim, x.dtype),)
    return (g - ember.exp(outputs[0]) * ember.sum(g, dim, keepdim=True),)
