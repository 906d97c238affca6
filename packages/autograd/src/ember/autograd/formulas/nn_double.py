"""Double backward: derivatives of the first-order kernels the nn formulas call
(``max_pool2d_with_indices_backward``, ``native_layer_norm_backward``, ...).

The pooling, padding, upsampling and embedding backward kernels are linear in grad_output: their
derivative there is the forward op (or a gather at the saved indices), and none reaches the input.
The normalizations' are differentiated through a composite of their forward written with ember
ops, whose eps is recovered from the saved rstd (the backward kernels do not take it).
"""

from __future__ import annotations

import ember

from ._common import arg, register_if_defined

OPS = ember.ops


def _gather_at(gg, indices):
    """gg (N, C, H, W) read at the flat H*W positions ``indices`` (N, C, h, w) holds."""
    return ember.gather(gg.flatten(-2), -1, indices.flatten(-2)).reshape(tuple(indices.shape))


def _max_pool2d_backward(grads, inputs, outputs):
    return _gather_at(grads[0], inputs.args[7]), None


def _adaptive_max_pool2d_backward(grads, inputs, outputs):
    return _gather_at(grads[0], inputs.args[2]), None


def _avg_pool2d_backward(grads, inputs, outputs):
    return (OPS["avg_pool2d"](grads[0], *inputs.args[2:]),)


def _adaptive_avg_pool2d_backward(grads, inputs, outputs):
    return (OPS["_adaptive_avg_pool2d"](grads[0], list(inputs.args[0].shape[-2:])),)


def _pad_enum_backward(grads, inputs, outputs):
    return (OPS["_pad_enum"](grads[0], arg(inputs, 2, "pad"), arg(inputs, 3, "mode")),)


def _upsample_backward(grads, inputs, outputs):
    grad_output = inputs.args[0]
    mode, align, scales = arg(inputs, 2, "mode"), arg(inputs, 3, "align_corners"), arg(inputs, 4, "scales")
    return (OPS["_upsample"](grads[0], list(grad_output.shape[2:]), mode, align, scales),)


def _embedding_backward(grads, inputs, outputs):
    # As PyTorch: scale_grad_by_freq is not applied again (the scaled gradient is a convention, not
    # a derivative, so there is no true second derivative to match).
    gg = grads[0]
    indices, padding_idx = inputs.args[1], inputs.args[3]
    rows = OPS["embedding"](gg, indices)
    if padding_idx >= 0:
        rows = ember.where(ember.eq(indices, padding_idx).unsqueeze(-1), ember.zeros((), dtype=gg.dtype), rows)
    return (rows,)


# -- normalizations --------------------------------------------------------------------------------


def _second_order(forward, grad_out, primals, ggs):
    """For the backward kernel ``vjp(forward, primals)(grad_out)``: the gradients of
    ``sum(gg_i * vjp_i)`` w.r.t. grad_out and each primal (None where a primal is None).
    With grad mode on they keep their history through the ggs (forward AD computes a jvp of this
    double backward by differentiating it w.r.t. the ggs: ``jacfwd(jacrev(f))``)."""
    keep = ember.is_grad_enabled() and any(gg is not None and gg.requires_grad for gg in ggs)
    with ember.enable_grad():
        go = grad_out.detach().requires_grad_(True)
        ps = [p.detach().requires_grad_(True) if p is not None else None for p in primals]
        live = [p for p in ps if p is not None]
        firsts = iter(ember.autograd.grad(forward(*ps), live, go, create_graph=True, allow_unused=True))
        outs, weights = [], []
        for p, gg in zip(ps, ggs):
            first = next(firsts) if p is not None else None
            if first is not None and gg is not None and first.requires_grad:
                outs.append(first)
                weights.append(gg)
        if not outs:
            return None, [None] * len(ps)
        seconds = iter(ember.autograd.grad(outs, [go] + live, weights, allow_unused=True, create_graph=keep))
    d_go = next(seconds)
    return d_go, [next(seconds) if p is not None else None for p in ps]


def _normalize(x, dims, rstd):
    """(x - mean) * rsqrt(var + eps) over ``dims`` as a function of x, eps taken from the saved rstd."""
    mean = x.mean(dims, keepdim=True)
    var = ((x - mean) * (x - mean)).mean(dims, keepdim=True)
    eps = (1 / (rstd * rstd)).reshape(tuple(var.shape)) - var.detach()
    return (x - mean) * (var + eps).rsqrt()


def _layer_norm_backward(grads, inputs, outputs):
    g, x, shape, rstd, weight, bias = (inputs.args[i] for i in (0, 1, 2, 4, 5, 6))
    dims = tuple(range(x.ndim - len(shape), x.ndim))

    def forward(x, w, b):
        y = _normalize(x, dims, rstd)
        y = y * w if w is not None else y
        return y + b if b is not None else y

    if bias is None:  # the bias gradient (sum of grad_out) may be asked for without a bias
        bias = ember.zeros(tuple(x.shape[x.ndim - len(shape):]), dtype=x.dtype)
    d_g, (d_x, d_w, _) = _second_order(forward, g, (x, weight, bias), tuple(grads) + (None,) * 3)
    return d_g, d_x, None, None, None, d_w, None, None


def _channel(t, ndim):
    return t.reshape((1, -1) + (1,) * (ndim - 2))


def _batch_norm_backward(grads, inputs, outputs):
    g, x, weight, running_mean, running_var = (inputs.args[i] for i in range(5))
    training, eps = arg(inputs, 7, "train"), arg(inputs, 8, "eps")
    dims = (0,) + tuple(range(2, x.ndim))

    def forward(x, w, b):
        if training:
            mean = x.mean(dims, keepdim=True)
            var = ((x - mean) * (x - mean)).mean(dims, keepdim=True)
        else:
            mean, var = _channel(running_mean, x.ndim), _channel(running_var, x.ndim)
        y = (x - mean) * (var + eps).rsqrt()
        y = y * _channel(w, x.ndim) if w is not None else y
        return y + _channel(b, x.ndim) if b is not None else y

    bias_stand_in = ember.zeros((x.shape[1],), dtype=x.dtype)  # the bias gradient is sum(grad_out)
    d_g, (d_x, d_w, _) = _second_order(forward, g, (x, weight, bias_stand_in), tuple(grads) + (None,) * 3)
    return d_g, d_x, d_w, None, None, None, None, None, None, None


def _group_norm_backward(grads, inputs, outputs):
    g, x, rstd, weight = inputs.args[0], inputs.args[1], inputs.args[3], inputs.args[4]
    n, group = arg(inputs, 5, "N"), arg(inputs, 8, "group")

    def forward(x, w, b):
        y = _normalize(x.reshape((n, group, -1)), (2,), rstd).reshape(tuple(x.shape))
        y = y * _channel(w, x.ndim) if w is not None else y
        return y + _channel(b, x.ndim) if b is not None else y

    bias_stand_in = ember.zeros((x.shape[1],), dtype=x.dtype)
    d_g, (d_x, d_w, _) = _second_order(forward, g, (x, weight, bias_stand_in), tuple(grads) + (None,) * 3)
    return d_g, d_x, None, None, d_w, None, None, None, None, None


register_if_defined("max_pool2d_with_indices_backward", _max_pool2d_backward)
register_if_defined("adaptive_max_pool2d_backward", _adaptive_max_pool2d_backward)
register_if_defined("avg_pool2d_backward", _avg_pool2d_backward)
register_if_defined("_adaptive_avg_pool2d_backward", _adaptive_avg_pool2d_backward)
register_if_defined("_pad_enum_backward", _pad_enum_backward)
register_if_defined("_upsample_backward", _upsample_backward)
register_if_defined("embedding_dense_backward", _embedding_backward)
register_if_defined("native_layer_norm_backward", _layer_norm_backward)
register_if_defined("native_batch_norm_backward", _batch_norm_backward)
register_if_defined("native_group_norm_backward", _group_norm_backward)
