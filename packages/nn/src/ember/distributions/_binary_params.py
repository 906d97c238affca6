"""The parameters of independent binary events, given as ``probs`` or as ``logits`` (exactly one),
shared by Bernoulli, LogitRelaxedBernoulli, Binomial and NegativeBinomial: the other is computed on
first use."""

import numbers

import ember

from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits


class BinaryProbsOrLogits:
    """Mixin of a Distribution: ``_set_probs_or_logits`` stores the given parameter (and
    ``_param``, the one given) and returns the batch shape it implies."""

    def _set_probs_or_logits(self, probs, logits):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        given = probs if probs is not None else logits
        (value,) = broadcast_all(given)
        setattr(self, "probs" if probs is not None else "logits", value)
        self._param = value
        return ember.Size() if isinstance(given, numbers.Number) else value.size()

    def _expanded_probs_or_logits(self, new, batch_shape):
        """Gives ``new`` this instance's probs and logits (those it holds) expanded to ``batch_shape``."""
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(batch_shape))
        new._param = new.logits if "logits" in new.__dict__ else new.probs

    def _new(self, *args, **kwargs):
        return self._param.new(*args, **kwargs)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.size()
