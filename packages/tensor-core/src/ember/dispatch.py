"""Public face of the dispatcher: the op registry and dispatch modes.

``DispatchMode`` is ember's counterpart of PyTorch's ``TorchDispatchMode``: subclass it,
override ``__torch_dispatch__(func, types, args, kwargs)``, and use it as a context manager
to see (or replace) every op call. ``ops`` maps op names to their ``Op`` objects.
"""

from ember._src.dispatch import OPS as ops
from ember._src.dispatch import DispatchMode, Op, active_modes

__all__ = ["DispatchMode", "Op", "active_modes", "ops"]
