"""``torch.conv_tbc`` (a 1-d convolution over (time, batch, channel) input, fairseq's layout)
and ``torch.empty_permuted`` (an uninitialized tensor whose memory follows a given dim order),
composed from existing ops; and the accelerator error classes PyTorch exposes at top level."""

from __future__ import annotations

from ...optable import declare
from ...tensor import Tensor
from ..creation import factories
from . import conv


class OutOfMemoryError(RuntimeError):
    """``torch.OutOfMemoryError``: an allocation on a device failed."""


class AcceleratorError(RuntimeError):
    """``torch.AcceleratorError``: an error reported by an accelerator's runtime."""


OutOfMemoryError.__module__ = AcceleratorError.__module__ = "ember"


def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """input (T, B, C_in), weight (K, C_in, C_out), bias (C_out) -> (T + 2 pad - K + 1, B, C_out)."""
    for name, t in (("self", input), ("weight", weight), ("bias", bias)):
        if not isinstance(t, Tensor):
            raise TypeError(f"conv_tbc(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if input.ndim != 3:
        raise RuntimeError("Input must have 3 dims: time, batch, in_channel")
    if weight.ndim != 3:
        raise RuntimeError("Weight tensor must have 3 dims: kernel_width, in_channels, out_channels.")
    if bias.ndim != 1:
        raise RuntimeError("Bias must be 1-D")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError("Input dim 2 (input channels) is not == dim 1 in the weight tensor")
    if weight.shape[2] != bias.shape[0]:
        raise RuntimeError("Bias size must equal dim 2 in the weight tensor (output channels).")
    out = conv.conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1)


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, requires_grad=False,
                   pin_memory=False) -> Tensor:
    size, order = tuple(size), tuple(physical_layout)
    if sorted(order) != list(range(len(size))):
        raise RuntimeError(f"Number of dimensions in size does not match the length of the physical_layout; "
                           f"or physical_layout is not a permutation of 0..{len(size) - 1}")
    physical = factories.empty(*[size[d] for d in order], dtype=dtype, device=device, pin_memory=pin_memory)
    inverse = [0] * len(order)
    for i, d in enumerate(order):
        inverse[d] = i
    result = physical.permute(*inverse) if order else physical
    return result.requires_grad_() if requires_grad else result


declare(__name__, """
conv_tbc          function
empty_permuted    function
""")
