"""Helpers shared by the distribution families (broadcasting, probs <-> logits, lazy attributes)."""

import math
import numbers

import ember

__all__ = ["broadcast_all", "clamp_probs", "lazy_property", "logits_to_probs", "probs_to_logits", "tril_matrix_to_vec",
           "vec_to_tril_matrix"]


def broadcast_all(*values):
    """Broadcasts tensors and Python numbers to one shape; numbers take the tensors' dtype."""
    if not all(ember.is_tensor(v) or isinstance(v, numbers.Number) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number or ember.Tensor.")
    if not any(ember.is_tensor(v) for v in values):
        dtype = ember.get_default_dtype()
        values = [ember.tensor(v, dtype=dtype) for v in values]
    else:
        ref = next(v for v in values if ember.is_tensor(v))
        values = [
            v if ember.is_tensor(v) else ember.tensor(v, dtype=ref.dtype, device=ref.device) for v in values
        ]
    return ember.broadcast_tensors(*values)


def _standard_normal(shape, dtype, device):
    return ember.randn(shape, dtype=dtype, device=device)


def _sum_rightmost(value, dim):
    """Sums out the rightmost ``dim`` dims of ``value``."""
    if dim == 0:
        return value
    return value.reshape(value.shape[: value.dim() - dim] + (-1,)).sum(-1)


def clamp_probs(probs):
    """Keeps probabilities inside (0, 1) so their logs stay finite."""
    eps = ember.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary=False):
    return ember.sigmoid(logits) if is_binary else ember.softmax(logits, dim=-1)


def probs_to_logits(probs, is_binary=False):
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return ember.log(ps_clamped) - ember.log1p(-ps_clamped)
    return ember.log(ps_clamped)


class lazy_property:
    """Computes an attribute once on first access and caches it on the instance."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with ember.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def tril_matrix_to_vec(mat, diag=0):
    """The entries of ``mat`` on and below diagonal ``diag``, row by row, as the last dim."""
    n = mat.shape[-1]
    rows, cols = ember.tril_indices(n, n, offset=diag, device=mat.device)
    return mat[..., rows, cols]


def vec_to_tril_matrix(vec, diag=0):
    """The inverse of ``tril_matrix_to_vec``: a square matrix with zeros above diagonal ``diag``."""
    # n*(n+1)/2 + n*diag = len(vec) solved for the matrix size n.
    length = vec.shape[-1]
    n = round((math.sqrt((1 + 2 * diag) ** 2 + 8 * length) - 1 - 2 * diag) / 2)
    if n * (n + 1) // 2 + n * diag != length:
        raise ValueError("The size of last dimension is not a valid lower triangle")
    mat = vec.new_zeros(vec.shape[:-1] + (n, n))
    rows, cols = ember.tril_indices(n, n, offset=diag, device=vec.device)
    mat[..., rows, cols] = vec
    return mat
