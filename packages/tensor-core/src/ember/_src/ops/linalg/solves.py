"""LU and triangular/Cholesky solves, the matrix exponential and ``bilinear``.

``linalg_lu_factor_ex`` is an op over one batched native getrf (``_C.lu_factor_``; its derivative
is in ember-autograd). Everything else is composed: ``lu_unpack`` from tril/triu and the pivots'
permutation (``_C.lu_pivots_to_perm_``), the solves from ``linalg.solve`` on the triangular
factors (the Cholesky solve on the factor's Gram matrix), ``matrix_exp`` by Pade-13 scaling and
squaring with matmul and solve, ``bilinear`` with einsum, so their gradients come from those ops.
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
from .._common import empty, return_type, type_name, write_out
from ..creation import factories
from ..indexing.subscripts import index_select
from ..pointwise import elementwise
from ..reduction import reduce as reductions
from ..shape import views
from ..shape.reorder import tril, triu
from .contract import einsum
from .lapack import LinAlgError, _batch3, _check_matrix, _info_tensor, _raise

lu_factor_result = return_type("linalg_lu_factor", ["LU", "pivots"])
lu_factor_ex_result = return_type("linalg_lu_factor_ex", ["LU", "pivots", "info"])
lu_result = return_type("linalg_lu", ["P", "L", "U"])
lu_unpack_result = return_type("lu_unpack", ["P", "L", "U"])
triangular_solve_result = return_type("triangular_solve", ["solution", "cloned_coefficient"])


# -- LU ------------------------------------------------------------------------------------------

def _lu_meta(A, *, pivot=True, check_errors=False):
    _check_matrix(A, "linalg.lu_factor", square=False, half_kernel="lu_cpu")
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    m, n = A._shape[-2:]
    batch = A._shape[:-2]
    return (empty(A._shape, A.dtype, META), empty(batch + (min(m, n),), dtypes.int32, META),
            empty(batch, dtypes.int32, META))


lu_factor_ex_op = define("linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False) -> "
                         "(Tensor LU, Tensor pivots, Tensor info)", (), _lu_meta)
lu_factor_ex_op.kernels["meta"] = _lu_meta


@lu_factor_ex_op.kernel("cpu")
def _lu_factor_cpu(A, *, pivot=True, check_errors=False):
    _lu_meta(A, pivot=pivot)
    m, n = A._shape[-2:]
    batch = A._shape[:-2]
    lu_ = empty((numel(batch), m, n), A.dtype, A._device)
    pivots = empty((numel(batch), min(m, n)), dtypes.int32, A._device)
    infos = _C.lu_factor_(lu_, pivots, _batch3(A))
    if check_errors:
        _raise(infos, "torch.linalg.lu_factor_ex", bool(batch), _singular_u)
    return views.reshape(lu_, A._shape), views.reshape(pivots, batch + (min(m, n),)), _info_tensor(infos, batch)


def _singular_u(info):
    return (f"U[{info},{info}] is zero and using it on lu_solve would result in a division by zero. If you still "
            f"want to perform the factorization, consider calling linalg.lu(A, pivot) or "
            f"linalg.lu_factor_ex(A, pivot)")


def _write_outs(cls, result, out):
    """out= for tuple results: one tensor per field."""
    if out is None:
        return cls(*result)
    if len(out) != len(result):
        raise RuntimeError(f"expected {len(result)} output tensors, got {len(out)}")
    return cls(*(write_out(r, o) for r, o in zip(result, out)))


def linalg_lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    return _write_outs(lu_factor_ex_result, lu_factor_ex_op(A, pivot=pivot, check_errors=check_errors), out)


def linalg_lu_factor(A, *, pivot=True, out=None):
    """LU factorization with partial pivoting: (LU, pivots), raising if U has a zero pivot."""
    lu_, pivots, info = lu_factor_ex_op(A, pivot=pivot)
    if numel(info._shape):
        bad = [int(i) for i in views.reshape(info, (-1,)).tolist()]
        for b, i in enumerate(bad):
            if i > 0:
                prefix = f"(Batch element {b}): " if A.ndim > 2 else ""
                raise LinAlgError(f"torch.linalg.lu_factor: {prefix}{_singular_u(i)}")
    return _write_outs(lu_factor_result, (lu_, pivots), out)


def lu(A, pivot: bool = True, get_infos: bool = False, out=None):
    """``torch.lu``: (LU, pivots) or, with ``get_infos``, (LU, pivots, infos)."""
    result = lu_factor_ex_op(A, pivot=pivot)
    result = result if get_infos else result[:2]
    if out is not None:
        return tuple(write_out(r, o) for r, o in zip(result, out))
    return tuple(result)


def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True, unpack_pivots: bool = True,
              *, out=None):
    """(P, L, U) with A = P @ L @ U from the packed LU factorization and its pivots."""
    if not isinstance(LU_data, Tensor) or not isinstance(LU_pivots, Tensor):
        raise TypeError("lu_unpack(): LU_data and LU_pivots must be Tensors")
    if LU_data.ndim < 2:
        raise RuntimeError(f"torch.lu_unpack: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(LU_data._shape)} instead")
    m, n = LU_data._shape[-2:]
    k = min(m, n)
    batch = LU_data._shape[:-2]
    if unpack_pivots:
        if LU_pivots.dtype is not dtypes.int32:
            raise RuntimeError(f"torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 "
                               f"dtype. Note: this function is intended to be used with the output produced by "
                               f"torch.linalg.lu_factor, got {type_name(LU_pivots.dtype)}")
        if LU_pivots._shape != batch + (k,):
            raise RuntimeError(f"torch.lu_unpack: Expected LU_pivots.size() to be {list(batch + (k,))}, got "
                               f"{list(LU_pivots._shape)}")
        dev = LU_data._device
        host = dev.type not in ("cpu", "meta")  # the native walk reads host memory: a device's pivots go through it
        perm = empty((numel(batch), m), dtypes.int64, LU_data._device if not host else LU_pivots.cpu()._device)
        _C.lu_pivots_to_perm_(perm, views.reshape(LU_pivots.cpu() if host else LU_pivots, (numel(batch), k)))
        perm = perm.to(dev) if host else perm
        # Row i of P^T A is row perm[i] of A, so P^T is the identity's rows in perm order.

        eye = factories.eye(m, dtype=LU_data.dtype, device=LU_data._device)
        pt = views.reshape(index_select(eye, 0, views.reshape(perm, (-1,))), (numel(batch), m, m))
        P = views.reshape(views.transpose(pt, -2, -1), batch + (m, m)).contiguous()
    else:
        P = factories.empty((0,), dtype=LU_data.dtype, device=LU_data._device)
    if unpack_data:
        eye_mk = factories.eye(m, k, dtype=LU_data.dtype, device=LU_data._device)
        L = elementwise.add(tril(views.narrow(LU_data, -1, 0, k), -1), eye_mk)
        U = triu(views.narrow(LU_data, -2, 0, k))
    else:
        L = U = factories.empty((0,), dtype=LU_data.dtype, device=LU_data._device)
    return _write_outs(lu_unpack_result, (P, L, U), out)


def linalg_lu(A, *, pivot: bool = True, out=None):
    """(P, L, U) with A = P @ L @ U."""
    lu_, pivots, _ = lu_factor_ex_op(A, pivot=pivot)
    return _write_outs(lu_result, lu_unpack(lu_, pivots), out)


def linalg_lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True, adjoint: bool = False, out=None):
    """Solves A X = B (X A = B when not ``left``; A^H when ``adjoint``) from A's LU factorization."""
    return write_out(_lu_solve(LU, pivots, B, left, adjoint), out)


def _lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, left: bool, adjoint: bool) -> Tensor:
    solve = _solve_matrices

    P, L, U = lu_unpack(LU, pivots)
    if left and not adjoint:  # P L U X = B
        return solve(U, solve(L, views.transpose(P, -2, -1).conj() @ B))
    if left:  # U^H L^H P^T X = B
        return P @ solve(views.transpose(L, -2, -1).conj(), solve(views.transpose(U, -2, -1).conj(), B))
    if not adjoint:  # X P L U = B
        return solve(L, solve(U, B, left=False), left=False) @ views.transpose(P, -2, -1).conj()
    # X U^H L^H P^T = B
    return solve(views.transpose(U, -2, -1).conj(), solve(views.transpose(L, -2, -1).conj(), B @ P, left=False),
                 left=False)


@_autocast_composite("fp32")
def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor, *, out=None) -> Tensor:
    """``torch.lu_solve``: solves A x = b from A's LU factorization."""
    return write_out(linalg_lu_solve(LU_data, LU_pivots, b), out)


# -- triangular and Cholesky solves --------------------------------------------------------------

def _triangle(A: Tensor, upper: bool, unitriangular: bool) -> Tensor:
    T = triu(A) if upper else tril(A)
    if unitriangular:
        T = elementwise.add(triu(T, 1) if upper else tril(T, -1), factories.eye(A._shape[-1], dtype=A.dtype))
    return T


def _solve_matrices(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """linalg.solve with B always a (batch of) matrices: linalg.solve reads a B shaped A.shape[:-1]
    as a batch of vectors, which the triangular, Cholesky and LU solvers never do."""
    from ....linalg import solve

    batch = broadcast_shapes(tuple(A._shape[:-2]), tuple(B._shape[:-2]))
    if tuple(B._shape[:-2]) != batch:
        B = views.expand(B, tuple(batch) + tuple(B._shape[-2:]))
    return solve(A, B, left=left)


def _check_solve_pair(A, B, fn: str) -> None:
    for name, t in (("A", A), ("B", B)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}(): argument '{name}' must be Tensor, not {type(t).__name__}")
        if t.ndim < 2:
            raise RuntimeError(f"{fn}: The input tensor {name} must have at least 2 dimensions.")
    _check_matrix(A, fn)
    if A.dtype is not B.dtype:
        raise RuntimeError(f"{fn}: Expected A and B to have the same dtype, but found A of type "
                           f"{type_name(A.dtype)} and B of type {type_name(B.dtype)} instead")


def linalg_solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False,
                            out=None) -> Tensor:
    """Solves A X = B (X A = B when not ``left``) for a triangular A (only its triangle is read)."""
    solve = _solve_matrices

    _check_solve_pair(A, B, "linalg.solve_triangular")
    return write_out(solve(_triangle(A, upper, unitriangular), B, left=left), out)


@_autocast_composite("fp32")
def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False, *, out=None):
    """``torch.triangular_solve``: (solution of op(A) X = b, a copy of A)."""
    solve = _solve_matrices

    _check_solve_pair(A, b, "triangular_solve")
    T = _triangle(A, upper, unitriangular)
    if transpose:
        T = views.transpose(T, -2, -1)
    return _write_outs(triangular_solve_result, (solve(T, b), A.clone()), out)


@_autocast_composite("fp32")
def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False, *, out=None) -> Tensor:
    """Solves A X = B given A's Cholesky factor (A = L L^H, or U^H U when ``upper``)."""
    _check_solve_pair(L, B, "cholesky_solve")
    # Only L's triangle is read, but PyTorch's derivatives treat A as L L^H (U^H U) of the FULL
    # input: its gradient -(A^-1 G X^H + X G^H A^-H) L and its tangent solve(dB - (dL L^H +
    # L dL^H) X) multiply by every entry of L. So A's value is made from the triangle and its
    # derivative from the full product, whose value cancels exactly (the same matmul twice).
    T = _triangle(L, upper, False).detach()
    Ld = L.detach()

    def gram(F):
        Fh = views.transpose(F, -2, -1).conj()
        return Fh @ F if upper else F @ Fh

    A = elementwise.add(gram(T), elementwise.sub(gram(L), gram(Ld)))
    X = _solve_matrices(A, B)
    return write_out(X, out)


@_autocast_composite("fp32")
def cholesky_inverse(L: Tensor, upper: bool = False, *, out=None) -> Tensor:
    """Inverse of A from its Cholesky factor (A = L L^H, or U^H U when ``upper``)."""
    _check_matrix(L, "cholesky_inverse")
    eye = views.expand(factories.eye(L._shape[-1], dtype=L.dtype, device=L._device), L._shape)
    return write_out(cholesky_solve(eye, L, upper), out)


# -- matrix exponential --------------------------------------------------------------------------

# Pade [13/13] coefficients and the 1-norm bound below which it is accurate in double precision
# (Higham, "The scaling and squaring method for the matrix exponential revisited", 2005).
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0, 129060195264000.0,
           10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0,
           1.0)
_THETA13 = 5.371920351148152


def matrix_exp(A: Tensor) -> Tensor:
    """exp(A) of square matrices by scaling, Pade [13/13] approximation and squaring."""
    from ....linalg import solve

    _check_matrix(A, "linalg.matrix_exp")
    n = A._shape[-1]
    if n == 0:
        return A.clone()
    if n == 1:
        return elementwise.exp(A)
    # Per matrix: s = max(0, ceil(log2(|A|_1 / theta))) halvings, undone by s squarings below.
    norm1 = reductions.amax(reductions.sum(elementwise.abs(A.detach()), -2), -1, keepdim=True)
    s = elementwise.clamp(elementwise.ceil(elementwise.log2(elementwise.div(norm1, _THETA13))), min=0)
    s = elementwise.where(elementwise.isfinite(s), s, 0.0)
    X = elementwise.div(A, views.unsqueeze(elementwise.pow(2.0, s), -1))
    b = _PADE13
    eye = factories.eye(n, dtype=A.dtype, device=A._device)
    X2 = X @ X
    X4 = X2 @ X2
    X6 = X4 @ X2
    U = X @ (X6 @ (b[13] * X6 + b[11] * X4 + b[9] * X2) + b[7] * X6 + b[5] * X4 + b[3] * X2 + b[1] * eye)
    V = X6 @ (b[12] * X6 + b[10] * X4 + b[8] * X2) + b[6] * X6 + b[4] * X4 + b[2] * X2 + b[0] * eye
    R = solve(V - U, V + U)
    steps = int(reductions.amax(s)) if numel(s._shape) else 0
    for i in range(steps):
        R = elementwise.where(views.unsqueeze(elementwise.gt(s, i), -1), R @ R, R)
    return R


# -- bilinear ------------------------------------------------------------------------------------

def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y[..., o] = input1[..., i] weight[o, i, j] input2[..., j] + bias[o]."""
    for name, t in (("input1", input1), ("input2", input2), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise TypeError(f"bilinear(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if input1.ndim != input2.ndim:
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.ndim} and {input2.ndim}")
    if input1._shape[:-1] != input2._shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got {list(input1._shape[:-1])} and "
                           f"{list(input2._shape[:-1])}")
    if weight.ndim != 3 or weight._shape[1] != input1._shape[-1] or weight._shape[2] != input2._shape[-1]:
        raise RuntimeError(f"bilinear(): weight of shape {list(weight._shape)} does not match input1 of size "
                           f"{input1._shape[-1]} and input2 of size {input2._shape[-1]}")
    if bias is not None and (bias.ndim != 1 or bias._shape[0] != weight._shape[0]):
        size = bias._shape[0] if bias.ndim else 0
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got {size} but expected "
                           f"{weight._shape[0]}")

    y = einsum("...i,oij,...j->...o", input1, weight, input2)
    return y if bias is None else elementwise.add(y, bias)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
bilinear                    function
cholesky_inverse            function method
cholesky_solve              function method
linalg_lu                   linalg=lu
linalg_lu_factor            linalg=lu_factor
linalg_lu_factor_ex         linalg=lu_factor_ex
linalg_lu_solve             linalg=lu_solve
linalg_solve_triangular     linalg=solve_triangular
lu                          function method
lu_solve                    function method
lu_unpack                   function
matrix_exp                  function method linalg=matrix_exp
triangular_solve            function method
""")
