"""Symbolic shapes under PyTorch's ``torch.fx.experimental.symbolic_shapes`` name (ember.compiler's)."""

from ember.compiler._exc import ConstraintViolationError, GuardOnDataDependentSymNode
from ember.compiler._guard_helpers import (
    guard_or_false,
    guard_or_true,
    has_free_symbols,
    is_concrete_int,
    statically_known_false,
    statically_known_true,
)
from ember.compiler.symbolic_shapes import ShapeEnv, SymInt

__all__ = ["ConstraintViolationError", "GuardOnDataDependentSymNode", "ShapeEnv", "SymInt", "guard_or_false",
           "guard_or_true", "has_free_symbols", "is_concrete_int", "statically_known_false",
           "statically_known_true"]
