"""Pooling: max_pool1d/2d (with indices), avg_pool1d/2d, adaptive average/max pooling, and the
backward ops autograd calls (PyTorch's names). 1-d pooling runs the 2-d ops on an unsqueezed
view, as PyTorch does. Kernels: csrc/cpu/pool.cpp, on contiguous (planes, H, W) float32/float64;
float16/bfloat16 are computed in float32.
"""

from __future__ import annotations

from ... import dtypes, grad_mode
from ... import memory_format as mf
from ..._native import _C
from ...composite import pre_dispatch_tracing
from ...device import META
from ...dispatch import define
from ...optable import declare
from ...shapes import numel as _numel
from ...tensor import Tensor
from .._common import check_tensor_args, convert, empty, type_name
from .conv import compute_dtype, contiguous_view, dense

_FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
_INTS = (dtypes.uint8, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64)  # max pooling only, as PyTorch


def _pair(v, name: str, default=None) -> tuple:
    if v is None or (not isinstance(v, int) and len(v) == 0):
        return default
    if isinstance(v, int):
        return (v, v)
    v = tuple(v)
    if len(v) == 1:
        return v * 2
    if len(v) != 2:
        raise RuntimeError(f"max_pool2d: {name} must either be a single int, or a tuple of two ints")
    return v


def _out_size(size, k, pad, stride, dil, ceil_mode) -> int:
    out = (size + 2 * pad - dil * (k - 1) - 1 + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _check_float(self, name: str) -> None:
    if self.dtype not in _FLOATS:
        raise NotImplementedError(f"\"{name}\" not implemented for '{type_name(self.dtype)}'")


def _pool_shape(self, kernel_size, stride, padding, dilation, ceil_mode, fn, is_max) -> tuple:
    """Validates like PyTorch's pool2d_shape_check; returns the output shape."""
    kh, kw = kernel_size
    sh, sw = stride
    if sh == 0 or sw == 0:
        raise RuntimeError("stride should not be zero")
    if kh <= 0 or kw <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {kh} kW: {kw}")
    if sh < 0 or sw < 0:
        raise RuntimeError(f"stride should be greater than zero, but got dH: {sh} dW: {sw}")
    if dilation[0] <= 0 or dilation[1] <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationH: {dilation[0]} "
                           f"dilationW: {dilation[1]}")
    if not is_max and self.ndim < 3:  # PyTorch's avg_pool2d reads size(-3) before its shape check
        span = max(self.ndim, 1)
        raise IndexError(f"Dimension out of range (expected to be in range of [{-span}, {span - 1}], but got -3)")
    if self.ndim not in (3, 4) or any(s == 0 for s in self._shape[-3:]):
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    for p, k, d in zip(padding, kernel_size, dilation):
        limit = ((k - 1) * d + 1) // 2 if is_max else k // 2
        if p < 0 or p > limit:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p}, "
                               f"kernel_size={k} and dilation={d}")
    if not (is_max and self.dtype in _INTS):
        _check_float(self, fn)
    h, w = self._shape[-2:]
    oh = _out_size(h, kh, padding[0], sh, dilation[0], ceil_mode)
    ow = _out_size(w, kw, padding[1], sw, dilation[1], ceil_mode)
    if oh < 1 or ow < 1:
        raise RuntimeError(f"Given input size: ({self._shape[-3]}x{h}x{w}). Calculated output size: "
                           f"({self._shape[-3]}x{oh}x{ow}). Output size is too small")
    return self._shape[:-2] + (oh, ow)


def _planes(t: Tensor, ctype) -> Tensor:
    t = dense(t, ctype)
    p = 1
    for s in t._shape[:-2]:
        p *= s
    return contiguous_view(t, (p,) + t._shape[-2:])


def _params(kernel_size, stride, padding, dilation, count_include_pad=True, divisor=None) -> list:
    return [*kernel_size, *stride, *padding, *dilation, int(bool(count_include_pad)), int(divisor or 0)]


def _run_forward(self, shape, params, mode, with_indices):
    ctype = compute_dtype(self.dtype)
    x = _planes(self, ctype)
    out = empty(shape, ctype, self._device)
    idx = empty(shape, dtypes.int64, self._device) if with_indices else None
    if _numel(shape) == 0:  # e.g. an adaptive output size of 0: nothing to compute
        out = convert(out, self.dtype)
        return (out, idx) if with_indices else out
    _C.pool_forward(_planes(out, ctype), _planes(idx, dtypes.int64) if idx is not None else None, x, params, mode)
    out = convert(out, self.dtype)
    return _in_input_format((out, idx) if with_indices else out, self)


def _in_input_format(result, *inputs):
    """Pooling results (and input gradients) laid out in the format the input suggests, as PyTorch's
    (the kernels compute on dense planes)."""
    fmt = mf.suggest_of(*inputs)
    if fmt is mf.contiguous_format:
        return result
    if isinstance(result, tuple):
        return tuple(mf.relayout(r, fmt) for r in result)
    return mf.relayout(result, fmt)


def _run_backward(grad_output, self, indices, params, mode, expected_shape):
    if tuple(grad_output._shape) != tuple(expected_shape):
        raise RuntimeError(f"Expected grad_output of size {list(expected_shape)}, but got "
                           f"{list(grad_output._shape)}")
    ctype = compute_dtype(self.dtype)
    gi = empty(self._shape, ctype, self._device)
    if _numel(grad_output._shape) == 0:
        return convert(gi.zero_(), self.dtype)
    _C.pool_backward(_planes(gi, ctype), _planes(grad_output, ctype),
                     _planes(indices, dtypes.int64) if indices is not None else None, params, mode)
    return _in_input_format(convert(gi, self.dtype), self)


def _declare(schema: str, meta):
    def laid_out(*args):
        return _in_input_format(meta(*args), *(a for a in args[:2] if isinstance(a, Tensor)))

    op = define(schema, (), laid_out)
    op.kernels["meta"] = laid_out
    return op


# -- max pooling ------------------------------------------------------------------------------

def _max_shape(self, kernel_size, stride, padding, dilation, ceil_mode, fn="max_pool2d"):
    return _pool_shape(self, kernel_size, stride, padding, dilation, ceil_mode, fn, True)


max_pool2d_op = _declare(
    "max_pool2d(Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode) "
    "-> Tensor",
    lambda self, k, s, p, d, c: empty(_max_shape(self, k, s, p, d, c), self.dtype, META))
max_pool2d_with_indices_op = _declare(
    "max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, "
    "bool ceil_mode) -> (Tensor, Tensor)",
    lambda self, k, s, p, d, c: (empty(_max_shape(self, k, s, p, d, c), self.dtype, META),
                                 empty(_max_shape(self, k, s, p, d, c), dtypes.int64, META)))
max_pool2d_with_indices_backward_op = _declare(
    "max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, "
    "int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor",
    lambda g, self, k, s, p, d, c, i: empty(self._shape, self.dtype, META))


@max_pool2d_op.kernel("cpu")
def _max_pool2d_cpu(self, kernel_size, stride, padding, dilation, ceil_mode):
    shape = _max_shape(self, kernel_size, stride, padding, dilation, ceil_mode)
    return _run_forward(self, shape, _params(kernel_size, stride, padding, dilation), 0, False)


@max_pool2d_with_indices_op.kernel("cpu")
def _max_pool2d_with_indices_cpu(self, kernel_size, stride, padding, dilation, ceil_mode):
    shape = _max_shape(self, kernel_size, stride, padding, dilation, ceil_mode)
    return _run_forward(self, shape, _params(kernel_size, stride, padding, dilation), 0, True)


@max_pool2d_with_indices_backward_op.kernel("cpu")
def _max_pool2d_backward_cpu(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
    shape = _max_shape(self, kernel_size, stride, padding, dilation, ceil_mode)
    if tuple(indices._shape) != tuple(shape) or indices.dtype is not dtypes.int64:
        raise RuntimeError(f"max_pool2d_with_indices_backward: expected int64 indices of size {list(shape)}")
    return _run_backward(grad_output, self, indices, _params(kernel_size, stride, padding, dilation), 0, shape)


def _max_args(kernel_size, stride, padding, dilation):
    k = _pair(kernel_size, "kernel_size")
    return k, _pair(stride, "stride", k), _pair(padding, "padding"), _pair(dilation, "dilation")


def _needs_grad(t: Tensor) -> bool:
    return grad_mode.STATE.grad_enabled and t._requires_grad


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    check_tensor_args("max_pool2d", ("input", input))
    k, s, p, d = _max_args(kernel_size, stride, padding, dilation)
    # Autograd needs the indices for the backward; an exported graph (a pre-dispatch trace) keeps
    # max_pool2d, as PyTorch's does (its formula finds them again).
    if return_indices or _needs_grad(input) and not pre_dispatch_tracing():
        out, idx = max_pool2d_with_indices_op(input, k, s, p, d, bool(ceil_mode))
        return (out, idx) if return_indices else out
    return max_pool2d_op(input, k, s, p, d, bool(ceil_mode))


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    # Always (output, indices): return_indices is only there for boolean_dispatch's common signature
    # (PyTorch's default is False and ignored the same way).
    k, s, p, d = _max_args(kernel_size, stride, padding, dilation)
    return max_pool2d_with_indices_op(input, k, s, p, d, bool(ceil_mode))


def _single(v, default=None) -> tuple:
    if v is None or (not isinstance(v, int) and len(v) == 0):
        return default
    return (1, v) if isinstance(v, int) else (1, *tuple(v))


def _unsqueeze_1d(input, fn: str):
    if fn == "avg_pool1d" and input.ndim not in (2, 3):  # PyTorch's avg_pool1d checks the rank first
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional tensor for argument #1 "
                           "'self' (while checking arguments for avg_pool1d)")
    if input.ndim not in (2, 3) or any(s == 0 for s in input._shape[1 if input.ndim == 3 else 0:]):
        raise RuntimeError(f"{fn}: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for input, "
                           f"but got:{list(input._shape)}")
    return input.unsqueeze(-2)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    # Always (output, indices): return_indices is only there for boolean_dispatch's common signature
    # (PyTorch's default is False and ignored the same way).
    x = _unsqueeze_1d(input, "max_pool1d")
    k = _single(kernel_size)
    s, p, d = _single(stride, k), (0, padding if isinstance(padding, int) else padding[0]), _single(dilation)
    out, idx = max_pool2d_with_indices_op(x, k, s, p, d, bool(ceil_mode))
    return out.squeeze(-2), idx.squeeze(-2)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    check_tensor_args("max_pool1d", ("input", input))
    x = _unsqueeze_1d(input, "max_pool1d")
    k = _single(kernel_size)
    s, p, d = _single(stride, k), (0, padding if isinstance(padding, int) else padding[0]), _single(dilation)
    if return_indices or _needs_grad(input):
        out, idx = max_pool2d_with_indices_op(x, k, s, p, d, bool(ceil_mode))
        return (out.squeeze(-2), idx.squeeze(-2)) if return_indices else out.squeeze(-2)
    return max_pool2d_op(x, k, s, p, d, bool(ceil_mode)).squeeze(-2)


# -- average pooling --------------------------------------------------------------------------

def _avg_shape(self, kernel_size, stride, padding, ceil_mode, divisor_override):
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    return _pool_shape(self, kernel_size, stride, padding, (1, 1), ceil_mode, "avg_pool2d", False)


avg_pool2d_op = _declare(
    "avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, bool ceil_mode, "
    "bool count_include_pad, int? divisor_override) -> Tensor",
    lambda self, k, s, p, c, cip, dv: empty(_avg_shape(self, k, s, p, c, dv), self.dtype, META))
avg_pool2d_backward_op = _declare(
    "avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, "
    "bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor",
    lambda g, self, k, s, p, c, cip, dv: empty(self._shape, self.dtype, META))


@avg_pool2d_op.kernel("cpu")
def _avg_pool2d_cpu(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    shape = _avg_shape(self, kernel_size, stride, padding, ceil_mode, divisor_override)
    params = _params(kernel_size, stride, padding, (1, 1), count_include_pad, divisor_override)
    return _run_forward(self, shape, params, 1, False)


@avg_pool2d_backward_op.kernel("cpu")
def _avg_pool2d_backward_cpu(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                             divisor_override):
    shape = _avg_shape(self, kernel_size, stride, padding, ceil_mode, divisor_override)
    params = _params(kernel_size, stride, padding, (1, 1), count_include_pad, divisor_override)
    return _run_backward(grad_output, self, None, params, 1, shape)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    k = _pair(kernel_size, "kernel_size")
    return avg_pool2d_op(input, k, _pair(stride, "stride", k), _pair(padding, "padding"), bool(ceil_mode),
                         bool(count_include_pad), divisor_override)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    check_tensor_args("avg_pool1d", ("input", input))
    x = _unsqueeze_1d(input, "avg_pool1d")
    k = _single(kernel_size)
    s, p = _single(stride, k), (0, padding if isinstance(padding, int) else padding[0])
    return avg_pool2d_op(x, k, s, p, bool(ceil_mode), bool(count_include_pad), None).squeeze(-2)


# -- adaptive pooling -------------------------------------------------------------------------

def _check_nonempty_dims(shape, first: int, fn: str) -> None:
    for i in range(first, len(shape)):
        if shape[i] == 0:
            raise RuntimeError(f"{fn}(): Expected input to have non-zero size for non-batch dimensions, but input "
                               f"has sizes {list(shape)} with dimension {i} being empty")


def _adaptive_shape(self, output_size, fn: str) -> tuple:
    if self.ndim not in (3, 4):
        raise RuntimeError(f"{fn}(): Expected 3D or 4D tensor, but got {list(self._shape)}")
    if len(output_size) != 2:
        raise RuntimeError(f"{fn}: output_size must be 2")
    # A 4D input's channels count as non-batch for max pooling (PyTorch), not for average pooling.
    _check_nonempty_dims(self._shape, 1 if fn == "adaptive_max_pool2d" and self.ndim == 4 else self.ndim - 2, fn)
    if any(o < 0 for o in output_size):
        if fn == "adaptive_max_pool2d":  # PyTorch's max kernel has no size check: its output allocation fails
            first = next(o for o in output_size if o < 0)
            raise RuntimeError(f"Trying to create tensor with negative dimension {first}: "
                               f"{list(self._shape[:-2]) + list(output_size)}")
        raise RuntimeError(f"{fn}(): elements of output_size must be greater than or equal to 0 but received "
                           f"{{{', '.join(map(str, output_size))}}}")
    _check_float(self, fn)
    return self._shape[:-2] + tuple(output_size)


_adaptive_avg_pool2d_op = _declare(
    "_adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor",
    lambda self, o: empty(_adaptive_shape(self, o, "adaptive_avg_pool2d"), self.dtype, META))
_adaptive_avg_pool2d_backward_op = _declare(
    "_adaptive_avg_pool2d_backward(Tensor grad_output, Tensor self) -> Tensor",
    lambda g, self: empty(self._shape, self.dtype, META))
adaptive_max_pool2d_op = _declare(
    "adaptive_max_pool2d(Tensor self, int[2] output_size) -> (Tensor, Tensor)",
    lambda self, o: (empty(_adaptive_shape(self, o, "adaptive_max_pool2d"), self.dtype, META),
                     empty(_adaptive_shape(self, o, "adaptive_max_pool2d"), dtypes.int64, META)))
adaptive_max_pool2d_backward_op = _declare(
    "adaptive_max_pool2d_backward(Tensor grad_output, Tensor self, Tensor indices) -> Tensor",
    lambda g, self, i: empty(self._shape, self.dtype, META))

_NO_PARAMS = [1, 1, 1, 1, 0, 0, 1, 1, 0, 0]


@_adaptive_avg_pool2d_op.kernel("cpu")
def _adaptive_avg_cpu(self, output_size):
    return _run_forward(self, _adaptive_shape(self, output_size, "adaptive_avg_pool2d"), _NO_PARAMS, 3, False)


@_adaptive_avg_pool2d_backward_op.kernel("cpu")
def _adaptive_avg_backward_cpu(grad_output, self):
    if grad_output.ndim != self.ndim:
        raise RuntimeError("adaptive_avg_pool2d_backward: grad_output and input must have the same rank")
    return _run_backward(grad_output, self, None, _NO_PARAMS, 3, self._shape[:-2] + grad_output._shape[-2:])


@adaptive_max_pool2d_op.kernel("cpu")
def _adaptive_max_cpu(self, output_size):
    return _run_forward(self, _adaptive_shape(self, output_size, "adaptive_max_pool2d"), _NO_PARAMS, 2, True)


@adaptive_max_pool2d_backward_op.kernel("cpu")
def _adaptive_max_backward_cpu(grad_output, self, indices):
    if tuple(indices._shape) != tuple(grad_output._shape) or indices.dtype is not dtypes.int64:
        raise RuntimeError("adaptive_max_pool2d_backward: indices must be int64 of grad_output's size")
    if grad_output.ndim != self.ndim:
        raise RuntimeError("adaptive_max_pool2d_backward: grad_output and input must have the same rank")
    return _run_backward(grad_output, self, indices, _NO_PARAMS, 2, self._shape[:-2] + grad_output._shape[-2:])


def _adaptive_size(output_size, input: Tensor, n: int) -> tuple:
    if isinstance(output_size, int):
        output_size = (output_size,) * n
    output_size = tuple(output_size)
    return tuple(input._shape[-n + i] if o is None else o for i, o in enumerate(output_size))


def _adaptive_avg_composite(input, size: tuple):
    """PyTorch's adaptive_avg_pool2d: its own size checks, then a mean over the plane for a 1x1 output
    (so a 0-sized plane gives NaN there, not the kernel's error, and any rank >= 2 works), else the kernel."""
    if len(size) != 2:
        raise RuntimeError("adaptive_avg_pool2d: output_size must be 2")
    if size[0] < 0 or size[1] < 0:
        raise RuntimeError("adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but "
                           f"received {{{size[0]}, {size[1]}}}")
    if size[0] == 1 and size[1] == 1:
        out = input.mean((-1, -2), keepdim=True)
        if input.ndim == 4 and not input.is_contiguous() and input.is_contiguous(memory_format=mf.channels_last):
            # PyTorch's mean keeps the input's layout (strides of the 1-sized plane included); ember's does not
            out = out.clone(memory_format=mf.channels_last)
        return out
    return _adaptive_avg_pool2d_op(input, size)


def adaptive_avg_pool2d(input, output_size):
    check_tensor_args("adaptive_avg_pool2d", ("input", input))
    return _adaptive_avg_composite(input, _adaptive_size(output_size, input, 2))


def adaptive_max_pool2d(input, output_size, return_indices=False):
    out, idx = adaptive_max_pool2d_op(input, _adaptive_size(output_size, input, 2))
    return (out, idx) if return_indices else out


def _adaptive_1d_input(input, fn: str):
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional tensor for argument #1 "
                           f"'self' (while checking arguments for {fn})")
    if fn == "adaptive_max_pool1d":
        _check_nonempty_dims(input._shape, 1, fn)
    return input.unsqueeze(-2)


def _adaptive_1d_size(output_size, fn: str) -> int:
    if isinstance(output_size, int):
        return output_size
    output_size = tuple(output_size)
    if len(output_size) != 1:
        raise RuntimeError(f"{fn}() argument 'output_size' should contain one int (got {len(output_size)})")
    if not isinstance(output_size[0], int):
        raise TypeError(f"{fn}(): argument 'output_size' must be tuple of ints, but found element of type "
                        f"{type(output_size[0]).__name__} at pos 0")
    return output_size[0]


def adaptive_avg_pool1d(input, output_size):
    size = _adaptive_1d_size(output_size, "adaptive_avg_pool1d")
    return _adaptive_avg_composite(_adaptive_1d_input(input, "adaptive_avg_pool1d"), (1, size)).squeeze(-2)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    size = _adaptive_1d_size(output_size, "adaptive_max_pool1d")
    out, idx = adaptive_max_pool2d_op(_adaptive_1d_input(input, "adaptive_max_pool1d"), (1, size))
    return (out.squeeze(-2), idx.squeeze(-2)) if return_indices else out.squeeze(-2)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
adaptive_avg_pool1d         function
avg_pool1d                  function
max_pool1d                  function
max_pool1d_with_indices     function
max_pool2d                  function
""")
