"""``ember.nn``: modules, layers and losses with PyTorch's API (distribution ``ember-nn``)."""

import sys as _sys

from . import attention, common_types, functional, grad, init, modules, parallel, utils  # noqa: F401
from .modules import *  # noqa: F401,F403
from .modules.lazy import LazyModuleMixin  # noqa: F401
from .parallel import DataParallel  # noqa: F401
from .parameter import Buffer, Parameter, UninitializedBuffer, UninitializedParameter  # noqa: F401

utils = _sys.modules[__name__ + ".utils"]  # noqa: F811 (the star import above brought ember.nn.modules.utils)
