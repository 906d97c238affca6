"""Ops without a gradient, and the random ops that PyTorch gives a zero gradient.

Ops whose results are integers or booleans (comparisons, predicates, bitwise and logical
ops, argmax, nonzero), factories and sampling ops never carry gradient. In-place variants
of these keep the history of their input in PyTorch (logical_and_) except where PyTorch
records a zero gradient (comparisons written into a float tensor, random fills), which get
zero formulas below so the overwritten tensor's old history is cut.
"""

from __future__ import annotations

from ._common import register_if_defined, zero_grads
from ._registry import derivative, non_differentiable

_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
_LOGICAL = ("logical_and", "logical_or", "logical_xor", "logical_not")
_BITWISE = (
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    "bitwise_left_shift",
    "bitwise_right_shift",
)
_PREDICATES = ("isnan", "isinf", "isfinite", "isposinf", "isneginf", "signbit")
_SELECTIONS = ("nonzero", "argmax", "argmin", "multinomial", "any", "all", "count_nonzero")
_FACTORIES = ("empty", "full", "arange_affine", "randperm")
_OTHER = ("view_dtype", "searchsorted", "histc", "bincount")

non_differentiable(*_COMPARISONS, *_LOGICAL, *_BITWISE, *_PREDICATES, *_SELECTIONS, *_FACTORIES, *_OTHER)
# In-place logical/bitwise ops leave the tensor's history alone (as PyTorch's do).
non_differentiable(*(name + "_" for name in _LOGICAL + _BITWISE))

# Zero gradient, as PyTorch: the written values do not depend on the old ones.
for _name in (
    *(name + "_" for name in _COMPARISONS),
    "normal_",
    "uniform_",
    "bernoulli_.float",
    "bernoulli_.Tensor",
    "cauchy_",
    "exponential_",
    "geometric_",
    "log_normal_",
    "random_",
    "normal.Tensor_Tensor",
):
    derivative(_name)(zero_grads)


def _no_derivative(name: str):
    def backward(grads, inputs, outputs):
        raise RuntimeError(f"derivative for aten::{name} is not implemented")

    return backward


# Differentiable in form but without a derivative in PyTorch: backward refuses, as there.
for _name in ("native_channel_shuffle",):
    register_if_defined(_name, _no_derivative(_name))
