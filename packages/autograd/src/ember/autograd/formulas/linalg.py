"""Derivatives of the matrix products (mm, bmm, mv, dot and their add* forms)."""

from __future__ import annotations

import ember
from ember._src.tensor import Tensor

from ._common import arg
from ._registry import derivative


def _needs(x) -> bool:
    if type(x) is Tensor and x._requires_grad:  # the C field answers for a plain tensor with a history
        return True
    return isinstance(x, ember.Tensor) and x.requires_grad


def _scaled(g, factor):
    return g if factor == 1 else g * factor


def _column_major(m) -> bool:
    """A 2-d operand laid out as the transpose of a contiguous matrix (``weight.t()`` in linear)."""
    if type(m) is Tensor and m._layout is ember.strided:  # a plain tensor's C fields, no property frames
        shape, stride = m._shape, m._stride
        return len(shape) == 2 and stride[0] == 1 and stride[1] == max(shape[0], 1) and shape[1] > 1
    if m.layout is not ember.strided:
        return False
    return m.ndim == 2 and m.stride(0) == 1 and m.stride(1) == max(m.shape[0], 1) and m.shape[1] > 1


def _dense_pair(a, b) -> bool:
    return a.layout is ember.strided and b.layout is ember.strided


def _mat1_grad(g, a, b):
    # plain tensors' layouts from their fields (no property frames: ~200 a GPT-2 step), others by the property
    if not (type(a) is Tensor and type(b) is Tensor and a._layout is ember.strided and b._layout is ember.strided or
            _dense_pair(a, b)):
        return ember.mm(g, b.t())  # mm gives a sparse operand a dense gradient, as PyTorch's mm
    # Produce the gradient in a's own layout, so that flowing back through ``.t()`` lands on a
    # contiguous gradient instead of needing a transposing copy (PyTorch does the same).
    return ember.mm(b, g.t()).t() if _column_major(a) else ember.mm(g, b.t())


def _mat2_grad(g, a, b):
    if not (type(a) is Tensor and type(b) is Tensor and a._layout is ember.strided and b._layout is ember.strided or
            _dense_pair(a, b)):
        return ember.mm(a.t(), g)
    return ember.mm(g.t(), a).t() if _column_major(b) else ember.mm(a.t(), g)


@derivative("mm")
def _mm(grads, inputs, outputs):
    g = grads[0]
    a, b = inputs.args[0], inputs.args[1]
    return (_mat1_grad(g, a, b) if _needs(a) else None, _mat2_grad(g, a, b) if _needs(b) else None)


@derivative("bmm")
def _bmm(grads, inputs, outputs):
    g = grads[0]
    a, b = inputs.args[0], inputs.args[1]
    return (
        ember.bmm(g, b.transpose(1, 2)) if _needs(a) else None,
        ember.bmm(a.transpose(1, 2), g) if _needs(b) else None,
    )


@derivative("mv")
def _mv(grads, inputs, outputs):
    g = grads[0]
    a, v = inputs.args[0], inputs.args[1]
    return (ember.outer(g, v) if _needs(a) else None, ember.mv(a.t(), g) if _needs(v) else None)


@derivative("dot")
def _dot(grads, inputs, outputs):
    g = grads[0]
    a, b = inputs.args[0], inputs.args[1]
    return (g * b if _needs(a) else None, g * a if _needs(b) else None)


def _beta_alpha(inputs):
    return arg(inputs, 3, "beta", 1), arg(inputs, 4, "alpha", 1)


@derivative("addmm")
def _addmm(grads, inputs, outputs):
    g = grads[0]
    a, b = inputs.args[1], inputs.args[2]
    beta, alpha = _beta_alpha(inputs)
    if beta == 1 and alpha == 1:  # linear's addmm: no scaling frames
        return g, _mat1_grad(g, a, b) if _needs(a) else None, _mat2_grad(g, a, b) if _needs(b) else None
    return (
        _scaled(g, beta),
        _scaled(_mat1_grad(g, a, b), alpha) if _needs(a) else None,
        _scaled(_mat2_grad(g, a, b), alpha) if _needs(b) else None,
    )


@derivative("addmv")
def _addmv(grads, inputs, outputs):
    g = grads[0]
    beta, alpha = _beta_alpha(inputs)
    a, v = inputs.args[1], inputs.args[2]
    return (
        _scaled(g, beta),
        _scaled(ember.outer(g, v), alpha) if _needs(a) else None,
        _scaled(ember.mv(a.t(), g), alpha) if _needs(v) else None,
    )


@derivative("baddbmm")
def _baddbmm(grads, inputs, outputs):
    g = grads[0]
    beta, alpha = _beta_alpha(inputs)
    a, b = inputs.args[1], inputs.args[2]
    return (
        _scaled(g, beta),
        _scaled(ember.bmm(g, b.transpose(1, 2)), alpha) if _needs(a) else None,
        _scaled(ember.bmm(a.transpose(1, 2), g), alpha) if _needs(b) else None,
    )


@derivative("addbmm")
def _addbmm(grads, inputs, outputs):
    # out = beta * self + alpha * sum_i a[i] @ b[i]: every batch sees the same gradient.
    g = grads[0]
    beta, alpha = _beta_alpha(inputs)
    a, b = inputs.args[1], inputs.args[2]
    batch = a.shape[0]
    gb = g.unsqueeze(0).expand(batch, *g.shape)
    return (
        _scaled(g, beta),
        _scaled(ember.bmm(gb, b.transpose(1, 2)), alpha) if _needs(a) else None,
        _scaled(ember.bmm(a.transpose(1, 2), gb), alpha) if _needs(b) else None,
    )
