"""Symbolic shapes under PyTorch's ``torch.fx.experimental.symbolic_shapes`` name (ember.compiler's)."""

from ember.compiler._exc import ConstraintViolationError, GuardOnDataDependentSymNode
from ember.compiler.symbolic_shapes import ShapeEnv, SymInt

__all__ = ["ConstraintViolationError", "GuardOnDataDependentSymNode", "ShapeEnv", "SymInt"]
