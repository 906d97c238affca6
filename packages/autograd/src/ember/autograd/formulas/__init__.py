"""Importing this package fills the derivative table (``_registry.FORMULAS``)."""

from ._registry import FORMULAS, NON_DIFFERENTIABLE, Formula, Inputs, derivative, forward_derivative  # noqa: F401
