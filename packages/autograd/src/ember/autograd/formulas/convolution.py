"""Derivatives of convolution (and of its backward, for double backward) and im2col/col2im.

convolution is bilinear in (input, weight): its backward op gives both adjoints. The
backward is itself bilinear in (grad_output, input/weight), so its own derivative is built
from the same two ops (``<B(g, w), a> = <g, conv(a, w)>``), which holds for transposed
convolutions too.
"""

from __future__ import annotations

import ember

from ._common import arg, register_if_defined

OPS = ember.ops


def _params(inputs, first: int):
    names = ("stride", "padding", "dilation", "transposed", "output_padding", "groups")
    return [arg(inputs, first + i, n) for i, n in enumerate(names)]


def _needs(x) -> bool:
    return isinstance(x, ember.Tensor) and x.requires_grad


def _convolution(grads, inputs, outputs):
    g = grads[0]
    x, w, bias = arg(inputs, 0, "input"), arg(inputs, 1, "weight"), arg(inputs, 2, "bias")
    params = _params(inputs, 3)
    bias_sizes = list(bias.shape) if bias is not None else None
    mask = [_needs(x), _needs(w), _needs(bias)]
    gi, gw, gb = OPS["convolution_backward"](g, x, w, bias_sizes, *params, mask)
    return gi, gw, gb


def _convolution_backward(grads, inputs, outputs):
    gg_input, gg_weight, gg_bias = (tuple(grads) + (None, None, None))[:3]
    g, x, w = inputs.args[0], inputs.args[1], inputs.args[2]
    bias_sizes = arg(inputs, 3, "bias_sizes")
    params = _params(inputs, 4)
    grad_g = grad_x = grad_w = None
    if gg_input is not None:
        grad_g = OPS["convolution"](gg_input, w, None, *params)
        grad_w = OPS["convolution_backward"](g, gg_input, w, bias_sizes, *params, [False, True, False])[1]
    if gg_weight is not None:
        part = OPS["convolution"](x, gg_weight, None, *params)
        grad_g = part if grad_g is None else grad_g + part
        grad_x = OPS["convolution_backward"](g, x, gg_weight, bias_sizes, *params, [True, False, False])[0]
    if gg_bias is not None:
        part = gg_bias.reshape((1, -1) + (1,) * (g.ndim - 2))
        grad_g = part.expand(tuple(g.shape)) if grad_g is None else grad_g + part
    return grad_g, grad_x, grad_w


def _im2col(grads, inputs, outputs):
    x = inputs.args[0]
    kernel, dilation = arg(inputs, 1, "kernel_size"), arg(inputs, 2, "dilation")
    padding, stride = arg(inputs, 3, "padding"), arg(inputs, 4, "stride")
    return (OPS["col2im"](grads[0], list(x.shape[-2:]), kernel, dilation, padding, stride),)


def _col2im(grads, inputs, outputs):
    kernel, dilation = arg(inputs, 2, "kernel_size"), arg(inputs, 3, "dilation")
    padding, stride = arg(inputs, 4, "padding"), arg(inputs, 5, "stride")
    return (OPS["im2col"](grads[0], kernel, dilation, padding, stride),)


register_if_defined("convolution", _convolution)
register_if_defined("convolution_backward", _convolution_backward)
register_if_defined("im2col", _im2col)
register_if_defined("col2im", _col2im)
