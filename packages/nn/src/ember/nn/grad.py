"""``ember.nn.grad``: the gradients of a convolution with respect to its input and its weight
(``conv1d_input``, ``conv2d_weight``, ...), as ``torch.nn.grad``. A convolution is linear in each
of the two, so each is the exact vector-Jacobian product of the convolution at a zero point,
taken by ember's autograd."""

from __future__ import annotations

import ember

from . import functional as F

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input", "conv3d_weight"]

_CONVS = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def _grad_input(n, input_size, weight, grad_output, stride, padding, dilation, groups):
    x = ember.zeros(tuple(input_size), dtype=grad_output.dtype, device=grad_output.device, requires_grad=True)
    with ember.enable_grad():
        out = _CONVS[n](x, weight.detach(), None, stride, padding, dilation, groups)
        if tuple(out.shape) != tuple(grad_output.shape):
            raise RuntimeError(f"Expected grad_output of shape {tuple(out.shape)} for input_size {tuple(input_size)}, "
                               f"got {tuple(grad_output.shape)}")
        return ember.autograd.grad(out, x, grad_output)[0]


def _grad_weight(n, input, weight_size, grad_output, stride, padding, dilation, groups):
    w = ember.zeros(tuple(weight_size), dtype=grad_output.dtype, device=grad_output.device, requires_grad=True)
    with ember.enable_grad():
        out = _CONVS[n](input.detach(), w, None, stride, padding, dilation, groups)
        if tuple(out.shape) != tuple(grad_output.shape):
            raise RuntimeError(f"Expected grad_output of shape {tuple(out.shape)}, got {tuple(grad_output.shape)}")
        return ember.autograd.grad(out, w, grad_output)[0]


def conv1d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """The gradient of conv1d with respect to an input of shape ``input_size``."""
    return _grad_input(1, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv1d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """The gradient of conv1d with respect to a weight of shape ``weight_size``."""
    return _grad_weight(1, input, weight_size, grad_output, stride, padding, dilation, groups)


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _grad_input(2, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _grad_weight(2, input, weight_size, grad_output, stride, padding, dilation, groups)


def conv3d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _grad_input(3, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv3d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _grad_weight(3, input, weight_size, grad_output, stride, padding, dilation, groups)
