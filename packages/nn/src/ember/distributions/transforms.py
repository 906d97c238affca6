"""Transforms: invertible maps with log-Jacobians, used by ``TransformedDistribution``.

This module holds the elementwise transforms and re-exports the base classes
(``_transform_base``) and the vector/matrix ones (``_vector_transforms``).
"""

import math
import numbers

import ember
from ember.nn.functional import softplus

from . import constraints
from ._structural_transforms import (
    CatTransform,
    CorrCholeskyTransform,
    CumulativeDistributionTransform,
    PositiveDefiniteTransform,
    ReshapeTransform,
    SoftplusTransform,
    StackTransform,
)
from ._transform_base import ComposeTransform, Transform, identity_transform
from ._vector_transforms import (
    IndependentTransform,
    LowerCholeskyTransform,
    SoftmaxTransform,
    StickBreakingTransform,
)
from .utils import broadcast_all

__all__ = [
    "AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform", "CorrCholeskyTransform",
    "CumulativeDistributionTransform", "PositiveDefiniteTransform", "ReshapeTransform", "SoftplusTransform",
    "StackTransform", "ExpTransform", "IndependentTransform",
    "LowerCholeskyTransform", "PowerTransform", "SigmoidTransform", "SoftmaxTransform", "StickBreakingTransform",
    "TanhTransform", "Transform", "identity_transform",
]  # fmt: skip


class ExpTransform(Transform):
    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, ExpTransform)

    __hash__ = Transform.__hash__

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class AbsTransform(Transform):
    domain = constraints.real
    codomain = constraints.positive

    def __eq__(self, other):
        return isinstance(other, AbsTransform)

    __hash__ = Transform.__hash__

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class PowerTransform(Transform):
    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size=cache_size)
        (self.exponent,) = broadcast_all(exponent)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return PowerTransform(self.exponent, cache_size=cache_size)

    @property
    def sign(self):
        return self.exponent.sign()

    def __eq__(self, other):
        return isinstance(other, PowerTransform) and bool(self.exponent.eq(other.exponent).all())

    __hash__ = Transform.__hash__

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape):
        return ember.broadcast_shapes(shape, getattr(self.exponent, "shape", ()))

    def inverse_shape(self, shape):
        return ember.broadcast_shapes(shape, getattr(self.exponent, "shape", ()))


class SigmoidTransform(Transform):
    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, SigmoidTransform)

    __hash__ = Transform.__hash__

    def _call(self, x):
        # Clip away from 0 and 1 so the inverse and the base log_prob stay finite.
        finfo = ember.finfo(x.dtype)
        return ember.clamp(ember.sigmoid(x), min=finfo.tiny, max=1.0 - finfo.eps)

    def _inverse(self, y):
        finfo = ember.finfo(y.dtype)
        y = y.clamp(min=finfo.tiny, max=1.0 - finfo.eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -softplus(-x) - softplus(x)


class TanhTransform(Transform):
    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, TanhTransform)

    __hash__ = Transform.__hash__

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return ember.atanh(y)

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2) written stably: 2 (log 2 - x - softplus(-2x)).
        return 2.0 * (math.log(2.0) - x - softplus(-2.0 * x))


class AffineTransform(Transform):
    """``y = loc + scale * x``; ``event_dim`` > 0 sums the log-Jacobian over that many rightmost dims."""

    bijective = True

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.loc = loc
        self.scale = scale
        self._event_dim = event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self.event_dim, cache_size=cache_size)

    def __eq__(self, other):
        if not isinstance(other, AffineTransform):
            return False
        for a, b in ((self.loc, other.loc), (self.scale, other.scale)):
            if isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
                if a != b:
                    return False
            elif not bool((ember.as_tensor(a) == ember.as_tensor(b)).all()):
                return False
        return True

    __hash__ = Transform.__hash__

    @property
    def sign(self):
        if isinstance(self.scale, numbers.Real):
            return 1 if float(self.scale) > 0 else -1 if float(self.scale) < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        shape = x.shape
        scale = self.scale
        if isinstance(scale, numbers.Real):
            result = ember.full_like(x, math.log(abs(scale)))
        else:
            result = ember.abs(scale).log()
        if self.event_dim:
            result = result.reshape(result.shape[: result.dim() - self.event_dim] + (-1,)).sum(-1)
            shape = shape[: len(shape) - self.event_dim]
        return result.expand(shape)

    def forward_shape(self, shape):
        return ember.broadcast_shapes(shape, getattr(self.loc, "shape", ()), getattr(self.scale, "shape", ()))

    def inverse_shape(self, shape):
        return ember.broadcast_shapes(shape, getattr(self.loc, "shape", ()), getattr(self.scale, "shape", ()))
