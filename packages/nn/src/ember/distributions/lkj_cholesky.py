"""LKJ distribution over the Cholesky factors of correlation matrices (Lewandowski, Kurowicka & Joe,
2009), sampled by the onion method."""

import math

import ember

from . import constraints
from .beta import Beta
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """``dim`` x ``dim`` lower-triangular factors L of correlation matrices with density
    proportional to det(L L^T)^(concentration - 1)."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.size()
        # Onion method: row i's squared off-diagonal length is Beta(i/2, conc + (dim - 2 - i)/2)-distributed.
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        offset = ember.arange(self.dim - 1, dtype=self.concentration.dtype, device=self.concentration.device)
        offset = ember.cat([offset.new_zeros((1,)), offset])
        self._beta = Beta(offset + 0.5, marginal_conc.unsqueeze(-1) - 0.5 * offset)
        super().__init__(batch_shape, ember.Size((dim, dim)), validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = ember.Size(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(batch_shape + (self.dim,))
        super(LKJCholesky, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=()):
        with ember.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            u = ember.randn(self._extended_shape(sample_shape), dtype=y.dtype, device=y.device).tril(-1)
            # A uniform direction on each row's hypersphere (the first row has no off-diagonal part).
            u = u / u.norm(dim=-1, keepdim=True)
            u[..., 0, :] = 0.0
            w = ember.sqrt(y) * u
            diag = ember.clamp(1 - ember.sum(w**2, dim=-1), min=ember.finfo(w.dtype).tiny).sqrt()
            return w + ember.diag_embed(diag)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diag = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = ember.arange(2, self.dim + 1, device=self.concentration.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized = ember.sum(order * diag.log(), dim=-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        normalize = 0.5 * dm1 * math.log(math.pi) + ember.mvlgamma(alpha - 0.5, dm1) - ember.lgamma(alpha) * dm1
        return unnormalized - normalize
