"""Von Mises (circular normal) distribution with ``loc`` and ``concentration`` (kappa)."""

import math

import ember

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property

__all__ = ["VonMises"]


def _log_modified_bessel_fn(x, order=0):
    """log I_order(x) for order 0 or 1, x > 0; exact through the scaled Bessel function i0e/i1e,
    which keeps large kappa finite (log I(x) = log(I(x) e^-x) + x)."""
    if order not in (0, 1):
        raise AssertionError(f"order must be 0 or 1, got {order}")
    scaled = ember.special.i0e(x) if order == 0 else ember.special.i1e(x)
    return scaled.log() + x


def _rejection_sample(loc, concentration, proposal_r, x):
    """Best & Fisher (1979): a wrapped-Cauchy envelope, accepted per element; vectorized rounds."""
    done = ember.zeros(x.shape, dtype=ember.bool, device=loc.device)
    while not bool(done.all()):
        u = ember.rand((3,) + tuple(x.shape), dtype=loc.dtype, device=loc.device)
        u1, u2, u3 = u.unbind()
        z = ember.cos(math.pi * u1)
        f = (1 + proposal_r * z) / (proposal_r + z)
        c = concentration * (proposal_r - f)
        accept = ((c * (2 - c) - u2) > 0) | (((c / u2).log() + 1 - c) >= 0)
        if bool(accept.any()):
            x = ember.where(accept & ~done, (u3 - 0.5).sign() * f.acos(), x)
            done = done | accept
    return (x + math.pi + loc) % (2 * math.pi) - math.pi


class VonMises(Distribution):
    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, ember.Size(), validate_args)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.concentration * ember.cos(value - self.loc)
        return log_prob - math.log(2 * math.pi) - _log_modified_bessel_fn(self.concentration, order=0)

    @lazy_property
    def _loc(self):
        return self.loc.to(ember.double)

    @lazy_property
    def _concentration(self):
        return self.concentration.to(ember.double)

    @lazy_property
    def _proposal_r(self):
        kappa = self._concentration
        tau = 1 + (1 + 4 * kappa**2).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        proposal_r = (1 + rho**2) / (2 * rho)
        # For tiny kappa the closed form cancels catastrophically; its expansion 1/kappa + kappa does not.
        return ember.where(kappa < 1e-5, 1 / kappa + kappa, proposal_r)

    def sample(self, sample_shape=()):
        with ember.no_grad():
            shape = self._extended_shape(sample_shape)
            x = ember.empty(shape, dtype=self._loc.dtype, device=self.loc.device)
            return _rejection_sample(self._loc, self._concentration, self._proposal_r, x).to(self.loc.dtype)

    def expand(self, batch_shape, _instance=None):
        try:
            return super().expand(batch_shape)
        except NotImplementedError:
            validate_args = self.__dict__.get("_validate_args")
            return type(self)(self.loc.expand(batch_shape), self.concentration.expand(batch_shape),
                              validate_args=validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        # 1 - I1(kappa) / I0(kappa)
        return 1 - (_log_modified_bessel_fn(self.concentration, order=1)
                    - _log_modified_bessel_fn(self.concentration, order=0)).exp()
