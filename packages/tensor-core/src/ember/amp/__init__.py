"""``ember.amp``: automatic mixed precision, as ``torch.amp``.

``autocast`` regions run the ops of PyTorch's lists in lower precision (or float32); the
state and the dispatcher step live in ``ember._src.autocast``. ``GradScaler`` scales losses
so that low-precision gradients keep their small values.
"""

from ember._src.autocast import autocast, is_autocast_available
from ember.amp import autocast_mode  # noqa: F401 - an attribute of the package, as torch.amp.autocast_mode
from ember.amp.custom import custom_bwd, custom_fwd
from ember.amp.grad_scaler import GradScaler

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd", "is_autocast_available"]
