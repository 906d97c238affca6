"""``ember.masked``: PyTorch's masked reductions and normalizations (``torch.masked.sum(x, 1,
mask=m)``): elements where ``mask`` is False take no part (they count as the reduction's identity:
0 for sum, 1 for prod, -inf for amax...). ``MaskedTensor`` is not provided (docs/deviations.md)."""

from __future__ import annotations

import math

__all__ = ["amax", "amin", "argmax", "argmin", "cumsum", "log_softmax", "logsumexp", "mean", "norm", "normalize",
           "prod", "softmax", "softmin", "std", "sum", "var"]


def _ember():
    import ember

    return ember


def _input_mask(input, mask):
    """``mask`` as PyTorch's masked ops take it: broadcast to input's shape (expand's errors), then
    bool (a mask of another dtype counts its nonzeros as kept)."""
    e = _ember()
    if not isinstance(mask, e.Tensor):
        raise ValueError("masked: mask must be a tensor")
    if mask.shape != input.shape:
        if mask.dim() > input.dim():
            raise IndexError("_input_mask expected broadcastable mask (got mask dimensionality higher than of the "
                             "input)")
        mask = e.broadcast_to(mask, input.shape)
    return mask if mask.dtype is e.bool else mask.to(e.bool)


def _masked(input, mask, fill):
    """input with masked-out elements replaced by ``fill``."""
    if mask is None:
        return input
    e = _ember()
    return e.where(_input_mask(input, mask), input, e.tensor(fill, dtype=input.dtype))


def _count(input, mask, dim, keepdim):
    e = _ember()
    ones = e.ones_like(input) if mask is None else _input_mask(input, mask).to(input.dtype)
    return _reduce(ones, dim, keepdim, "sum")


def _dims(input, dim):
    if dim is None:
        return tuple(range(input.dim()))
    return (dim,) if isinstance(dim, int) else tuple(dim)


def _reduce(x, dim, keepdim, op):
    dims = _dims(x, dim)
    if not dims:
        return x
    if op in ("amax", "amin"):
        return getattr(x, op)(dims, keepdim=keepdim)
    if op == "prod":
        out = x
        for d in sorted((d % max(x.dim(), 1) for d in dims), reverse=True):
            out = out.prod(d, keepdim=keepdim)
        return out
    return x.sum(dims, keepdim=keepdim)


def _cast(input, dtype):
    return input if dtype is None else input.to(dtype)


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    input = _cast(input, dtype)
    return _reduce(_masked(input, mask, 0), dim, keepdim, "sum")


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    input = _cast(input, dtype)
    return _reduce(_masked(input, mask, 1), dim, keepdim, "prod")


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    input = _cast(input, dtype)
    return _reduce(_masked(input, mask, -math.inf), dim, keepdim, "amax")


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    input = _cast(input, dtype)
    return _reduce(_masked(input, mask, math.inf), dim, keepdim, "amin")


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    input = _cast(input, dtype)
    return _masked(input, mask, -math.inf).argmax(dim, keepdim=keepdim).to(input.dtype)


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    input = _cast(input, dtype)
    return _masked(input, mask, math.inf).argmin(dim, keepdim=keepdim).to(input.dtype)


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    input = _cast(input, dtype)
    return sum(input, dim, keepdim=keepdim, mask=mask) / _count(input, mask, dim, keepdim)


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    input = _cast(input, dtype)
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    centred = input - mean(input, dim, keepdim=True, mask=mask)
    total = sum(centred * centred, dim, keepdim=keepdim, mask=mask)
    n = _count(input, mask, dim, keepdim) - correction
    e = _ember()
    return total / e.where(n > 0, n, e.tensor(math.nan, dtype=n.dtype))


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    return var(input, dim, unbiased, correction=correction, keepdim=keepdim, dtype=dtype, mask=mask).sqrt()


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):
    input = _cast(input, dtype)
    return _ember().linalg.vector_norm(_masked(input, mask, 0), ord, _dims(input, dim), keepdim=keepdim)


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):
    input = _cast(input, dtype)
    x = _masked(input, mask, 0)
    return x / norm(x, ord, dim, keepdim=True).clamp_min(eps)


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    input = _cast(input, dtype)
    return _masked(input, mask, -math.inf).logsumexp(_dims(input, dim), keepdim=keepdim)


def softmax(input, dim, *, dtype=None, mask=None):
    input = _cast(input, dtype)
    return _masked(input, mask, -math.inf).softmax(dim)


def log_softmax(input, dim, *, dtype=None, mask=None):
    input = _cast(input, dtype)
    return _masked(input, mask, -math.inf).log_softmax(dim)


def softmin(input, dim, *, dtype=None, mask=None):
    input = _cast(input, dtype)
    return softmax(-input, dim, mask=mask)


def cumsum(input, dim, *, dtype=None, mask=None):
    input = _cast(input, dtype)
    return _masked(input, mask, 0).cumsum(dim)
