"""Dirichlet distribution over the probability simplex, with concentration ``concentration``."""

import ember
from ember.nn.functional import one_hot

from . import constraints
from .distribution import Distribution
from .gamma import _sample_standard_gamma, _StandardGamma

__all__ = ["Dirichlet"]


def _sample_dirichlet(concentration):
    """Normalized Gamma(alpha_i, 1) draws; gradients flow through each reparameterized gamma."""
    if concentration.device.type == "cpu" and concentration.dtype in (ember.float32, ember.float64):
        # As PyTorch's CPU kernel: gammas drawn and normalized in float64, then cast and kept
        # inside (0, 1), so seeded draws match torch's.
        alpha = concentration.double()
        gammas = _StandardGamma.apply(alpha) if alpha.requires_grad else _sample_standard_gamma(alpha)
        info = ember.finfo(concentration.dtype)
        x = (gammas / gammas.sum(-1, keepdim=True)).to(concentration.dtype)
        return x.clamp(min=info.tiny, max=1.0 - info.eps / 2)
    if concentration.requires_grad:
        gammas = _StandardGamma.apply(concentration)
    else:
        gammas = _sample_standard_gamma(concentration)
    return gammas / gammas.sum(-1, keepdim=True)


class Dirichlet(Distribution):
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        batch_shape, event_shape = concentration.shape[:-1], concentration.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = ember.Size(batch_shape)
        new.concentration = self.concentration.expand(batch_shape + self.event_shape)
        super(Dirichlet, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return _sample_dirichlet(self.concentration.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (
            ember.xlogy(self.concentration - 1.0, value).sum(-1)
            + ember.lgamma(self.concentration.sum(-1))
            - ember.lgamma(self.concentration).sum(-1)
        )

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self):
        concentrationm1 = (self.concentration - 1).clamp(min=0.0)
        mode = concentrationm1 / concentrationm1.sum(-1, True)
        # All concentrations below 1: the density peaks at the vertex of the largest one.
        all_small = (self.concentration < 1).all(-1, keepdim=True)
        vertex = one_hot(mode.argmax(-1), concentrationm1.shape[-1]).to(mode.dtype)
        return ember.where(all_small, vertex, mode)

    @property
    def variance(self):
        con0 = self.concentration.sum(-1, True)
        return self.concentration * (con0 - self.concentration) / (con0.pow(2) * (con0 + 1))

    def entropy(self):
        k = self.concentration.size(-1)
        a0 = self.concentration.sum(-1)
        return (
            ember.lgamma(self.concentration).sum(-1)
            - ember.lgamma(a0)
            - (k - a0) * ember.digamma(a0)
            - ((self.concentration - 1.0) * ember.digamma(self.concentration)).sum(-1)
        )
