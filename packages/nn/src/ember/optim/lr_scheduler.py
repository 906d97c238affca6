"""``ember.optim.lr_scheduler``: learning-rate schedulers with PyTorch's API and arithmetic."""

from ._schedulers_base import LRScheduler
from ._schedulers_compose import ChainedScheduler, ReduceLROnPlateau, SequentialLR
from ._schedulers_cyclic import CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR
from ._schedulers_simple import (
    ConstantLR,
    CosineAnnealingLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    MultiplicativeLR,
    MultiStepLR,
    PolynomialLR,
    StepLR,
)

_LRScheduler = LRScheduler  # the old name, still imported by some programs

__all__ = [
    "LambdaLR",
    "MultiplicativeLR",
    "StepLR",
    "MultiStepLR",
    "ConstantLR",
    "LinearLR",
    "ExponentialLR",
    "SequentialLR",
    "CosineAnnealingLR",
    "ChainedScheduler",
    "ReduceLROnPlateau",
    "CyclicLR",
    "CosineAnnealingWarmRestarts",
    "OneCycleLR",
    "PolynomialLR",
    "LRScheduler",
]
