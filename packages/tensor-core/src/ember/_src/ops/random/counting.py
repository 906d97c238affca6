"""Counting distributions: ``poisson`` and ``binomial`` draws with per-element parameters.

Each is an op over one native sampler (``_C.mt_poisson_``/``_C.mt_binomial_``) that draws from
the generator's stream with PyTorch's algorithms, so seeded results are PyTorch's. Their
gradient is zero, as in PyTorch.
"""

from __future__ import annotations

from ... import dtypes
from ..._native import _C
from ...device import META
from ...dispatch import define
from ...optable import declare
from ...shapes import broadcast_shapes, numel
from ...tensor import Tensor
from .._common import HALF_TYPES, convert, empty, type_name
from .samplers import _generator_for, _resolve


def _poisson_meta(self, generator=None):
    if not isinstance(self, Tensor):
        raise TypeError(f"poisson(): argument 'input' (position 1) must be Tensor, not {type(self).__name__}")
    if not self.dtype.is_floating_point:
        raise NotImplementedError(f"\"poisson_cpu\" not implemented for '{type_name(self.dtype)}'")
    return empty(self._shape, self.dtype, META)


poisson_op = define("poisson(Tensor self, Generator? generator=None) -> Tensor", (), _poisson_meta)
poisson_op.kernels["meta"] = _poisson_meta


@poisson_op.kernel("cpu")
def _poisson_cpu(self, generator=None):
    _poisson_meta(self)
    gen = _generator_for(self, generator)
    rates = convert(self, dtypes.float64)
    n = numel(self._shape)
    if n and not bool((rates >= 0).all()):  # a NaN rate too, as PyTorch's check
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    values = empty(self._shape, dtypes.float64, self._device)
    if n:
        _C.mt_poisson_(values, rates.contiguous(), gen._rng)
    return convert(values, self.dtype)


def poisson(input: Tensor, generator=None) -> Tensor:
    """Poisson draws with rate ``input`` (elementwise)."""
    return poisson_op(input, generator)


def _binomial_meta(count, prob, generator=None):
    for name, t in (("count", count), ("prob", prob)):
        if not isinstance(t, Tensor):
            raise TypeError(f"binomial(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if not count.dtype.is_floating_point:
        raise ValueError(f"binomial only supports floating-point dtypes for count, got: {type_name(count.dtype)}")
    if count.dtype in HALF_TYPES:
        raise NotImplementedError(f"\"binomial_cpu\" not implemented for '{type_name(count.dtype)}'")
    if prob.dtype is not count.dtype:
        raise RuntimeError(f"Found dtype {type_name(prob.dtype)} but expected {type_name(count.dtype)}")
    shape = broadcast_shapes(count._shape, prob._shape)
    return empty(shape, count.dtype, META)


binomial_op = define("binomial(Tensor count, Tensor prob, Generator? generator=None) -> Tensor", (), _binomial_meta)
binomial_op.kernels["meta"] = _binomial_meta


@binomial_op.kernel("cpu")
def _binomial_cpu(count, prob, generator=None):
    result = _binomial_meta(count, prob)
    gen = _resolve(generator)
    shape = result._shape
    values = empty(shape, count.dtype, count._device)
    if numel(shape):
        _C.mt_binomial_(values, count.expand(shape).contiguous(), prob.expand(shape).contiguous(), gen._rng)
    return values


def binomial(count: Tensor, prob: Tensor, generator=None) -> Tensor:
    """Binomial draws: successes in ``count`` trials of probability ``prob`` (elementwise, broadcast)."""
    return binomial_op(count, prob, generator)


def _standard_gamma_meta(self, generator=None):
    if not isinstance(self, Tensor):
        raise TypeError(f"_standard_gamma(): argument 'self' (position 1) must be Tensor, not {type(self).__name__}")
    if self.dtype not in (dtypes.float32, dtypes.float64):
        raise NotImplementedError(f"\"gamma_cpu\" not implemented for '{type_name(self.dtype)}'")
    return empty(self._shape, self.dtype, META)


standard_gamma_op = define("_standard_gamma(Tensor self, Generator? generator=None) -> Tensor", ("random",),
                           _standard_gamma_meta)
standard_gamma_op.kernels["meta"] = _standard_gamma_meta


@standard_gamma_op.kernel("cpu")
def _standard_gamma_cpu(self, generator=None):
    _standard_gamma_meta(self)
    gen = _generator_for(self, generator)
    values = empty(self._shape, self.dtype, self._device)
    if numel(self._shape):
        _C.mt_gamma_(values, self.contiguous(), gen._rng)
    return values


def _standard_gamma(input: Tensor, generator=None) -> Tensor:
    """Gamma(input, 1) draws (elementwise), PyTorch's CPU sampler and stream."""
    return standard_gamma_op(input, generator)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
_standard_gamma             function
binomial                    function
poisson                     function
""")
