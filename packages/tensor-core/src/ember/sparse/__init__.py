"""``ember.sparse``: PyTorch's ``torch.sparse`` functions over the sparse layouts.

The layouts, constructors and kernels live in ``ember._src.sparse``; this module only
re-exports (and adds the functions whose names exist only here).
"""

from __future__ import annotations

from ember._src.dispatch import OPS as _OPS
from ember._src.layouts import strided as _strided
from ember._src.sparse import check_sparse_tensor_invariants, sampled_addmm
from ember._src.sparse._scipy import from_scipy, to_scipy


def mm(mat1, mat2, reduce=None):
    """``torch.sparse.mm``: a product with a sparse operand (sparse x dense -> dense,
    sparse x sparse -> sparse)."""
    if reduce not in (None, "sum"):
        raise RuntimeError(f"sparse.mm: reduce={reduce!r} is not supported (only 'sum')")
    return _OPS["_sparse_mm"](mat1, mat2)


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """``torch.sparse.addmm``: ``beta * mat + alpha * (mat1 @ mat2)`` with sparse ``mat1``."""
    return _OPS["addmm"](mat, mat1, mat2, beta=beta, alpha=alpha)


def sum(input, dim=None, dtype=None):  # noqa: A001  (PyTorch's name)
    """``torch.sparse.sum``: all elements (a dense scalar) or over ``dim`` (a sparse tensor, dense
    when every sparse dim is reduced)."""
    if input._layout is _strided:
        raise RuntimeError("sparse.sum: expected a sparse tensor, got a strided one")
    if dim is None:
        return _OPS["sum"](input, dtype=dtype)
    return _OPS["sum"](input, dim, dtype=dtype)


def softmax(input, dim, *, dtype=None):
    """``torch.sparse.softmax``: unstored elements count as -inf (they stay unstored)."""
    return _OPS["softmax"](input, dim, dtype)


def log_softmax(input, dim, *, dtype=None):
    """``torch.sparse.log_softmax``."""
    return _OPS["log_softmax"](input, dim, dtype)


def spdiags(diagonals, offsets, shape, layout=None):
    """``torch.sparse.spdiags``: a sparse matrix from rows of ``diagonals`` placed at ``offsets``."""
    import ember

    if diagonals.ndim != 2 or offsets.ndim != 1 or diagonals.shape[0] != offsets.shape[0]:
        raise RuntimeError("spdiags: expected diagonals (n x m) and offsets (n)")
    rows, cols = int(shape[0]), int(shape[1])
    index_rows, index_cols, values = [], [], []
    for k, off in enumerate(offsets.tolist()):
        start_col = max(off, 0)
        stop_col = min(cols, rows + off, diagonals.shape[1])
        if stop_col <= start_col:
            continue
        c = ember.arange(start_col, stop_col)
        index_rows.append(c - off)
        index_cols.append(c)
        values.append(diagonals[k].index_select(0, c))
    if values:
        indices = ember.stack([ember.cat(index_rows), ember.cat(index_cols)])
        vals = ember.cat(values)
    else:
        indices = ember.zeros((2, 0), dtype=ember.int64)
        vals = ember.zeros(0, dtype=diagonals.dtype)
    out = ember.sparse_coo_tensor(indices, vals, (rows, cols)).coalesce()
    return out if layout in (None, ember.sparse_coo) else out.to_sparse(layout=layout)


__all__ = ["addmm", "check_sparse_tensor_invariants", "from_scipy", "log_softmax", "mm", "sampled_addmm", "softmax",
           "spdiags", "sum", "to_scipy"]
