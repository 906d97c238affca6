"""HalfNormal: ``|X|`` for ``X ~ Normal(0, scale)``."""

import math

from . import constraints
from ._wrapped import FoldedDistribution
from .normal import Normal

__all__ = ["HalfNormal"]


class HalfNormal(FoldedDistribution):
    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    base_family = Normal

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)
