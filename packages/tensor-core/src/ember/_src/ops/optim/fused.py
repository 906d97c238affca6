"""Fused optimizer updates: ``_fused_adam_``, ``_fused_adamw_``, ``_fused_sgd_`` (PyTorch's aten ops).

Each is one native pass over every element of every parameter (``_C.fused_adam``,
``_C.fused_sgd``, csrc/cpu/optim.cpp): param, grad and state are read once and param and
state written once, where the per-op composition reads and writes each buffer several times.
ember.optim's Adam/AdamW/SGD call them for ``foreach``/``fused`` (and their default) steps.

The native pass takes float32/float64 contiguous CPU tensors of one dtype; any other list
(half types, non-contiguous grads, mixed dtypes) runs the same update through per-tensor
composite ops, so every input PyTorch accepts works. Steps are read, not bumped, as in PyTorch.
"""

from __future__ import annotations

import math
from operator import attrgetter

from ... import dispatch, dtypes
from ..._native import _C
from ...optable import declare
from ...tensor import Tensor

__all__: list[str] = []

_NATIVE = (dtypes.float32, dtypes.float64)
# (update, device type) -> fn(same arguments as _adam's, less name) -> bool: a device plugin's fused
# update ("adam" on "cuda": ember-cuda's one kernel per parameter). It returns False for a case it does
# not take (the composite below then runs); it is consulted only where the native pass would be.
DEVICE_UPDATES: dict = {}


def _scalar(value) -> float:
    return float(value.item()) if isinstance(value, Tensor) else float(value)


def _ops_visible() -> bool:
    """True when something (a dispatch mode, a ``__torch_dispatch__`` subclass, pending lazy work)
    must see the update as ops: no native or device-fused pass then."""
    return bool(dispatch._MODES_ENTERED[0] or dispatch._SUBCLASS_DISPATCH[0] or dispatch._SYNC_HOOK[0] is not None)


def _native_ok(*lists) -> bool:
    """True when the native pass may run: every tensor a contiguous dense CPU tensor of the first
    param's float dtype, and nothing that must see the update as ops (``_ops_visible``)."""
    if _ops_visible():
        return False
    first = lists[0][0].dtype if lists and lists[0] else None
    if first not in _NATIVE:
        return False
    dense = getattr(Tensor, "_layout", None)
    for items in lists:
        for t in items:
            if (not isinstance(t, Tensor) or t.dtype is not first or t._device.type != "cpu"
                    or getattr(t, "_layout", None) is not dense or not t.is_contiguous()):
                return False
    return True


def _check_lists(name: str, params, *others) -> None:
    n = len(params)
    for other in others:
        if len(other) != n:
            raise RuntimeError(f"{name}: Tensor lists must have the same number of tensors, got {n} and {len(other)}")
    if others:
        shapes = list(map(_SHAPE, params))  # C-level loops: the per-tensor check below only on a mismatch
        if all(list(map(_SHAPE, other)) == shapes for other in others):
            return
    for i, p in enumerate(params):
        shape = p.shape
        for other in others:
            if other[i].shape != shape:
                raise RuntimeError(f"{name}: Tensor lists must have matching shapes, got {tuple(p.shape)} and "
                                   f"{tuple(other[i].shape)} at index {i}")


_SHAPE = attrgetter("_shape")


def _skip(found_inf) -> bool:
    return found_inf is not None and float(found_inf.item()) != 0.0


def _adam(name, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
          weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, decoupled):
    params, grads, exp_avgs, exp_avg_sqs = list(params), list(grads), list(exp_avgs), list(exp_avg_sqs)
    max_exp_avg_sqs, state_steps = list(max_exp_avg_sqs), list(state_steps)
    if not amsgrad and max_exp_avg_sqs:
        raise RuntimeError("Expected max_exp_avg_sqs.empty() to be true, but got false.")
    maxes = max_exp_avg_sqs
    _check_lists(name, params, grads, exp_avgs, exp_avg_sqs, *([maxes] if amsgrad else []))
    if len(state_steps) != len(params):
        raise RuntimeError(f"{name}: expected one state_steps tensor per param")
    if not params:
        return
    lr = _scalar(lr)
    device_update = DEVICE_UPDATES.get(("adam", params[0]._device.type)) if isinstance(params[0], Tensor) else None
    if device_update is not None and not _ops_visible() and device_update(
            params, grads, exp_avgs, exp_avg_sqs, maxes, state_steps, lr, beta1, beta2, weight_decay, eps, amsgrad,
            maximize, grad_scale, found_inf, decoupled):
        pass
    elif _native_ok(params, grads, exp_avgs, exp_avg_sqs, maxes):
        _C.fused_adam(params, grads, exp_avgs, exp_avg_sqs, maxes, state_steps, lr, float(beta1), float(beta2),
                      float(weight_decay), float(eps), bool(amsgrad), bool(maximize), decoupled, grad_scale, found_inf)
    else:
        if _skip(found_inf):
            return
        for i, p in enumerate(params):  # on .data aliases: PyTorch's fused kernels bump no version counter
            _adam_one(p.data, grads[i], exp_avgs[i].data, exp_avg_sqs[i].data, maxes[i].data if amsgrad else None,
                      float(state_steps[i].item()), lr, beta1, beta2, weight_decay, eps, maximize, grad_scale,
                      decoupled)


def _adam_one(p, g, m, v, vmax, step, lr, beta1, beta2, weight_decay, eps, maximize, grad_scale, decoupled):
    """The same update on one tensor of any float dtype, computed in its compute dtype."""
    g = g.to(p.dtype)
    if grad_scale is not None:
        g = g / grad_scale.to(p.dtype)
    if maximize:
        g = -g
    if weight_decay != 0:
        if decoupled:
            p.mul_(1 - lr * weight_decay)
        else:
            g = g + p * weight_decay
    m.lerp_(g, 1 - beta1)
    v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    second = v
    if vmax is not None:
        vmax.copy_(vmax.maximum(v))
        second = vmax
    bc2_sqrt = math.sqrt(1 - beta2 ** step)
    denom = (second.sqrt() / bc2_sqrt).add_(eps)
    p.addcdiv_(m, denom, value=-lr / (1 - beta1 ** step))


def _fused_adam_(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr, beta1, beta2,
                 weight_decay, eps, amsgrad, maximize, grad_scale=None, found_inf=None):
    """Adam on every tensor of ``self`` in place (PyTorch's ``_fused_adam_``)."""
    _adam("_fused_adam_", self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
          weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, False)


def _fused_adamw_(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr, beta1, beta2,
                  weight_decay, eps, amsgrad, maximize, grad_scale=None, found_inf=None):
    """AdamW (decoupled weight decay) on every tensor of ``self`` in place (PyTorch's ``_fused_adamw_``)."""
    _adam("_fused_adamw_", self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
          weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, True)


def _fused_sgd_(self, grads, momentum_buffer_list, *, weight_decay, momentum, lr, dampening, nesterov, maximize,
                is_first_step, grad_scale=None, found_inf=None):
    """SGD (with momentum, dampening, nesterov) on every tensor of ``self`` in place (``_fused_sgd_``)."""
    params, grads, bufs = list(self), list(grads), list(momentum_buffer_list)
    use_bufs = momentum != 0
    if not use_bufs and bufs:
        raise RuntimeError("Expected momentum_buffer_list.empty() to be true, but got false.")
    _check_lists("_fused_sgd_", params, grads, *([bufs] if use_bufs else []))
    if not params:
        return
    lr = _scalar(lr)
    bufs = bufs if use_bufs else []
    if _native_ok(params, grads, bufs):
        _C.fused_sgd(params, grads, bufs, float(weight_decay), float(momentum), lr, float(dampening), bool(nesterov),
                     bool(maximize), bool(is_first_step), grad_scale, found_inf)
    else:
        if _skip(found_inf):
            return
        for i, p in enumerate(params):
            p = p.data  # an alias with a counter of its own: PyTorch's fused kernels bump no version counter
            d = grads[i].to(p.dtype)
            if grad_scale is not None:
                d = d / grad_scale.to(p.dtype)
            if maximize:
                d = -d
            if weight_decay != 0:
                d = d + p * weight_decay
            if use_bufs:
                b = bufs[i].data
                if is_first_step:
                    b.copy_(d)
                else:
                    b.mul_(momentum).add_(d, alpha=1 - dampening)
                d = d + b * momentum if nesterov else b
            p.sub_(d * lr)


for _fn in (_fused_adam_, _fused_adamw_, _fused_sgd_):
    _fn.__module__ = "ember"

# The public API of this module (optable.py; docs/adding-an-op.md): PyTorch's top-level names.
declare(__name__, """
_fused_adam_   function
_fused_adamw_  function
_fused_sgd_    function
""")
