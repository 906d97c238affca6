"""Shared builders for the sparse tests: the same random sparse tensor in ember and torch."""

from __future__ import annotations

import numpy as np
import torch

import ember

TORCH_DTYPES = {"float32": torch.float32, "float64": torch.float64, "complex64": torch.complex64,
                "int64": torch.int64, "int32": torch.int32, "bool": torch.bool}
EMBER_DTYPES = {"float32": ember.float32, "float64": ember.float64, "complex64": ember.complex64,
                "int64": ember.int64, "int32": ember.int32, "bool": ember.bool}


def random_values(rng, shape, dtype: str) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        return rng.integers(-5, 6, shape).astype(dtype)
    if dtype == "complex64":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    return rng.standard_normal(shape).astype(dtype)


def random_coo(rng, shape, nnz, dtype="float64", dense_dims=0, duplicates=False):
    """(ember COO, torch COO) with the same uncoalesced entries."""
    sparse_shape = shape[: len(shape) - dense_dims]
    idx = np.stack([rng.integers(0, s, nnz) for s in sparse_shape]) if nnz else np.zeros((len(sparse_shape), 0),
                                                                                        np.int64)
    if duplicates and nnz > 1:
        idx[:, -1] = idx[:, 0]
    values = random_values(rng, (nnz,) + tuple(shape[len(sparse_shape):]), dtype)
    e = ember.sparse_coo_tensor(ember.tensor(idx.astype(np.int64)), ember.tensor(values), shape)
    t = torch.sparse_coo_tensor(torch.tensor(idx.astype(np.int64)), torch.tensor(values), shape)
    return e, t


def to_numpy(x):
    if isinstance(x, torch.Tensor):
        x = x.to_dense() if x.layout != torch.strided else x
        return x.detach().numpy()
    x = x.to_dense() if x.layout is not ember.strided else x
    return x.detach().numpy()


def assert_same(e, t, rtol=1e-5, atol=1e-6):
    assert str(e.layout) == str(t.layout), (e.layout, t.layout)
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(to_numpy(e), to_numpy(t), rtol=rtol, atol=atol)
