"""``norm_except_dim`` / ``_weight_norm`` as compositions of differentiable ops."""

from __future__ import annotations

import ember
from ember import Tensor


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:
    """The ``pow``-norm of ``v`` over every dim but ``dim``, kept as size-1 dims.

    ``dim=-1`` means the norm of the whole tensor (a 0-d result), as in PyTorch.
    """
    if dim == -1:
        return ember.linalg.vector_norm(v, pow)
    if dim < 0:
        dim += v.ndim
    if not 0 <= dim < v.ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-v.ndim}, {v.ndim - 1}], "
                         f"but got {dim})")
    others = tuple(d for d in range(v.ndim) if d != dim)
    if not others:  # a 1-d tensor: each element is its own slice
        return v.abs()
    return ember.linalg.vector_norm(v, pow, dim=others, keepdim=True)


def weight_norm(v: Tensor, g: Tensor, dim: int = 0) -> Tensor:
    """``v * (g / ||v||)`` with the norm taken over every dim but ``dim``."""
    return v * (g / norm_except_dim(v, 2, dim))
