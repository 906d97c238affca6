"""Half-Cauchy distribution: the absolute value of a zero-centred Cauchy with scale ``scale``."""

import math

import ember

from . import constraints
from ._wrapped import FoldedDistribution
from .cauchy import Cauchy

__all__ = ["HalfCauchy"]


class HalfCauchy(FoldedDistribution):
    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    base_family = Cauchy

    @property
    def mean(self):
        return ember.full(self._extended_shape(), math.inf, dtype=self.scale.dtype, device=self.scale.device)

    @property
    def variance(self):
        return self.base_dist.variance
