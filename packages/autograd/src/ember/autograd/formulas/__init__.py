"""The derivative table. Importing this package fills ``_registry.FORMULAS``: one module per
op family, plus the ops marked non-differentiable, then the forward-mode (JVP) rules."""

from . import (  # noqa: F401, I001 - forward must stay last (below)
    activations,
    complex_fft,
    convolution,
    fused_pointwise,
    indexing,
    joining,
    linalg,
    linalg_decomp,
    linalg_eig,
    mathfns,
    nn,
    nn_double,
    nondifferentiable,
    pointwise,
    reduction,
    reorder,
    rnn,
    scatter,
    sorting,
    sparse,
    views,
)
from ._registry import FORMULAS, NON_DIFFERENTIABLE, Formula, Inputs, derivative, forward_derivative  # noqa: F401

# Last: forward-mode rules attach to the backward entries registered above.
from . import forward, linalg_forward, nn_forward  # noqa: E402

forward.register_generic()
nn_forward.register()
linalg_forward.register()
