"""Public face of the dispatcher: the op registry and dispatch modes.

``DispatchMode`` is ember's counterpart of PyTorch's ``TorchDispatchMode``: subclass it,
override ``__torch_dispatch__(func, types, args, kwargs)``, and use it as a context manager
to see (or replace) every op call. ``ops`` maps op names to their ``Op`` objects.

``set_sync_hook(hook)`` installs the pending-work hook a lazy tracer uses: ``hook(tensor,
reason)`` runs before anything in the core reads tensor data or random state (``item``,
``numpy``, ``repr``, ``backward``, ``manual_seed``, ...); ``sync_pending`` calls it.
"""

from ember._src.dispatch import OPS as ops
from ember._src.dispatch import DispatchMode, Op, active_modes, set_sync_hook, sync_pending

__all__ = ["DispatchMode", "Op", "active_modes", "ops", "set_sync_hook", "sync_pending"]
