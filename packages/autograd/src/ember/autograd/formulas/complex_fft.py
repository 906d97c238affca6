"""Derivatives of the complex-number ops and of the FFT primitives, in PyTorch's convention
(a complex gradient is the conjugate Wirtinger derivative; see FunctionsManual.cpp).

The engine records history only for floating outputs today, so the complex paths run once it
tracks complex tensors; angle and sgn of real inputs (zero gradients, as PyTorch) run now.
Registered only when the tensor core defines the ops.
"""

from __future__ import annotations

import ember

from ._common import arg, embed, register_if_defined, where_zero, zero_grads


def _view_as_real(grads, inputs, outputs):
    return (ember.view_as_complex(grads[0].contiguous()),)


def _view_as_complex(grads, inputs, outputs):
    return (ember.view_as_real(grads[0]),)


def _conj_physical(grads, inputs, outputs):
    return (ember.conj_physical(grads[0]),)


def _angle(grads, inputs, outputs):
    x = inputs.args[0]
    if not x.dtype.is_complex:
        return zero_grads(grads, inputs, outputs)
    g = grads[0]
    return (where_zero(x == 0, g * x / (x.abs() ** 2) * 1j),)


def _sgn(grads, inputs, outputs):
    x = inputs.args[0]
    if not x.dtype.is_complex:
        return zero_grads(grads, inputs, outputs)
    g, s = grads[0], outputs[0]
    magnitude = x.abs()
    return (where_zero(magnitude == 0, (g - s * s * ember.conj_physical(g)) / (2 * magnitude)),)


def _complex(grads, inputs, outputs):
    g = grads[0]
    return (g.real, g.imag)


def _polar(grads, inputs, outputs):
    g_conj, result = ember.conj_physical(grads[0]), outputs[0]
    return (ember.real(g_conj * ember.sgn(result)), ember.real(g_conj * result * 1j))


def _fft_ops():
    from ember._src.ops.spectral import fft

    return fft


def _c2c(grads, inputs, outputs):
    dim, norm, forward = arg(inputs, 1, "dim"), arg(inputs, 2, "normalization"), arg(inputs, 3, "forward")
    return (_fft_ops().c2c_op(grads[0], list(dim), norm, not forward),)


def _r2c(grads, inputs, outputs):
    # The one-sided spectrum is the first half of the full one: zero-fill the rest, then the
    # adjoint of the full transform, whose real part reaches the real input.
    x, dim = inputs.args[0], list(arg(inputs, 1, "dim"))
    norm, onesided = arg(inputs, 2, "normalization"), arg(inputs, 3, "onesided")
    g = grads[0]
    if onesided:
        last = dim[-1]
        shape = list(g.shape)
        shape[last] = x.shape[last]
        g = embed(tuple(shape), g, lambda full: full.narrow(last, 0, grads[0].shape[last]))
    return (ember.real(_fft_ops().c2c_op(g, dim, norm, False)),)


def _c2r(grads, inputs, outputs):
    # Backward of "fill the other half by symmetry, inverse transform, keep the real part":
    # a one-sided forward transform, with the bins whose mirror image was filled counted twice.
    dim, norm = list(arg(inputs, 1, "dim")), arg(inputs, 2, "normalization")
    g = grads[0]
    gi = _fft_ops().r2c_op(g, dim, norm, True)
    last = dim[-1]
    doubled = g.shape[last] - gi.shape[last]
    if doubled > 0:
        weight = ember.ones(gi.shape[last], dtype=g.dtype)
        weight[1:1 + doubled] = 2
        gi = gi * weight.reshape([-1 if d == last else 1 for d in range(gi.ndim)])
    return (gi,)


register_if_defined("view_as_real", _view_as_real)
register_if_defined("view_as_complex", _view_as_complex)
register_if_defined("conj_physical", _conj_physical)
register_if_defined("angle", _angle)
register_if_defined("sgn", _sgn, save_output=True)
register_if_defined("complex", _complex)
register_if_defined("polar", _polar, save_output=True)
register_if_defined("_fft_c2c", _c2c)
register_if_defined("_fft_r2c", _r2c)
register_if_defined("_fft_c2r", _c2r)
