"""Transforms that reshape, concatenate, stack or act on matrices (re-exported by ``transforms``):
Reshape, Cat, Stack, Softplus, CorrCholesky, PositiveDefinite and CumulativeDistribution."""

import math

import ember
from ember.nn.functional import pad, softplus

from . import constraints
from ._transform_base import Transform
from ._vector_transforms import LowerCholeskyTransform
from .utils import _sum_rightmost, lazy_property, tril_matrix_to_vec, vec_to_tril_matrix

__all__ = ["CatTransform", "CorrCholeskyTransform", "CumulativeDistributionTransform", "PositiveDefiniteTransform",
           "ReshapeTransform", "SoftplusTransform", "StackTransform"]


class ReshapeTransform(Transform):
    """Reshapes the rightmost ``in_shape`` dims to ``out_shape`` (Jacobian 1)."""

    bijective = True

    def __init__(self, in_shape, out_shape, cache_size=0):
        self.in_shape = ember.Size(in_shape)
        self.out_shape = ember.Size(out_shape)
        if self.in_shape.numel() != self.out_shape.numel():
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @constraints.dependent_property
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @constraints.dependent_property
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else ReshapeTransform(self.in_shape, self.out_shape, cache_size)

    def _call(self, x):
        return x.reshape(x.shape[: x.dim() - len(self.in_shape)] + self.out_shape)

    def _inverse(self, y):
        return y.reshape(y.shape[: y.dim() - len(self.out_shape)] + self.in_shape)

    def log_abs_det_jacobian(self, x, y):
        return x.new_zeros(x.shape[: x.dim() - len(self.in_shape)])

    @staticmethod
    def _swap(shape, old, new):
        if len(shape) < len(old):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(old)
        if shape[cut:] != old:
            raise ValueError(f"Shape mismatch: expected {shape[cut:]} but got {old}")
        return shape[:cut] + new

    def forward_shape(self, shape):
        return self._swap(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return self._swap(shape, self.out_shape, self.in_shape)


class SoftplusTransform(Transform):
    """``log(1 + exp(x))`` onto the positive reals."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, SoftplusTransform)

    def _call(self, x):
        return softplus(x)

    def _inverse(self, y):
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x, y):
        return -softplus(-x)


class CorrCholeskyTransform(Transform):
    """An unconstrained vector of D(D-1)/2 reals onto the Cholesky factor of a D x D correlation
    matrix: tanh to (-1, 1), then stick breaking row by row (LKJ, 2009)."""

    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def _call(self, x):
        x = ember.tanh(x)
        eps = ember.finfo(x.dtype).eps
        x = x.clamp(min=-1 + eps, max=1 - eps)
        r = vec_to_tril_matrix(x, diag=-1)
        z1m_cumprod_sqrt = (1 - r**2).sqrt().cumprod(-1)
        r = r + ember.eye(r.shape[-1], dtype=r.dtype, device=r.device)
        return r * pad(z1m_cumprod_sqrt[..., :-1], [1, 0], value=1)

    def _inverse(self, y):
        y_cumsum = 1 - ember.cumsum(y * y, dim=-1)
        y_cumsum_shifted = pad(y_cumsum[..., :-1], [1, 0], value=1)
        t = tril_matrix_to_vec(y, diag=-1) / tril_matrix_to_vec(y_cumsum_shifted, diag=-1).sqrt()
        return (t.log1p() - t.neg().log1p()) / 2  # atanh

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        y1m_cumsum = 1 - (y * y).cumsum(dim=-1)
        stick_breaking_logdet = 0.5 * tril_matrix_to_vec(y1m_cumsum, diag=-2).log().sum(-1)
        # log(1 - tanh(x)^2), written stably through softplus.
        tanh_logdet = -2 * (x + softplus(-2 * x) - math.log(2.0)).sum(dim=-1)
        return stick_breaking_logdet + tanh_logdet

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattened lower-diagonal number")
        return shape[:-1] + (d, d)

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        return shape[:-2] + (d * (d - 1) // 2,)


class PositiveDefiniteTransform(Transform):
    """Unconstrained matrix -> ``L L^T`` with ``L = LowerCholeskyTransform()(x)``."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def __eq__(self, other):
        return isinstance(other, PositiveDefiniteTransform)

    def _call(self, x):
        x = LowerCholeskyTransform()(x)
        return x @ x.mT

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(ember.linalg.cholesky(y))


def _check_dim(t, dim, size, what, name):
    if not -t.dim() <= dim < t.dim():
        raise AssertionError(f"dim {dim} out of range for {name} with {t.dim()} dimensions")
    if t.size(dim) != size:
        raise AssertionError(f"{name}.size({dim}) = {t.size(dim)} must equal {what} {size}")


class CatTransform(Transform):
    """Applies ``tseq[i]`` to consecutive slices of lengths ``lengths[i]`` along ``dim`` and concatenates."""

    def __init__(self, tseq, dim=0, lengths=None, cache_size=0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise AssertionError("All elements of tseq must be Transform instances")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.lengths = list(lengths) if lengths is not None else [1] * len(self.transforms)
        if len(self.lengths) != len(self.transforms):
            raise AssertionError(f"lengths ({len(self.lengths)}) must match transforms ({len(self.transforms)})")
        self.dim = dim

    @lazy_property
    def event_dim(self):
        return max(t.event_dim for t in self.transforms)

    @lazy_property
    def length(self):
        return sum(self.lengths)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _map(self, z, inverse):
        _check_dim(z, self.dim, self.length, "length", "y" if inverse else "x")
        out, start = [], 0
        for trans, length in zip(self.transforms, self.lengths):
            piece = z.narrow(self.dim, start, length)
            out.append(trans.inv(piece) if inverse else trans(piece))
            start += length
        return ember.cat(out, dim=self.dim)

    def _call(self, x):
        return self._map(x, False)

    def _inverse(self, y):
        return self._map(y, True)

    def log_abs_det_jacobian(self, x, y):
        _check_dim(x, self.dim, self.length, "length", "x")
        _check_dim(y, self.dim, self.length, "length", "y")
        logdetjacs, start = [], 0
        for trans, length in zip(self.transforms, self.lengths):
            ldj = trans.log_abs_det_jacobian(x.narrow(self.dim, start, length), y.narrow(self.dim, start, length))
            if trans.event_dim < self.event_dim:
                ldj = _sum_rightmost(ldj, self.event_dim - trans.event_dim)
            logdetjacs.append(ldj)
            start += length
        dim = self.dim - x.dim() if self.dim >= 0 else self.dim
        dim += self.event_dim
        # The concatenated dim survives in the Jacobian only when it is a batch dim.
        return ember.cat(logdetjacs, dim=dim) if dim < 0 else sum(logdetjacs)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @constraints.dependent_property
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(Transform):
    """Applies ``tseq[i]`` to the i-th slice along ``dim`` and stacks the results."""

    def __init__(self, tseq, dim=0, cache_size=0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise AssertionError("All elements of tseq must be Transform instances")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else StackTransform(self.transforms, self.dim, cache_size)

    def _slice(self, z):
        return [z.select(self.dim, i) for i in range(z.size(self.dim))]

    def _map(self, z, inverse):
        _check_dim(z, self.dim, len(self.transforms), "len(transforms)", "y" if inverse else "x")
        return ember.stack([t.inv(s) if inverse else t(s) for s, t in zip(self._slice(z), self.transforms)],
                           dim=self.dim)

    def _call(self, x):
        return self._map(x, False)

    def _inverse(self, y):
        return self._map(y, True)

    def log_abs_det_jacobian(self, x, y):
        _check_dim(x, self.dim, len(self.transforms), "len(transforms)", "x")
        _check_dim(y, self.dim, len(self.transforms), "len(transforms)", "y")
        return ember.stack([t.log_abs_det_jacobian(xs, ys)
                            for xs, ys, t in zip(self._slice(x), self._slice(y), self.transforms)], dim=self.dim)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @constraints.dependent_property
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)


class CumulativeDistributionTransform(Transform):
    """A distribution's CDF as a transform onto (0, 1); its log-Jacobian is the log-density."""

    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self):
        return self.distribution.support

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)
