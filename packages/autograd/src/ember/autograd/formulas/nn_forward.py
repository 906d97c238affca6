"""Forward-mode (JVP) rules of the fused norms (``native_layer_norm``, ``native_batch_norm``,
``native_group_norm``), following PyTorch's derivatives: the normalized output's tangent from the
saved statistics; the statistics' own tangents only where PyTorch defines them (group norm's mean
and rstd; layer and batch norm give none). Without these rules the tangents came from the backward
formulas, which ignore the statistics' cotangents, so the statistics' tangents were wrong.

With y = x_hat w + b and x_hat = (x - mean) rstd over the reduced dims (rstd = 1/sqrt(var + eps)):
d x_hat = rstd (dx - mean(dx) - x_hat mean(x_hat dx)), d rstd = -rstd^2 mean(x_hat dx).
"""

from __future__ import annotations

from ember._src import grad_mode

from ._common import arg
from ._registry import FORMULAS


def _normalized_tangent(x, xt, mean, rstd, dims, eps):
    if grad_mode.STATE.grad_enabled:
        # Reverse over forward (jacrev(jacfwd(f))): the tangent must be a differentiable function of
        # x, and the saved statistics' history does not carry every path (the batch and group norm
        # backward formulas ignore their cotangents), so they are recomputed from x.
        mean = x.mean(dims, keepdim=True)
        rstd = (x.var(dims, unbiased=False, keepdim=True) + eps).rsqrt()
    x_hat = (x - mean) * rstd
    if xt is None:
        return x_hat, None, rstd
    centered = xt - xt.mean(dims, keepdim=True)
    return x_hat, rstd * (centered - x_hat * (x_hat * xt).mean(dims, keepdim=True)), rstd


def _affine_tangent(x_hat, nt, weight, wt, bt, view):
    """Tangent of x_hat * w + b: w and b broadcast through ``view`` (their shape inside x)."""
    out = None
    if nt is not None:
        out = nt * view(weight) if weight is not None else nt
    if wt is not None:
        part = x_hat * view(wt)
        out = part if out is None else out + part
    if bt is not None:
        part = view(bt).expand(tuple(x_hat.shape))
        out = part if out is None else out + part
    return out


def _layer_norm_jvp(tangents, inputs, outputs):
    x, shape, weight = inputs.args[0], inputs.args[1], inputs.args[2]
    xt, _, wt, bt = (tuple(tangents) + (None,) * 4)[:4]
    dims = tuple(range(x.ndim - len(shape), x.ndim))
    x_hat, nt, rstd = _normalized_tangent(x, xt, outputs[1], outputs[2], dims, arg(inputs, 4, "eps"))
    return _affine_tangent(x_hat, nt, weight, wt, bt, lambda t: t), None, None


def _batch_norm_jvp(tangents, inputs, outputs):
    x, weight, _, running_mean, running_var = (inputs.args[i] for i in range(5))
    training, eps = arg(inputs, 5, "training"), arg(inputs, 7, "eps")
    xt, wt, bt = (tuple(tangents) + (None,) * 3)[:3]
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)

    def view(t):
        return t.reshape(shape)

    if training:
        dims = (0,) + tuple(range(2, x.ndim))
        x_hat, nt, rstd = _normalized_tangent(x, xt, view(outputs[1]), view(outputs[2]), dims, eps)
    else:  # the running statistics are constants: x_hat is affine in x
        rstd = view((running_var + eps).rsqrt())
        x_hat = (x - view(running_mean)) * rstd
        nt = None if xt is None else xt * rstd
    return _affine_tangent(x_hat, nt, weight, wt, bt, view), None, None


def _group_norm_jvp(tangents, inputs, outputs):
    x, weight = inputs.args[0], inputs.args[1]
    n, c, hw, group = (arg(inputs, i, name) for i, name in ((3, "N"), (4, "C"), (5, "HxW"), (6, "group")))
    xt, wt, bt = (tuple(tangents) + (None,) * 3)[:3]
    grouped = (n, group, (c // group) * hw)
    mean, rstd = outputs[1], outputs[2]
    xg = x.reshape(grouped)
    xtg = None if xt is None else xt.reshape(grouped)
    eps = arg(inputs, 7, "eps")
    x_hat, nt, rstd = _normalized_tangent(xg, xtg, mean.unsqueeze(-1), rstd.unsqueeze(-1), (-1,), eps)
    shape = (1, c) + (1,) * (x.ndim - 2)
    out_t = _affine_tangent(x_hat.reshape(tuple(x.shape)), None if nt is None else nt.reshape(tuple(x.shape)),
                            weight, wt, bt, lambda t: t.reshape(shape))
    if xtg is None:
        return out_t, None, None
    rstd = rstd.squeeze(-1)
    return out_t, xtg.mean(-1), -(rstd * rstd) * (x_hat * xtg).mean(-1)


def register() -> None:
    for name, rule in (("native_layer_norm", _layer_norm_jvp), ("native_batch_norm", _batch_norm_jvp),
                       ("native_group_norm", _group_norm_jvp)):
        if name in FORMULAS:
            FORMULAS[name].jvp = rule
