"""Layout conversions: coalesce, to_dense, and every dense/sparse layout to every other.

The conversions are ops (``_to_dense``, ``_to_sparse``, ``coalesce``, ``sparse_mask``) so that
autograd and dispatch modes see them like any other op; their kernels are registered per layout.
"""

from __future__ import annotations

import ember

from .. import dtypes as dt
from .._native import _C
from ..dispatch import define
from ..layouts import COMPRESSED, sparse_bsc, sparse_bsr, sparse_coo, sparse_csc, sparse_csr, strided
from ..shapes import numel
from ..tensor import Tensor
from ._core import blocksize, dense_dim, layout_word, make_compressed, make_coo, sparse_dim

_WIDENED = (dt.float16, dt.bfloat16)  # the C++ kernels compute these in float32


def linear_index(indices: Tensor, sizes: tuple) -> Tensor:
    """Row-major position of each COO entry within the sparse dims ``sizes``."""
    key = ember.zeros(indices._shape[1], dtype=dt.int64, device=indices.device)
    for d, s in enumerate(sizes):
        key = key * s + indices[d]
    return key


# -- coalesce -------------------------------------------------------------------------------

coalesce_op = define("coalesce(Tensor self) -> Tensor")


def _coalesce_coo(t: Tensor) -> Tensor:
    if t._coalesced:
        return t
    indices, values = t._sp_indices, t._sp_values
    sdim, nnz = indices._shape
    rows = values.reshape(nnz, -1)
    if rows.dtype in _WIDENED:
        rows = rows.to(dt.float32)
    rows = rows.contiguous()
    out_indices = ember.empty((sdim, nnz), dtype=dt.int64)
    out_rows = ember.empty_like(rows)
    unique = _C.sparse_coalesce(indices, rows, list(t._shape[:sdim]), out_indices, out_rows)
    new_indices = out_indices[:, :unique].contiguous() if unique < nnz else out_indices
    new_values = out_rows[:unique].reshape((unique,) + tuple(values._shape[1:])).to(values.dtype)
    return make_coo(new_indices, new_values, t._shape, True)


@coalesce_op.kernel("sparse_cpu")
def coalesce(t: Tensor) -> Tensor:
    return _coalesce_coo(t)


@coalesce_op.kernel("cpu")
def _coalesce_dense(t: Tensor) -> Tensor:
    raise RuntimeError(f"coalesce expected sparse coordinate tensor layout but got {layout_word(t)}")


@coalesce_op.kernel("sparse_csr_cpu")
def _coalesce_compressed(t: Tensor) -> Tensor:
    raise RuntimeError(f"coalesce expected sparse coordinate tensor layout but got {layout_word(t)}")


# -- to dense -------------------------------------------------------------------------------

to_dense_op = define("_to_dense(Tensor self, ScalarType? dtype=None) -> Tensor")


def _scatter_dense(indices: Tensor, values: Tensor, shape: tuple) -> Tensor:
    """Dense tensor of ``shape`` holding the sum of ``values`` at ``indices`` (duplicates add)."""
    sdim = indices._shape[0]
    out = ember.zeros(shape, dtype=values.dtype, device=values.device)
    if values._shape[0] == 0 or numel(shape) == 0:
        return out
    flat = out.view((numel(shape[:sdim]),) + tuple(shape[sdim:]))
    add_at(flat, linear_index(indices, shape[:sdim]), values)
    return out


def add_at(flat: Tensor, key: Tensor, values: Tensor) -> None:
    """``flat[key] += values`` along dim 0. index_add_ has no bool kernel: for bool the caller
    passes distinct keys (a coalesced tensor); complex values add as (real, imag) pairs."""
    if values.dtype is dt.bool:
        flat.index_put_((key,), flat.index_select(0, key) | values)
    elif values.dtype.is_complex:
        ember.view_as_real(flat).index_add_(0, key, ember.view_as_real(values.contiguous()))
    else:
        flat.index_add_(0, key, values)


@to_dense_op.kernel("sparse_cpu")
def _coo_to_dense(t: Tensor, dtype=None) -> Tensor:
    if t.dtype is dt.bool:
        t = _coalesce_coo(t)  # distinct positions for add_at
    out = _scatter_dense(t._sp_indices, t._sp_values, t._shape)
    return out if dtype is None else out.to(dtype)


def compressed_to_coo(t: Tensor) -> Tensor:
    """COO of a CSR/CSC tensor (BSR/BSC: a COO over blocks, values nnz x bh x bw x dense)."""
    n = t._compressed._shape[0] - 1
    outer = ember.empty(t._plain._shape[0], dtype=dt.int64)
    _C.sparse_expand_compressed(t._compressed, outer)
    bh, bw = blocksize(t)
    rows, cols = t._shape[0] // bh, t._shape[1] // bw
    del n
    if t._layout in (sparse_csr, sparse_bsr):
        indices, coalesced = ember.stack([outer, t._plain]), True
    else:
        indices, coalesced = ember.stack([t._plain, outer]), False
    if t._layout in (sparse_csr, sparse_csc):
        return make_coo(indices, t._sp_values, t._shape, coalesced)
    return make_coo(indices, t._sp_values, (rows, cols, bh, bw) + tuple(t._shape[2:]), coalesced)


@to_dense_op.kernel("sparse_csr_cpu")
def _compressed_to_dense(t: Tensor, dtype=None) -> Tensor:
    coo = compressed_to_coo(t)
    out = _coo_to_dense(coo)
    if t._layout in (sparse_bsr, sparse_bsc):
        rows, cols, bh, bw = coo._shape[:4]
        dense = tuple(t._shape[2:])
        nd = len(dense)
        out = out.permute((0, 2, 1, 3) + tuple(range(4, 4 + nd))).reshape(t._shape)
    return out if dtype is None else out.to(dtype)


# -- dense -> sparse and between layouts --------------------------------------------------------

to_sparse_op = define("_to_sparse(Tensor self, Layout? layout=None, int[2]? blocksize=None, int? dense_dim=None, "
                      "int? sparse_dim=None) -> Tensor")


def _dense_to_coo(x: Tensor, sdim: int) -> Tensor:
    if sdim < 0 or sdim > x.ndim:
        raise RuntimeError(f"sparse_dim must be in [0, {x.ndim}], got {sdim}")
    shape = tuple(x._shape)
    blocks = x.reshape((numel(shape[:sdim]),) + shape[sdim:]) if sdim else x.reshape((1,) + shape)
    mask = blocks != 0
    if mask.ndim > 1:
        mask = mask.reshape(mask._shape[0], -1).any(1)
    key = mask.nonzero().reshape(-1)
    values = blocks.index_select(0, key)
    indices = ember.empty((sdim, key.numel()), dtype=dt.int64)
    rest = key
    for d in range(sdim - 1, -1, -1):
        indices[d] = rest % shape[d] if shape[d] else rest
        rest = rest // shape[d] if shape[d] else rest
    return make_coo(indices, values, shape, True)


def _coo_to_compressed(t: Tensor, layout) -> Tensor:
    if sparse_dim(t) != 2:
        raise RuntimeError(f"to_sparse_{layout.name[7:]}: expected a COO tensor with 2 sparse dims, got "
                           f"{sparse_dim(t)} (batched compressed tensors are not supported)")
    if layout is sparse_csr:
        c = coalesce(t)
        crow = ember.empty(t._shape[0] + 1, dtype=dt.int64)
        _C.sparse_compress(c._sp_indices[0], t._shape[0], crow)
        return make_compressed(sparse_csr, crow, c._sp_indices[1].contiguous(), c._sp_values, t._shape)
    if layout is sparse_csc:
        swapped = make_coo(t._sp_indices.flip(0), t._sp_values, (t._shape[1], t._shape[0]) + tuple(t._shape[2:]))
        c = coalesce(swapped)
        ccol = ember.empty(t._shape[1] + 1, dtype=dt.int64)
        _C.sparse_compress(c._sp_indices[0], t._shape[1], ccol)
        return make_compressed(sparse_csc, ccol, c._sp_indices[1].contiguous(), c._sp_values, t._shape)
    raise RuntimeError(f"conversion from COO to {layout} needs a blocksize")


def _dense_to_blocked(x: Tensor, layout, block, ddim: int) -> Tensor:
    if block is None or len(block) != 2:
        raise RuntimeError(f"to_sparse_{layout.name[7:]}: expected a blocksize of 2 ints")
    bh, bw = int(block[0]), int(block[1])
    if x.ndim - ddim != 2:
        raise RuntimeError(f"to_sparse_{layout.name[7:]}: expected 2 sparse dims (batched compressed tensors are "
                           f"not supported), got {x.ndim - ddim}")
    rows, cols = x._shape[0], x._shape[1]
    if bh <= 0 or bw <= 0 or rows % bh or cols % bw:
        raise RuntimeError(f"Tensor size({rows}, {cols}) must be divisible by the blocksize ({bh}, {bw})")
    dense = tuple(x._shape[2:])
    nd = len(dense)
    blocks = x.reshape((rows // bh, bh, cols // bw, bw) + dense).permute((0, 2, 1, 3) + tuple(range(4, 4 + nd)))
    if layout is sparse_bsc:
        blocks = blocks.transpose(0, 1)
    coo = _dense_to_coo(blocks.contiguous(), 2)
    n = blocks._shape[0]
    crow = ember.empty(n + 1, dtype=dt.int64)
    _C.sparse_compress(coo._sp_indices[0], n, crow)
    return make_compressed(layout, crow, coo._sp_indices[1].contiguous(), coo._sp_values, x._shape)


def convert(x: Tensor, layout, block=None, ddim=None) -> Tensor:
    """``x`` in ``layout`` (the work behind every ``to_sparse*`` method)."""
    src = x._layout
    if layout is None:
        layout = sparse_coo
    if src is layout and (block is None or tuple(block) == blocksize(x)):
        if ddim is not None and ddim != dense_dim(x):
            raise RuntimeError(f"to_sparse: conversion to a different dense_dim ({ddim}) is not supported")
        return x
    if layout is strided:
        return to_dense_op(x)
    if src is strided:
        ddim = 0 if ddim is None else int(ddim)
        if ddim < 0 or ddim > x.ndim - (0 if layout is sparse_coo else 2):
            raise RuntimeError(f"to_sparse: dense_dim={ddim} is out of range for a {x.ndim}-d tensor")
        if layout is sparse_coo:
            return _dense_to_coo(x, x.ndim - ddim)
        if layout in (sparse_bsr, sparse_bsc):
            return _dense_to_blocked(x, layout, block, ddim)
        if x.ndim - ddim != 2:
            raise RuntimeError(f"to_sparse_{layout.name[7:]}: expected 2 sparse dims (batched compressed tensors "
                               f"are not supported), got {x.ndim - ddim}")
        return _coo_to_compressed(_dense_to_coo(x, 2), layout)
    if ddim is not None and ddim != dense_dim(x):
        raise RuntimeError(f"to_sparse: conversion to a different dense_dim ({ddim}) is not supported")
    if src is sparse_coo and layout in (sparse_csr, sparse_csc):
        return _coo_to_compressed(x, layout)
    if src in (sparse_csr, sparse_csc) and layout is sparse_coo:
        coo = compressed_to_coo(x)
        return coo if coo._coalesced else coalesce(coo)
    if src in (sparse_csr, sparse_csc) and layout in (sparse_csr, sparse_csc):
        return _coo_to_compressed(compressed_to_coo(x), layout)
    # Blocked layouts go through the dense form (one pass each way over the dense size).
    return convert(to_dense_op(x), layout, block, dense_dim(x))


@to_sparse_op.kernel("cpu")
@to_sparse_op.kernel("sparse_cpu")
@to_sparse_op.kernel("sparse_csr_cpu")
def _to_sparse_kernel(self, layout=None, blocksize=None, dense_dim=None, sparse_dim=None):
    if sparse_dim is not None:
        if self._layout is strided:
            return _dense_to_coo(self, int(sparse_dim))
        if self._layout is sparse_coo and int(sparse_dim) == self._sp_indices._shape[0]:
            return self
        raise RuntimeError("to_sparse(sparse_dim) of a sparse tensor with another sparse_dim is not supported")
    if layout is not None and layout not in COMPRESSED and layout not in (sparse_coo, strided):
        raise RuntimeError(f"to_sparse: unsupported layout {layout}")
    return convert(self, layout, blocksize, dense_dim)


# -- sparse_mask: a dense (or sparse) tensor's values at a sparse tensor's positions ----------------

sparse_mask_op = define("sparse_mask(Tensor self, Tensor mask) -> Tensor")


def _values_at(x: Tensor, indices: Tensor, shape: tuple) -> Tensor:
    sdim = indices._shape[0]
    flat = x.reshape((numel(shape[:sdim]),) + tuple(shape[sdim:]))
    return flat.index_select(0, linear_index(indices, shape[:sdim]))


@sparse_mask_op.kernel("sparse_cpu")
@sparse_mask_op.kernel("sparse_csr_cpu")
def sparse_mask(self: Tensor, mask: Tensor) -> Tensor:
    if tuple(self._shape) != tuple(mask._shape):
        raise RuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size {list(self._shape)} "
                           f"but mask has size {list(mask._shape)}")
    if mask._layout is strided:
        raise RuntimeError("sparse_mask expects mask to be sparse")
    dense = self if self._layout is strided else to_dense_op(self)
    if mask._layout is sparse_coo:
        values = _values_at(dense, mask._sp_indices, mask._shape).to(mask.dtype if self.dtype is mask.dtype
                                                                     else self.dtype)
        return make_coo(mask._sp_indices, values, mask._shape, mask._coalesced)
    coo = compressed_to_coo(mask)
    if mask._layout in (sparse_bsr, sparse_bsc):
        rows, cols, bh, bw = coo._shape[:4]
        nd = dense.ndim - 2
        blocks = dense.reshape((rows, bh, cols, bw) + tuple(dense._shape[2:]))
        blocks = blocks.permute((0, 2, 1, 3) + tuple(range(4, 4 + nd)))
        values = _values_at(blocks, coo._sp_indices, blocks._shape)
    else:
        values = _values_at(dense, coo._sp_indices, mask._shape)
    return make_compressed(mask._layout, mask._compressed, mask._plain, values, mask._shape)


def _to_blocked_from_block_coo(coo: Tensor, like: Tensor) -> Tensor:
    """A COO result back in ``like``'s compressed layout: for CSR/CSC ``coo`` has ``like``'s shape;
    for BSR/BSC it is the COO over blocks that ``compressed_to_coo`` gives."""
    layout = like._layout
    if layout in (sparse_csr, sparse_csc):
        return _coo_to_compressed(coo, layout)
    if layout is sparse_bsc:
        swapped_shape = (coo._shape[1], coo._shape[0]) + tuple(coo._shape[2:])
        swapped = make_coo(coo._sp_indices.flip(0), coo._sp_values, swapped_shape)
        coo, n = coalesce(swapped), coo._shape[1]
    else:
        coo, n = coalesce(coo), coo._shape[0]
    compressed = ember.empty(n + 1, dtype=dt.int64)
    _C.sparse_compress(coo._sp_indices[0], n, compressed)
    return make_compressed(layout, compressed, coo._sp_indices[1].contiguous(), coo._sp_values, like._shape)


def values_at(g: Tensor, indices: Tensor, shape: tuple) -> Tensor:
    """``g``'s elements at the COO ``indices`` (zeros where a sparse ``g`` stores nothing): the
    gradient of the values of a tensor built from ``indices``."""
    if g._layout is strided:
        return _values_at(g, indices, shape)
    c = coalesce(g if g._layout is sparse_coo else convert(g, sparse_coo))
    sdim = indices._shape[0]
    if c._sp_indices._shape[0] != sdim:
        return _values_at(to_dense_op(c), indices, shape)
    want, have = linear_index(indices, shape[:sdim]), linear_index(c._sp_indices, shape[:sdim])
    if have.numel() == 0:
        return ember.zeros((want.numel(),) + tuple(shape[sdim:]), dtype=g.dtype)
    pos = ember.searchsorted(have, want).clamp(max=have.numel() - 1)
    hit = have.index_select(0, pos) == want
    picked = c._sp_values.index_select(0, pos)
    return picked * hit.reshape((-1,) + (1,) * (picked.ndim - 1)).to(picked.dtype)
