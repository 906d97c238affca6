"""Native input gradients of activations (PyTorch's ``gelu_backward``, ``_softmax_backward_data``,
``_log_softmax_backward_data``): one pass over (grad, x) where the composite gelu formula runs
about ten elementwise ops, two passes over (grad, output) where the softmax ones run four.

ember-autograd's gelu formulas call these when no graph of the backward is recorded; the
composite stays for double backward and for tensors of other devices or wrapped subclasses.
"""

from __future__ import annotations

import math

from ... import dtypes
from ..._native import _C
from ...device import META
from ...dispatch import define
from ...tensor import new_empty_tensor
from .._common import compute_dtype, convert


def _gelu_backward_kernel(grad_output, self, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh. Got: {approximate}")
    if not self.is_floating_point():
        raise RuntimeError(f"gelu_backward: expected a floating point input, got {self.dtype}")
    shape = tuple(self._shape)
    cd = compute_dtype(self.dtype)
    out = new_empty_tensor(shape, cd, self._device)
    if self._device is not META:
        grad = convert(grad_output, cd)
        if tuple(grad._shape) != shape:
            grad = grad.expand(*shape)
        _C.gelu_backward(out, grad.contiguous(), convert(self, cd).contiguous(), approximate == "tanh")
    return convert(out, self.dtype)


gelu_backward_op = define(
    "gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor", (),
    differentiable=False)
gelu_backward_op.kernel("cpu")(_gelu_backward_kernel)
gelu_backward_op.kernels["meta"] = gelu_backward_op.meta = _gelu_backward_kernel


def _declare_softmax_backward(name: str, log: bool):
    def kernel(grad_output, output, dim, input_dtype):
        rd = dtypes.to_dtype(input_dtype)
        nd = output.ndim
        d = dim % nd if nd else 0
        shape = tuple(output._shape)
        cd = compute_dtype(output.dtype)
        out = new_empty_tensor(shape, cd, output._device)
        if output._device is not META and out.numel():
            grad = convert(grad_output, cd)
            if tuple(grad._shape) != shape:
                grad = grad.expand(*shape)
            outer, inner = math.prod(shape[:d]), math.prod(shape[d + 1:])
            _C.softmax_backward(out, grad.contiguous(), convert(output, cd).contiguous(), outer,
                                shape[d] if shape else 1, inner, log)
        return convert(out, rd)

    op = define(f"{name}(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor", (),
                differentiable=False)
    op.kernel("cpu")(kernel)
    op.kernels["meta"] = op.meta = kernel
    return op


softmax_backward_op = _declare_softmax_backward("_softmax_backward_data", False)
log_softmax_backward_op = _declare_softmax_backward("_log_softmax_backward_data", True)
