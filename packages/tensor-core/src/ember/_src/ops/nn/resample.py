"""Padding, interpolation, pixel_shuffle/unshuffle and one_hot.

Ops (PyTorch's names where it has one op): ``constant_pad_nd``, ``_pad_enum`` (reflect,
replicate, circular) with ``_pad_enum_backward``, and ``_upsample`` / ``_upsample_backward``
(one op for every interpolation mode, standing in for PyTorch's upsample_* family). Kernels:
csrc/cpu/resample.cpp on contiguous (planes, D, H, W) tensors.
"""

from __future__ import annotations

import math
import operator

from ... import dispatch, dtypes
from ... import memory_format as mf
from ..._native import _C
from ...device import META
from ...dispatch import define
from ...optable import declare
from ...shapes import numel
from ...tensor import Tensor, make_view
from .._common import check_tensor_args, convert, empty, label_as_op, type_name
from . import pool as nn_pool
from .conv import as_3d_spatial, compute_dtype, contiguous_view, dense

_MODES = {"constant": 0, "reflect": 1, "replicate": 2, "circular": 3}
_FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)


def _declare(schema: str, meta):
    op = define(schema, (), meta)
    op.kernels["meta"] = meta
    return op


# -- constant padding -------------------------------------------------------------------------

def _constant_shape(self, pad) -> tuple:
    if len(pad) % 2:
        raise RuntimeError("Length of pad must be even but instead it equals " + str(len(pad)))
    if len(pad) // 2 > self.ndim:
        raise RuntimeError(f"Length of pad should be no more than twice the number of dimensions of the input. Pad "
                           f"length is {len(pad)} while the input has {self.ndim} dimensions.")
    shape = list(self._shape)
    for i in range(len(pad) // 2):
        d = self.ndim - 1 - i
        size = shape[d] + pad[2 * i] + pad[2 * i + 1]
        if size < 0:
            raise RuntimeError("narrow(): length must be non-negative.")
        shape[d] = size
    return tuple(shape)


constant_pad_nd_op = _declare("constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor",
                              lambda self, pad, value=0: mf.empty_in(_constant_shape(self, pad), self.dtype, META,
                                                                     mf.suggest_of(self)))


@constant_pad_nd_op.kernel("cpu")
def _constant_pad_cpu(self, pad, value=0):
    shape = _constant_shape(self, pad)
    out = mf.empty_in(shape, self.dtype, self._device, mf.suggest_of(self))  # PyTorch's layout of the result
    _C.fill_(out, value)
    if numel(shape) == 0:
        return out
    # Copy the kept part of the input into its place in out; negative pads crop the input.
    src_off, dst_off = self._offset, 0
    src_shape, out_stride = list(self._shape), out._stride
    dst_shape = list(shape)
    for i in range(len(pad) // 2):
        d = self.ndim - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        keep = self._shape[d] + min(lo, 0) + min(hi, 0)
        if keep <= 0:
            return out
        src_off += max(-lo, 0) * self._stride[d]
        dst_off += max(lo, 0) * out_stride[d]
        src_shape[d] = dst_shape[d] = keep
    _C.copy_(make_view(out, tuple(dst_shape), out_stride, dst_off),
             make_view(self, tuple(src_shape), self._stride, src_off))
    return out


def constant_pad_nd(input, pad, value=0):
    return constant_pad_nd_op(input, tuple(operator.index(p) for p in pad), value)


# -- reflect / replicate / circular -----------------------------------------------------------

def _pad_shape(self, pad, mode: int) -> tuple:
    k = len(pad) // 2
    if not 1 <= k <= 3 or self.ndim not in (k + 1, k + 2):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {self.ndim}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    nonbatch = self._shape[1:] if self.ndim == k + 2 else self._shape
    if any(s == 0 for s in nonbatch):
        raise RuntimeError(f"Expected {k + 1}D or {k + 2}D (batch mode) tensor with possibly 0 batch size and other "
                           f"non-zero dimensions for input, but got: {list(self._shape)}")
    shape = list(self._shape)
    for i in range(k):
        d = self.ndim - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        if mode == 1 and (lo >= shape[d] or hi >= shape[d]):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, "
                               f"but got: padding ({lo}, {hi}) at dimension {d} of input {list(self._shape)}")
        if mode == 3 and (lo > shape[d] or hi > shape[d]):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        shape[d] += lo + hi
        if shape[d] < 1:
            raise RuntimeError(f"input (H: {self._shape[d]}) is too small. Calculated output size: {shape[d]}")
    return tuple(shape)


def _planes4(t: Tensor, k: int) -> Tensor:
    """Contiguous t viewed as (planes, D, H, W) with the last k dims spatial."""
    lead = numel(t._shape[:t.ndim - k])
    return contiguous_view(t, as_3d_spatial((lead,) + tuple(t._shape[t.ndim - k:]), 1))


def _before(pad) -> list:
    k = len(pad) // 2
    return [0] * (3 - k) + [pad[2 * i] for i in reversed(range(k))]


_pad_enum_op = _declare("_pad_enum(Tensor self, SymInt[] pad, int mode, float? value=None) -> Tensor",
                        lambda self, pad, mode, value=None: empty(_pad_shape(self, pad, mode), self.dtype, META))
_pad_enum_backward_op = _declare(
    "_pad_enum_backward(Tensor grad_output, Tensor self, SymInt[] pad, int mode) -> Tensor",
                                 lambda g, self, pad, mode: empty(self._shape, self.dtype, META))


@_pad_enum_op.kernel("cpu")
def _pad_enum_cpu(self, pad, mode, value=None):
    shape = _pad_shape(self, pad, mode)
    k = len(pad) // 2
    x = dense(self)
    out = empty(shape, self.dtype, self._device)
    _C.pad_nd(_planes4(out, k), _planes4(x, k), _before(pad), mode, 0)
    return out


@_pad_enum_backward_op.kernel("cpu")
def _pad_enum_backward_cpu(grad_output, self, pad, mode):
    shape = _pad_shape(self, pad, mode)
    if tuple(grad_output._shape) != shape:
        raise RuntimeError(f"_pad_enum_backward: expected grad_output of size {list(shape)}, but got "
                           f"{list(grad_output._shape)}")
    k = len(pad) // 2
    ctype = compute_dtype(self.dtype)
    gi = empty(self._shape, ctype, self._device)
    _C.pad_nd_backward(_planes4(gi, k), _planes4(dense(grad_output, ctype), k), _before(pad), mode)
    return convert(gi, self.dtype)


def pad(input, pad, mode="constant", value=None):
    """nn.functional.pad."""
    check_tensor_args("pad", ("input", input))
    pad = tuple(operator.index(p) for p in pad)
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input dimension but got "
                           f"padding length {len(pad)} and input of dimension {input.ndim}")
    if mode not in _MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if mode == "constant":
        return constant_pad_nd_op(input, pad, 0 if value is None else value)
    if value is not None and value != 0:
        raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
    out = _pad_enum_op(input, pad, _MODES[mode], None)
    if mode in _PAD_NODE_NAMES:  # grad_fn as PyTorch's: ReflectionPad2DBackward0, ...
        out = label_as_op(out, f"{_PAD_NODE_NAMES[mode]}_pad{len(pad) // 2}d")
    return out


_PAD_NODE_NAMES = {"reflect": "reflection", "replicate": "replication"}


# -- interpolation ----------------------------------------------------------------------------

_KERNEL_MODE = {"nearest": 0, "nearest-exact": 1, "linear": 2, "bilinear": 2, "trilinear": 2, "bicubic": 3}
_MODE_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}


def _uint8_mode(dtype, mode: str, k: int) -> bool:
    """uint8 images resample with the nearest modes (exact through float32). PyTorch also takes
    uint8 for 2-d bilinear/bicubic, with fixed-point weights of its own that ember does not copy."""
    return dtype is dtypes.uint8 and mode in ("nearest", "nearest-exact")


def _upsample_check(self, output_size, mode, scales) -> tuple:
    k = self.ndim - 2
    if self.dtype not in _FLOATS and not _uint8_mode(self.dtype, mode, k):
        raise NotImplementedError(f"\"upsample_{mode.replace('-', '_')}{k}d\" not implemented for "
                                  f"'{type_name(self.dtype)}'")
    if len(output_size) != k or len(scales) != k:
        raise RuntimeError(f"_upsample: expected {k} output sizes and scales")
    if any(s <= 0 for s in self._shape[2:]) or any(o <= 0 for o in output_size):
        names = ("D", "H", "W")[3 - k:]
        ins = ", ".join(f"{n}: {s}" for n, s in zip(names, self._shape[2:]))
        outs = ", ".join(f"{n}: {s}" for n, s in zip(names, output_size))
        joint = " and" if k == 1 else ""  # PyTorch's 1-d kernels word it "input (W: 4) and output (W: 0)"
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input ({ins}){joint} "
                           f"output ({outs})")
    return tuple(self._shape[:2]) + tuple(output_size)


def _scales3(scales) -> list:
    return [0.0] * (3 - len(scales)) + [float(s) if s is not None else 0.0 for s in scales]


_upsample_op = _declare(
    "_upsample(Tensor self, SymInt[] output_size, str mode, bool align_corners, float?[] scales) -> Tensor",
    lambda self, o, m, a, s: mf.relayout(empty(_upsample_check(self, o, m, s), self.dtype, META),
                                         mf.suggest_of(self)))
_upsample_backward_op = _declare(
    "_upsample_backward(Tensor grad_output, SymInt[] input_size, str mode, bool align_corners, float?[] scales) "
    "-> Tensor",
    lambda g, i, m, a, s: mf.relayout(empty(tuple(i), g.dtype, META), mf.suggest_of(g)))


@_upsample_op.kernel("cpu")
def _upsample_cpu(self, output_size, mode, align_corners, scales):
    shape = _upsample_check(self, output_size, mode, scales)
    ctype = dtypes.float32 if self.dtype is dtypes.uint8 else compute_dtype(self.dtype)
    k = self.ndim - 2
    out = empty(shape, ctype, self._device)
    _C.interpolate(_planes4(out, k), _planes4(dense(self, ctype), k), _KERNEL_MODE[mode], bool(align_corners),
                   _scales3(scales))
    return mf.relayout(convert(out, self.dtype), mf.suggest_of(self))  # as PyTorch's, a channels-last input's


@_upsample_backward_op.kernel("cpu")
def _upsample_backward_cpu(grad_output, input_size, mode, align_corners, scales):
    input_size = tuple(input_size)
    k = len(input_size) - 2
    if tuple(grad_output._shape[:2]) != input_size[:2] or grad_output.ndim != len(input_size):
        raise RuntimeError(f"_upsample_backward: grad_output of size {list(grad_output._shape)} does not match "
                           f"input_size {list(input_size)}")
    ctype = compute_dtype(grad_output.dtype)
    gi = empty(input_size, ctype, grad_output._device)
    _C.interpolate_backward(_planes4(gi, k), _planes4(dense(grad_output, ctype), k), _KERNEL_MODE[mode],
                            bool(align_corners), _scales3(scales))
    return mf.relayout(convert(gi, grad_output.dtype), mf.suggest_of(grad_output))


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """nn.functional.interpolate (nearest, nearest-exact, linear, bilinear, bicubic, trilinear, area)."""
    k = input.ndim - 2
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    if antialias and (mode not in ("bilinear", "bicubic", "lanczos") or k != 2):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a 4-D "
                         "tensor as input")
    if antialias and mode == "lanczos":
        raise NotImplementedError("interpolate: anti-aliased lanczos is not supported")
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        sizes = list(size) if isinstance(size, (list, tuple)) else [size] * k
        if len(sizes) != k:
            raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input with "
                             f"spatial dimensions of {list(input._shape[2:])} and output size of {size}. Please "
                             f"provide input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, "
                             f"...,oK) format.")
        scales = [None] * k
    elif scale_factor is not None:
        factors = list(scale_factor) if isinstance(scale_factor, (list, tuple)) else [scale_factor] * k
        if len(factors) != k:
            raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got input "
                             f"with spatial dimensions of {list(input._shape[2:])} and scale_factor of shape "
                             f"{scale_factor}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                             f"scale_factor in (s1, s2, ...,sK) format.")
        sizes = [math.floor(float(input._shape[2 + i]) * factors[i]) for i in range(k)]
        scales = [None] * k if recompute_scale_factor else [float(f) for f in factors]
    else:
        raise ValueError("either size or scale_factor should be defined")
    if mode == "area":
        if k == 1:
            return nn_pool.adaptive_avg_pool1d(input, sizes)
        if k == 2:
            return nn_pool.adaptive_avg_pool2d(input, sizes)
        if k == 3:  # adaptive averaging is separable: (h, w) per depth slice, then depth
            n, c, d, h, w = input._shape
            od, oh, ow = (int(v) for v in sizes)
            plane = nn_pool.adaptive_avg_pool2d(input.reshape(n, c * d, h, w), (oh, ow))
            out = nn_pool.adaptive_avg_pool2d(plane.reshape(n, c, d, oh * ow), (od, oh * ow))
            return out.reshape(n, c, od, oh, ow)
    need = _MODE_DIMS.get(mode)
    # PyTorch names the rank a linear mode needs; bicubic's wrong rank gets its generic message
    if mode not in _KERNEL_MODE or not 1 <= k <= 3 or (mode == "bicubic" and need != k):
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for "
                                  f"the modes: nearest | linear | bilinear | bicubic | trilinear | lanczos | area | "
                                  f"nearest-exact (got {mode})")
    if need is not None and need != k:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {need + 2}D input")
    if antialias:
        return _antialiased(input, [int(s) for s in sizes], mode, bool(align_corners), scales)
    out = _upsample_op(input, tuple(int(s) for s in sizes), mode, bool(align_corners), scales)
    # grad_fn as PyTorch's op for the mode: UpsampleNearest2DBackward0, UpsampleBilinear2DBackward0, ...
    return label_as_op(out, f"upsample_{mode.replace('-', '_')}{k}d")


def _aa_filter(mode: str):
    if mode == "bilinear":
        return 2, lambda x: max(0.0, 1.0 - abs(x))

    def cubic(x, a=-0.5):  # the Keys kernel PIL and PyTorch's anti-aliased bicubic use
        x = abs(x)
        if x < 1.0:
            return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        if x < 2.0:
            return (((x - 5.0) * x + 8.0) * x - 4.0) * a
        return 0.0

    return 4, cubic


def _aa_weights(in_size: int, out_size: int, mode: str, align_corners: bool, scale_factor) -> list:
    """The (out_size, in_size) matrix of one axis of anti-aliased resampling: each output pixel a
    normalized filter over the input pixels its footprint covers (widened by the scale when
    downsampling, which is what removes the aliasing)."""
    if align_corners:
        scale = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    elif scale_factor is not None and scale_factor > 0:
        scale = 1.0 / scale_factor
    else:
        scale = in_size / out_size
    interp_size, fn = _aa_filter(mode)
    support = interp_size * 0.5 * (scale if scale >= 1.0 else 1.0)
    invscale = 1.0 / scale if scale >= 1.0 else 1.0
    rows = []
    for i in range(out_size):
        center = scale * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), in_size)
        w = [fn((j - center + 0.5) * invscale) for j in range(lo, hi)]
        total = sum(w)
        row = [0.0] * in_size
        for j, v in zip(range(lo, hi), w):
            row[j] = v / total if total != 0.0 else 0.0
        rows.append(row)
    return rows


def _antialiased(input, sizes, mode: str, align_corners: bool, scales):
    """interpolate(antialias=True) for 4-D input: separable filtering, one matrix per axis."""
    from ..creation.factories import tensor

    if not input.dtype.is_floating_point:
        raise RuntimeError(f"\"upsample_{mode}2d_aa\" not implemented for '{type_name(input.dtype)}'")
    h, w = input._shape[2], input._shape[3]
    wh = tensor(_aa_weights(h, sizes[0], mode, align_corners, scales[0]), dtype=input.dtype, device=input._device)
    ww = tensor(_aa_weights(w, sizes[1], mode, align_corners, scales[1]), dtype=input.dtype, device=input._device)
    return label_as_op(wh @ input @ ww.transpose(0, 1), f"_upsample_{mode}2d_aa")


# -- pixel_shuffle / one_hot ------------------------------------------------------------------

def pixel_shuffle(input, upscale_factor):
    r = operator.index(upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    c, h, w = input._shape[-3:]
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    lead = tuple(input._shape[:-3])
    n = len(lead)
    x = input.reshape(lead + (c // (r * r), r, r, h, w))
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return label_as_op(x.reshape(lead + (c // (r * r), h * r, w * r)), "pixel_shuffle")


def pixel_unshuffle(input, downscale_factor):
    r = operator.index(downscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    c, h, w = input._shape[-3:]
    if h % r:
        raise RuntimeError(f"pixel_unshuffle expects height to be divisible by downscale_factor, but "
                           f"input.size(-2)={h} is not divisible by {r}")
    if w % r:
        raise RuntimeError(f"pixel_unshuffle expects width to be divisible by downscale_factor, but "
                           f"input.size(-1)={w} is not divisible by {r}")
    lead = tuple(input._shape[:-3])
    n = len(lead)
    x = input.reshape(lead + (c, h // r, r, w // r, r))
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return label_as_op(x.reshape(lead + (c * r * r, h // r, w // r)), "pixel_unshuffle")


def one_hot(tensor, num_classes=-1):
    """nn.functional.one_hot: int64 (*, num_classes) with a 1 at each index."""
    if not isinstance(tensor, Tensor) or tensor.dtype is not dtypes.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    num_classes = operator.index(num_classes)
    if num_classes >= 0 and dispatch._MODES.stack:
        # Under a tracer (compile, export) the indices have no data yet: written with ops, as
        # PyTorch's traced one_hot (indices out of range give zero rows, unchecked).
        from ..creation.factories import arange
        from ..pointwise.elementwise import eq

        classes = arange(num_classes, dtype=dtypes.int64, device=tensor._device)
        return eq(tensor.unsqueeze(-1), classes).to(dtypes.int64)
    dispatch.sync_pending(tensor, "Tensor.tolist()")  # the indices' values are read below
    idx = dense(tensor)
    if idx.numel() == 0:
        if num_classes == -1:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        return empty(tuple(tensor._shape) + (num_classes,), dtypes.int64, tensor._device)
    lo, hi = _C.index_range(idx)
    if lo < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        num_classes = hi + 1
    elif hi >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = empty(tuple(tensor._shape) + (num_classes,), dtypes.int64, tensor._device)
    _C.one_hot(contiguous_view(out, (idx.numel(), num_classes)), contiguous_view(idx, (idx.numel(),)))
    # PyTorch's one_hot is a composite, zeros() then scatter_(): both writes count, so its result
    # is at _version 2 (0 when empty). One kernel here; the counter as PyTorch's.
    out._bump_version()
    out._bump_version()
    return out


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
constant_pad_nd             function
pixel_shuffle               function
pixel_unshuffle             function
""")
