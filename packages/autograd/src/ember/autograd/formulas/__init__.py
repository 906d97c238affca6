"""The derivative table. Importing this package fills ``_registry.FORMULAS``: one module per
op family, plus the ops marked non-differentiable."""

from . import (  # noqa: F401, E402
    activations,
    forward,  # noqa: E402  (registers JVP rules after every backward formula exists)
    indexing,
    joining,
    linalg,
    nondifferentiable,
    pointwise,
    reduction,
    reorder,
    views,
)
from ._registry import FORMULAS, NON_DIFFERENTIABLE, Formula, Inputs, derivative, forward_derivative  # noqa: F401

forward._register_generic()
