"""Sparse kernels of the shape and copy ops: transpose/permute, index_select, narrow, cat,
clone, _to_copy (dtype/device), copy_.

A COO result of a selection keeps the kept entries' order, so it stays coalesced when the input
was (narrow, index_select with sorted unique indices are not assumed: the flag is cleared)."""

from __future__ import annotations

import ember

from .. import dtypes as dt
from ..dispatch import OPS
from ..layouts import COMPRESSED, sparse_coo, strided
from ..shapes import wrap_dim
from ..tensor import Tensor
from ._convert import _coalesce_coo, compressed_to_coo, convert
from ._core import dense_dim, make_coo, sparse_dim
from ._pointwise import _assign, with_values
from ._products import transpose_2d

COO, CSR = "sparse_cpu", "sparse_csr_cpu"


def _via_coo(t: Tensor, fn, *args):
    """Runs a COO kernel on a compressed tensor and converts the result back to its layout."""
    if t._layout is sparse_coo:
        return fn(t, *args)
    if t._layout not in COMPRESSED[:2]:
        raise RuntimeError(f"{fn.__name__.strip('_')}: {t._layout} tensors are not supported; convert to "
                           f"sparse_coo or sparse_csr first")
    out = fn(convert(t, sparse_coo), *args)
    return convert(out, t._layout) if out._layout is sparse_coo and out.ndim == 2 else out


# -- transpose / permute ----------------------------------------------------------------------

def _transpose(self, dim0, dim1):
    n = self.ndim
    d0, d1 = wrap_dim(dim0, n), wrap_dim(dim1, n)
    if d0 == d1:
        return self
    if self._layout is not sparse_coo:
        if {d0, d1} != {0, 1}:
            raise RuntimeError(f"transpose(): {self._layout} tensors can only swap their two sparse dims, got "
                               f"({dim0}, {dim1})")
        return transpose_2d(self)
    sdim = sparse_dim(self)
    shape = list(self._shape)
    shape[d0], shape[d1] = shape[d1], shape[d0]
    if d0 < sdim and d1 < sdim:
        order = list(range(sdim))
        order[d0], order[d1] = order[d1], order[d0]
        indices = self._sp_indices.index_select(0, ember.tensor(order))
        return make_coo(indices, self._sp_values, tuple(shape), False)
    if d0 >= sdim and d1 >= sdim:
        values = self._sp_values.transpose(d0 - sdim + 1, d1 - sdim + 1)
        return make_coo(self._sp_indices, values, tuple(shape), self._coalesced)
    raise RuntimeError("transpose(): can't transpose a sparse dimension with a dense dimension of a hybrid "
                       "sparse tensor")


def _permute(self, dims):
    n = self.ndim
    dims = [wrap_dim(d, n) for d in dims]
    if sorted(dims) != list(range(n)):
        raise RuntimeError(f"permute(sparse_coo): dims {dims} is not a permutation of {n} dims")
    if self._layout is not sparse_coo:
        if dims[:2] == [1, 0] and dims[2:] == list(range(2, n)):
            return transpose_2d(self)
        if dims == list(range(n)):
            return self
        raise RuntimeError(f"permute: {self._layout} tensors can only swap their two sparse dims")
    sdim = sparse_dim(self)
    if sorted(dims[:sdim]) != list(range(sdim)):
        raise RuntimeError("permute(sparse_coo): transpositions between sparse and dense dimensions are not "
                           "allowed. Only transpositions within sparse and dense dimensions are supported.")
    indices = self._sp_indices.index_select(0, ember.tensor(dims[:sdim], dtype=dt.int64))
    values = self._sp_values.permute([0] + [d - sdim + 1 for d in dims[sdim:]])
    shape = tuple(self._shape[d] for d in dims)
    keep = dims[:sdim] == list(range(sdim))
    return make_coo(indices, values, shape, self._coalesced and keep)


for _key in (COO, CSR):
    OPS["transpose"].kernels[_key] = _transpose
    OPS["permute"].kernels[_key] = _permute


# -- index_select / narrow / cat ----------------------------------------------------------------

def _index_select_coo(self, dim, index):
    sdim = sparse_dim(self)
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    index = index.reshape(-1).to(dt.int64)
    size = self._shape[dim]
    if index.numel() and (int(index.min()) < -size or int(index.max()) >= size):
        bad = int(index.max()) if int(index.max()) >= size else int(index.min())
        raise IndexError(f"index_select(): index {bad} out of range for tensor of size {list(self._shape)} at "
                         f"dimension {dim}")
    index = ember.where(index < 0, index + size, index)
    shape = list(self._shape)
    shape[dim] = index.numel()
    if dim >= sdim:
        values = self._sp_values.index_select(dim - sdim + 1, index)
        return make_coo(self._sp_indices, values, tuple(shape), self._coalesced)
    # Entries sorted by their index along dim; each requested position takes the run of entries
    # with that index (searchsorted finds the run), in the order of the request.
    along = self._sp_indices[dim]
    order = ember.argsort(along, stable=True)
    ordered = along.index_select(0, order)
    lo = ember.searchsorted(ordered, index)
    hi = ember.searchsorted(ordered, index, right=True)
    counts = hi - lo
    total = int(counts.sum()) if counts.numel() else 0
    owner = ember.repeat_interleave(ember.arange(index.numel()), counts) if total else ember.zeros(0, dtype=dt.int64)
    within = ember.arange(total) - (ember.cumsum(counts, 0) - counts).index_select(0, owner)
    entries = order.index_select(0, lo.index_select(0, owner) + within)
    indices = self._sp_indices.index_select(1, entries).clone()
    indices[dim] = owner
    return make_coo(indices, self._sp_values.index_select(0, entries), tuple(shape), False)


def _index_select(self, dim, index):
    if self._layout is strided:
        raise RuntimeError("index_select: a sparse index is not supported")
    if index._layout is not strided:
        raise RuntimeError("index_select: index must be a dense tensor")
    return _via_coo(self, _index_select_coo, wrap_dim(dim, self.ndim), index)


def _narrow_coo(self, dim, start, length):
    sdim = sparse_dim(self)
    shape = list(self._shape)
    shape[dim] = length
    if dim >= sdim:
        return make_coo(self._sp_indices, self._sp_values.narrow(dim - sdim + 1, start, length), tuple(shape),
                        self._coalesced)
    along = self._sp_indices[dim]
    keep = ((along >= start) & (along < start + length)).nonzero().reshape(-1)
    indices = self._sp_indices.index_select(1, keep).clone()
    indices[dim] -= start
    return make_coo(indices, self._sp_values.index_select(0, keep), tuple(shape), self._coalesced)


def _narrow(self, dim, start, length):
    dim = wrap_dim(dim, self.ndim)
    size = self._shape[dim]
    start = int(start)
    if start < 0:
        start += size
    length = int(length)
    if start < 0 or length < 0 or start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return _via_coo(self, _narrow_coo, dim, start, length)


def _cat_coo(tensors, dim):
    first = tensors[0]
    sdim, ddim = sparse_dim(first), dense_dim(first)
    for t in tensors:
        if t._layout is not sparse_coo or sparse_dim(t) != sdim or dense_dim(t) != ddim:
            raise RuntimeError("cat: all inputs must be sparse COO tensors with the same sparse and dense dims")
        for d in range(first.ndim):
            if d != dim and t._shape[d] != first._shape[d]:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {dim}. Expected size "
                                   f"{first._shape[d]} but got size {t._shape[d]} for tensor in the list.")
    shape = list(first._shape)
    shape[dim] = sum(t._shape[dim] for t in tensors)
    dtype = first.dtype
    for t in tensors[1:]:
        dtype = dt.promote_types(dtype, t.dtype)
    indices, values, offset = [], [], 0
    for t in tensors:
        idx, val = t._sp_indices, t._sp_values.to(dtype)
        if dim < sdim:
            idx = idx.clone()
            idx[dim] += offset
        else:  # a dense dim: each tensor's values sit in their own slice, zeros elsewhere
            vshape = list(val._shape)
            vshape[dim - sdim + 1] = shape[dim]
            padded = ember.zeros(vshape, dtype=dtype)
            padded.narrow(dim - sdim + 1, offset, t._shape[dim]).copy_(val)
            val = padded
        indices.append(idx)
        values.append(val)
        offset += t._shape[dim]
    return make_coo(ember.cat(indices, 1), ember.cat(values, 0), tuple(shape), False)


def _cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    dim = wrap_dim(dim, tensors[0].ndim)
    layout = tensors[0]._layout
    if any(t._layout is not layout for t in tensors):
        raise RuntimeError("cat: all tensors must have the same layout (dense and sparse tensors cannot be mixed)")
    if layout is sparse_coo:
        return _cat_coo(tensors, dim)
    out = _cat_coo([convert(t, sparse_coo) for t in tensors], dim)
    return convert(_coalesce_coo(out), layout)


for _key in (COO, CSR):
    OPS["index_select"].kernels[_key] = _index_select
    OPS["narrow"].kernels[_key] = _narrow
    OPS["cat"].kernels[_key] = _cat


# -- copies ---------------------------------------------------------------------------------------

def _clone(self, *args, **kwargs):
    if self._layout is sparse_coo:
        return make_coo(self._sp_indices.clone(), self._sp_values.clone(), self._shape, self._coalesced)
    from ._core import make_compressed

    return make_compressed(self._layout, self._compressed.clone(), self._plain.clone(), self._sp_values.clone(),
                           self._shape)


def _to_copy(self, *, dtype=None, device=None, **kwargs):
    values = self._sp_values
    if dtype is not None:
        values = values.to(dtype)
    if device is not None:
        values = values.to(device)
    if values is self._sp_values:
        values = values.clone()
    out = with_values(self, values)
    if device is not None and out._layout is sparse_coo:
        out._sp_indices = out._sp_indices.to(device)
    return out


def _copy_(self, src, *args, **kwargs):
    if tuple(self._shape) != tuple(src._shape):
        raise RuntimeError(f"copy_(): expected tensors of the same size, got {list(self._shape)} and "
                           f"{list(src._shape)}")
    if self._layout is strided:
        return self.copy_(OPS["_to_dense"](src).to(self.dtype))
    if src._layout is strided:
        src = convert(src, self._layout, self._sp_values._shape[1:3], dense_dim(self))
    src = _clone(src).to(self.dtype) if src.dtype is not self.dtype else _clone(src)
    _assign(self, src)
    return self


for _key in (COO, CSR):
    OPS["clone"].kernels[_key] = _clone
    OPS["_to_copy"].kernels[_key] = _to_copy
    OPS["copy_"].kernels[_key] = _copy_


def values_of(t: Tensor) -> Tensor:
    return compressed_to_coo(t)._sp_values if t._layout is not sparse_coo else t._sp_values


def _fill_(self, value):
    """``zero_()`` of a sparse tensor drops every stored element (PyTorch's sparse zero_); any
    other fill value would make it dense."""
    if value != 0:
        raise RuntimeError(f"fill_: a {self._layout} tensor can only be filled with zero (zero_()), got {value}")
    if self._layout is sparse_coo:
        sdim = self._sp_indices._shape[0]
        self._sp_indices = ember.zeros((sdim, 0), dtype=dt.int64)
        self._sp_values = ember.zeros((0,) + tuple(self._sp_values._shape[1:]), dtype=self.dtype)
        self._coalesced = True
    else:
        self._compressed = ember.zeros_like(self._compressed)
        self._plain = ember.zeros(0, dtype=dt.int64)
        self._sp_values = ember.zeros((0,) + tuple(self._sp_values._shape[1:]), dtype=self.dtype)
    self._bump_version()
    return self


for _key in (COO, CSR):
    OPS["fill_"].kernels[_key] = _fill_
