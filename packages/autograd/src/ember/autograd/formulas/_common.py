"""Helpers shared by the formula files: reading op arguments and building gradients."""

from __future__ import annotations

import math

import ember
from ember._src.tensor import Tensor


def arg(inputs, index: int, name: str, default=None):
    """The op argument at ``index`` or passed by ``name`` (callers use either form); a negative
    ``index`` marks a keyword-only argument."""
    if 0 <= index < len(inputs.args):
        return inputs.args[index]
    return inputs.kwargs.get(name, default)


def is_tensor(x) -> bool:
    return isinstance(x, Tensor)


def input_requires_grad(inputs, index: int) -> bool:
    """Whether positional input ``index`` is a tensor that requires grad, read without unpacking it
    (unpacking version-checks a saved tensor, which only a formula that uses its values may do)."""
    if index >= len(inputs.args):
        return False
    return bool(getattr(tuple.__getitem__(inputs.args, index), "requires_grad", False))


def zeros_like(x: Tensor) -> Tensor:
    # On x's device, except when x is a meta placeholder (saved for its shape only): then the default.
    device = x.device if x.device.type != "meta" else None
    return ember.zeros(x.shape, dtype=x.dtype, device=device)


def zero_grads(grads, inputs, outputs):
    """The backward of ops PyTorch differentiates with a zero gradient (floor, sign, ...)."""
    return [zeros_like(a) if is_tensor(a) else None for a in inputs.args]


def not_implemented(op_name: str, error: type = RuntimeError):
    """A backward that raises as PyTorch does for ops whose derivative it does not implement
    (``error``: PyTorch's type, NotImplementedError for derivatives.yaml's ``not_implemented``)."""

    def backward(grads, inputs, outputs):
        raise error(f"the derivative for '{op_name}' is not implemented.")

    backward.not_implemented = True  # the coverage test counts these as missing derivatives
    return backward


def embed(shape, g: Tensor, view) -> Tensor:
    """Zeros of ``shape`` with ``g`` written into the region ``view(zeros)`` selects."""
    from ember.autograd import forward_ad

    if forward_ad._LEVEL[0] is not None:
        # Forward AD (jacfwd/hessian over this backward) follows g's tangent through ops, and a
        # copy_ into a view of the zeros (below) would leave the tangent on the view only: write
        # g by positions instead, an index_put_ into the zeros themselves.
        positions = view(ember.arange(math.prod(shape), device=g.device).view(shape)).reshape(-1)
        flat = g.new_zeros((math.prod(shape),))
        flat.index_put_((positions,), g.reshape(-1))
        return flat.view(shape)
    result = g.new_zeros(shape)  # batched like g under vmap (ember.func)
    view(result).copy_(g)
    return result


def where_zero(cond: Tensor, g: Tensor) -> Tensor:
    """``g`` with zeros where ``cond`` holds."""
    return ember.where(cond, 0.0, g)  # a number keeps g's dtype (no zeros tensor made per call)


def register_if_defined(op_name: str, backward, *, save_output: bool | tuple = False, clone_self=None,
                        nondiff_outputs: tuple = (), meta_args: tuple = ()) -> None:
    """Registers ``backward`` for an op that may not exist in this tensor-core build yet."""
    from ember._src.dispatch import OPS

    from ._registry import derivative

    if op_name in OPS:
        derivative(op_name, save_output=save_output, clone_self=clone_self, nondiff_outputs=nondiff_outputs,
                   meta_args=meta_args)(backward)
