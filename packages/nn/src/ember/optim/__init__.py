"""``ember.optim``: optimizers and learning-rate schedulers with PyTorch's API.

Every optimizer follows PyTorch's single-tensor (``foreach=False``) update equations, in
place, one parameter at a time; ``foreach``/``fused``/``capturable`` are accepted and run
the same path. ``lr`` may be a number or a 1-element tensor.
"""

from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam
from .adamax import Adamax
from .adamw import AdamW
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = [
    "Adadelta",
    "Adagrad",
    "Adam",
    "AdamW",
    "Adamax",
    "LBFGS",
    "NAdam",
    "Optimizer",
    "RAdam",
    "RMSprop",
    "SGD",
    "lr_scheduler",
]
