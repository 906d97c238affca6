"""``ember.cuda.amp``: deprecated aliases (``torch.cuda.amp``). Without CUDA they warn and disable
themselves, as PyTorch's CPU build does."""

import warnings

from ember.amp._deprecated import CUDA as _CUDA

autocast, GradScaler = _CUDA

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd"]


def custom_fwd(fwd=None, *, cast_inputs=None):
    """Deprecated: ``ember.amp.custom_fwd(..., device_type="cuda")``."""
    warnings.warn("`torch.cuda.amp.custom_fwd(args...)` is deprecated. Please use "
                  "`torch.amp.custom_fwd(args..., device_type='cuda')` instead.", FutureWarning, stacklevel=2)
    from ember.amp import custom_fwd as _custom_fwd

    return _custom_fwd(fwd=fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd):
    """Deprecated: ``ember.amp.custom_bwd(..., device_type="cuda")``."""
    warnings.warn("`torch.cuda.amp.custom_bwd(args...)` is deprecated. Please use "
                  "`torch.amp.custom_bwd(args..., device_type='cuda')` instead.", FutureWarning, stacklevel=2)
    from ember.amp import custom_bwd as _custom_bwd

    return _custom_bwd(bwd, device_type="cuda")
