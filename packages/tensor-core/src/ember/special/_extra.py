"""More of ``torch.special``: composites of the core's ops (differentiable through them) and the
orthogonal polynomials by their three-term recurrences.

The polynomials take ``n`` as a tensor or a number, as PyTorch's do: the recurrence runs up to the
largest degree and each element keeps the value of its own degree (negative degrees give 0).
"""

from __future__ import annotations

import math

import ember


def _t(x, like=None):
    if isinstance(x, ember.Tensor):
        return x
    dtype = like.dtype if isinstance(like, ember.Tensor) and like.dtype.is_floating_point else None
    device = like.device if isinstance(like, ember.Tensor) else None  # the tensor operand's (a CUDA x, a scalar n)
    return ember.tensor(x, dtype=dtype or ember.get_default_dtype(), device=device)


def _out(result, out):
    if out is None:
        return result
    out.resize_(result.shape)
    out.copy_(result)
    return out


def logit(input, eps=None, *, out=None):
    return _out(ember.logit(input, eps), out)


def logsumexp(input, dim, keepdim=False, *, out=None):
    return _out(ember.logsumexp(input, dim, keepdim), out)


def softmax(input, dim, *, dtype=None):
    return ember.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    return ember.log_softmax(input, dim, dtype=dtype)


def round(input, *, decimals=0, out=None):  # noqa: A001 - PyTorch's name
    return _out(ember.round(input, decimals=decimals), out)


def xlogy(input, other, *, out=None):
    return _out(ember.xlogy(input, other), out)


def xlog1py(input, other, *, out=None):
    """x * log1p(y), 0 where x == 0 (unless y is NaN), as PyTorch's."""
    x, y = _t(input, other), _t(other, input)
    prod = x * ember.log1p(y)
    zero = ember.zeros_like(prod)
    return _out(ember.where((x == 0) & ~ember.isnan(y), zero, prod), out)


def entr(input, *, out=None):
    """-x log x for x > 0, 0 at 0, -inf below 0 (NaN stays NaN)."""
    x = input if input.dtype.is_floating_point else input.to(ember.get_default_dtype())
    # Unmasked log: the gradient is -(1 + log x) everywhere, NaN below 0, as PyTorch's formula.
    pos = -x * ember.log(x)
    res = ember.where(x > 0, pos, ember.where(x == 0, ember.zeros_like(x), ember.full_like(x, -math.inf)))
    return _out(ember.where(ember.isnan(x), x, res), out)


def ndtr(input, *, out=None):
    """The standard normal CDF: erfc(-x / sqrt 2) / 2 (erfc keeps the lower tail accurate)."""
    x = input if input.dtype.is_floating_point else input.to(ember.get_default_dtype())
    return _out(0.5 * ember.erfc(-x * (1 / math.sqrt(2))), out)


def ndtri(input, *, out=None):
    """The inverse of ndtr: sqrt 2 * erfinv(2p - 1) (inf at 0 and 1, NaN outside [0, 1])."""
    p = input if input.dtype.is_floating_point else input.to(ember.get_default_dtype())
    return _out(math.sqrt(2) * ember.erfinv(2 * p - 1), out)


# -- orthogonal polynomials ---------------------------------------------------------------------------


def _recurrence(x, n, p0, p1, step, *, out=None):
    """P_n(x) for the recurrence P_{k+1} = step(k, x, P_k, P_{k-1}) from P_0 = p0(x), P_1 = p1(x)."""
    if not isinstance(x, ember.Tensor) and not isinstance(n, ember.Tensor):
        raise TypeError("expected a tensor for x or n")
    xt = _t(x, n)
    nt = _t(n, xt)
    if not xt.dtype.is_floating_point:
        xt = xt.to(ember.get_default_dtype())
    shape = ember.broadcast_shapes(xt.shape, nt.shape)
    xt, nt = xt.expand(shape), nt.to(xt.dtype).expand(shape)
    top = int(nt.max().item()) if nt.numel() else 0
    prev, cur = p0(xt), p1(xt)
    result = ember.where(nt == 0, prev, ember.zeros_like(xt))
    result = ember.where(nt == 1, cur, result)
    for k in range(1, top):
        prev, cur = cur, step(k, xt, cur, prev)
        result = ember.where(nt == k + 1, cur, result)
    return _out(result, out)


def _one(x):
    return ember.ones_like(x)


def chebyshev_polynomial_t(input, n, *, out=None):
    return _recurrence(input, n, _one, lambda x: x.clone(), lambda k, x, c, p: 2 * x * c - p, out=out)


def chebyshev_polynomial_u(input, n, *, out=None):
    return _recurrence(input, n, _one, lambda x: 2 * x, lambda k, x, c, p: 2 * x * c - p, out=out)


def chebyshev_polynomial_v(input, n, *, out=None):
    return _recurrence(input, n, _one, lambda x: 2 * x - 1, lambda k, x, c, p: 2 * x * c - p, out=out)


def chebyshev_polynomial_w(input, n, *, out=None):
    return _recurrence(input, n, _one, lambda x: 2 * x + 1, lambda k, x, c, p: 2 * x * c - p, out=out)


def _shifted(fn):
    def shifted(input, n, *, out=None):
        x = _t(input, n)
        return fn(2 * x - 1, n, out=out)

    shifted.__name__ = shifted.__qualname__ = "shifted_" + fn.__name__  # pickled by name
    return shifted


shifted_chebyshev_polynomial_t = _shifted(chebyshev_polynomial_t)
shifted_chebyshev_polynomial_u = _shifted(chebyshev_polynomial_u)
shifted_chebyshev_polynomial_v = _shifted(chebyshev_polynomial_v)
shifted_chebyshev_polynomial_w = _shifted(chebyshev_polynomial_w)


def hermite_polynomial_h(input, n, *, out=None):
    """Physicists' Hermite: H_{k+1} = 2x H_k - 2k H_{k-1}."""
    return _recurrence(input, n, _one, lambda x: 2 * x, lambda k, x, c, p: 2 * x * c - 2 * k * p, out=out)


def hermite_polynomial_he(input, n, *, out=None):
    """Probabilists' Hermite: He_{k+1} = x He_k - k He_{k-1}."""
    return _recurrence(input, n, _one, lambda x: x.clone(), lambda k, x, c, p: x * c - k * p, out=out)


def laguerre_polynomial_l(input, n, *, out=None):
    """L_{k+1} = ((2k + 1 - x) L_k - k L_{k-1}) / (k + 1)."""
    return _recurrence(input, n, _one, lambda x: 1 - x, lambda k, x, c, p: ((2 * k + 1 - x) * c - k * p) / (k + 1),
                       out=out)


def legendre_polynomial_p(input, n, *, out=None):
    """P_{k+1} = ((2k + 1) x P_k - k P_{k-1}) / (k + 1)."""
    return _recurrence(input, n, _one, lambda x: x.clone(), lambda k, x, c, p: ((2 * k + 1) * x * c - k * p) / (k + 1),
                       out=out)


__all__ = [
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w", "entr",
    "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p", "log_softmax",
    "logit", "logsumexp", "ndtr", "ndtri", "round", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "softmax", "xlog1py", "xlogy",
]
