"""Graph passes over ember.fx GraphModules, as in torch.fx.passes: ``shape_prop``,
``fake_tensor_prop`` and ``split_module``."""

from . import fake_tensor_prop, shape_prop, split_module

__all__ = ["fake_tensor_prop", "shape_prop", "split_module"]
