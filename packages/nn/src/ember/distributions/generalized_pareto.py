"""Generalized Pareto distribution with ``loc``, ``scale`` and shape ``concentration`` (xi)."""

import math
import numbers

import ember

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    """xi = 0 is the exponential limit; each formula takes it on its own branch (a safe xi of 1 keeps
    the other branch finite where it is not selected, so gradients stay clean)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        if all(isinstance(v, numbers.Number) for v in (loc, scale, concentration)):
            batch_shape = ember.Size()
        else:
            batch_shape = self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(GeneralizedPareto, batch_shape, _instance, ("loc", "scale", "concentration"))

    def _split(self):
        eq_zero = ember.isclose(self.concentration, ember.zeros_like(self.concentration))
        return eq_zero, ember.where(eq_zero, ember.ones_like(self.concentration), self.concentration)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return self.icdf(ember.rand(shape, dtype=self.loc.dtype, device=self.loc.device))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe = self._split()
        y = 1 / safe + ember.ones_like(z)
        where_nonzero = ember.where(y == 0, y, y * ember.log1p(safe * z))
        return -self.scale.log() - ember.where(eq_zero, z, where_nonzero)

    def log_survival_function(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe = self._split()
        return ember.where(eq_zero, -z, -ember.log1p(safe * z) / safe)

    def log_cdf(self, value):
        return ember.log1p(-ember.exp(self.log_survival_function(value)))

    def cdf(self, value):
        return ember.exp(self.log_cdf(value))

    def icdf(self, value):
        eq_zero, safe = self._split()
        logu = ember.log1p(-value)
        where_nonzero = self.loc + self.scale / safe * ember.expm1(-safe * logu)
        return ember.where(eq_zero, self.loc - self.scale * logu, where_nonzero)

    def _z(self, x):
        return (x - self.loc) / self.scale

    @property
    def mean(self):
        valid = self.concentration < 1
        safe = ember.where(valid, self.concentration, 0.5)
        return ember.where(valid, self.loc + self.scale / (1 - safe), math.nan)

    @property
    def variance(self):
        valid = self.concentration < 0.5
        safe = ember.where(valid, self.concentration, 0.25)
        return ember.where(valid, self.scale**2 / ((1 - safe) ** 2 * (1 - 2 * safe)), math.nan)

    def entropy(self):
        return ember.broadcast_to(ember.log(self.scale) + self.concentration + 1, self._batch_shape)

    @property
    def mode(self):
        return self.loc

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        lower = self.loc
        upper = ember.where(self.concentration < 0, lower - self.scale / self.concentration, math.inf)
        return constraints.interval(lower, upper)
