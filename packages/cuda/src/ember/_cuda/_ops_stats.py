"""CUDA kernels of the statistics ops: var, std, var_mean, std_mean, batch normalization
(``native_batch_norm`` forward in training and eval, ``native_batch_norm_backward``), vector
norms, logsumexp and RMS norm (``_fused_rms_norm``).

Both are built from the device's own reduction (``_reduce.reduce_into``, float32 accumulators for
half and float32 inputs, float64 for float64) and generated elementwise kernels
(``_elementwise.launch``, which broadcasts per-channel vectors without copies): the two-pass
variance (mean, then the sum of squared deviations: no cancellation), and batch norm as
per-channel sums followed by one fused elementwise pass. The core's CPU kernels run native code
on host memory, so CUDA tensors need these. Argument checks and result shapes are the core's.
"""

from __future__ import annotations

import math
import warnings

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.ops.reduction import composite as red_composite
from ember._src.ops.reduction import reduce as red
from ember._src.shapes import contiguous_strides
from ember._src.tensor import make_tensor, new_empty_tensor

from ._elementwise import launch
from ._ops_pointwise import fill_values
from ._reduce import accumulator, reduce_into


def _cd(dtype):
    return dt.float64 if dtype is dt.float64 else dt.float32


def _sum(x, dims, cd, scale: float = 1.0):
    """The sum (times ``scale``) of ``x`` over ``dims`` as a contiguous tensor of dtype ``cd`` shaped
    like the kept dims (the reduced dims dropped)."""
    out = new_empty_tensor(red._out_shape(x._shape, dims, False), cd, x._device)
    if x.numel() == 0:
        fill_values(out, 0.0)
        return out
    reduce_into("sum", x, dims, out, accumulator("sum", cd), scale)
    return out


def _shaped(t, shape: tuple):
    """The contiguous ``t`` viewed with ``shape`` (the same elements in order: size-1 dims added or dropped)."""
    return make_tensor(t._storage, tuple(shape), contiguous_strides(tuple(shape)), t._offset, t.dtype, t._device)


def _keepdim_view(t, shape: tuple, dims: tuple):
    """``t`` (contiguous, the kept dims of ``shape``) seen with the reduced dims as size 1 (stride 0)."""
    kept = iter(range(t.ndim))
    sizes, strides = [], []
    for d in range(len(shape)):
        if d in dims:
            sizes.append(1)
            strides.append(0)
        else:
            k = next(kept)
            sizes.append(t._shape[k])
            strides.append(t._stride[k])
    return make_tensor(t._storage, tuple(sizes), tuple(strides), t._offset, t.dtype, t._device)


def _moments(x, dims, cd):
    """(mean, sum of squared deviations) over ``dims``, both in ``cd``, shaped like the kept dims."""
    n = red._count(x._shape, dims)
    mean = _sum(x, dims, cd, 1.0 / n if n else float("nan"))
    sq = new_empty_tensor(x._shape, cd, x._device)
    launch("({0} - {1}) * ({0} - {1})", sq, [x, _keepdim_view(mean, x._shape, dims)], [cd, cd])
    return mean, _sum(sq, dims, cd)


def _declare_var(name: str, sqrt: bool, with_mean: bool):
    def kernel(x, dim=None, correction=1, keepdim=False):
        dims, shape = red_composite._var_result(x, dim, correction, keepdim, name)
        if x.dtype.is_complex:
            raise NotImplementedError(f"ember.ops.{name} has no CUDA kernel for complex dtype {x.dtype}")
        cd = _cd(x.dtype)
        n = red._count(x._shape, dims)
        mean, sq = _moments(x, dims, cd)
        dof = max(0, n - correction)
        if dof <= 0:
            warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than the "
                          "reduction factor (input numel divided by output numel).", UserWarning, stacklevel=3)
        var = new_empty_tensor(shape, x.dtype, x._device)
        launch("tl.sqrt({0} / {1})" if sqrt else "{0} / {1}", var, [_shaped(sq, shape), float(dof)], [cd, cd])
        if not with_mean:
            return var
        m = new_empty_tensor(shape, x.dtype, x._device)
        launch("{0}", m, [_shaped(mean, shape)], [cd])
        return var, m

    return kernel


# ---------------------------------------------------------------------------------- batch norm


def _channel_view(v, ndim: int):
    """A (C,) vector seen as (1, C, 1, ...) for broadcasting over an (N, C, ...) tensor."""
    shape = (1, v._shape[0]) + (1,) * (ndim - 2)
    stride = (0, v._stride[0]) + (0,) * (ndim - 2)
    return make_tensor(v._storage, shape, stride, v._offset, v.dtype, v._device)


def _stat_dims(x) -> tuple:
    return (0,) + tuple(range(2, x.ndim))


def _update_running(running, stat, momentum: float):
    if running is None:
        return
    launch("{0} * {1} + {2} * {3}", running, [running, 1.0 - momentum, stat, momentum],
           [_cd(running.dtype)] * 4)
    running._bump_version()


def _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    c = input._shape[1]
    dev, nd = input._device, input.ndim
    cd = _cd(input.dtype)
    dims = _stat_dims(input)
    count = input.numel() // c if c else 0
    out = new_empty_tensor(input._shape, input.dtype, dev)
    if training:
        mean, sq = _moments(input, dims, cd)
        invstd = new_empty_tensor((c,), cd, dev)
        launch("1.0 / tl.sqrt({0} / {1} + {2})", invstd, [sq, float(max(count, 1)), float(eps)], [cd] * 3)
        if running_mean is not None:
            _update_running(running_mean, mean, momentum)
        if running_var is not None:
            unbiased = new_empty_tensor((c,), cd, dev)
            launch("{0} / {1}", unbiased, [sq, float(count - 1) if count > 1 else 0.0], [cd, cd])
            _update_running(running_var, unbiased, momentum)
    else:
        mean = running_mean
        invstd = new_empty_tensor((c,), cd, dev)
        launch("1.0 / tl.sqrt({0} + {1})", invstd, [running_var, float(eps)], [cd, cd])
    if c and input.numel():
        w = weight if weight is not None else 1.0
        b = bias if bias is not None else 0.0
        wv = _channel_view(w, nd) if weight is not None else w
        bv = _channel_view(b, nd) if bias is not None else b
        launch("({0} - {1}) * {2} * {3} + {4}", out,
               [input, _channel_view(mean, nd), _channel_view(invstd, nd), wv, bv], [cd] * 5)
    if not training:
        return out, new_empty_tensor((0,), input.dtype, dev), new_empty_tensor((0,), input.dtype, dev)
    return out, _as(mean, input.dtype), _as(invstd, input.dtype)


def _as(t, dtype):
    if t.dtype is dtype:
        return t
    out = new_empty_tensor(t._shape, dtype, t._device)
    launch("{0}", out, [t], [_cd(t.dtype)])
    return out


def _batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps,
                         output_mask):
    c = input._shape[1]
    dev, nd = input._device, input.ndim
    cd = _cd(input.dtype)
    dims = _stat_dims(input)
    count = input.numel() // c if c else 0
    if train:
        mean, invstd = save_mean, save_invstd
    else:
        mean = running_mean
        invstd = new_empty_tensor((c,), cd, dev)
        launch("1.0 / tl.sqrt({0} + {1})", invstd, [running_var, float(eps)], [cd, cd])
    mv, iv = _channel_view(mean, nd), _channel_view(invstd, nd)
    sum_dy = _sum(grad_out, dims, cd)
    prod = new_empty_tensor(input._shape, cd, dev)
    launch("{0} * ({1} - {2})", prod, [grad_out, input, mv], [cd] * 3)
    sum_dy_xmu = _sum(prod, dims, cd)
    dx = dw = db = None
    if output_mask[0]:
        dx = new_empty_tensor(input._shape, input.dtype, dev)
        w = _channel_view(weight, nd) if weight is not None else 1.0
        if train and count:
            # dx = w * invstd * (dy - sum(dy) / count - (x - mu) * invstd^2 * sum(dy (x - mu)) / count)
            launch("{4} * {3} * ({0} - {5} / {7} - ({1} - {2}) * {3} * {3} * {6} / {7})", dx,
                   [grad_out, input, mv, iv, w, _channel_view(sum_dy, nd), _channel_view(sum_dy_xmu, nd),
                    float(count)], [cd] * 8)
        else:
            launch("{0} * {1} * {2}", dx, [grad_out, iv, w], [cd] * 3)
    if output_mask[1]:
        dw = new_empty_tensor((c,), input.dtype, dev)
        launch("{0} * {1}", dw, [sum_dy_xmu, invstd], [cd, cd])
    if output_mask[2]:
        db = _as(sum_dy, input.dtype)
    return dx, dw, db


def register() -> None:
    for name, sqrt, with_mean in (("var", False, False), ("std", True, False), ("var_mean", False, True),
                                  ("std_mean", True, True)):
        OPS[name].kernels["cuda"] = _declare_var(name, sqrt, with_mean)
    OPS["native_batch_norm"].kernels["cuda"] = _batch_norm
    OPS["native_batch_norm_backward"].kernels["cuda"] = _batch_norm_backward
    OPS["norm"].kernels["cuda"] = _norm
    OPS["logsumexp"].kernels["cuda"] = _logsumexp
    OPS["_fused_rms_norm"].kernels["cuda"] = _rms_norm



# ------------------------------------------------------------------------ norm, logsumexp, rms_norm


def _reduce_of(kind: str, t, dims, shape, cd):
    """``kind`` ("sum", "max", "min") of ``t`` over ``dims``, contiguous of dtype ``cd`` in ``shape``."""
    out = new_empty_tensor(tuple(shape), cd, t._device)
    if out.numel():
        if t.numel() == 0:
            fill_values(out, 0.0)
        else:
            reduce_into(kind, t, dims, out, accumulator(kind, cd))
    return out


_NORM_TERM = {2.0: ("{0} * {0}", "sum", "tl.sqrt({0})"), 1.0: ("tl.abs({0})", "sum", "{0}"),
              math.inf: ("tl.abs({0})", "max", "{0}"), -math.inf: ("tl.abs({0})", "min", "{0}"),
              0.0: ("tl.where({0} != 0, 1.0, 0.0)", "sum", "{0}")}


def _norm(x, p="fro", dim=None, keepdim=False, dtype=None):
    p, dims, shape, rd = red_composite._norm_result(x, p, dim, keepdim, dtype)
    if x.dtype.is_complex or rd.is_complex:
        raise NotImplementedError("ember.ops.norm has no CUDA kernel for complex dtypes")
    cd = _cd(rd)
    term, kind, final = _NORM_TERM.get(p, ("tl.exp({1} * tl.log(tl.abs({0})))", "sum", None))
    mapped = new_empty_tensor(x._shape, cd, x._device)
    launch(term, mapped, [x, p] if final is None else [x], [cd, cd] if final is None else [cd])
    r = _reduce_of(kind, mapped, dims, shape, cd)
    out = new_empty_tensor(tuple(shape), rd, x._device)
    if final is None:  # (sum |x|^p)^(1/p); |x|^p of 0 is 0 for p > 0 and inf for p < 0, as pow
        launch("tl.exp(tl.log({0}) / {1})", out, [r, p], [cd, cd])
    else:
        launch(final, out, [r], [cd])
    return out


def _logsumexp(x, dim, keepdim=False):
    dims, shape, rd = red_composite._lse_result(x, dim, keepdim)
    if rd.is_complex:
        raise NotImplementedError("ember.ops.logsumexp has no CUDA kernel for complex dtypes")
    cd = _cd(rd)
    if not x.dtype.is_floating_point:  # integers: the default float dtype, as on the CPU
        xf = new_empty_tensor(x._shape, cd, x._device)
        launch("{0}", xf, [x], [cd])
        x = xf
    kept = red._out_shape(x._shape, dims, False)
    out = new_empty_tensor(tuple(shape), rd, x._device)
    if x.numel() == 0:
        launch("tl.log({0})", out, [_reduce_of("sum", x, dims, shape, cd)], [cd])
        return out
    # Shift by the max (0 where it is infinite, so inf - inf never appears), as PyTorch does.
    m = _reduce_of("max", x, dims, kept, cd)
    launch("tl.where(tl.abs({0}) == float('inf'), 0.0, {0})", m, [m], [cd])
    e = new_empty_tensor(x._shape, cd, x._device)
    launch("tl.exp({0} - {1})", e, [x, _keepdim_view(m, x._shape, dims)], [cd, cd])
    s = _reduce_of("sum", e, dims, kept, cd)
    launch("tl.log({0}) + {1}", out, [_shaped(s, shape), _shaped(m, shape)], [cd, cd])
    return out


def _rms_norm(input, normalized_shape, weight, eps):
    axis = input.ndim - len(normalized_shape)
    stat_shape = tuple(input._shape[:axis]) + (1,) * len(normalized_shape)
    cd = _cd(input.dtype)
    dev = input._device
    out = new_empty_tensor(input._shape, input.dtype, dev)
    rstd = new_empty_tensor(stat_shape, cd, dev)
    if input.numel() == 0:
        return out, rstd
    dims = tuple(range(axis, input.ndim))
    n = 1
    for d in dims:
        n *= input._shape[d]
    sq = new_empty_tensor(input._shape, cd, dev)
    launch("{0} * {0}", sq, [input], [cd])
    ms = _sum(sq, dims, cd, 1.0 / n)
    launch("1.0 / tl.sqrt({0} + {1})", rstd, [_shaped(ms, stat_shape), float(eps)], [cd, cd])
    if weight is None:
        launch("{0} * {1}", out, [input, rstd], [cd, cd])
    else:
        launch("{0} * {1} * {2}", out, [input, rstd, weight], [cd, cd, cd])
    return out, rstd
