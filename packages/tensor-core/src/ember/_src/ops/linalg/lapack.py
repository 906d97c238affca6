"""Factorizations through LAPACK (scipy-openblas32): det/slogdet, inv, solve, cholesky, qr,
eigh, svd and lstsq are ops, each running one batched native kernel (``_C.<name>_``) over
the matrices of the flattened leading dims. pinv, matrix_rank, matrix_power, the matrix norms
and the top-level aliases (``ember.det``, ``ember.svd``, ...) are composed from them.

Only float32/float64 are supported, as in PyTorch on CPU; integer and low-precision inputs
raise PyTorch's errors. The kernels return LAPACK's ``info`` per matrix; a failure raises
:class:`LinAlgError` with PyTorch's message.
"""

from __future__ import annotations

from ... import dtypes
from ..._native import _C
from ...autocast import composite as _autocast_composite
from ...device import META
from ...dispatch import define
from ...optable import declare
from ...shapes import broadcast_shapes, numel
from ...tensor import Tensor
from .._common import HALF_TYPES, empty, return_type, type_name, write_out
from ..creation.factories import eye, scalar_tensor, tensor
from ..pointwise import elementwise
from ..shape import views


class LinAlgError(RuntimeError):
    """Raised when a factorization fails (singular matrix, not positive-definite, ...)."""


# PyTorch's class is torch._C._LinAlgError (torch.linalg.LinAlgError names it): programs that
# print type(e).__name__ see "_LinAlgError" there, and so here.
LinAlgError.__module__ = "ember.linalg"
LinAlgError.__name__ = LinAlgError.__qualname__ = "_LinAlgError"

# PyTorch's return types (torch.return_types.*); private names so they don't become Tensor methods.
_slogdet_result = return_type("linalg_slogdet", ["sign", "logabsdet"])
_inv_ex_result = return_type("linalg_inv_ex", ["inverse", "info"])
_cholesky_ex_result = return_type("linalg_cholesky_ex", ["L", "info"])
_qr_result = return_type("qr", ["Q", "R"])
_torch_slogdet_result = return_type("slogdet", ["sign", "logabsdet"])
_linalg_qr_result = return_type("linalg_qr", ["Q", "R"])
_eigh_result = return_type("linalg_eigh", ["eigenvalues", "eigenvectors"])
_svd_result = return_type("linalg_svd", ["U", "S", "Vh"])
_torch_svd_result = return_type("svd", ["U", "S", "V"])
_lstsq_result = return_type("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
_solve_ex_result = return_type("linalg_solve_ex", ["result", "info"])


def _check_matrix(A, fn: str, *, square: bool = True, half_kernel: str | None = None,
                 int_kernel: str | None = None) -> None:
    """PyTorch's input checks: rank >= 2, a float32/float64 dtype, square matrices.

    ``half_kernel``/``int_kernel`` name the CPU kernel whose NotImplementedError PyTorch raises
    for those dtypes; without one it raises a RuntimeError naming ``fn``.
    """
    if not isinstance(A, Tensor):
        raise TypeError(f"{fn}(): argument 'A' (position 1) must be Tensor, not {type(A).__name__}")
    if A.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor A must have at least 2 dimensions.")
    if A.dtype.is_complex:
        raise NotImplementedError(f"{fn}: complex inputs are not supported by ember yet (got {type_name(A.dtype)})")
    if not A.dtype.is_floating_point:
        if int_kernel is not None:
            raise NotImplementedError(f"\"{int_kernel}\" not implemented for '{type_name(A.dtype)}'")
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. Got {type_name(A.dtype)}")
    if A.dtype in HALF_TYPES:
        if half_kernel is not None:
            raise NotImplementedError(f"\"{half_kernel}\" not implemented for '{type_name(A.dtype)}'")
        raise RuntimeError(f"{fn}: Low precision dtypes not supported. Got {type_name(A.dtype)}")
    if square and A._shape[-1] != A._shape[-2]:
        raise RuntimeError(f"{fn}: A must be batches of square matrices, but they are {A._shape[-2]} by "
                           f"{A._shape[-1]} matrices")


def _batch3(A: Tensor) -> Tensor:
    """(..., m, n) as (B, m, n): a view where possible (kernels read any strides)."""
    return views.reshape(A, (numel(A._shape[:-2]),) + A._shape[-2:])


def _raise(infos, fn: str, batched: bool, message, nonfinite: bool = False) -> None:
    """LinAlgError for the first failed matrix; ``message(info)`` gives PyTorch's text.

    ``nonfinite``: a negative info means LAPACK met nan/inf (gesdd's scaling rejects them), which
    PyTorch reports with the convergence message.
    """
    for i, info in enumerate(infos):
        if info > 0 or (info < 0 and nonfinite):
            prefix = f"{fn}: (Batch element {i}): " if batched else f"{fn}: "
            raise LinAlgError(prefix + message(info))
        if info < 0:
            raise RuntimeError(f"{fn}: LAPACK argument {-info} was invalid (an internal error)")


def _declare(schema: str, meta):
    op = define(schema, (), meta)
    op.kernels["meta"] = meta
    return op


# -- det / slogdet ---------------------------------------------------------------------------

def _det_meta(A):
    _check_matrix(A, "linalg.det", half_kernel="lu_cpu")
    return empty(A._shape[:-2], A.dtype, META)


def _lu_det(A):
    batch = A._shape[:-2]
    outs = [empty((numel(batch), 1, 1), A.dtype, A._device) for _ in range(3)]
    _C.lu_det_(*outs, _batch3(A))
    return [views.reshape(o, batch) for o in outs]


det_op = _declare("linalg_det(Tensor A) -> Tensor", _det_meta)


@det_op.kernel("cpu")
def _det_cpu(A):
    _det_meta(A)
    return _lu_det(A)[2]


def _slogdet_meta(A):
    _check_matrix(A, "linalg.slogdet")
    return empty(A._shape[:-2], A.dtype, META), empty(A._shape[:-2], A.dtype, META)


slogdet_op = _declare("linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet)", _slogdet_meta)


@slogdet_op.kernel("cpu")
def _slogdet_cpu(A):
    _slogdet_meta(A)
    sign, logabs, _ = _lu_det(A)
    return sign, logabs


# -- inv / solve -----------------------------------------------------------------------------

def _singular_inv(info):
    return (f"The diagonal element {info} is zero, the inversion could not be completed because the input "
            f"matrix is singular.")


def _inv_meta(A, check_errors=False):
    _check_matrix(A, "linalg.inv")
    return empty(A._shape, A.dtype, META), empty(A._shape[:-2], dtypes.int32, META)


inv_ex_op = _declare("linalg_inv_ex(Tensor A, *, bool check_errors=False) -> (Tensor inverse, Tensor info)",
                     _inv_meta)


@inv_ex_op.kernel("cpu")
def _inv_cpu(A, check_errors=False):
    _inv_meta(A)
    n = A._shape[-1]
    out = empty((numel(A._shape[:-2]), n, n), A.dtype, A._device)
    infos = _C.inv_(out, _batch3(A))
    if check_errors:
        _raise(infos, "linalg.inv", A.ndim > 2, _singular_inv)
    return views.reshape(out, A._shape), _info_tensor(infos, A._shape[:-2])


def _info_tensor(infos, batch) -> Tensor:
    return views.reshape(tensor(infos, dtype=dtypes.int32), batch)


def _solve_shapes(A, B, left: bool):
    """(A's batch-broadcast shape, B's, result shape, vector case) for A X = B."""
    _check_matrix(A, "linalg.solve", half_kernel="lu_cpu")
    if not isinstance(B, Tensor):
        raise TypeError(f"linalg_solve(): argument 'B' (position 2) must be Tensor, not {type(B).__name__}")
    if B.dtype is not A.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A of type "
                           f"{type_name(A.dtype)} and B of type {type_name(B.dtype)} instead")
    vector = B.ndim == 1 or (left and B.ndim == A.ndim - 1 and B._shape == A._shape[:-1])
    Bm = B._shape + (1,) if vector else B._shape
    if len(Bm) < 2:
        raise RuntimeError("linalg.solve: The input tensor B must have at least 2 dimensions.")
    n = A._shape[-1]
    rows = Bm[-2] if left else Bm[-1]
    if rows != n:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {Bm[-2]}x{Bm[-1]})")
    batch = broadcast_shapes(A._shape[:-2], Bm[:-2])
    return batch, Bm, vector


def _solve_meta(A, B, *, left=True, check_errors=False):
    batch, Bm, vector = _solve_shapes(A, B, left)
    return empty(batch + (Bm[-2:-1] if vector else Bm[-2:]), A.dtype, META), empty(batch, dtypes.int32, META)


solve_ex_op = _declare("linalg_solve_ex(Tensor A, Tensor B, *, bool left=True, bool check_errors=False) -> "
                       "(Tensor result, Tensor info)", _solve_meta)


@solve_ex_op.kernel("cpu")
def _solve_cpu(A, B, *, left=True, check_errors=False):
    batch, Bm, vector = _solve_shapes(A, B, left)
    n = A._shape[-1]
    Bv = views.reshape(B, Bm) if vector else B
    if not left:  # X A = B  <=>  A^T X^T = B^T
        A, Bv = views.transpose_op(A, -2, -1), views.transpose_op(Bv, -2, -1)
    k = Bv._shape[-1]
    nb = numel(batch)
    a3 = views.reshape(views.expand_op(A, batch + (n, n)), (nb, n, n))
    b3 = views.reshape(views.expand_op(Bv, batch + (n, k)), (nb, n, k))
    out = empty((nb, n, k), A.dtype, A._device)
    infos = _C.solve_(out, a3, b3)
    if check_errors:
        _raise(infos, "torch.linalg.solve", len(batch) > 0,
               lambda info: "The solver failed because the input matrix is singular.")
    x = views.reshape(out, batch + (n, k))
    if not left:
        x = views.transpose_op(x, -2, -1)
    return (views.squeeze_op(x, (-1,)) if vector else x), _info_tensor(infos, batch)


# -- cholesky ----------------------------------------------------------------------------------

def _cholesky_meta(A, *, upper=False, check_errors=False):
    _check_matrix(A, "linalg.cholesky", half_kernel="cholesky_cpu")
    return empty(A._shape, A.dtype, META), empty(A._shape[:-2], dtypes.int32, META)


cholesky_ex_op = _declare(
    "linalg_cholesky_ex(Tensor A, *, bool upper=False, bool check_errors=False) -> (Tensor L, Tensor info)",
    _cholesky_meta)


@cholesky_ex_op.kernel("cpu")
def _cholesky_cpu(A, *, upper=False, check_errors=False):
    _cholesky_meta(A)
    n = A._shape[-1]
    out = empty((numel(A._shape[:-2]), n, n), A.dtype, A._device)
    infos = _C.cholesky_(out, _batch3(A), bool(upper))
    if check_errors:
        _raise(infos, "linalg.cholesky", A.ndim > 2,
               lambda info: f"The factorization could not be completed because the input is not positive-definite "
                            f"(the leading minor of order {info} is not positive-definite).")
    return views.reshape(out, A._shape), _info_tensor(infos, A._shape[:-2])


# -- qr ------------------------------------------------------------------------------------------

def _qr_shapes(A, mode):
    _check_matrix(A, "linalg.qr", square=False, half_kernel="geqrf_cpu")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           f"or 'complete'")
    m, n = A._shape[-2:]
    k = min(m, n)
    qcols = {"reduced": k, "complete": m, "r": 0}[mode]
    rrows = m if mode == "complete" else k
    return (m, qcols), (rrows, n)


def _qr_meta(A, mode="reduced"):
    (qm, qc), rshape = _qr_shapes(A, mode)
    batch = A._shape[:-2]
    return empty(batch + (qm, qc) if mode != "r" else (0,), A.dtype, META), empty(batch + rshape, A.dtype, META)


qr_op = _declare("linalg_qr(Tensor A, str mode='reduced') -> (Tensor Q, Tensor R)", _qr_meta)


@qr_op.kernel("cpu")
def _qr_cpu(A, mode="reduced"):
    (qm, qc), rshape = _qr_shapes(A, mode)
    batch = A._shape[:-2]
    nb = numel(batch)
    q = empty((nb, qm, qc), A.dtype, A._device)
    r = empty((nb,) + rshape, A.dtype, A._device)
    _C.qr_(q, r, _batch3(A))
    Q = views.reshape(q, batch + (qm, qc)) if mode != "r" else empty((0,), A.dtype, A._device)
    return Q, views.reshape(r, batch + rshape)


# -- eigh ---------------------------------------------------------------------------------------

def _eigh_check(A, UPLO, fn):
    _check_matrix(A, fn, half_kernel="linalg_eigh_cpu", int_kernel="linalg_eigh_cpu")
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


def _eigh_meta(A, UPLO="L", *, eigenvectors=True):
    _eigh_check(A, UPLO, "linalg.eigh")
    vecs = A._shape if eigenvectors else (0,)
    return empty(A._shape[:-1], A.dtype, META), empty(vecs, A.dtype, META)


eigh_op = _declare("linalg_eigh(Tensor A, str UPLO='L', *, bool eigenvectors=True) -> (Tensor eigenvalues, "
                   "Tensor eigenvectors)", _eigh_meta)


@eigh_op.kernel("cpu")
def _eigh_cpu(A, UPLO="L", *, eigenvectors=True):
    _eigh_check(A, UPLO, "linalg.eigh")
    n = A._shape[-1]
    nb = numel(A._shape[:-2])
    w = empty((nb, n, 1), A.dtype, A._device)
    v = empty((nb, n, n if eigenvectors else 0), A.dtype, A._device)
    infos = _C.eigh_(w, v, _batch3(A), UPLO == "L")
    _raise(infos, "linalg.eigh", A.ndim > 2,
           lambda info: f"The algorithm failed to converge because the input matrix is ill-conditioned or has too "
                        f"many repeated eigenvalues (error code: {info}).")
    vecs = views.reshape(v, A._shape) if eigenvectors else empty((0,), A.dtype, A._device)
    return views.reshape(w, A._shape[:-1]), vecs


# -- svd ------------------------------------------------------------------------------------------

def _svd_shapes(A, full_matrices, compute_uv):
    _check_matrix(A, "linalg.svd", square=False, half_kernel="linalg_svd_cpu")
    m, n = A._shape[-2:]
    k = min(m, n)
    if not compute_uv:
        return (m, 0), k, (0, n)
    return ((m, m), k, (n, n)) if full_matrices else ((m, k), k, (k, n))


def _svd_meta(A, full_matrices=True, *, compute_uv=True):
    ushape, k, vshape = _svd_shapes(A, full_matrices, compute_uv)
    batch = A._shape[:-2]
    if not compute_uv:
        return empty((0,), A.dtype, META), empty(batch + (k,), A.dtype, META), empty((0,), A.dtype, META)
    return (empty(batch + ushape, A.dtype, META), empty(batch + (k,), A.dtype, META),
            empty(batch + vshape, A.dtype, META))


svd_op = _declare("linalg_svd(Tensor A, bool full_matrices=True, *, bool compute_uv=True) -> (Tensor U, "
                  "Tensor S, Tensor Vh)", _svd_meta)


@svd_op.kernel("cpu")
def _svd_cpu(A, full_matrices=True, *, compute_uv=True):
    ushape, k, vshape = _svd_shapes(A, full_matrices, compute_uv)
    batch = A._shape[:-2]
    nb = numel(batch)
    u = empty((nb,) + ushape, A.dtype, A._device)
    s = empty((nb, k, 1), A.dtype, A._device)
    vh = empty((nb,) + vshape, A.dtype, A._device)
    infos = _C.svd_(u, s, vh, _batch3(A))
    _raise(infos, "linalg.svd", A.ndim > 2,
           lambda info: "The algorithm failed to converge because the input matrix contained non-finite values.",
           nonfinite=True)
    S = views.reshape(s, batch + (k,))
    if not compute_uv:
        return empty((0,), A.dtype, A._device), S, empty((0,), A.dtype, A._device)
    return views.reshape(u, batch + ushape), S, views.reshape(vh, batch + vshape)


# -- lstsq ------------------------------------------------------------------------------------------

_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _lstsq_shapes(A, B, rcond, driver):
    for name, t in (("input", A), ("b", B)):
        if not isinstance(t, Tensor):
            raise TypeError(f"linalg_lstsq(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if A.dtype not in (dtypes.float32, dtypes.float64):
        raise RuntimeError("This function doesn't handle types other than float and double")
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    if B.dtype is not A.dtype:
        raise RuntimeError(f"torch.linalg.lstsq: Expected input and other to have the same dtype, but got "
                           f"input's dtype {type_name(A.dtype)} and other's dtype {type_name(B.dtype)}")
    if driver is None:
        driver = "gelsy"
    if driver not in _DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    vector = B.ndim == A.ndim - 1
    Bm = B._shape + (1,) if vector else B._shape
    m, n = A._shape[-2:]
    if len(Bm) < 2:
        raise RuntimeError("torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and "
                           "(input.dim() - other.dim()) <= 1")
    if Bm[-2] != m:
        raise RuntimeError(f"torch.linalg.lstsq: input.size(-2) should match other.size(-{1 + (not vector)})")
    batch = broadcast_shapes(A._shape[:-2], Bm[:-2])
    return batch, Bm, vector, driver


def _lstsq_outputs(A, batch, Bm, vector, driver):
    m, n = A._shape[-2:]
    k = Bm[-1]
    x_shape = batch + ((n,) if vector else (n, k))
    rank_shape = batch if driver != "gels" else (0,)
    sv_shape = batch + (min(m, n),) if driver in ("gelsd", "gelss") else (0,)
    return x_shape, rank_shape, sv_shape


def _lstsq_meta(A, B, rcond=None, *, driver=None):
    batch, Bm, vector, driver = _lstsq_shapes(A, B, rcond, driver)
    x, r, s = _lstsq_outputs(A, batch, Bm, vector, driver)
    m, n = A._shape[-2:]
    res = batch + (Bm[-1],) if m > n and driver != "gelsy" else (0,)
    return (empty(x, A.dtype, META), empty(res, A.dtype, META), empty(r, dtypes.int64, META),
            empty(s, A.dtype, META))


lstsq_op = _declare("linalg_lstsq(Tensor A, Tensor B, float? rcond=None, *, str? driver=None) -> (Tensor solution, "
                    "Tensor residuals, Tensor rank, Tensor singular_values)", _lstsq_meta)


@lstsq_op.kernel("cpu")
def _lstsq_cpu(A, B, rcond=None, *, driver=None):
    batch, Bm, vector, driver = _lstsq_shapes(A, B, rcond, driver)
    m, n = A._shape[-2:]
    k = Bm[-1]
    nb = numel(batch)
    if rcond is None:
        rcond = dtypes.finfo(A.dtype).eps * max(m, n)
    a3 = views.reshape(views.expand_op(A, batch + (m, n)), (nb, m, n))
    b3 = views.reshape(views.expand_op(views.reshape(B, Bm), batch + (m, k)), (nb, m, k))
    x = empty((nb, max(m, n), k), A.dtype, A._device)
    rank = empty((nb, 1 if driver != "gels" else 0, 1), dtypes.int64, A._device)
    sv_rows = min(m, n) if driver in ("gelsd", "gelss") else 0
    sv = empty((nb, sv_rows, 1), A.dtype, A._device)
    infos = _C.lstsq_(x, rank, sv, a3, b3, float(rcond), driver)
    _raise(infos, "torch.linalg.lstsq", len(batch) > 0,
           lambda info: f"The least squares solution could not be computed because the input matrix does not have "
                        f"full rank (error code: {info}).")
    x_shape, rank_shape, sv_shape = _lstsq_outputs(A, batch, Bm, vector, driver)
    solution = views.reshape(views.narrow_op(x, 1, 0, n), x_shape)
    # Squared residuals: the sum of squares of rows n..m of LAPACK's output, when m > n and full rank.
    residuals = empty((0,), A.dtype, A._device)
    if m > n and driver != "gelsy":
        full_rank = driver == "gels" or _all_full_rank(rank, n)
        if full_rank:
            tail = views.narrow_op(x, 1, n, m - n)
            residuals = views.reshape((tail * tail).sum(1), batch + (k,))  # (..., 1) for a vector b too
    rank_out = views.reshape(rank, rank_shape) if driver != "gels" else empty((0,), dtypes.int64, A._device)
    sv_out = views.reshape(sv, sv_shape) if sv_rows else empty((0,), A.dtype, A._device)
    return solution, residuals, rank_out, sv_out


def _all_full_rank(rank: Tensor, n: int) -> bool:
    return bool((rank == n).all().item())


# -- composites shared by ember.linalg and the top-level aliases ------------------------------------

def _pinv(A: Tensor, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
    """Pseudo-inverse from the SVD (or eigh when hermitian): singular values <= tol become 0."""

    if not isinstance(A, Tensor) or A.ndim < 2 or A.dtype not in (dtypes.float32, dtypes.float64):
        desc = f"{type_name(A.dtype)}{list(A._shape)}" if isinstance(A, Tensor) else type(A).__name__
        raise RuntimeError(f"linalg.pinv({desc.replace('[', '{[').replace(']', ']}')}): expected a tensor with 2 or "
                           f"more dimensions of float, double, cfloat or cdouble types")
    m, n = A._shape[-2:]
    if rtol is None:
        rtol = 0.0 if atol is not None and not _is_zero(atol) else dtypes.finfo(A.dtype).eps * max(m, n)
    if atol is None:
        atol = 0.0
    if hermitian:
        L, V = eigh_op(A, "L")
        S = L.abs()
    else:
        U, S, Vh = svd_op(A, False)
    if numel(S._shape) == 0:
        return empty(A._shape[:-2] + (n, m), A.dtype, A._device).zero_()
    # tol = max(atol, rtol * largest singular value), per matrix.
    top = S.amax(-1, keepdim=True) if hermitian else views.narrow_op(S, -1, 0, 1)
    tol = elementwise.maximum(elementwise.mul(top, _column(rtol)), _column(atol))
    keep = S > tol
    if hermitian:
        inv_l = elementwise.where(keep, elementwise.div(1.0, elementwise.where(keep, L, 1.0)), 0.0)
        return (V * views.unsqueeze_op(inv_l, -2)) @ views.transpose_op(V, -2, -1)
    inv_s = elementwise.where(keep, elementwise.div(1.0, elementwise.where(keep, S, 1.0)), 0.0)
    return (views.transpose_op(Vh, -2, -1) * views.unsqueeze_op(inv_s, -2)) @ views.transpose_op(U, -2, -1)


def _is_zero(x) -> bool:
    return (not isinstance(x, Tensor)) and x == 0


def _column(x):
    """A per-matrix tolerance (a number or a batch-shaped tensor) as a (..., 1) operand."""

    if isinstance(x, Tensor):
        return views.unsqueeze_op(x, -1)
    return scalar_tensor(float(x))


def _matrix_power(A: Tensor, n: int) -> Tensor:
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"matrix_power(): argument 'n' must be int, not {type(n).__name__}")
    if A.ndim < 2:  # any dtype: only negative powers need a float inverse
        raise RuntimeError("linalg.matrix_power: The input tensor A must have at least 2 dimensions.")
    if A._shape[-1] != A._shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are "
                           f"{A._shape[-2]} by {A._shape[-1]} matrices")
    if n == 0:
        # Written into a clone of A, as PyTorch does: the identity then stays in A's graph (a zero
        # gradient, not an output that does not require grad).
        result = views.contiguous(views.clone_op(A))  # contiguous, as PyTorch's (a transposed A too)
        return result.copy_(views.expand_op(eye(A._shape[-1], dtype=A.dtype), A._shape))
    if n < 0:
        A = inv_ex_op(A, check_errors=True)[0]
        n = -n
    result, base = None, A
    while True:  # binary powering: log2(n) products
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if not n:
            return result if result is not A else result.clone()
        base = base @ base


# -- top-level aliases (torch.det, torch.svd, ...) --------------------------------------------------

def det(input: Tensor) -> Tensor:
    return det_op(input)


def slogdet(input: Tensor):
    return _torch_slogdet_result(*slogdet_op(input))


def logdet(input: Tensor) -> Tensor:
    """log(det): nan for a negative determinant, -inf for a singular matrix."""

    _check_matrix(input, "logdet")
    sign, logabs = slogdet_op(input)
    return elementwise.where(sign < 0, float("nan"), logabs)


@_autocast_composite("fp32")
def inverse(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    return write_out(inv_ex_op(input, check_errors=True)[0], out)


@_autocast_composite("fp32")
def cholesky(input: Tensor, upper: bool = False, *, out: Tensor | None = None) -> Tensor:
    return write_out(cholesky_ex_op(input, upper=upper, check_errors=True)[0], out)


@_autocast_composite("fp32")
def qr(input: Tensor, some: bool = True):
    return _qr_result(*qr_op(input, "reduced" if some else "complete"))


@_autocast_composite("fp32")
def svd(input: Tensor, some: bool = True, compute_uv: bool = True):
    """torch.svd: returns V (not Vh); with compute_uv=False, U and V are zero-filled and square."""
    if not compute_uv:
        _, S, _ = svd_op(input, False, compute_uv=False)
        m, n = input._shape[-2:]
        batch = input._shape[:-2]
        U = empty(batch + (m, m), input.dtype, input._device).zero_()
        V = empty(batch + (n, n), input.dtype, input._device).zero_()
        return _torch_svd_result(U, S, V)
    U, S, Vh = svd_op(input, not some)
    return _torch_svd_result(U, S, views.transpose_op(Vh, -2, -1))


@_autocast_composite("fp32")
def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    return _pinv(input, rtol=rcond)


def matrix_power(input: Tensor, n: int) -> Tensor:
    return _matrix_power(input, n)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
cholesky                    function method
det                         function method
inverse                     function method
logdet                      function method
matrix_power                function method
pinverse                    function method
qr                          function method
slogdet                     function method
svd                         function method
""")
