"""``ember.cpu.amp``: deprecated aliases of ``ember.amp`` (``torch.cpu.amp``); they warn as PyTorch's do."""

from ember.amp._deprecated import CPU as _CPU

autocast, GradScaler = _CPU

__all__ = ["GradScaler", "autocast"]
