"""Sparse kernels of the matrix products: mm / addmm / mv / bmm, sparse x dense (dense result)
and sparse x sparse (sparse result), and ``sampled_addmm``.

Every sparse x dense product ends in one C++ loop, ``_C.sparse_csr_mm`` (compressed rows times a
row-major dense matrix, parallel over rows): a COO operand is coalesced and its rows compressed
(both O(nnz)), a CSC one is re-sorted by rows, BSR/BSC multiply their dense blocks with bmm.
"""

from __future__ import annotations

import ember

from .. import dtypes as dt
from .._native import _C
from ..dispatch import OPS, define
from ..layouts import sparse_bsc, sparse_bsr, sparse_coo, sparse_csc, sparse_csr, strided
from ..ops._common import type_name
from ..tensor import Tensor
from ._convert import add_at, coalesce, compressed_to_coo, convert
from ._core import dense_dim, make_compressed, make_coo, sparse_dim

COO, CSR = "sparse_cpu", "sparse_csr_cpu"
_WIDENED = (dt.float16, dt.bfloat16)


def _check_mm(a: Tensor, b: Tensor, what: str = "mm") -> None:
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"{what}: expected 2-D matrices, got {a.ndim}-D and {b.ndim}-D")
    if a._shape[1] != b._shape[0]:
        if sparse_coo in (a._layout, b._layout) and strided in (a._layout, b._layout):
            # PyTorch's COO kernel is addmm(dense, sparse, dense), the dense-sparse product run transposed
            k, got = (a._shape[1], b._shape[0]) if a._layout is sparse_coo else (b._shape[0], a._shape[1])
            raise RuntimeError(f"addmm: Argument #3 (dense): Expected dim 0 size {k}, got {got}")
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a._shape[0]}x{a._shape[1]} and "
                           f"{b._shape[0]}x{b._shape[1]})")
    if a.dtype is not b.dtype:
        if strided in (a._layout, b._layout):  # the sparse operand's dtype is the expected one
            sparse, dense = (a, b) if b._layout is strided else (b, a)
            raise RuntimeError(f"expected scalar type {type_name(sparse.dtype)} but found {type_name(dense.dtype)}")
        raise RuntimeError(f"expected mat1 and mat2 to have the same dtype, but got: {_cpp(a.dtype)} != "
                           f"{_cpp(b.dtype)}")
    for t in (a, b):
        if t._layout is not strided and dense_dim(t) != 0:
            raise RuntimeError(f"{what}: sparse operands with dense dimensions (hybrid) are not supported; got "
                               f"sparse_dim={sparse_dim(t)}, dense_dim={dense_dim(t)}")


def _cpp(dtype) -> str:
    return {"float32": "float", "float64": "double", "int64": "long int", "int32": "int"}.get(dtype.name, dtype.name)


def _csr_parts(a: Tensor):
    """(crow, col, values) of 2-D sparse ``a`` in compressed-rows form."""
    if a._layout is sparse_csr:
        return a._compressed, a._plain, a._sp_values
    if a._layout is sparse_coo:
        c = coalesce(a)
        crow = ember.empty(a._shape[0] + 1, dtype=dt.int64)
        _C.sparse_compress(c._sp_indices[0], a._shape[0], crow)
        return crow, c._sp_indices[1].contiguous(), c._sp_values
    csr = convert(a, sparse_csr)
    return csr._compressed, csr._plain, csr._sp_values


def _blocked_mm(a: Tensor, dense: Tensor) -> Tensor:
    """BSR/BSC x dense: each stored block times its slice of dense rows, summed per block row."""
    coo = compressed_to_coo(a)  # indices over blocks: (block row, block col)
    nbr, nbc, bh, bw = coo._shape[:4]
    n = dense._shape[1]
    pieces = dense.reshape(nbc, bw, n).index_select(0, coo._sp_indices[1])  # nnz x bw x n
    products = ember.bmm(coo._sp_values, pieces)  # nnz x bh x n
    out = ember.zeros((nbr, bh, n), dtype=dense.dtype)
    if products._shape[0]:
        add_at(out, coo._sp_indices[0], products)
    return out.reshape(nbr * bh, n)


def sparse_dense_mm(a: Tensor, b: Tensor) -> Tensor:
    """Sparse ``a`` (M x K) times dense ``b`` (K x N): dense M x N."""
    _check_mm(a, b)
    dtype = a.dtype
    if a._layout in (sparse_bsr, sparse_bsc):
        return _blocked_mm(a, b)
    crow, col, values = _csr_parts(a)
    if dtype in _WIDENED:
        values, b = values.to(dt.float32), b.to(dt.float32)
    if b._shape[1] > 1 and b._stride[1] != 1:
        b = b.contiguous()
    out = ember.empty((a._shape[0], b._shape[1]), dtype=values.dtype)
    _C.sparse_csr_mm(crow, col, values.contiguous(), b, out)
    return out.to(dtype) if dtype in _WIDENED else out


def dense_sparse_mm(a: Tensor, b: Tensor) -> Tensor:
    """Dense ``a`` times sparse ``b``: (b^T a^T)^T, with b^T in compressed rows."""
    _check_mm(a, b)
    return sparse_dense_mm(transpose_2d(b), a.t()).t()


def transpose_2d(t: Tensor) -> Tensor:
    if t._layout is sparse_coo:
        return make_coo(t._sp_indices.flip(0), t._sp_values, (t._shape[1], t._shape[0]) + tuple(t._shape[2:]))
    swap = {sparse_csr: sparse_csc, sparse_csc: sparse_csr, sparse_bsr: sparse_bsc, sparse_bsc: sparse_bsr}
    values = t._sp_values.transpose(1, 2) if t._layout in (sparse_bsr, sparse_bsc) else t._sp_values
    return make_compressed(swap[t._layout], t._compressed, t._plain, values,
                           (t._shape[1], t._shape[0]) + tuple(t._shape[2:]))


def sparse_sparse_mm(a: Tensor, b: Tensor) -> Tensor:
    """Sparse x sparse, both 2-D: every stored a[i, k] meets the stored b[k, :] (row k of b's
    compressed rows), the products are summed per (i, j) by coalescing. Result in a's layout."""
    _check_mm(a, b)
    ca = coalesce(a if a._layout is sparse_coo else convert(a, sparse_coo))
    crow, col, bvalues = _csr_parts(b)
    k = ca._sp_indices[1]
    starts, ends = crow.index_select(0, k), crow.index_select(0, k + 1)
    counts = ends - starts
    total = int(counts.sum()) if counts.numel() else 0
    owner = ember.repeat_interleave(ember.arange(k.numel()), counts) if total else ember.zeros(0, dtype=dt.int64)
    offsets = ember.cumsum(counts, 0) - counts
    within = ember.arange(total) - offsets.index_select(0, owner) if total else owner
    positions = starts.index_select(0, owner) + within
    rows = ca._sp_indices[0].index_select(0, owner)
    cols = col.index_select(0, positions)
    values = ca._sp_values.index_select(0, owner) * bvalues.index_select(0, positions)
    out = coalesce(make_coo(ember.stack([rows, cols]), values, (a._shape[0], b._shape[1])))
    if a._layout is sparse_coo:
        return out
    return convert(out, a._layout if a._layout in (sparse_csr, sparse_csc) else sparse_csr)


def _mm(self, mat2):
    if self._layout is not strided and mat2._layout is not strided:
        return sparse_sparse_mm(self, mat2)
    if self._layout is not strided:
        return sparse_dense_mm(self, mat2)
    return dense_sparse_mm(self, mat2)


def _addmm(self, mat1, mat2, *, beta=1, alpha=1):
    product = _mm(mat1, mat2)
    if self._layout is not strided and product._layout is strided:
        self = self.to_dense()
    if product._layout is strided:
        base = self.expand(product._shape) if self._layout is strided else self
        return ember.add(ember.mul(base, beta) if beta != 1 else base, ember.mul(product, alpha) if alpha != 1
                         else product) if beta != 0 else ember.mul(product, alpha)
    result = ember.mul(product, alpha) if alpha != 1 else product
    return ember.add(ember.mul(self, beta), result) if beta != 0 else result


def _mv(self, vec):
    if vec._layout is not strided:
        raise RuntimeError("mv: a sparse vector is not supported")
    if self.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {self.ndim}, {vec.ndim}")
    if self._shape[1] != vec._shape[0]:
        if self._layout is sparse_coo:
            raise RuntimeError("mv: expected self.size(-1) == vec.size(-1)")
        raise RuntimeError(f"size mismatch, got input ({self._shape[0]}), mat ({self._shape[0]}x{self._shape[1]}), "
                           f"vec ({vec._shape[0]})")
    return sparse_dense_mm(self, vec.unsqueeze(1)).squeeze(1)


def _bmm(self, mat2):
    """Batched COO (B x M x K, 3 sparse dims) times dense B x K x N: the batch becomes one
    block-diagonal (B*M) x (B*K) matrix."""
    if self._layout is not sparse_coo or mat2._layout is not strided:
        raise RuntimeError("bmm: expected a 3-D COO tensor times a 3-D dense tensor")
    if self.ndim != 3 or mat2.ndim != 3 or sparse_dim(self) != 3:
        raise RuntimeError(f"bmm: expected 3-D tensors with 3 sparse dims, got {self.ndim}-D and {mat2.ndim}-D")
    nb, m, k = self._shape
    if mat2._shape[0] != nb or mat2._shape[1] != k:
        raise RuntimeError(f"bmm: expected mat2 of size [{nb}, {k}, *], got {list(mat2._shape)}")
    idx = self._sp_indices
    flat = make_coo(ember.stack([idx[0] * m + idx[1], idx[0] * k + idx[2]]), self._sp_values, (nb * m, nb * k))
    return sparse_dense_mm(flat, mat2.reshape(nb * k, mat2._shape[2])).reshape(nb, m, mat2._shape[2])


for _key in (COO, CSR):
    OPS["mm"].kernels[_key] = _mm
    OPS["addmm"].kernels[_key] = _addmm
    OPS["mv"].kernels[_key] = _mv
OPS["bmm"].kernels[COO] = _bmm

# torch.sparse.mm: the product of mm, with its own derivative (a sparse operand's gradient is masked
# to its pattern; mm gives it a dense one).
sparse_mm_op = define("_sparse_mm(Tensor mat1, Tensor mat2) -> Tensor")
for _key in (COO, CSR):
    sparse_mm_op.kernels[_key] = _mm


@sparse_mm_op.kernel("cpu")
def _sparse_mm_dense(mat1, mat2):
    return OPS["mm"](mat1, mat2)


# -- products with a sparse result: sspaddmm, smm, hspmm --------------------------------------------

def _row_products(mat1: Tensor, mat2: Tensor, what: str) -> tuple:
    """(rows, products): the rows where COO ``mat1`` stores something (ascending) and those rows of
    ``mat1 @ mat2``, after PyTorch's checks for sspaddmm/hspmm."""
    if mat1._layout is not sparse_coo:
        raise RuntimeError("tensor.sspaddmm(...) can only be called on sparse tensors" if what == "sspaddmm"
                           else f"{what}: expected a sparse COO mat1, got {mat1._layout}")
    if mat1.ndim != 2 or mat2.ndim != 2:
        position, t = (2, mat1) if mat1.ndim != 2 else (3, mat2)
        raise RuntimeError(f"{what}: Argument #{position}: matrices expected, got {t.ndim}D tensor")
    if mat2._layout is not strided:  # PyTorch's words (its product's check)
        raise RuntimeError("addmm_sparse_dense: expected strided result tensor, got tensor with layout Sparse")
    if mat2._shape[0] != mat1._shape[1]:
        raise RuntimeError(f"{what}: Argument #3: Expected dim 0 size {mat1._shape[1]}, got {mat2._shape[0]}")
    if mat1.dtype is not mat2.dtype:
        raise RuntimeError(f"expected scalar type {type_name(mat1.dtype)} but found {type_name(mat2.dtype)}")
    rows = ember.unique(coalesce(mat1)._sp_indices[0]) if mat1._sp_values._shape[0] else \
        ember.zeros(0, dtype=dt.int64)
    return rows, sparse_dense_mm(mat1, mat2).index_select(0, rows)


def _rows_as_coo(rows: Tensor, products: Tensor) -> tuple:
    """The (indices, values) of a 2-sparse-dim COO tensor holding every element of the ``products`` rows."""
    n = products._shape[1]
    indices = ember.stack([rows.repeat_interleave(n), ember.arange(n).repeat(rows._shape[0])])
    return indices, products.reshape(-1)


def sspaddmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1, out=None) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)`` for COO ``input`` and ``mat1``, dense ``mat2``: a COO
    result holding input's entries, then every element of each product row where mat1 stores one
    (not coalesced), as PyTorch's."""
    rows, products = _row_products(mat1, mat2, "sspaddmm")
    if input._layout is not sparse_coo:
        raise RuntimeError("sspaddmm: expected a sparse COO input (self), got a strided tensor")
    shape = (mat1._shape[0], mat2._shape[1])
    for dim in (0, 1):
        if input.ndim != 2 or input._shape[dim] != shape[dim]:
            raise RuntimeError(f"sspaddmm: Argument #1: Expected dim {dim} size {shape[dim]}, got "
                               f"{input._shape[dim] if dim < input.ndim else 1}")
    indices, values = _rows_as_coo(rows, products)
    values = ember.cat([input._sp_values * beta if beta != 1 else input._sp_values,
                        values * alpha if alpha != 1 else values])
    result = make_coo(ember.cat([input._sp_indices, indices], 1), values, shape)
    result._coalesced = False
    if out is not None:
        from ._pointwise import _assign

        _assign(out, result)
        return out
    return result


def smm(input: Tensor, mat: Tensor) -> Tensor:
    """``torch.smm``: COO ``input`` times dense ``mat`` as a COO tensor (sspaddmm with no input)."""
    rows, products = _row_products(input, mat, "sspaddmm")
    indices, values = _rows_as_coo(rows, products)
    result = make_coo(indices, values, (input._shape[0], mat._shape[1]))
    result._coalesced = values._shape[0] == 0
    return result


def hspmm(mat1: Tensor, mat2: Tensor, *, out=None) -> Tensor:
    """``torch.hspmm``: COO ``mat1`` times dense ``mat2`` as a hybrid COO tensor (1 sparse dim, 1
    dense dim): one stored row per row where mat1 stores something."""
    rows, products = _row_products(mat1, mat2, "hspmm")
    result = make_coo(rows.unsqueeze(0), products, (mat1._shape[0], mat2._shape[1]))
    result._coalesced = False
    if out is not None:
        from ._pointwise import _assign

        _assign(out, result)
        return out
    return result


def sampled_addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1.0, alpha=1.0, out=None) -> Tensor:
    """``torch.sparse.sampled_addmm``: ``beta * input + alpha * (mat1 @ mat2)`` computed only where
    CSR ``input`` stores an element; a CSR result with input's pattern."""
    if input._layout is not sparse_csr:
        raise RuntimeError(f"sampled_addmm: Expected input to have sparse_csr layout, but got {input._layout}")
    if mat1._layout is not strided or mat2._layout is not strided:
        raise RuntimeError("sampled_addmm: Expected mat1 and mat2 to be strided")
    if mat1.ndim != 2 or mat2.ndim != 2 or input.ndim != 2:
        raise RuntimeError("sampled_addmm: Expected 2-D matrices (batches are not supported)")
    if mat1._shape[1] != mat2._shape[0] or tuple(input._shape) != (mat1._shape[0], mat2._shape[1]):
        raise RuntimeError(f"sampled_addmm: shapes do not match: input {list(input._shape)}, mat1 "
                           f"{list(mat1._shape)}, mat2 {list(mat2._shape)}")
    coo = compressed_to_coo(input)
    rows = mat1.index_select(0, coo._sp_indices[0])
    cols = mat2.t().index_select(0, coo._sp_indices[1])
    products = (rows * cols).sum(-1)
    values = products * alpha if beta == 0 else input._sp_values * beta + products * alpha
    result = make_compressed(sparse_csr, input._compressed, input._plain, values.to(input.dtype), input._shape)
    if out is not None:
        from ._pointwise import _assign

        _assign(out, result)
        return out
    return result
