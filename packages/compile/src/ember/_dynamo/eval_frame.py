"""``torch._dynamo.eval_frame``: the compiled-module class (``isinstance(m, OptimizedModule)``)."""

from ember.compiler import OptimizedModule

__all__ = ["OptimizedModule"]
