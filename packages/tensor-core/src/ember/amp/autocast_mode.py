"""``ember.amp.autocast_mode``: where PyTorch programs sometimes import autocast from."""

from ember._src.autocast import autocast, is_autocast_available

__all__ = ["autocast", "is_autocast_available"]
