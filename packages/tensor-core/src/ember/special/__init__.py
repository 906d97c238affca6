"""``ember.special``: PyTorch's ``torch.special`` names for the special functions of the core
(each one a name its op's record gives, ``special=``: _src/optable.py)."""

from ember._src.bindings import namespace as _namespace

globals().update(_namespace("special"))
__all__ = sorted(_namespace("special"))
