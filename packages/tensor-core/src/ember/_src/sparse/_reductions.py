"""Sparse kernels of the reductions: sum (to a dense scalar, or over some dims to a sparse
tensor) and softmax / log_softmax along a dim (unstored elements count as -inf: they stay
unstored, and the stored ones of each slice sum to 1)."""

from __future__ import annotations

import ember

from .. import dtypes as dt
from ..dispatch import OPS
from ..layouts import sparse_coo
from ..shapes import numel, wrap_dim
from ..tensor import Tensor
from ._convert import _coalesce_coo, convert, linear_index
from ._core import make_coo, sparse_dim

COO, CSR = "sparse_cpu", "sparse_csr_cpu"


def _dims(dim, ndim):
    if dim is None:
        return None
    if isinstance(dim, int):
        dim = (dim,)
    out = sorted({wrap_dim(d, ndim) for d in dim})
    return out if out else None


def _sum_coo(self: Tensor, dims, keepdim, dtype):
    sdim = sparse_dim(self)
    values = self._sp_values if dtype is None else self._sp_values.to(dtype)
    if dtype is None and (values.dtype is dt.bool or not (values.dtype.is_floating_point or values.dtype.is_complex)):
        values = values.to(dt.int64)  # sum promotes integers to int64, as the dense sum
    if dims is None:
        return values.sum()
    dense_dims = [d - sdim + 1 for d in dims if d >= sdim]
    if dense_dims:
        values = values.sum(dense_dims, keepdim=keepdim)
    sparse_dims = [d for d in dims if d < sdim]
    kept = [d for d in range(sdim) if d not in sparse_dims]
    dense_shape = tuple(values._shape[1:])
    if not kept:
        total = values.sum(0)
        if keepdim:
            total = total.reshape((1,) * sdim + dense_shape)
        return total
    if keepdim:
        indices = self._sp_indices.clone()
        for d in sparse_dims:
            indices[d] = 0
        shape = tuple(1 if d in sparse_dims else s for d, s in enumerate(self._shape[:sdim])) + dense_shape
    else:
        indices = self._sp_indices.index_select(0, ember.tensor(kept, dtype=dt.int64))
        shape = tuple(self._shape[d] for d in kept) + dense_shape
    return _coalesce_coo(make_coo(indices, values, shape))


def _sum(self, dim=None, keepdim=False, dtype=None):
    dims = _dims(dim, self.ndim)
    if self._layout is sparse_coo:
        return _sum_coo(self, dims, keepdim, dtype)
    result = _sum_coo(convert(self, sparse_coo), dims, keepdim, dtype)
    if result._layout is sparse_coo and result.ndim == 2:
        return convert(result, self._layout if self._layout in (ember.sparse_csr, ember.sparse_csc)
                       else ember.sparse_csr)
    return result


for _key in (COO, CSR):
    OPS["sum"].kernels[_key] = _sum


def _softmax_coo(self: Tensor, dim: int, log: bool, dtype) -> Tensor:
    dim = wrap_dim(dim, self.ndim)
    c = _coalesce_coo(self)
    values = c._sp_values if dtype is None else c._sp_values.to(dtype)
    if not (values.dtype.is_floating_point or values.dtype.is_complex):
        raise RuntimeError(f"softmax: expected a floating point sparse tensor, got {values.dtype}")
    sdim = sparse_dim(c)
    if dim >= sdim:  # a dense dim: an ordinary softmax of each stored slice
        fn = ember.log_softmax if log else ember.softmax
        return make_coo(c._sp_indices, fn(values, dim - sdim + 1), c._shape, True)
    if values._shape[0] == 0:
        return make_coo(c._sp_indices, values.clone(), c._shape, True)
    group, ngroups = _groups(c, dim)
    rest = tuple(values._shape[1:])
    expanded = group.reshape((-1,) + (1,) * len(rest)).expand(values._shape)
    peak = ember.full((ngroups,) + rest, float("-inf"), dtype=values.dtype)
    peak = peak.scatter_reduce(0, expanded, values, "amax", include_self=True)
    shifted = values - peak.index_select(0, group)
    exps = shifted.exp()
    sums = ember.zeros((ngroups,) + rest, dtype=values.dtype).index_add_(0, group, exps)
    out = shifted - sums.log().index_select(0, group) if log else exps / sums.index_select(0, group)
    return make_coo(c._sp_indices, out, c._shape, True)


def _groups(c: Tensor, dim: int):
    """For each stored entry of coalesced ``c``, the id of its slice along sparse ``dim`` (entries
    that share every other sparse index), and the number of slices."""
    sdim = sparse_dim(c)
    others = [d for d in range(sdim) if d != dim]
    if not others or c._sp_values._shape[0] == 0:
        return ember.zeros(c._sp_values._shape[0], dtype=dt.int64), 1
    group = linear_index(c._sp_indices.index_select(0, ember.tensor(others, dtype=dt.int64)),
                         tuple(c._shape[d] for d in others))
    _, group = ember.unique(group, return_inverse=True)
    return group, int(group.max()) + 1


def softmax_backward(g: Tensor, y: Tensor, dim: int, log: bool) -> Tensor:
    """Gradient of sparse softmax / log_softmax (output ``y``) for the incoming gradient ``g``: on
    y's pattern, ``y * (g - sum(g * y))`` / ``g - exp(y) * sum(g)`` per slice."""
    from ._convert import add_at, values_at

    layout = y._layout
    c = y if layout is sparse_coo else convert(y, sparse_coo)
    dim = wrap_dim(dim, c.ndim)
    yv = c._sp_values
    gv = values_at(g, c._sp_indices, tuple(c._shape)).to(yv.dtype)
    weight = ember.exp(yv) if log else yv
    term = gv if log else gv * yv
    sdim = sparse_dim(c)
    if dim >= sdim:
        out = term - weight * term.sum(dim - sdim + 1, keepdim=True)
    else:
        group, ngroups = _groups(c, dim)
        sums = ember.zeros((ngroups,) + tuple(yv._shape[1:]), dtype=yv.dtype)
        if term._shape[0]:
            add_at(sums, group, term)
        out = term - weight * sums.index_select(0, group)
    result = make_coo(c._sp_indices, out, c._shape, True)
    return result if layout is sparse_coo else convert(result, layout)


def _softmax(self, dim, dtype=None):
    if self._layout is not sparse_coo:
        return convert(_softmax_coo(convert(self, sparse_coo), dim, False, dtype), self._layout)
    return _softmax_coo(self, dim, False, dtype)


def _log_softmax(self, dim, dtype=None):
    if self._layout is not sparse_coo:
        return convert(_softmax_coo(convert(self, sparse_coo), dim, True, dtype), self._layout)
    return _softmax_coo(self, dim, True, dtype)


for _key in (COO, CSR):
    OPS["softmax"].kernels[_key] = _softmax
    OPS["log_softmax"].kernels[_key] = _log_softmax


def nnz_elements(t: Tensor) -> int:
    return numel(t._sp_values._shape)
