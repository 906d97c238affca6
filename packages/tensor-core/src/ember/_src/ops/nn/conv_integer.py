"""Convolutions of integer tensors, as PyTorch's CPU build computes them (its slow_conv kernels):
every integer dtype forward, int64 only transposed, in the tensors' own dtype (wrapping as the
dtype's arithmetic does). Written over integer matmul and strided slices of the 5-d (3 spatial
dims) forms conv.py makes; integer tensors never require grad, so there is no backward."""

from __future__ import annotations

from ... import dtypes
from ...tensor import Tensor
from .._common import type_name
from ..creation.factories import zeros
from ..shape.joining import stack

# PyTorch's kernel names in its "not implemented for" errors, by (transposed, spatial dims).
_KERNEL_NAMES = {
    (False, 1): "slow_conv2d_cpu", (False, 2): "slow_conv2d_cpu", (False, 3): "compute_columns3d",
    (True, 1): "slow_conv_transpose2d_out_cpu", (True, 2): "slow_conv_transpose2d_out_cpu",
    (True, 3): "slow_conv_transpose3d_out_cpu",
}


def check_integer_conv(dtype, transposed: bool, dilated: bool, spatial_dims: int) -> None:
    """PyTorch's NotImplementedError for the integer dtypes its kernels lack: bool, and anything
    but int64 for transposed or dilated convolutions (kernels of their own)."""
    if dilated and not transposed:
        name = "slow_conv_dilated<>"
    else:
        name = _KERNEL_NAMES[transposed, spatial_dims]
    if dtype is dtypes.bool or ((transposed or dilated) and dtype is not dtypes.int64):
        raise NotImplementedError(f"\"{name}\" not implemented for '{type_name(dtype)}'")


def _offsets(kernel: tuple):
    for a in range(kernel[0]):
        for b in range(kernel[1]):
            for c in range(kernel[2]):
                yield a, b, c


def _window(t: Tensor, start: tuple, count: tuple, step: tuple) -> Tensor:
    """``t[:, :, start::step]`` over the 3 spatial dims, ``count`` elements each."""
    return t[:, :, start[0]:start[0] + (count[0] - 1) * step[0] + 1:step[0],
             start[1]:start[1] + (count[1] - 1) * step[1] + 1:step[1],
             start[2]:start[2] + (count[2] - 1) * step[2] + 1:step[2]]


def conv_forward_integer(x5: Tensor, w5: Tensor, bias, out_shape5: tuple, stride, padding, dilation,
                         groups: int) -> Tensor:
    """``out[n, o] = sum over in-channels of o's group and kernel taps of x * w`` (+ bias)."""
    n, channels = x5._shape[:2]
    out_channels, group_channels = w5._shape[:2]
    kernel = w5._shape[2:]
    spatial_out = out_shape5[2:]
    padded = zeros((n, channels) + tuple(s + 2 * p for s, p in zip(x5._shape[2:], padding)), dtype=x5.dtype)
    _window(padded, padding, x5._shape[2:], (1, 1, 1)).copy_(x5)
    taps = [_window(padded, tuple(o * d for o, d in zip(offset, dilation)), spatial_out, stride)
            for offset in _offsets(kernel)]
    columns = stack(taps, 2)  # (n, channels, taps, *spatial_out)
    size = 1
    for s in spatial_out:
        size *= s
    columns = columns.reshape(n, groups, group_channels * len(taps), size)
    weights = w5.reshape(groups, out_channels // groups, group_channels * len(taps))
    out = (weights @ columns).reshape((n, out_channels) + tuple(spatial_out))
    if bias is not None:
        out.add_(bias.reshape(1, out_channels, 1, 1, 1))
    return out


def conv_transpose_integer(x5: Tensor, w5: Tensor, bias, out_shape5: tuple, stride, padding, dilation,
                           groups: int) -> Tensor:
    """The transposed convolution: every input element adds ``x * w`` at ``i * stride - padding +
    tap * dilation`` of its output channels."""
    n, channels = x5._shape[:2]
    group_out = w5._shape[1]
    group_channels = channels // groups
    kernel = w5._shape[2:]
    spatial_in = x5._shape[2:]
    spatial_out = out_shape5[2:]
    taps = len(list(_offsets(kernel)))
    size = 1
    for s in spatial_in:
        size *= s
    # (groups, group_out * taps, group_channels) @ (n, groups, group_channels, size)
    weights = w5.reshape(groups, group_channels, group_out * taps).transpose(1, 2)
    products = (weights @ x5.reshape(n, groups, group_channels, size)).reshape(
        (n, groups * group_out, taps) + tuple(spatial_in))
    full = tuple(max((i - 1) * s + d * (k - 1) + 1, p + o)
                 for i, s, d, k, p, o in zip(spatial_in, stride, dilation, kernel, padding, spatial_out))
    buffer = zeros((n, groups * group_out) + full, dtype=x5.dtype)
    for index, offset in enumerate(_offsets(kernel)):
        _window(buffer, tuple(o * d for o, d in zip(offset, dilation)), spatial_in, stride).add_(products[:, :, index])
    out = _window(buffer, tuple(padding), spatial_out, (1, 1, 1)).contiguous()
    if bias is not None:
        out.add_(bias.reshape(1, groups * group_out, 1, 1, 1))
    return out
