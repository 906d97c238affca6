"""``ember.func``: composable function transforms (PyTorch's ``torch.func``).

``vmap`` vectorizes a function over a batch dimension; ``grad``, ``grad_and_value``, ``vjp``,
``jvp``, ``jacrev``, ``jacfwd``, ``hessian`` and ``linearize`` differentiate functions; and
``functional_call`` / ``stack_module_state`` run modules as functions of their parameters. Every
transform composes with every other (``vmap(grad(f))``, ``jacrev(jacrev(f))``, ...).
"""

from ._debug import debug_unwrap
from ._forward import jvp, linearize
from ._functional_call import functional_call, replace_all_batch_norm_modules_, stack_module_state
from ._functionalize import functionalize
from ._grad import grad, grad_and_value, vjp
from ._jacobian import hessian, jacfwd, jacrev
from ._vmap import vmap

__all__ = [
    "debug_unwrap",
    "functional_call",
    "functionalize",
    "grad",
    "grad_and_value",
    "hessian",
    "jacfwd",
    "jacrev",
    "jvp",
    "linearize",
    "replace_all_batch_norm_modules_",
    "stack_module_state",
    "vjp",
    "vmap",
]
