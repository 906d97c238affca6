"""The derivative table. Importing this package fills ``_registry.FORMULAS``: one module per
op family, plus the ops marked non-differentiable."""

from ._registry import FORMULAS, NON_DIFFERENTIABLE, Formula, Inputs, derivative, forward_derivative  # noqa: F401
from . import activations, indexing, joining, linalg, nondifferentiable, pointwise, reduction, reorder, views  # noqa: F401, E402
from . import forward  # noqa: E402  (registers JVP rules after every backward formula exists)

forward._register_generic()
