"""``ember.linalg``: PyTorch's ``torch.linalg`` namespace.

Matrix products come from ``_src/ops/linalg/products.py``; factorizations are ops of
``_src/ops/linalg/lapack.py`` (LAPACK kernels); norms, pinv, matrix_rank and matrix_power are
composed from them and the reductions.
"""

from __future__ import annotations

import math

from ember._src.autocast import composite as _autocast_composite

from .._src import dtypes as _dtypes
from .._src.bindings import namespace as _namespace
from .._src.ops._common import write_out as _write_out
from .._src.ops.creation.factories import zeros as _zeros
from .._src.ops.linalg import lapack as _lapack
from .._src.ops.linalg.lapack import LinAlgError
from .._src.ops.pointwise import elementwise
from .._src.ops.reduction.composite import norm_op as _norm_op
from .._src.ops.shape import views as _views
from .._src.ops.shape.joining import cat as _cat
from .._src.ops.shape.reorder import cross as _cross
from .._src.shapes import numel as _numel
from .._src.shapes import wrap_dim as _wrap_dim
from .._src.tensor import Tensor as _Tensor

# The class's name is PyTorch's (_LinAlgError, see lapack.py); pickle finds it by that name here.
_LinAlgError = LinAlgError

__all__ = [
    "LinAlgError", "matmul", "multi_dot", "det", "slogdet", "inv", "inv_ex", "solve", "solve_ex", "lstsq",
    "cholesky", "cholesky_ex", "qr", "eigh", "eigvalsh", "svd", "svdvals", "pinv", "matrix_rank",
    "matrix_power", "cross", "norm", "vector_norm", "matrix_norm", "cond", "diagonal", "vecdot", "vander",
    "tensorinv", "tensorsolve", "lu_factor", "lu_factor_ex", "lu", "lu_solve", "solve_triangular", "matrix_exp",
]


def _out2(result, out, cls):
    """out= for ops returning a tuple of tensors."""
    if out is None:
        return cls(*result)
    if len(out) != len(result):
        raise RuntimeError(f"expected {len(result)} output tensors, got {len(out)}")
    return cls(*(_write_out(r, o) for r, o in zip(result, out)))


def det(A, *, out=None):
    return _write_out(_lapack.det_op(A), out)


def slogdet(A, *, out=None):
    return _out2(_lapack.slogdet_op(A), out, _lapack._slogdet_result)


@_autocast_composite("fp32")
def inv(A, *, out=None):
    return _write_out(_lapack.inv_ex_op(A, check_errors=True)[0], out)


def inv_ex(A, *, check_errors=False, out=None):
    return _out2(_lapack.inv_ex_op(A, check_errors=check_errors), out, _lapack._inv_ex_result)


@_autocast_composite("fp32")
def solve(A, B, *, left=True, out=None):
    return _write_out(_lapack.solve_ex_op(A, B, left=left, check_errors=True)[0], out)


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    return _out2(_lapack.solve_ex_op(A, B, left=left, check_errors=check_errors), out, _lapack._solve_ex_result)


@_autocast_composite("fp32")
def lstsq(A, B, rcond=None, *, driver=None):
    return _lapack._lstsq_result(*_lapack.lstsq_op(A, B, rcond, driver=driver))


@_autocast_composite("fp32")
def cholesky(A, *, upper=False, out=None):
    return _write_out(_lapack.cholesky_ex_op(A, upper=upper, check_errors=True)[0], out)


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    return _out2(_lapack.cholesky_ex_op(A, upper=upper, check_errors=check_errors), out, _lapack._cholesky_ex_result)


@_autocast_composite("fp32")
def qr(A, mode="reduced", *, out=None):
    return _out2(_lapack.qr_op(A, mode), out, _lapack._linalg_qr_result)


@_autocast_composite("fp32")
def eigh(A, UPLO="L", *, out=None):
    return _out2(_lapack.eigh_op(A, UPLO), out, _lapack._eigh_result)


@_autocast_composite("fp32")
def eigvalsh(A, UPLO="L", *, out=None):
    _lapack._eigh_check(A, UPLO, "linalg.eigh")
    return _write_out(_lapack.eigh_op(A, UPLO, eigenvectors=False)[0], out)


@_autocast_composite("fp32")
def svd(A, full_matrices=True, *, driver=None, out=None):
    return _out2(_lapack.svd_op(A, full_matrices), out, _lapack._svd_result)


@_autocast_composite("fp32")
def svdvals(A, *, driver=None, out=None):
    return _write_out(_lapack.svd_op(A, False, compute_uv=False)[1], out)


def pinv(A, *, atol=None, rtol=None, hermitian=False, out=None):
    return _write_out(_lapack._pinv(A, atol, rtol, hermitian), out)


@_autocast_composite("fp32")
def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, out=None):
    """Number of singular values above max(atol, rtol * largest)."""

    if not isinstance(A, _Tensor) or A.dtype not in (_dtypes.float32, _dtypes.float64):
        raise RuntimeError("This function doesn't handle types other than float and double")
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.matrix_rank: The input tensor input must have at least 2 dimensions.")
    m, n = A._shape[-2:]
    S = (
        _lapack.eigh_op(A, "L", eigenvectors=False)[0].abs()
        if hermitian
        else _lapack.svd_op(A, False, compute_uv=False)[1]
    )
    if rtol is None:
        rtol = 0.0 if atol is not None and not _lapack._is_zero(atol) else _dtypes.finfo(A.dtype).eps * max(m, n)
    if atol is None:
        atol = 0.0
    if min(m, n) == 0:
        return _write_out(_zeros(A._shape[:-2], dtype=_dtypes.int64), out)
    top = S.amax(-1, keepdim=True)
    tol = elementwise.maximum(elementwise.mul(top, _lapack._column(rtol)), _lapack._column(atol))
    return _write_out((S > tol).sum(-1), out, overlap=False)


def matrix_power(A, n, *, out=None):
    return _write_out(_lapack._matrix_power(A, n), out)


def cross(input, other, *, dim=-1, out=None):
    if input.ndim != other.ndim:
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions. Got {input.ndim} and "
                           f"{other.ndim}")
    return _write_out(_cross(input, other, dim), out, exact_dtype=True)


# -- norms -------------------------------------------------------------------------------------------

def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: Expected a number as ord, got {ord}")
    return _write_out(_norm_op(x, ord, dim, keepdim, dtype), out, overlap=False)  # a reduction: unchecked


def _matrix_dims(A, dim, fn):
    if A.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor A must have at least 2 dimensions.")
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise RuntimeError(f"{fn}: dim must be a 2-tuple. Got {' '.join(str(d) for d in dim)}")

    d0, d1 = _wrap_dim(dim[0], A.ndim), _wrap_dim(dim[1], A.ndim)
    if d0 == d1:
        raise RuntimeError(f"{fn}: dims must be different. Got ({dim[0]}, {dim[1]})")
    return d0, d1


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """Frobenius/nuclear norms, max/min column (1) or row (inf) sums, largest/smallest singular value (2)."""
    fn = "linalg.matrix_norm"
    if not isinstance(A, _Tensor):
        raise TypeError(f"linalg_matrix_norm(): argument 'A' (position 1) must be Tensor, not {type(A).__name__}")
    d0, d1 = _matrix_dims(A, dim, fn)
    if A.dtype.is_complex:
        raise NotImplementedError(f"{fn}: complex inputs are not supported by ember yet")
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. Got "
                           f"{_lapack.type_name(A.dtype)}")
    if dtype is not None:
        A = A.to(dtype)
    if ord == "fro":
        return _write_out(vector_norm(A, 2, (d0, d1), keepdim), out)
    spectral = ord in ("nuc", 2, -2)
    if not spectral and ord not in (1, -1, math.inf, -math.inf):
        raise RuntimeError(f"{fn}: Order {ord} not supported.")
    if spectral:
        _lapack._check_matrix(A, fn, square=False)
        # Move the two dims last, take singular values, reduce over them.
        S = svdvals(_views.movedim(A, (d0, d1), (-2, -1)))
        if ord == "nuc":
            result = S.sum(-1)
        elif ord == 2 and S.shape[-1] == 0:
            result = _zeros(S.shape[:-1], dtype=S.dtype)  # the largest of no singular values: 0, as PyTorch
        else:
            result = S.amax(-1) if ord == 2 else S.amin(-1)
        if keepdim:
            for d in sorted((d0, d1)):
                result = _views.unsqueeze_op(result, d)
        return _write_out(result, out)
    # ord 1: max/min column sum (sum over rows, d0); ord inf: max/min row sum (sum over d1).
    sum_dim, red_dim = (d0, d1) if abs(ord) == 1 else (d1, d0)
    sums = A.abs().sum(sum_dim)
    red_dim -= 1 if sum_dim < red_dim else 0
    if ord > 0 and sums.shape[red_dim] == 0:
        # The largest of no (non-negative) sums is 0, as in PyTorch; the smallest stays an IndexError.
        result = _zeros(tuple(s for i, s in enumerate(sums.shape) if i != red_dim), dtype=sums.dtype)
    else:
        result = sums.amax(red_dim) if ord > 0 else sums.amin(red_dim)
    if keepdim:
        for d in sorted((d0, d1)):
            result = _views.unsqueeze_op(result, d)
    return _write_out(result, out)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None, out=None):
    """vector_norm for a 1-D dim (or a flattened input), matrix_norm for a 2-D one."""
    if dim is not None and not isinstance(dim, (tuple, list)):
        dim = (dim,)
    if dim is not None:
        if len(dim) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype, out=out)
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype, out=out)
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype, out=out)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype, out=out)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype, out=out)
    raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                       f"{A.ndim}D.")


@_autocast_composite("fp32")
def cond(A, p=None, *, out=None):
    """Condition number: a ratio of singular values for p in (None, 2, -2), else |A|_p |A^-1|_p."""

    if p in (None, 2, -2):
        _lapack._check_matrix(A, "linalg.cond", square=False)
        S = svdvals(A)
        big, small = _views.narrow_op(S, -1, 0, 1), _views.narrow_op(S, -1, S._shape[-1] - 1, 1)
        ratio = elementwise.div(small, big) if p == -2 else elementwise.div(big, small)
        return _write_out(_views.squeeze_op(ratio, (-1,)), out)
    _lapack._check_matrix(A, "linalg.cond")
    return _write_out(elementwise.mul(matrix_norm(A, p), matrix_norm(inv(A), p)), out)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    return _views.diagonal(A, offset, dim1, dim2)


def vecdot(x, y, *, dim=-1, out=None):
    return _write_out(elementwise.mul(x, y).sum(dim), out)


def vander(x, *, N=None):
    """Columns x^0, x^1, ..., x^(N-1) (a cumulative product, as PyTorch computes it)."""

    if x.ndim < 1:
        raise RuntimeError("linalg.vander: x must have at least one dimension")
    n = x._shape[-1] if N is None else N
    if n <= 1:
        if n < 0:
            raise RuntimeError("N must be greater than 1.")
        return x.unsqueeze(-1).new_ones(x._shape + (n,))
    col = _views.unsqueeze_op(x, -1)
    ones = col.new_ones(x._shape + (1,))
    return _cat([ones, _views.expand_op(col, x._shape + (n - 1,))], -1).cumprod(-1)


@_autocast_composite("fp32")
def tensorinv(A, ind=2, *, out=None):
    """Inverse of A seen as a (prod(shape[:ind]), prod(shape[ind:])) matrix, reshaped back."""

    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = _numel(A._shape[:ind]), _numel(A._shape[ind:])
    if rows != cols:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {cols} != {rows}")
    result = inv(_views.reshape(A, (rows, cols)))
    return _write_out(_views.reshape(result, A._shape[ind:] + A._shape[:ind]), out)


@_autocast_composite("fp32")
def tensorsolve(A, B, dims=None, *, out=None):
    """X with tensordot(A, X, X.ndim) == B: one solve on A flattened to a square matrix."""

    if dims is not None:
        dims = [d % A.ndim for d in dims]
        A = _views.movedim(A, dims, list(range(A.ndim - len(dims), A.ndim)))
    rest = A._shape[B.ndim:]
    rows, cols = _numel(B._shape), _numel(rest)
    if rows != cols:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(result_shape) == prod(other.shape), but "
                           f"got {cols} != {rows}")
    x = solve(_views.reshape(A, (rows, cols)), _views.reshape(B, (rows,)))
    return _write_out(_views.reshape(x, rest), out)



# matmul, multi_dot, LU, triangular solves and the matrix exponential: the names their op records
# give ember.linalg (``linalg=``, _src/optable.py).
globals().update(_namespace("linalg"))
