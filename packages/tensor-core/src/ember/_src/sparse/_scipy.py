"""SciPy interop: ``scipy.sparse`` matrices/arrays in and out. SciPy (and NumPy) are imported
only when these functions run, so ``import ember`` stays free of both. The index arrays are
converted to int64; the values are copied."""

from __future__ import annotations

import ember

from ..layouts import sparse_bsr, sparse_coo, sparse_csc, sparse_csr
from ..tensor import Tensor
from ._core import dense_dim


def _scipy_sparse():
    try:
        import scipy.sparse
    except ModuleNotFoundError:
        raise ModuleNotFoundError("ember.sparse's SciPy interop needs SciPy: pip install scipy") from None
    return scipy.sparse


def from_scipy(matrix) -> Tensor:
    """An ember sparse tensor holding a ``scipy.sparse`` matrix or array: COO, CSR, CSC and BSR keep
    their layout (duplicates and unsorted indices are summed and sorted first); any other format
    becomes COO."""
    import numpy as np

    sp = _scipy_sparse()
    if not sp.issparse(matrix):
        raise TypeError(f"from_scipy expects a scipy.sparse matrix or array, got {type(matrix).__name__}")
    shape = tuple(int(s) for s in matrix.shape)
    fmt = matrix.format
    if fmt in ("csr", "csc", "bsr"):
        m = matrix.copy()
        m.sum_duplicates()  # also sorts the indices
        values = ember.tensor(np.ascontiguousarray(m.data))
        compressed = ember.tensor(m.indptr.astype(np.int64))
        plain = ember.tensor(m.indices.astype(np.int64))
        if fmt == "csr":
            return ember.sparse_csr_tensor(compressed, plain, values, shape)
        if fmt == "csc":
            return ember.sparse_csc_tensor(compressed, plain, values, shape)
        return ember.sparse_bsr_tensor(compressed, plain, values, shape)
    m = matrix.tocoo()
    indices = ember.tensor(np.stack([m.row, m.col]).astype(np.int64))
    out = ember.sparse_coo_tensor(indices, ember.tensor(np.ascontiguousarray(m.data)), shape)
    return out.coalesce() if getattr(m, "has_canonical_format", False) else out


def to_scipy(t: Tensor):
    """``t`` as a ``scipy.sparse`` array in the matching format (coo/csr/csc/bsr; BSC goes to CSC).
    Only 2-D tensors without dense dimensions have a SciPy counterpart."""
    sp = _scipy_sparse()
    if t.ndim != 2 or (t._layout is not ember.strided and dense_dim(t) != 0):
        raise ValueError(f"to_scipy: only 2-D sparse tensors without dense dimensions convert, got shape "
                         f"{list(t.shape)}")
    shape = tuple(t.shape)
    if t._layout is ember.strided:
        return sp.coo_array(t.detach().numpy())
    values = t._sp_values.detach().numpy()
    if t._layout is sparse_coo:
        idx = t._sp_indices.numpy()
        return sp.coo_array((values, (idx[0], idx[1])), shape=shape)
    parts = (values, t._plain.numpy(), t._compressed.numpy())
    if t._layout is sparse_csr:
        return sp.csr_array(parts, shape=shape)
    if t._layout is sparse_csc:
        return sp.csc_array(parts, shape=shape)
    if t._layout is sparse_bsr:
        return sp.bsr_array(parts, shape=shape)
    return to_scipy(t.to_sparse_csc())
