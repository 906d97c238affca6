"""Convolutions: conv1d/2d/3d and conv_transpose1d/2d/3d over the ops ``convolution`` and
``convolution_backward`` (PyTorch's names; autograd calls the backward op), plus ``im2col`` /
``col2im`` (the kernels behind nn.functional.unfold/fold).

The native kernels (csrc/cpu/conv.cpp) see every convolution as a 3-d one on contiguous
float32/float64 tensors: 1-d and 2-d inputs get size-1 leading spatial dims, float16/bfloat16
are computed in float32 and rounded once.
"""

from __future__ import annotations

import warnings

from ... import dtypes
from ... import memory_format as mf
from ..._native import _C
from ...composite import define_composite, pre_dispatch_tracing
from ...device import META
from ...dispatch import define
from ...optable import declare
from ...shapes import numel as _numel
from ...tensor import Tensor, make_view
from .._common import HALF_TYPES, convert, empty, type_meta_name, type_name
from . import conv_integer as _integer

# -- shared helpers (also used by nn_pool and nn_resample) ------------------------------------

def dense(t: Tensor, dtype=None) -> Tensor:
    """``t`` as a contiguous tensor of ``dtype`` (itself when it already is), copied natively."""
    dtype = dtype or t.dtype
    if t.dtype is dtype and t.is_contiguous():
        return t
    out = empty(t._shape, dtype, t._device)
    if t._device is not META:
        _C.copy_(out, t)
    return out


def contiguous_view(t: Tensor, shape: tuple) -> Tensor:
    """A view of contiguous ``t`` with another shape of the same size."""
    stride, acc = [], 1
    for s in reversed(shape):
        stride.append(acc)
        acc *= max(s, 1)
    return make_view(t, tuple(shape), tuple(reversed(stride)), t._offset)


def as_3d_spatial(shape: tuple, lead: int) -> tuple:
    """(lead dims..., *spatial) -> (lead dims..., 1.., *spatial) with exactly 3 spatial dims."""
    return tuple(shape[:lead]) + (1,) * (3 - (len(shape) - lead)) + tuple(shape[lead:])


def expand_param(value, n: int, name: str) -> tuple:
    if isinstance(value, int):
        return (value,) * n
    value = tuple(value)
    if len(value) == 1:
        return value * n
    if len(value) != n:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} values to match the "
                           f"convolution dimensions, but got {name}={list(value)}")
    return value


def compute_dtype(dtype):
    return dtypes.float32 if dtype in HALF_TYPES else dtype


# -- convolution ------------------------------------------------------------------------------

def _conv_check(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups) -> tuple:
    """Validates like PyTorch's check_shape_forward; returns the output shape."""
    k = weight.ndim - 2
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(p < 0 for p in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("non-positive dilation is not supported")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if input.ndim != weight.ndim:
        raise RuntimeError(f"Expected {weight.ndim}-dimensional input for {weight.ndim}-dimensional weight "
                           f"{list(weight._shape)}, but got {input.ndim}-dimensional input of size "
                           f"{list(input._shape)} instead")
    w = list(weight._shape)
    if w[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but "
                           f"got weight of size [{w}] instead")
    if input.dtype is not weight.dtype:
        raise RuntimeError(f"expected scalar type {type_name(input.dtype)} but found {type_name(weight.dtype)}")
    if bias is not None and bias.dtype is not input.dtype:
        raise RuntimeError(f"Input type ({type_meta_name(input.dtype)}) and bias type "
                           f"({type_meta_name(bias.dtype)}) should be the same")
    channels = input._shape[1]
    if not transposed:
        if channels != w[1] * groups:
            raise RuntimeError(f"Given groups={groups}, weight of size {w}, expected input{list(input._shape)} to "
                               f"have {w[1] * groups} channels, but got {channels} channels instead")
        if bias is not None and (bias.ndim != 1 or bias._shape[0] != w[0]):
            raise RuntimeError(f"Given weight of size {w}, expected bias to be 1-dimensional with {w[0]} elements, "
                               f"but got bias of size {list(bias._shape)} instead")
        padded = [input._shape[2 + i] + 2 * padding[i] for i in range(k)]
        kern = [dilation[i] * (w[2 + i] - 1) + 1 for i in range(k)]
        if any(p < q for p, q in zip(padded, kern)):
            raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel "
                               f"size: ({' x '.join(map(str, kern))}). Kernel size can't be greater than actual "
                               f"input size")
        spatial = tuple((padded[i] - kern[i]) // stride[i] + 1 for i in range(k))
        return (input._shape[0], w[0]) + spatial
    if channels != w[0]:
        raise RuntimeError(f"Given transposed=1, weight of size {w}, expected input{list(input._shape)} to have "
                           f"{w[0]} channels, but got {channels} channels instead")
    if bias is not None and (bias.ndim != 1 or bias._shape[0] != w[1] * groups):
        raise RuntimeError(f"Given transposed=1, weight of size {w}, expected bias to be 1-dimensional with "
                           f"{w[1] * groups} elements, but got bias of size {list(bias._shape)} instead")
    names = ("depth", "height", "width")[3 - k:]
    if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
        parts = [f"output_padding_{n}: {v}" for n, v in zip(names, output_padding)]
        parts += [f"stride_{n}: {v}" for n, v in zip(names, stride)]
        parts += [f"dilation_{n}: {v}" for n, v in zip(names, dilation)]
        raise RuntimeError("output padding must be smaller than either stride or dilation, but got " + " ".join(parts))
    spatial = tuple((input._shape[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (w[2 + i] - 1)
                    + output_padding[i] + 1 for i in range(k))
    if any(s <= 0 for s in spatial):
        raise RuntimeError(f"Given input size per channel: {list(input._shape[2:])}. Calculated output size per "
                           f"channel: {list(spatial)}. Output size is too small")
    return (input._shape[0], w[1] * groups) + spatial


def _geometry(stride, padding, dilation) -> tuple:
    pad = 3 - len(stride)
    return ([1] * pad + list(stride), [0] * pad + list(padding), [1] * pad + list(dilation))


def _conv_meta(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    shape = _conv_check(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    return mf.relayout(empty(shape, input.dtype, META), mf.suggest_of(input, weight))


convolution_op = define("convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride, SymInt[] padding, "
                        "int[] dilation, bool transposed, SymInt[] output_padding, int groups) -> Tensor",
                        (), _conv_meta)
convolution_op.kernels["meta"] = _conv_meta


def _spatial5(t: Tensor, ctype) -> Tensor:
    t = dense(t, ctype)
    return contiguous_view(t, as_3d_spatial(t._shape, 2))


@convolution_op.kernel("cpu")
def _conv_cpu(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    shape = _conv_check(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        return _conv_integer(input, weight, bias, shape, stride, padding, dilation, transposed, groups)
    ctype = compute_dtype(input.dtype)
    out = empty(shape, ctype, input._device)
    x5, w5, o5 = _spatial5(input, ctype), _spatial5(weight, ctype), contiguous_view(out, as_3d_spatial(shape, 2))
    b = dense(bias, ctype) if bias is not None else None
    s, p, d = _geometry(stride, padding, dilation)
    if transposed:
        _C.conv_backward_input(o5, x5, w5, b, s, p, d, groups)
    else:
        _C.conv_forward(o5, x5, w5, b, s, p, d, groups)
    # PyTorch's result is channels-last when the input or the weight is (computed dense here)
    return mf.relayout(convert(out, input.dtype), mf.suggest_of(input, weight))


def _conv_integer(input, weight, bias, shape, stride, padding, dilation, transposed, groups):
    """Integer convolutions (conv_integer.py), in the 5-d forms with PyTorch's result layout."""
    _integer.check_integer_conv(input.dtype, transposed, any(d != 1 for d in dilation), weight.ndim - 2)
    s, p, d = _geometry(stride, padding, dilation)
    x5, w5 = _spatial5(input, input.dtype), _spatial5(weight, input.dtype)
    compute = _integer.conv_transpose_integer if transposed else _integer.conv_forward_integer
    out = compute(x5, w5, bias, as_3d_spatial(shape, 2), s, p, d, groups)
    return mf.relayout(contiguous_view(out, shape), mf.suggest_of(input, weight))


def _conv_backward_meta(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                        output_padding, groups, output_mask):
    fmt = mf.suggest_of(input, weight)
    gi = mf.relayout(empty(input._shape, input.dtype, META), fmt) if output_mask[0] else None
    gw = mf.relayout(empty(weight._shape, weight.dtype, META), fmt) if output_mask[1] else None
    gb = empty(tuple(bias_sizes), grad_output.dtype, META) if output_mask[2] and bias_sizes is not None else None
    return gi, gw, gb


convolution_backward_op = define(
    "convolution_backward(Tensor grad_output, Tensor input, Tensor weight, SymInt[]? bias_sizes, int[] stride, "
    "SymInt[] padding, int[] dilation, bool transposed, SymInt[] output_padding, int groups, bool[3] output_mask) "
    "-> (Tensor, Tensor, Tensor)", (), _conv_backward_meta)
convolution_backward_op.kernels["meta"] = _conv_backward_meta


@convolution_backward_op.kernel("cpu")
def _conv_backward_cpu(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                       output_padding, groups, output_mask):
    shape = _conv_check(input, weight, None, stride, padding, dilation, transposed, output_padding, groups)
    if tuple(grad_output._shape) != tuple(shape):
        raise RuntimeError(f"convolution_backward: expected grad_output of size {list(shape)}, but got "
                           f"{list(grad_output._shape)}")
    ctype = compute_dtype(input.dtype)
    g5, x5, w5 = _spatial5(grad_output, ctype), _spatial5(input, ctype), _spatial5(weight, ctype)
    s, p, d = _geometry(stride, padding, dilation)
    gi = gw = gb = None
    if output_mask[0]:
        gi = empty(input._shape, ctype, input._device)
        gi5 = contiguous_view(gi, x5._shape)
        if transposed:  # the input gradient of a transposed conv is a conv of grad_output
            _C.conv_forward(gi5, g5, w5, None, s, p, d, groups)
        else:
            _C.conv_backward_input(gi5, g5, w5, None, s, p, d, groups)
        gi = mf.relayout(convert(gi, input.dtype), mf.suggest_of(input, weight))
    if output_mask[1]:
        gw = empty(weight._shape, ctype, weight._device)
        gw5 = contiguous_view(gw, w5._shape)
        if transposed:
            _C.conv_backward_weight(gw5, g5, x5, s, p, d, groups)
        else:
            _C.conv_backward_weight(gw5, x5, g5, s, p, d, groups)
        gw = mf.relayout(convert(gw, weight.dtype), mf.suggest_of(input, weight))
    if output_mask[2] and bias_sizes is not None:
        gb = empty((g5._shape[1],), ctype, grad_output._device)
        _C.channel_sum(gb, contiguous_view(g5, (g5._shape[0], g5._shape[1], _numel(g5._shape[2:]))))
        gb = convert(gb, grad_output.dtype)
    return gi, gw, gb


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """PyTorch's ``torch.convolution``: batched input, explicit parameters for every spatial dim."""
    k = weight.ndim - 2
    return convolution_op(input, weight, bias, expand_param(stride, k, "stride"),
                          expand_param(padding, k, "padding"), expand_param(dilation, k, "dilation"),
                          bool(transposed), expand_param(output_padding, k, "output_padding"), int(groups))


# -- public conv functions --------------------------------------------------------------------

def _batchify(input: Tensor, k: int, fn: str):
    if not isinstance(input, Tensor):
        raise TypeError(f"{fn}() argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if input.ndim == k + 1:
        return input.unsqueeze(0), True
    if input.ndim != k + 2:
        raise RuntimeError(f"Expected {k + 1}D (unbatched) or {k + 2}D (batched) input to {fn}, but got input of "
                           f"size: {list(input._shape)}")
    return input, False


def _same_padding(input: Tensor, weight: Tensor, stride, dilation, k: int):
    """PyTorch's rule for padding='same': symmetric where the total is even, one extra at the end otherwise."""
    from .resample import pad as _pad

    if any(s != 1 for s in expand_param(stride, k, "stride")):
        raise RuntimeError("padding='same' is not supported for strided convolutions")
    dilation = expand_param(dilation, k, "dilation")
    totals = [dilation[i] * (weight._shape[2 + i] - 1) for i in range(k)]
    left = [t // 2 for t in totals]
    extra = [t - 2 * lft for t, lft in zip(totals, left)]
    if any(extra):
        warnings.warn("Using padding='same' with even kernel lengths and odd dilation may require a zero-padded "
                      "copy of the input be created", UserWarning, stacklevel=3)
        pads = []
        for e in reversed(extra):
            pads += [0, e]
        input = _pad(input, pads)
    return input, left


def _conv(input, weight, bias, stride, padding, dilation, groups, k, fn):
    if pre_dispatch_tracing():
        return _CONV_OPS[k](input, weight, bias, stride, padding, dilation, groups)
    input, unbatched = _batchify(input, k, fn)
    if isinstance(padding, str):
        if padding == "valid":
            padding = 0
        elif padding == "same":
            input, padding = _same_padding(input, weight, stride, dilation, k)
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    out = convolution(input, weight, bias, stride, padding, dilation, False, 0, groups)
    return out.squeeze(0) if unbatched else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")


_CONV_OPS = {
    k: define_composite(
        f"conv{k}d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[{k}] stride=1, SymInt[{k}] padding=0, "
        f"SymInt[{k}] dilation=1, SymInt groups=1) -> Tensor", fn)
    for k, fn in ((1, conv1d), (2, conv2d), (3, conv3d))
}


def _conv_t(input, weight, bias, stride, padding, output_padding, groups, dilation, k, fn):
    if isinstance(padding, str):
        raise TypeError(f"{fn}(): argument 'padding' must be tuple of ints, not str")
    input, unbatched = _batchify(input, k, fn)
    out = convolution(input, weight, bias, stride, padding, dilation, True, output_padding, groups)
    return out.squeeze(0) if unbatched else out


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_t(input, weight, bias, stride, padding, output_padding, groups, dilation, 1, "conv_transpose1d")


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_t(input, weight, bias, stride, padding, output_padding, groups, dilation, 2, "conv_transpose2d")


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_t(input, weight, bias, stride, padding, output_padding, groups, dilation, 3, "conv_transpose3d")


# -- im2col / col2im (nn.functional.unfold / fold) ---------------------------------------------

def _pair(v) -> tuple:
    return (v, v) if isinstance(v, int) else tuple(v)


def _blocks(size, kernel_size, dilation, padding, stride) -> tuple:
    return tuple((size[i] + 2 * padding[i] - dilation[i] * (kernel_size[i] - 1) - 1) // stride[i] + 1
                 for i in range(2))


def _geometry_check(kernel_size, dilation, padding, stride) -> None:
    """PyTorch's first checks of im2col/col2im (before any division by a stride or dilation)."""
    for name, short, vals, ok, want in (("kernel size", "kernel", kernel_size, 1, "greater than zero"),
                                        ("stride", "stride", stride, 1, "greater than zero"),
                                        ("dilation", "dilation", dilation, 1, "greater than zero"),
                                        ("padding", "pad", padding, 0, "non-negative")):
        if vals[0] < ok or vals[1] < ok:
            raise RuntimeError(f"{name} should be {want}, but got {short}_height: {vals[0]} {short}_width: {vals[1]}")


def _im2col_check(self, kernel_size, dilation, padding, stride) -> tuple:
    _geometry_check(kernel_size, dilation, padding, stride)
    if self.ndim in (1, 2):  # PyTorch reads input.size(ndim) of such an input before its shape check
        raise IndexError(f"Dimension out of range (expected to be in range of [{-self.ndim}, {self.ndim - 1}], but "
                         f"got {self.ndim})")
    if self.ndim not in (3, 4) or any(s == 0 for s in self._shape[-3:]):
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero "
                           f"dimensions for input, but got: {list(self._shape)}")
    if self.dtype not in (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64):
        raise NotImplementedError(f"\"im2col\" not implemented for '{type_name(self.dtype)}'")
    blocks = _blocks(self._shape[-2:], kernel_size, dilation, padding, stride)
    if any(b < 1 for b in blocks):
        raise RuntimeError(f"Given input with spatial size {tuple(self._shape[-2:])}, kernel_size={kernel_size}, "
                           f"dilation={dilation}, padding={padding}, calculated shape of the array of sliding "
                           f"blocks as {blocks}, but its components must be at least one.")
    c = self._shape[-3] * kernel_size[0] * kernel_size[1]
    return self._shape[:-3] + (c, blocks[0] * blocks[1]), blocks


def _im2col_meta(self, kernel_size, dilation, padding, stride):
    return empty(_im2col_check(self, kernel_size, dilation, padding, stride)[0], self.dtype, META)


im2col_op = define("im2col(Tensor self, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride) "
                   "-> Tensor", (), _im2col_meta)
im2col_op.kernels["meta"] = _im2col_meta


@im2col_op.kernel("cpu")
def _im2col_cpu(self, kernel_size, dilation, padding, stride):
    shape, blocks = _im2col_check(self, kernel_size, dilation, padding, stride)
    ctype = compute_dtype(self.dtype)
    x = dense(self, ctype)
    n = self._shape[0] if self.ndim == 4 else 1
    out = empty(shape, ctype, self._device)
    _C.im2col(contiguous_view(x, (n,) + as_3d_spatial(x._shape[-3:], 1)), contiguous_view(out, (n,) + shape[-2:]),
              [1, *kernel_size], [1, *stride], [0, *padding], [1, *dilation], [1, *blocks])
    return convert(out, self.dtype)


def _col2im_check(self, output_size, kernel_size, dilation, padding, stride) -> tuple:
    _geometry_check(kernel_size, dilation, padding, stride)
    if self.ndim not in (2, 3) or any(s == 0 for s in self._shape[-2:]):
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor with possibly 0 batch size and non-zero "
                           f"dimensions for input, but got: {list(self._shape)}")
    if self.dtype not in (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64):
        raise NotImplementedError(f"\"col2im\" not implemented for '{type_name(self.dtype)}'")
    kk = kernel_size[0] * kernel_size[1]
    if self._shape[-2] % kk:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                           f"got input.size(1)={self._shape[-2]} and kernel_size={kernel_size}.")
    blocks = _blocks(output_size, kernel_size, dilation, padding, stride)
    if blocks[0] * blocks[1] != self._shape[-1] or any(b < 1 for b in blocks):
        raise RuntimeError(f"Given output_size={output_size}, kernel_size={kernel_size}, dilation={dilation}, "
                           f"padding={padding}, stride={stride}, expected size of input's dimension 2 to match the "
                           f"calculated number of sliding blocks {blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, "
                           f"but got input.size(2)={self._shape[-1]}.")
    return self._shape[:-2] + (self._shape[-2] // kk,) + tuple(output_size), blocks


def _col2im_meta(self, output_size, kernel_size, dilation, padding, stride):
    return empty(_col2im_check(self, output_size, kernel_size, dilation, padding, stride)[0], self.dtype, META)


col2im_op = define("col2im(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation, "
                   "int[2] padding, int[2] stride) -> Tensor", (), _col2im_meta)
col2im_op.kernels["meta"] = _col2im_meta


@col2im_op.kernel("cpu")
def _col2im_cpu(self, output_size, kernel_size, dilation, padding, stride):
    shape, blocks = _col2im_check(self, output_size, kernel_size, dilation, padding, stride)
    ctype = compute_dtype(self.dtype)
    cols = dense(self, ctype)
    n = self._shape[0] if self.ndim == 3 else 1
    out = empty(shape, ctype, self._device)
    _C.col2im(contiguous_view(out, (n,) + as_3d_spatial(shape[-3:], 1)), contiguous_view(cols, (n,) + cols._shape[-2:]),
              [1, *kernel_size], [1, *stride], [0, *padding], [1, *dilation], [1, *blocks])
    return convert(out, self.dtype)


def im2col(input, kernel_size, dilation=1, padding=0, stride=1):
    """nn.functional.unfold: sliding blocks of a (N, C, H, W) or (C, H, W) tensor as columns."""
    return im2col_op(input, _pair(kernel_size), _pair(dilation), _pair(padding), _pair(stride))


def col2im(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """nn.functional.fold: sums columns back into an image (the adjoint of im2col)."""
    return col2im_op(input, _pair(output_size), _pair(kernel_size), _pair(dilation), _pair(padding), _pair(stride))


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
conv1d                      function
conv2d                      function
conv3d                      function
conv_transpose1d            function
conv_transpose2d            function
conv_transpose3d            function
convolution                 function
""")
