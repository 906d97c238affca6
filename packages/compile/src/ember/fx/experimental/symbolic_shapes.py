"""Symbolic shapes under PyTorch's ``torch.fx.experimental.symbolic_shapes`` name (ember.compiler's)."""

from ember.compiler._exc import GuardOnDataDependentSymNode
from ember.compiler.symbolic_shapes import ShapeEnv, SymInt

__all__ = ["GuardOnDataDependentSymNode", "ShapeEnv", "SymInt"]
