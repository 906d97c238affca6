"""CUDA kernels of the activations' native input gradients: ``gelu_backward`` (both
approximations) in one elementwise pass, instead of the dozen-op composite the autograd formula
falls back to on a device without it (a GPT-2 step ran it once per layer: ~150 launches).

Same contract as the CPU kernel (activation_grads.py): the result has ``self``'s shape and dtype,
computed in float32 for float16/bfloat16 (rounded once at the store), ``grad_output`` broadcast
to ``self``'s shape.
"""

from __future__ import annotations

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.ops._common import empty

from ._elementwise import launch

L = "libdevice."
# PyTorch's GeluBackward formulas; {0} is the gradient, {1} the input.
_EXACT = ("{0} * (0.5 * (1.0 + " + L + "erf({1} * 0.7071067811865476)) + "
          "{1} * 0.3989422804014327 * " + L + "exp(-0.5 * {1} * {1}))")
_TANH_INNER = L + "tanh(0.7978845608028654 * ({1} + 0.044715 * {1} * {1} * {1}))"
_TANH = ("{0} * (0.5 * (1.0 + " + _TANH_INNER + ") + 0.5 * {1} * (1.0 - " + _TANH_INNER + " * " + _TANH_INNER +
         ") * 0.7978845608028654 * (1.0 + 0.134145 * {1} * {1}))")


def _gelu_backward(grad_output, self, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh. Got: {approximate}")
    if not self.is_floating_point():
        raise RuntimeError(f"gelu_backward: expected a floating point input, got {self.dtype}")
    if grad_output._device != self._device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{self._device} and {grad_output._device}!")
    if grad_output.dtype.is_complex:
        raise NotImplementedError(f"complex dtype {grad_output.dtype} has no CUDA kernels in ember")
    compute = dt.float64 if self.dtype is dt.float64 else dt.float32
    out = empty(tuple(self._shape), self.dtype, self._device)
    if grad_output._shape != self._shape:
        grad_output = grad_output.expand(*self._shape)
    launch(_TANH if approximate == "tanh" else _EXACT, out, [grad_output, self], [compute, compute])
    return out


def register() -> None:
    OPS["gelu_backward"].kernels["cuda"] = _gelu_backward
