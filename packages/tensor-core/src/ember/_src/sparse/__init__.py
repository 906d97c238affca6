"""Sparse layouts (issue 19): COO, CSR/CSC and BSR/BSC tensors, their conversions and the
per-layout kernels registered on the op table (``Op.kernels["sparse_cpu"]`` for COO,
``["sparse_csr_cpu"]`` for the compressed layouts). Module map:

- _core.py        how a sparse tensor is held; constructors; invariant checks
- _convert.py     coalesce, to_dense, to_sparse*, sparse_mask (ops)
- _pointwise.py   pattern-preserving pointwise kernels, add/sub/mul/div
- _products.py    mm/addmm/mv/bmm (sparse x dense, sparse x sparse), sampled_addmm
- _shape.py       transpose/permute, index_select, narrow, cat, clone/_to_copy/copy_
- _reductions.py  sum, softmax/log_softmax
- _methods.py     the Tensor methods and the repr
"""

from __future__ import annotations

from . import _convert, _methods, _pointwise, _products, _reductions, _shape  # noqa: F401  (register kernels)
from ._core import (  # noqa: F401
    check_sparse_tensor_invariants,
    sparse_bsc_tensor,
    sparse_bsr_tensor,
    sparse_compressed_tensor,
    sparse_coo_tensor,
    sparse_csc_tensor,
    sparse_csr_tensor,
)
from ._products import sampled_addmm  # noqa: F401

_methods.install()
