"""``ember.func``: composable function transforms (PyTorch's ``torch.func``).

``vmap`` vectorizes a function over a batch dimension; ``grad``, ``grad_and_value``, ``vjp``,
``jvp``, ``jacrev``, ``jacfwd``, ``hessian`` and ``linearize`` differentiate functions; and
``functional_call`` / ``stack_module_state`` run modules as functions of their parameters. Every
transform composes with every other (``vmap(grad(f))``, ``jacrev(jacrev(f))``, ...).
"""

from ._functional_call import functional_call, stack_module_state
from ._vmap import vmap

__all__ = ["functional_call", "stack_module_state", "vmap"]
