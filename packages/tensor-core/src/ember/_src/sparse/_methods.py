"""The sparse Tensor methods (accessors and conversions) and the sparse repr."""

from __future__ import annotations

from .. import dtypes as dt
from ..layouts import COMPRESSED, sparse_bsc, sparse_bsr, sparse_coo, sparse_csc, sparse_csr, strided
from ..tensor import Tensor
from . import _products
from ._convert import coalesce_op, sparse_mask_op, to_dense_op, to_sparse_op
from ._core import dense_dim as _dense_dim
from ._core import layout_word
from ._core import sparse_dim as _sparse_dim


def _require(t: Tensor, layouts, what: str, expected: str) -> None:
    if t._layout not in layouts:
        raise RuntimeError(f"{what} expected {expected} layout but got {layout_word(t)}")


def to_dense(self: Tensor, dtype=None, *, masked_grad=None) -> Tensor:
    if self._layout is strided:
        return self if dtype is None or dtype is self.dtype else self.to(dtype)
    return to_dense_op(self, dtype)


def to_sparse(self: Tensor, *args, layout=None, blocksize=None, dense_dim=None) -> Tensor:
    """``to_sparse(sparse_dim)`` or ``to_sparse(*, layout=None, blocksize=None, dense_dim=None)``."""
    if args:
        if len(args) > 1 or layout is not None or blocksize is not None or dense_dim is not None:
            raise TypeError("to_sparse() takes either sparse_dim or layout/blocksize/dense_dim")
        return to_sparse_op(self, sparse_dim=int(args[0]))
    if layout in (sparse_bsr, sparse_bsc) and blocksize is None:
        raise RuntimeError(f"to_sparse for {layout} conversion requires blocksize to be specified")
    return to_sparse_op(self, layout, None if blocksize is None else tuple(blocksize), dense_dim)


def to_sparse_csr(self: Tensor, dense_dim=None) -> Tensor:
    return to_sparse_op(self, sparse_csr, None, dense_dim)


def to_sparse_csc(self: Tensor, dense_dim=None) -> Tensor:
    return to_sparse_op(self, sparse_csc, None, dense_dim)


def to_sparse_bsr(self: Tensor, blocksize, dense_dim=None) -> Tensor:
    return to_sparse_op(self, sparse_bsr, tuple(blocksize), dense_dim)


def to_sparse_bsc(self: Tensor, blocksize, dense_dim=None) -> Tensor:
    return to_sparse_op(self, sparse_bsc, tuple(blocksize), dense_dim)


def coalesce(self: Tensor) -> Tensor:
    return coalesce_op(self)


def is_coalesced(self: Tensor) -> bool:
    _require(self, (sparse_coo,), "is_coalesced", "sparse coordinate tensor")
    return self._coalesced


def _coalesced_(self: Tensor, coalesced: bool) -> Tensor:
    _require(self, (sparse_coo,), "_coalesced_", "sparse coordinate tensor")
    self._coalesced = bool(coalesced)
    return self


def indices(self: Tensor) -> Tensor:
    _require(self, (sparse_coo,), "indices", "sparse coordinate tensor")
    if not self._coalesced:
        raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
    return self._sp_indices


def values(self: Tensor) -> Tensor:
    if self._layout is strided:
        raise RuntimeError("values expected sparse tensor layout but got Strided")
    if self._layout is sparse_coo and not self._coalesced:
        raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
    return self._sp_values


def _indices(self: Tensor) -> Tensor:
    _require(self, (sparse_coo,), "_indices", "sparse coordinate tensor")
    return self._sp_indices


def _values(self: Tensor) -> Tensor:
    if self._layout is strided:
        raise RuntimeError("_values expected sparse tensor layout but got Strided")
    return self._sp_values


def crow_indices(self: Tensor) -> Tensor:
    _require(self, (sparse_csr, sparse_bsr), "crow_indices", "sparse row compressed tensor")
    return self._compressed


def col_indices(self: Tensor) -> Tensor:
    _require(self, (sparse_csr, sparse_bsr), "col_indices", "sparse row compressed tensor")
    return self._plain


def ccol_indices(self: Tensor) -> Tensor:
    _require(self, (sparse_csc, sparse_bsc), "ccol_indices", "sparse column compressed tensor")
    return self._compressed


def row_indices(self: Tensor) -> Tensor:
    _require(self, (sparse_csc, sparse_bsc), "row_indices", "sparse column compressed tensor")
    return self._plain


def _nnz(self: Tensor) -> int:
    if self._layout is strided:
        raise NotImplementedError("Could not run 'aten::_nnz' with arguments from the 'CPU' backend.")
    return self._sp_values._shape[0]


def sparse_dim(self: Tensor) -> int:
    return _sparse_dim(self)


def dense_dim(self: Tensor) -> int:
    return _dense_dim(self)


def sparse_mask(self: Tensor, mask: Tensor) -> Tensor:
    return sparse_mask_op(self, mask)


METHODS = {
    "to_dense": to_dense, "to_sparse": to_sparse, "to_sparse_csr": to_sparse_csr, "to_sparse_csc": to_sparse_csc,
    "to_sparse_bsr": to_sparse_bsr, "to_sparse_bsc": to_sparse_bsc, "coalesce": coalesce,
    "is_coalesced": is_coalesced, "_coalesced_": _coalesced_, "indices": indices, "values": values,
    "_indices": _indices, "_values": _values, "crow_indices": crow_indices, "col_indices": col_indices,
    "ccol_indices": ccol_indices, "row_indices": row_indices, "_nnz": _nnz, "sparse_dim": sparse_dim,
    "dense_dim": dense_dim, "sparse_mask": sparse_mask, "smm": _products.smm, "sspaddmm": _products.sspaddmm,
}


def install() -> None:
    for name, fn in METHODS.items():
        setattr(Tensor, name, fn)


def sparse_repr(t: Tensor) -> str:
    """PyTorch's form: the member tensors, then size, nnz and layout."""
    from ..printing import OPTIONS, _body

    def member(name: str, value: Tensor, indent: int) -> str:
        # The values alone, wrapped under their own opening bracket (the dtype is a suffix of the whole).
        prefix = f"{name}=tensor("
        return prefix + _body(value.detach(), indent + len(prefix)) + ")"

    pad = " " * 7
    if t._layout is sparse_coo:
        parts = [member("indices", t._sp_indices, 7), member("values", t._sp_values, 7)]
    else:
        names = {sparse_csr: ("crow_indices", "col_indices"), sparse_bsr: ("crow_indices", "col_indices"),
                 sparse_csc: ("ccol_indices", "row_indices"), sparse_bsc: ("ccol_indices", "row_indices")}
        c, p = names[t._layout]
        parts = [member(c, t._compressed, 7), member(p, t._plain, 7), member("values", t._sp_values, 7)]
    suffixes = [f"size={tuple(t._shape)}", f"nnz={t._sp_values._shape[0]}"]
    if t.dtype is not dt.get_default_dtype() and t.dtype not in (dt.int64, dt.bool):
        suffixes.append(f"dtype={t.dtype}")
    suffixes.append(f"layout={t._layout}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{type(t.grad_fn).__name__}>")
    elif t._requires_grad:
        suffixes.append("requires_grad=True")
    # PyTorch's placement: COO starts the suffixes on a new line; each then follows on the same
    # line unless it would pass the line width (counted as PyTorch counts the last line).
    text = "tensor(" + (",\n" + pad).join(parts)
    line = len(text) - text.rfind("\n") + 1
    newline = t._layout is sparse_coo
    for suffix in suffixes:
        if newline or line + len(suffix) + 2 > OPTIONS.linewidth:
            text += ",\n" + pad + suffix
            line = len(pad) + len(suffix)
            newline = False
        else:
            text += ", " + suffix
            line += len(suffix) + 2
    return text + ")"


__all__ = ["COMPRESSED", "install", "sparse_repr"]
