"""``ember.optim``: optimizers and learning-rate schedulers with PyTorch's API.

Every optimizer follows PyTorch's single-tensor (``foreach=False``) update equations, in
place, one parameter at a time; ``foreach``/``fused``/``capturable`` are accepted and run
the same path. ``lr`` may be a number or a 1-element tensor.
"""

from . import lr_scheduler, swa_utils
from ._swap_in import swap_in_optimizer_params_and_state
from .adadelta import Adadelta
from .adafactor import Adafactor
from .adagrad import Adagrad
from .adam import Adam
from .adamax import Adamax
from .adamw import AdamW
from .asgd import ASGD
from .lbfgs import LBFGS
from .muon import Muon
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD
from .sparse_adam import SparseAdam

__all__ = [
    "Adadelta",
    "Adafactor",
    "Adagrad",
    "Adam",
    "AdamW",
    "ASGD",
    "Adamax",
    "LBFGS",
    "Muon",
    "NAdam",
    "Optimizer",
    "RAdam",
    "RMSprop",
    "Rprop",
    "SGD",
    "SparseAdam",
    "lr_scheduler",
    "swap_in_optimizer_params_and_state",
]
