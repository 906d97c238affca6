"""3-d pooling (``max_pool3d``, ``avg_pool3d``, adaptive and LP forms) composed from the 2-d kernels.

A 3-d window is a product of a (D) window and an (H, W) window, and max, mean, adaptive bins and
the count of non-padded cells all factor over that product: pooling (H, W) with the 2-d kernel and
then D with a (k, 1) 2-d window gives PyTorch's values, its first-max tie order (d, then h, w) and,
through the 2-d kernels' own autograd formulas, its gradients.
"""

from __future__ import annotations

import math

import ember
from ember import Tensor
from ember._src.autocast import composite as _autocast_composite
from ember._src.ops._common import type_name as _type_name
from ember._src.ops.nn import pool as _pool
from ember._src.ops.pointwise import elementwise as _pointwise

__all__ = ["adaptive_avg_pool3d", "adaptive_max_pool3d", "adaptive_max_pool3d_with_indices", "avg_pool3d",
           "lp_pool3d", "max_pool3d", "max_pool3d_with_indices", "max_unpool3d"]


def _triple(v, fn: str, name: str, allow_none: bool = False, either: str = "either ") -> tuple | None:
    if allow_none and (v is None or (not isinstance(v, int) and len(v) == 0)):
        return None
    if isinstance(v, int):
        return (v, v, v)
    v = tuple(v)
    if len(v) == 1:
        return v * 3
    if len(v) != 3:
        omitted = "omitted, " if allow_none else ""
        raise RuntimeError(f"{fn}: {name} must {either}be {omitted}a single int, or a tuple of three ints")
    return v


def _batched(input: Tensor, fn_check: str) -> tuple:
    """(N, C, D, H, W) view of a 4-d or 5-d input, and whether a batch dim was added."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{fn_check}(): argument 'input' must be Tensor, not {type(input).__name__}")
    if input.ndim not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    return (input, False) if input.ndim == 5 else (input.unsqueeze(0), True)


def _wide(x: Tensor) -> Tensor:
    """float16/bfloat16 averaged in float32 across both steps, so only the result is rounded (as PyTorch)."""
    return x.float() if x.dtype in (ember.float16, ember.bfloat16) else x


def _out_size(size, k, pad, stride, dil, ceil_mode) -> int:
    out = (size + 2 * pad - dil * (k - 1) - 1 + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _check_geometry(x: Tensor, k, s, p, d, ceil_mode: bool, is_max: bool) -> None:
    """PyTorch's pool3d_shape_check, so errors name the 3-d sizes rather than the 2-d steps'."""
    if any(v == 0 for v in s):
        raise RuntimeError("stride should not be zero")
    if any(v <= 0 for v in k):
        raise RuntimeError(f"kernel size should be greater than zero, but got kT: {k[0]} kH: {k[1]} kW: {k[2]}")
    if any(v < 0 for v in s):
        raise RuntimeError(f"stride should be greater than zero, but got dT: {s[0]} dH: {s[1]} dW: {s[2]}")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"dilation should be greater than zero, but got dilationT: {d[0]} dilationH: {d[1]} "
                           f"dilationW: {d[2]}")
    if any(v == 0 for v in x.shape[1:]):
        raise RuntimeError(f"max_pool3d_with_indices_out_cpu_template(): Expected input's non-batch dimensions to "
                           f"have positive length, but input has a shape of {list(x.shape)} and non-batch "
                           f"dimension {[v == 0 for v in x.shape[1:]].index(True)} has length zero!")
    for pi, ki, di in zip(p, k, d):
        limit = ((ki - 1) * di + 1) // 2 if is_max else ki // 2
        if pi < 0 or pi > limit:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={pi}, "
                               f"kernel_size={ki} and dilation={di}")
    spatial = x.shape[2:]
    if not is_max and any(sz + 2 * pi < ki for sz, pi, ki in zip(spatial, p, k)):
        raise RuntimeError(f"input image (T: {spatial[0]} H: {spatial[1]} W: {spatial[2]}) smaller than kernel "
                           f"size (kT: {k[0]} kH: {k[1]} kW: {k[2]})")
    out = [_out_size(*a, ceil_mode) for a in zip(spatial, k, p, s, d)]
    if min(out) < 1:
        c = x.shape[1]
        raise RuntimeError(f"Given input size: ({c}x{'x'.join(map(str, spatial))}). Calculated output size: "
                           f"({c}x{'x'.join(map(str, out))}). Output size is too small")


def max_pool3d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = False):
    x, added = _batched(input, "max_pool3d")
    k = _triple(kernel_size, "max_pool3d", "kernel_size")
    s = _triple(stride, "max_pool3d", "stride", allow_none=True) or k
    p = _triple(padding, "max_pool3d", "padding")
    d = _triple(dilation, "max_pool3d", "dilation")
    _check_geometry(x, k, s, p, d, ceil_mode, True)
    n, c, dd, h, w = x.shape
    # (H, W) windows of every depth slice, then (k, 1) windows down the depth of those maxima.
    hw, hw_idx = _pool.max_pool2d_with_indices(x.reshape(n, c * dd, h, w), k[1:], s[1:], p[1:], d[1:], ceil_mode)
    oh, ow = hw.shape[-2:]
    out, d_idx = _pool.max_pool2d_with_indices(hw.reshape(n, c, dd, oh * ow), (k[0], 1), (s[0], 1), (p[0], 0),
                                               (d[0], 1), ceil_mode)
    od = out.shape[2]
    out = out.reshape(n, c, od, oh, ow)
    depth = ember.div(d_idx, oh * ow, rounding_mode="floor")  # the winning depth of each output cell
    plane = hw_idx.reshape(n, c, dd, oh * ow).gather(2, depth)
    indices = (depth * (h * w) + plane).reshape(n, c, od, oh, ow)
    if added:
        out, indices = out.squeeze(0), indices.squeeze(0)
    return out, indices


@_autocast_composite("fp32")
def max_pool3d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    out, indices = max_pool3d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return (out, indices) if return_indices else out


@_autocast_composite("fp32")
def avg_pool3d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    x, added = _batched(input, "avg_pool3d")
    k = _triple(kernel_size, "avg_pool3d", "kernel_size", either="")
    s = _triple(stride, "avg_pool3d", "stride", allow_none=True, either="") or k
    p = _triple(padding, "avg_pool3d", "padding", either="")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    _check_geometry(x, k, s, p, (1, 1, 1), ceil_mode, False)
    if x.dtype in (ember.float16, ember.bfloat16):  # PyTorch's CPU kernel has no reduced-precision form
        raise NotImplementedError(f"\"avg_pool3d_out_frame\" not implemented for '{_type_name(x.dtype)}'")
    n, c, dd, h, w = x.shape
    # Sums over (H, W) when a divisor overrides the window size, so the depth step divides once.
    plane = _pool.avg_pool2d(x.reshape(n, c * dd, h, w), k[1:], s[1:], p[1:], ceil_mode, count_include_pad,
                             1 if divisor_override is not None else None)
    oh, ow = plane.shape[-2:]
    out = _pool.avg_pool2d(plane.reshape(n, c, dd, oh * ow), (k[0], 1), (s[0], 1), (p[0], 0), ceil_mode,
                           count_include_pad, divisor_override)
    out = out.reshape(n, c, out.shape[2], oh, ow)
    return out.squeeze(0) if added else out


def _adaptive_input(input: Tensor, output_size, fn: str, sep: str) -> tuple:
    if not isinstance(input, Tensor):
        raise TypeError(f"{fn}(): argument 'input' must be Tensor, not {type(input).__name__}")
    if input.ndim not in (4, 5):
        raise RuntimeError(f"{fn}(): Expected 4D or 5D tensor, but got{sep} {list(input.shape)}")
    if isinstance(output_size, int):
        size = (output_size,) * 3
    else:
        size = tuple(output_size)
        if len(size) != 3:
            msg = ("adaptive_avg_pool3d: output_size must be 3" if fn == "adaptive_avg_pool3d"
                   else "adaptive_max_pool3d(): internal error: output_size.size() must be 3")
            raise RuntimeError(msg)
    # None keeps that input dim, as PyTorch's _list_with_default.
    size = tuple(input.shape[-3 + i] if v is None else v for i, v in enumerate(size))
    for v in size:
        if v < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {v}: "
                               f"{list(input.shape[:-3]) + list(size)}")
    for i, v in enumerate(input.shape[1:] if input.ndim == 5 else input.shape):
        if v == 0:
            raise RuntimeError(f"{fn}(): Expected input to have non-zero size for non-batch dimensions, but input "
                               f"has sizes {list(input.shape)} with dimension {i + (input.ndim == 5)} being empty")
    x = input if input.ndim == 5 else input.unsqueeze(0)
    return x, input.ndim == 4, size


@_autocast_composite("fp32")
def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    # PyTorch's composite checks the size, then takes a mean for a 1x1x1 output (a 0-sized volume gives
    # NaN, any rank >= 3 works) before its kernel's checks.
    if isinstance(input, Tensor) and input.ndim >= 3:
        size = (output_size,) * 3 if isinstance(output_size, int) else tuple(output_size)
        if len(size) == 3:
            size = tuple(input.shape[-3 + i] if v is None else v for i, v in enumerate(size))
            if any(v < 0 for v in size):
                raise RuntimeError("adaptive_avg_pool3d: elements of output_size must be greater than or equal to 0 "
                                   f"but received {{{size[0]}, {size[1]},{size[2]}}}")
            if size == (1, 1, 1):
                return input.mean((-1, -2, -3), keepdim=True)
    x, added, (od, oh, ow) = _adaptive_input(input, output_size, "adaptive_avg_pool3d", "")
    n, c, dd, h, w = x.shape
    x = _wide(x)
    plane = _pool.adaptive_avg_pool2d(x.reshape(n, c * dd, h, w), (oh, ow))
    out = _pool.adaptive_avg_pool2d(plane.reshape(n, c, dd, oh * ow), (od, oh * ow)).reshape(n, c, od, oh, ow)
    out = out.to(input.dtype)
    return out.squeeze(0) if added else out


def adaptive_max_pool3d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    x, added, (od, oh, ow) = _adaptive_input(input, output_size, "adaptive_max_pool3d", ":")
    n, c, dd, h, w = x.shape
    plane, plane_idx = _pool.adaptive_max_pool2d(x.reshape(n, c * dd, h, w), (oh, ow), True)
    out, d_idx = _pool.adaptive_max_pool2d(plane.reshape(n, c, dd, oh * ow), (od, oh * ow), True)
    depth = ember.div(d_idx, max(oh * ow, 1), rounding_mode="floor")
    hw = plane_idx.reshape(n, c, dd, oh * ow).gather(2, depth)
    indices = (depth * (h * w) + hw).reshape(n, c, od, oh, ow)
    out = out.reshape(n, c, od, oh, ow)
    if added:
        out, indices = out.squeeze(0), indices.squeeze(0)
    return out, indices


@_autocast_composite("fp32")
def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    out, indices = adaptive_max_pool3d_with_indices(input, output_size)
    return (out, indices) if return_indices else out


def lp_pool3d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    if norm_type == math.inf:
        return max_pool3d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -math.inf:
        return -max_pool3d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    kd, kh, kw = _triple(kernel_size, "avg_pool3d", "kernel_size", either="")
    out = avg_pool3d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (ember.sign(out) * _pointwise.relu(out.abs())).mul(kd * kh * kw).pow(1.0 / norm_type)


@_autocast_composite("fp32")
def max_unpool3d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """Scatters each value of ``input`` to its flat index in a (oD, oH, oW) volume of zeros."""
    from .functional import _ntuple, _unpool_output_size  # functional imports this module

    kernel_size = _ntuple(kernel_size, 3)
    stride = _ntuple(stride, 3) if stride is not None else kernel_size
    od, oh, ow = _unpool_output_size(input, kernel_size, stride, _ntuple(padding, 3), output_size)
    if indices.dtype is not ember.int64:
        raise RuntimeError("elements in indices should be type int64")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(input.shape)}) "
                           f"but got indices tensor with shape: {list(indices.shape)}")
    if input.ndim not in (4, 5):
        raise RuntimeError(f"Input to max_unpooling3d should be a 4d or 5d Tensor, but got a tensor with "
                           f"{input.ndim} dimensions.")
    lead = tuple(input.shape[:-3])
    flat_idx = indices.reshape(lead + (-1,))
    bad = (flat_idx < 0) | (flat_idx >= od * oh * ow)
    if bool(bad.any()):
        raise RuntimeError(f"Found an invalid max index: {flat_idx[bad][-1].item()} (output volumes are of size "
                           f"{od}x{oh}x{ow}")
    out = ember.zeros(lead + (od * oh * ow,), dtype=input.dtype, device=input.device)
    return out.scatter(-1, flat_idx, input.reshape(lead + (-1,))).reshape(lead + (od, oh, ow))
