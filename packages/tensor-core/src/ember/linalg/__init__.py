"""``ember.linalg``: PyTorch's ``torch.linalg`` namespace (matrix products so far)."""

from __future__ import annotations

from .._src.ops.linalg import matmul, multi_dot

__all__ = ["matmul", "multi_dot"]
