"""``ember.cuda.amp``: deprecated aliases (``torch.cuda.amp``). Without CUDA they warn and disable
themselves, as PyTorch's CPU build does."""

from ember.amp._deprecated import CUDA as _CUDA

autocast, GradScaler = _CUDA

__all__ = ["GradScaler", "autocast"]
