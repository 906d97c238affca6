"""Derivatives of the activation functions (relu family, elu family, gelu, softplus, ...).

At kinks the gradient is PyTorch's: relu/threshold give 0 at the threshold, hardtanh and
relu6 give 0 on their bounds, leaky_relu uses the negative slope at 0.
"""

from __future__ import annotations

import math
import struct

import ember

from ._common import arg, where_zero
from ._registry import derivative

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_KAPPA = 0.044715


def _elu_grad(g, x, alpha, scale, input_scale):
    negative = g * (input_scale * scale * alpha) * ember.exp(x * input_scale)
    return ember.where(ember.le(x, 0), negative, g * scale)


@derivative("elu")
def _elu(grads, inputs, outputs):
    alpha = arg(inputs, 1, "alpha", 1.0)
    scale = arg(inputs, 2, "scale", 1.0)
    input_scale = arg(inputs, 3, "input_scale", 1.0)
    return (_elu_grad(grads[0], inputs.args[0], alpha, scale, input_scale),)


def _celu_input_scale(alpha) -> float:
    # PyTorch's 1.0 / alpha.toFloat(): alpha rounded to float32 first, as in celu's forward kernel.
    return 1.0 / struct.unpack("f", struct.pack("f", alpha))[0]


@derivative("celu")
def _celu(grads, inputs, outputs):
    alpha = arg(inputs, 1, "alpha", 1.0)
    return (_elu_grad(grads[0], inputs.args[0], alpha, 1.0, _celu_input_scale(alpha)),)


@derivative("selu")
def _selu(grads, inputs, outputs):
    return (_elu_grad(grads[0], inputs.args[0], _SELU_ALPHA, _SELU_SCALE, 1.0),)


@derivative("relu", save_output=True)
def _relu(grads, inputs, outputs):
    return (where_zero(ember.le(outputs[0], 0), grads[0]),)


@derivative("threshold")
def _threshold(grads, inputs, outputs):
    threshold = arg(inputs, 1, "threshold", 0.0)
    return (where_zero(ember.le(inputs.args[0], threshold), grads[0]),)


def _hardtanh_grad(g, x, low, high):
    return where_zero(ember.logical_or(ember.le(x, low), ember.ge(x, high)), g)


@derivative("hardtanh")
def _hardtanh(grads, inputs, outputs):
    low = arg(inputs, 1, "min_val", -1.0)
    high = arg(inputs, 2, "max_val", 1.0)
    return (_hardtanh_grad(grads[0], inputs.args[0], low, high),)


@derivative("relu6")
def _relu6(grads, inputs, outputs):
    return (_hardtanh_grad(grads[0], inputs.args[0], 0.0, 6.0),)


@derivative("leaky_relu")
def _leaky_relu(grads, inputs, outputs):
    g = grads[0]
    slope = arg(inputs, 1, "negative_slope", 0.01)
    return (ember.where(ember.gt(inputs.args[0], 0), g, g * slope),)


# In-place elu_/celu_/leaky_relu_ have derivatives.yaml entries of their own: they differentiate from
# the result (self is gone) and refuse a negative slope, for which the result does not tell the sign
# of the input.
_NEGATIVE_SLOPE = (
    "In-place {} backward calculation is triggered with a negative slope which is not supported. This is "
    "caused by calling in-place forward function with a negative slope, please call out-of-place version instead."
)


def _elu_grad_from_result(g, result, alpha, scale, input_scale):
    if alpha < 0:
        raise RuntimeError(_NEGATIVE_SLOPE.format("elu"))
    return ember.where(ember.le(result, 0), g * (input_scale * (result + alpha * scale)), g * scale)


@derivative("elu_", save_output=True)
def _elu_inplace(grads, inputs, outputs):
    alpha = arg(inputs, 1, "alpha", 1.0)
    scale = arg(inputs, 2, "scale", 1.0)
    input_scale = arg(inputs, 3, "input_scale", 1.0)
    return (_elu_grad_from_result(grads[0], outputs[0], alpha, scale, input_scale),)


@derivative("celu_", save_output=True)
def _celu_inplace(grads, inputs, outputs):
    alpha = arg(inputs, 1, "alpha", 1.0)
    return (_elu_grad_from_result(grads[0], outputs[0], alpha, 1.0, _celu_input_scale(alpha)),)


@derivative("leaky_relu_", save_output=True)
def _leaky_relu_inplace(grads, inputs, outputs):
    g = grads[0]
    slope = arg(inputs, 1, "negative_slope", 0.01)
    if slope < 0:
        raise RuntimeError(
            _NEGATIVE_SLOPE.format("leakyReLu") + " File an issue at https://github.com/pytorch/pytorch if you do "
            "require supporting in-place leakRelu backward calculation with negative slope"
        )
    return (ember.where(ember.gt(outputs[0], 0), g, g * slope),)


@derivative("hardsigmoid")
def _hardsigmoid(grads, inputs, outputs):
    x = inputs.args[0]
    inside = ember.logical_and(ember.gt(x, -3.0), ember.lt(x, 3.0))
    return (where_zero(ember.logical_not(inside), grads[0] / 6.0),)


@derivative("hardswish")
def _hardswish(grads, inputs, outputs):
    g = grads[0]
    x = inputs.args[0]
    middle = g * (x / 3.0 + 0.5)
    # Open interval (-3, 3) for the middle piece, as PyTorch's kernel.
    return (where_zero(ember.le(x, -3.0), ember.where(ember.lt(x, 3.0), middle, g)),)


def _native_gelu_grad(g, x, approximate):
    """The one-pass native kernel, when no graph of the backward is recorded and both are plain
    tensors of a device that has it; None sends the caller to the composite (double backward,
    ember.func's wrapped tensors, other devices)."""
    if (ember.is_grad_enabled() or type(x) is not ember.Tensor or type(g) is not ember.Tensor
            or x.device.type not in ember.ops["gelu_backward"].kernels):
        return None
    return ember.ops["gelu_backward"](g, x, approximate=approximate)


@derivative("gelu")
def _gelu(grads, inputs, outputs):
    x = inputs.args[0]
    native = _native_gelu_grad(grads[0], x, "none")
    if native is not None:
        return (native,)
    cdf = 0.5 * (1 + ember.erf(x * _INV_SQRT_2))
    pdf = _INV_SQRT_2PI * ember.exp(-0.5 * x * x)
    return (grads[0] * (cdf + x * pdf),)


@derivative("gelu_tanh")
def _gelu_tanh(grads, inputs, outputs):
    x = inputs.args[0]
    native = _native_gelu_grad(grads[0], x, "tanh")
    if native is not None:
        return (native,)
    x_sq = x * x
    t = ember.tanh(_SQRT_2_OVER_PI * (x + _GELU_KAPPA * x_sq * x))
    d_inner = _SQRT_2_OVER_PI * (1 + 3 * _GELU_KAPPA * x_sq)
    return (grads[0] * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * d_inner),)


@derivative("silu")
def _silu(grads, inputs, outputs):
    x = inputs.args[0]
    s = ember.sigmoid(x)
    return (grads[0] * s * (1 + x * (1 - s)),)


@derivative("mish")
def _mish(grads, inputs, outputs):
    x = inputs.args[0]
    t = ember.tanh(ember.softplus(x))
    return (grads[0] * (t + x * ember.sigmoid(x) * (1 - t * t)),)


@derivative("softplus")
def _softplus(grads, inputs, outputs):
    g = grads[0]
    x = inputs.args[0]
    beta = arg(inputs, 1, "beta", 1.0)
    threshold = arg(inputs, 2, "threshold", 20.0)
    z = ember.sigmoid(x * beta)  # exp(bx) / (1 + exp(bx))
    return (ember.where(ember.gt(x * beta, threshold), g, g * z),)


@derivative("softsign")
def _softsign(grads, inputs, outputs):
    d = 1 + ember.abs(inputs.args[0])
    return (grads[0] / (d * d),)


@derivative("tanhshrink")
def _tanhshrink(grads, inputs, outputs):
    t = ember.tanh(inputs.args[0])
    return (grads[0] * t * t,)
