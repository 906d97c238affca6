"""Derivatives of the fused pointwise updates (addcmul, addcdiv, add with alpha), as PyTorch's
derivatives.yaml gives them. lerp's is with the other pointwise formulas. Their in-place forms
(``addcmul_`` ...) reuse these, and forward mode derives its rule from them (forward.py)."""

from __future__ import annotations

from ._common import is_tensor
from ._registry import derivative


def _scalar(inputs, pos: int, name: str, default=1):
    args = inputs.args
    return args[pos] if len(args) > pos else inputs.kwargs.get(name, default)


def _wants(t) -> bool:
    return is_tensor(t) and t.requires_grad


@derivative("addcmul")
def _addcmul(grads, inputs, outputs):
    g = grads[0]
    t1, t2 = inputs.args[1], inputs.args[2]
    value = _scalar(inputs, 3, "value")
    return (
        g,
        g * (t2 * value) if _wants(t1) else None,
        g * (t1 * value) if _wants(t2) else None,
    )


@derivative("addcdiv")
def _addcdiv(grads, inputs, outputs):
    g = grads[0]
    t1, t2 = inputs.args[1], inputs.args[2]
    value = _scalar(inputs, 3, "value")
    return (
        g,
        g * (value / t2) if _wants(t1) else None,
        -g * (value * t1 / (t2 * t2)) if _wants(t2) else None,
    )


@derivative("add_scaled")
def _add_scaled(grads, inputs, outputs):
    g = grads[0]
    alpha = _scalar(inputs, 2, "alpha")
    return g, g * alpha if _wants(inputs.args[1]) else None
