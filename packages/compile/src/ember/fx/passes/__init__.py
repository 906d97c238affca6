"""Graph passes over ember.fx GraphModules (``shape_prop``, ``split_module``), as in torch.fx.passes."""

from . import shape_prop

__all__ = ["shape_prop"]
