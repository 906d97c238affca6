"""``ember.functional``: the tensor functions PyTorch defines in ``torch/functional.py``
(``einsum``, ``split``, ``stft``, ``meshgrid``, ...), re-exported from ember's top level."""

from ember import (
    atleast_1d,
    atleast_2d,
    atleast_3d,
    block_diag,
    broadcast_shapes,
    broadcast_tensors,
    cartesian_prod,
    cdist,
    chain_matmul,
    einsum,
    istft,
    lu,
    meshgrid,
    norm,
    pca_lowrank,
    split,
    stft,
    svd_lowrank,
    tensordot,
    unique,
    unique_consecutive,
    unravel_index,
)

__all__ = [
    "atleast_1d", "atleast_2d", "atleast_3d", "block_diag", "broadcast_shapes", "broadcast_tensors", "cartesian_prod",
    "cdist", "chain_matmul", "einsum", "istft", "lu", "meshgrid", "norm", "pca_lowrank", "split", "stft",
    "svd_lowrank", "tensordot", "unique", "unique_consecutive", "unravel_index",
]  # fmt: skip
