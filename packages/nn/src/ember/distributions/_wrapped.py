"""Distributions that are one named base distribution pushed through one transform, sharing their
expand and the properties they forward to the base: the folded ones (HalfNormal, HalfCauchy:
``|X|`` of a zero-centred X) and the relaxed ones (RelaxedBernoulli, RelaxedOneHotCategorical: a
relaxed sample's logit or log pushed back through a sigmoid or exp)."""

import math

import ember

from .transformed_distribution import TransformedDistribution
from .transforms import AbsTransform


class _WrappedDistribution(TransformedDistribution):
    """A TransformedDistribution whose concrete class (the family) builds its own base; ``expand``
    makes a new instance of that family, and a user subclass with its own ``__init__`` must
    define ``expand``, as for every PyTorch distribution."""

    _family = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # The first class below this module's bases is the family (HalfNormal); a user's subclass
        # of it inherits the family.
        if cls.__module__ != __name__ and all(getattr(b, "_family", None) is None for b in cls.__bases__):
            cls._family = cls

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(self._family, _instance)
        return super().expand(batch_shape, _instance=new)


class FoldedDistribution(_WrappedDistribution):
    """``|X|`` for ``X ~ base_family(0, scale)``: both x and -x map onto |x|, so the density doubles
    on the support. The family gives ``base_family`` and its mean and variance."""

    base_family = None

    def __init__(self, scale, validate_args=None):
        base_dist = self.base_family(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mode(self):
        return ember.zeros_like(self.scale)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = ember.as_tensor(value, dtype=self.scale.dtype, device=self.scale.device)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return ember.where(value >= 0, log_prob, -math.inf)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class RelaxedDistribution(_WrappedDistribution):
    """A relaxed sample at ``temperature``: the family's ``base_family(temperature, probs, logits)``
    (a sample's logit or log) through ``transform``."""

    base_family = None
    transform = None
    validate_base = True  # whether the base gets validate_args (else the global default)

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base_args = {"validate_args": validate_args} if self.validate_base else {}
        base_dist = self.base_family(temperature, probs, logits, **base_args)
        super().__init__(base_dist, self.transform(), validate_args=validate_args)

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs

