"""Public face of the dispatcher: the op registry and dispatch modes.

``DispatchMode`` is ember's counterpart of PyTorch's ``TorchDispatchMode``: subclass it,
override ``__torch_dispatch__(func, types, args, kwargs)``, and use it as a context manager
to see (or replace) every op call. ``ops`` maps op names to their ``Op`` objects.

``set_sync_hook(hook)`` installs the pending-work hook a lazy tracer uses: ``hook(tensor,
reason)`` runs before anything in the core reads tensor data or random state (``item``,
``numpy``, ``repr``, ``backward``, ``manual_seed``, ...); ``sync_pending`` calls it.
``eager_region(reason)`` is the context in which ops run for real even under such a tracer
(``set_eager_region_hook`` installs the tracer's side of it).
"""

from ember._src.dispatch import OPS as ops
from ember._src.dispatch import (
    DispatchMode,
    Op,
    active_modes,
    eager_region,
    set_eager_region_hook,
    set_sync_hook,
    sync_pending,
)

__all__ = [
    "DispatchMode", "Op", "active_modes", "eager_region", "ops", "set_eager_region_hook", "set_sync_hook",
    "sync_pending",
]
