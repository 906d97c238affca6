"""Gamma distribution (shape ``concentration``, inverse scale ``rate``) and the gamma sampler."""

import numbers

import ember
from ember.autograd import Function
from ember.autograd.formulas.mathfns import standard_gamma_grad

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["Gamma"]


def _sample_standard_gamma(alpha):
    """Gamma(alpha, 1) draws by Marsaglia-Tsang rejection: on CPU PyTorch's serial sampler
    (``ember._standard_gamma``), elsewhere this version vectorized over ``alpha``.

    Each round proposes for the elements not yet accepted; the acceptance rate is above
    95%, so the rounds shrink fast. ``alpha < 1`` uses
    Gamma(alpha + 1) * U^(1 / alpha).
    """
    alpha = alpha.detach()
    if alpha.device.type == "cpu" and alpha.dtype in (ember.float32, ember.float64):
        return ember._standard_gamma(alpha)  # PyTorch's sampler: seeded draws match torch's
    boost = alpha < 1
    a = ember.where(boost, alpha + 1, alpha).reshape(-1)
    d = a - 1.0 / 3.0
    c = (9.0 * d).rsqrt()
    result = ember.zeros_like(a)
    idx = ember.arange(a.numel(), device=a.device)  # flat positions still waiting for an acceptance
    while idx.numel() > 0:
        d_i, c_i = d[idx], c[idx]
        x = ember.randn(idx.shape, dtype=a.dtype, device=a.device)
        u = ember.rand(idx.shape, dtype=a.dtype, device=a.device)
        v = (1 + c_i * x) ** 3
        safe_v = ember.where(v > 0, v, ember.ones_like(v))
        accept = (v > 0) & (u.log() < 0.5 * x * x + d_i - d_i * safe_v + d_i * safe_v.log())
        result[idx[accept]] = (d_i * safe_v)[accept]
        idx = idx[~accept]
    result = result.reshape(alpha.shape)
    u = ember.rand(alpha.shape, dtype=alpha.dtype, device=alpha.device)
    result = ember.where(boost, result * u.pow(1.0 / alpha), result)
    return result.clamp(min=ember.finfo(alpha.dtype).tiny)


class _StandardGamma(Function):
    """Gamma(alpha, 1) sample with the implicit reparameterization gradient (``standard_gamma_grad``),
    for devices whose sampler is the Python one above."""

    @staticmethod
    def forward(ctx, alpha):
        x = _sample_standard_gamma(alpha)
        ctx.save_for_backward(alpha, x)
        return x

    @staticmethod
    def backward(ctx, grad):
        alpha, x = ctx.saved_tensors
        return grad * standard_gamma_grad(alpha, x)


class Gamma(Distribution):
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        if isinstance(concentration, numbers.Number) and isinstance(rate, numbers.Number):
            batch_shape = ember.Size()
        else:
            batch_shape = self.concentration.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Gamma, batch_shape, _instance, ("concentration", "rate"))

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        alpha = self.concentration.expand(shape)
        if alpha.requires_grad:
            x = _StandardGamma.apply(alpha)
        else:
            x = _sample_standard_gamma(alpha)
        return (x / self.rate.expand(shape)).clamp(min=ember.finfo(x.dtype).tiny)

    def log_prob(self, value):
        value = ember.as_tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        if self._validate_args:
            self._validate_sample(value)
        return (
            ember.xlogy(self.concentration, self.rate)
            + ember.xlogy(self.concentration - 1, value)
            - self.rate * value
            - ember.lgamma(self.concentration)
        )

    def entropy(self):
        return (
            self.concentration
            - ember.log(self.rate)
            + ember.lgamma(self.concentration)
            + (1.0 - self.concentration) * ember.digamma(self.concentration)
        )

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ember.special.gammainc(self.concentration, self.rate * value)
