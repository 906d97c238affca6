"""``torch.distributed._tensor``: DTensor's old module path (before ``torch.distributed.tensor``),
which older programs still import. The same objects as ``ember.distributed.tensor``."""

from ..tensor import *  # noqa: F403 - every public name of ember.distributed.tensor
from ..tensor import __all__  # noqa: F401
