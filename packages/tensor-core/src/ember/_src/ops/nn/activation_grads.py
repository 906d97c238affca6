"""Native input gradients of activations (PyTorch's ``gelu_backward``): one pass over (grad, x)
where the composite formula runs about ten elementwise ops.

ember-autograd's gelu formulas call these when no graph of the backward is recorded; the
composite stays for double backward and for tensors of other devices or wrapped subclasses.
"""

from __future__ import annotations

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
