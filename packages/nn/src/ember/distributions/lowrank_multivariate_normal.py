"""Multivariate normal with a low-rank-plus-diagonal covariance ``W W^T + diag(D)``."""

import math

import ember

from . import constraints
from .distribution import Distribution
from .multivariate_normal import _batch_mahalanobis
from .utils import _standard_normal, lazy_property

__all__ = ["LowRankMultivariateNormal"]


def _eye_plus(k):
    return k + ember.eye(k.shape[-1], dtype=k.dtype, device=k.device)


def _batch_capacitance_tril(W, D):
    """Cholesky factor of the capacitance ``I + W^T D^-1 W`` (m x m, m = the rank): every solve and
    determinant goes through it (Woodbury identity, matrix determinant lemma)."""
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    return ember.linalg.cholesky(_eye_plus(ember.matmul(Wt_Dinv, W)))


def _batch_lowrank_logdet(W, D, capacitance_tril):
    return 2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + D.log().sum(-1)


def _batch_lowrank_mahalanobis(W, D, x, capacitance_tril):
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    Wt_Dinv_x = ember.matmul(Wt_Dinv, x.unsqueeze(-1)).squeeze(-1)
    return (x.pow(2) / D).sum(-1) - _batch_mahalanobis(capacitance_tril, Wt_Dinv_x)


class LowRankMultivariateNormal(Distribution):
    arg_constraints = {
        "loc": constraints.real_vector,
        "cov_factor": constraints.independent(constraints.real, 2),
        "cov_diag": constraints.independent(constraints.positive, 1),
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = loc.shape[-1:]
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if cov_factor.shape[-2:-1] != event_shape:
            raise ValueError(f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m")
        if cov_diag.shape[-1:] != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}")
        try:
            loc_, self.cov_factor, cov_diag_ = ember.broadcast_tensors(loc.unsqueeze(-1), cov_factor,
                                                                      cov_diag.unsqueeze(-1))
        except RuntimeError as e:
            raise ValueError(f"Incompatible batch shapes: loc {loc.shape}, cov_factor {cov_factor.shape}, "
                             f"cov_diag {cov_diag.shape}") from e
        self.loc = loc_[..., 0]
        self.cov_diag = cov_diag_[..., 0]
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)
        super().__init__(self.loc.shape[:-1], event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = ember.Size(batch_shape)
        loc_shape = batch_shape + self.event_shape
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + self.cov_factor.shape[-1:])
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        super(LowRankMultivariateNormal, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        var = self._unbroadcasted_cov_factor.pow(2).sum(-1) + self._unbroadcasted_cov_diag
        return var.expand(self._batch_shape + self._event_shape)

    @lazy_property
    def scale_tril(self):
        # W W^T + D = D^1/2 (I + D^-1/2 W W^T D^-1/2) D^1/2: a Cholesky of the bracket, scaled.
        d_sqrt = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        w = self._unbroadcasted_cov_factor / d_sqrt
        scale_tril = d_sqrt * ember.linalg.cholesky(_eye_plus(ember.matmul(w, w.mT)))
        return scale_tril.expand(self._batch_shape + self._event_shape + self._event_shape)

    @lazy_property
    def covariance_matrix(self):
        w = self._unbroadcasted_cov_factor
        cov = ember.matmul(w, w.mT) + ember.diag_embed(self._unbroadcasted_cov_diag)
        return cov.expand(self._batch_shape + self._event_shape + self._event_shape)

    @lazy_property
    def precision_matrix(self):
        # Woodbury: (W W^T + D)^-1 = D^-1 - D^-1 W C^-1 W^T D^-1, with C = L L^T the capacitance.
        Wt_Dinv = self._unbroadcasted_cov_factor.mT / self._unbroadcasted_cov_diag.unsqueeze(-2)
        A = ember.linalg.solve_triangular(self._capacitance_tril, Wt_Dinv, upper=False)
        precision = ember.diag_embed(self._unbroadcasted_cov_diag.reciprocal()) - A.mT @ A
        return precision.expand(self._batch_shape + self._event_shape + self._event_shape)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        w_shape = shape[:-1] + self.cov_factor.shape[-1:]
        eps_w = _standard_normal(w_shape, dtype=self.loc.dtype, device=self.loc.device)
        eps_d = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return (self.loc + ember.matmul(self._unbroadcasted_cov_factor, eps_w.unsqueeze(-1)).squeeze(-1)
                + self._unbroadcasted_cov_diag.sqrt() * eps_d)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        W, D = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        M = _batch_lowrank_mahalanobis(W, D, diff, self._capacitance_tril)
        log_det = _batch_lowrank_logdet(W, D, self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + log_det + M)

    def entropy(self):
        log_det = _batch_lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                        self._capacitance_tril)
        H = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + log_det)
        return H if len(self._batch_shape) == 0 else H.expand(self._batch_shape)
