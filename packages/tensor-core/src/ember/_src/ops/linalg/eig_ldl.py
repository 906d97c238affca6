"""General eigendecomposition, symmetric-indefinite LDL^T and raw Householder QR, through LAPACK
(csrc/cpu/lapack_extra.cpp): ``linalg.eig``/``eigvals`` (geev; complex results for real
inputs, as PyTorch), ``linalg.ldl_factor(_ex)``/``ldl_solve`` (sytrf/sytrs), ``geqrf`` and
``ormqr``. Real float32/float64 inputs only, as the rest of ember's LAPACK family
(docs/deviations.md).
"""

from __future__ import annotations

from ... import dtypes
from ..._native import _C
from ...device import META
from ...optable import declare
from ...shapes import broadcast_shapes, numel
from ...tensor import Tensor
from .._common import empty, return_type, type_name, write_out
from ..creation.factories import scalar_tensor
from ..shape import views
from .lapack import _batch3, _check_matrix, _declare, _raise

_eig_result = return_type("linalg_eig", ["eigenvalues", "eigenvectors"])
_ldl_result = return_type("linalg_ldl_factor", ["LD", "pivots"])
_ldl_ex_result = return_type("linalg_ldl_factor_ex", ["LD", "pivots", "info"])
_geqrf_result = return_type("geqrf", ["a", "tau"])


def _out(result, out, cls):
    if out is None:
        return cls(*result)
    if len(out) != len(result):
        raise RuntimeError(f"expected {len(result)} output tensors, got {len(out)}")
    return cls(*(write_out(r, o) for r, o in zip(result, out)))


# -- eig ---------------------------------------------------------------------------------------

def _eig_meta(A, compute_v=True):
    if isinstance(A, Tensor) and not (A.dtype.is_floating_point or A.dtype.is_complex):
        raise RuntimeError(f"Unknown Complex ScalarType for {type_name(A.dtype)}")  # PyTorch's message
    _check_matrix(A, "linalg.eig", half_kernel="linalg_eig_out_cpu")
    c = A.dtype.to_complex()
    return empty(A._shape[:-1], c, META), empty(A._shape if compute_v else (0,), c, META)


eig_op = _declare("linalg_eig(Tensor A, bool compute_v=True) -> (Tensor eigenvalues, Tensor eigenvectors)", _eig_meta)


@eig_op.kernel("cpu")
def _eig_cpu(A, compute_v=True):
    _eig_meta(A, compute_v)
    n = A._shape[-1]
    nb = numel(A._shape[:-2])
    c = A.dtype.to_complex()
    w = empty((nb, n, 1), c, A._device)
    v = empty((nb, n, n) if compute_v else (nb, n, 0), c, A._device)
    infos = _C.geev_(w, v, _batch3(A))
    _raise(infos, "linalg.eig", A.ndim > 2,
           lambda info: f"The algorithm failed to converge because the input matrix is ill-conditioned or has too "
                        f"many repeated eigenvalues (error code: {info}).")
    vecs = views.reshape(v, A._shape) if compute_v else empty((0,), c, A._device)
    return views.reshape(w, A._shape[:-1]), vecs


def eig(A: Tensor, *, out=None):
    return _out(eig_op(A), out, _eig_result)


def eigvals(A: Tensor, *, out=None) -> Tensor:
    # The eigenvalues' gradient needs the eigenvectors: computed only when a gradient can flow.
    from ... import grad_mode

    needs_v = isinstance(A, Tensor) and A.requires_grad and grad_mode.is_grad_enabled()
    return write_out(eig_op(A, needs_v)[0], out)


# -- ldl ---------------------------------------------------------------------------------------

def _ldl_meta(A, *, hermitian=False, check_errors=False):
    _check_matrix(A, "torch.linalg.ldl_factor_ex")
    return (empty(A._shape, A.dtype, META), empty(A._shape[:-1], dtypes.int32, META),
            empty(A._shape[:-2], dtypes.int32, META))


ldl_factor_ex_op = _declare("linalg_ldl_factor_ex(Tensor self, *, bool hermitian=False, bool check_errors=False) -> "
                            "(Tensor LD, Tensor pivots, Tensor info)", _ldl_meta)


@ldl_factor_ex_op.kernel("cpu")
def _ldl_cpu(A, *, hermitian=False, check_errors=False):
    _ldl_meta(A, hermitian=hermitian)
    n = A._shape[-1]
    nb = numel(A._shape[:-2])
    ld = empty((nb, n, n), A.dtype, A._device)
    piv = empty((nb, n, 1), dtypes.int32, A._device)
    infos = _C.sytrf_(ld, piv, _batch3(A))
    if check_errors:
        _raise(infos, "torch.linalg.ldl_factor_ex", A.ndim > 2,
               lambda info: f"The factorization could not be completed because the input is not invertible "
                            f"(the {info}-th diagonal element of D is zero).")
    # PyTorch returns the lower triangle only (sytrf leaves the strict upper part as it was).
    LD = views.reshape(ld, A._shape).tril()
    info = scalar_tensor(0, dtypes.int32) if not infos else _info(infos, A._shape[:-2])
    return LD, views.reshape(piv, A._shape[:-1]), info


def _info(infos, batch) -> Tensor:
    from ..creation.factories import tensor

    return views.reshape(tensor(list(infos), dtype=dtypes.int32), batch)


def ldl_factor_ex(A: Tensor, *, hermitian: bool = False, check_errors: bool = False, out=None):
    return _out(ldl_factor_ex_op(A, hermitian=hermitian, check_errors=check_errors), out, _ldl_ex_result)


def ldl_factor(A: Tensor, *, hermitian: bool = False, out=None):
    LD, pivots, _ = ldl_factor_ex_op(A, hermitian=hermitian, check_errors=True)
    return _out((LD, pivots), out, _ldl_result)


def _ldl_solve_meta(LD, pivots, B, *, hermitian=False):
    fn = "torch.linalg.ldl_solve"
    _check_matrix(LD, fn)
    if not isinstance(pivots, Tensor) or not isinstance(B, Tensor):
        raise TypeError("ldl_solve(): arguments 'pivots' and 'B' must be Tensors")
    if pivots.dtype is not dtypes.int32:
        raise RuntimeError(f"{fn}: Expected pivots to be integers. Got {type_name(pivots.dtype)}")
    if B.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor B must have at least 2 dimensions.")
    if B.dtype is not LD.dtype:
        raise RuntimeError(f"{fn}: Expected LD and B to have the same dtype, but found LD of type "
                           f"{type_name(LD.dtype)} and B of type {type_name(B.dtype)} instead")
    if tuple(pivots._shape) != tuple(LD._shape[:-1]):
        raise RuntimeError(f"{fn}: Expected LD.shape[:-1] and pivots.shape to be the same, but got pivots with "
                           f"shape {list(pivots._shape)} instead")
    if B._shape[-2] != LD._shape[-1]:
        raise RuntimeError(f"{fn}: Incompatible shapes of A and B for the equation AX = B "
                           f"({LD._shape[-2]}x{LD._shape[-1]} and {B._shape[-2]}x{B._shape[-1]})")
    batch = broadcast_shapes(LD._shape[:-2], B._shape[:-2])
    return empty(batch + B._shape[-2:], B.dtype, META)


ldl_solve_op = _declare("linalg_ldl_solve(Tensor LD, Tensor pivots, Tensor B, *, bool hermitian=False) -> Tensor",
                        _ldl_solve_meta)


@ldl_solve_op.kernel("cpu")
def _ldl_solve_cpu(LD, pivots, B, *, hermitian=False):
    shape = _ldl_solve_meta(LD, pivots, B)._shape
    batch, (n, k) = shape[:-2], shape[-2:]
    ld3 = views.reshape(LD.expand(batch + LD._shape[-2:]), (numel(batch), n, n))
    piv3 = views.reshape(pivots.expand(batch + pivots._shape[-1:]), (numel(batch), n, 1))
    b3 = views.reshape(B.expand(batch + B._shape[-2:]), (numel(batch), n, k))
    x = empty((numel(batch), n, k), B.dtype, B._device)
    _C.sytrs_(x, ld3, piv3, b3)
    return views.reshape(x, shape)


def ldl_solve(LD: Tensor, pivots: Tensor, B: Tensor, *, hermitian: bool = False, out=None) -> Tensor:
    return write_out(ldl_solve_op(LD, pivots, B, hermitian=hermitian), out)


# -- geqrf / ormqr -----------------------------------------------------------------------------

def _geqrf_meta(self):
    _check_matrix(self, "geqrf", square=False, half_kernel="geqrf_cpu", int_kernel="geqrf_cpu")
    k = min(self._shape[-2:])
    return empty(self._shape, self.dtype, META), empty(self._shape[:-2] + (k,), self.dtype, META)


geqrf_op = _declare("geqrf(Tensor self) -> (Tensor a, Tensor tau)", _geqrf_meta)


@geqrf_op.kernel("cpu")
def _geqrf_cpu(self):
    _geqrf_meta(self)
    m, n = self._shape[-2:]
    nb = numel(self._shape[:-2])
    a = empty((nb, m, n), self.dtype, self._device)
    tau = empty((nb, min(m, n), 1), self.dtype, self._device)
    _C.geqrf_(a, tau, _batch3(self))
    return views.reshape(a, self._shape), views.reshape(tau, self._shape[:-2] + (min(m, n),))


def geqrf(input: Tensor, *, out=None):
    return _out(geqrf_op(input), out, _geqrf_result)


def _ormqr_check(input, tau, other, left):
    fn = "torch.ormqr"
    for name, t in (("input", input), ("tau", tau), ("other", other)):
        if not isinstance(t, Tensor):
            raise TypeError(f"ormqr(): argument '{name}' must be Tensor, not {type(t).__name__}")
    _check_matrix(input, "ormqr", square=False, half_kernel="ormqr_cpu", int_kernel="ormqr_cpu")
    if other.ndim < 2:
        raise RuntimeError(f"{fn}: other must have at least 2 dimensions.")
    if tau.ndim != input.ndim - 1:
        raise RuntimeError(f"{fn}: Expected tau to have one dimension less than input, but got tau.ndim equal to "
                           f"{tau.ndim} and input.ndim is equal to {input.ndim}")
    if other.ndim != input.ndim:
        raise RuntimeError(f"{fn}: Expected other to have the same number of dimensions as input, but got "
                           f"other.ndim equal to {other.ndim} and input.ndim is equal to {input.ndim}")
    nq = other._shape[-2] if left else other._shape[-1]
    if input._shape[-2] != nq:
        side = "other.shape[-2]" if left else "other.shape[-1]"
        raise RuntimeError(f"{fn}: Expected input.shape[-2] to be equal to {side} ({nq}), but got "
                           f"{input._shape[-2]}")
    if tau._shape[-1] > input._shape[-1] or tau._shape[-1] > nq:
        raise RuntimeError(f"{fn}: tau.shape[-1] must be less than or equal to input.shape[-1] and to {nq}")
    if input.dtype is not other.dtype or tau.dtype is not other.dtype:
        raise RuntimeError(f"{fn}: Expected input, tau and other to have the same dtype, but got "
                           f"{type_name(input.dtype)}, {type_name(tau.dtype)} and {type_name(other.dtype)}")
    if tuple(input._shape[:-2]) != tuple(other._shape[:-2]) or tuple(tau._shape[:-1]) != tuple(input._shape[:-2]):
        raise RuntimeError(f"{fn}: Expected batch dimensions of input, tau and other to be equal")


def _ormqr_composite(input, tau, other, left, transpose):
    # Q (nq x nq) from the reflectors through householder_product, with zero columns and taus
    # appended (identity reflectors) so that it is square: differentiable in all three inputs.
    import ember

    nq, k = input.shape[-2], tau.shape[-1]
    a = input[..., :k]
    if k < nq:
        a = ember.cat([a, ember.zeros(a.shape[:-1] + (nq - k,), dtype=a.dtype)], -1)
        tau = ember.cat([tau, ember.zeros(tau.shape[:-1] + (nq - k,), dtype=tau.dtype)], -1)
    q = ember.linalg.householder_product(a, tau)
    if transpose:
        q = q.mT
    return q @ other if left else other @ q


def ormqr(input: Tensor, tau: Tensor, other: Tensor, left: bool = True, transpose: bool = False, *,
          out=None) -> Tensor:
    from ... import grad_mode

    _ormqr_check(input, tau, other, left)
    if grad_mode.is_grad_enabled() and (input.requires_grad or tau.requires_grad or other.requires_grad):
        return write_out(_ormqr_composite(input, tau, other, left, transpose), out)
    batch = numel(other._shape[:-2])
    result = empty((batch,) + other._shape[-2:], other.dtype, other._device)
    if other._device is META:
        return write_out(views.reshape(result, other._shape), out)
    tau3 = views.reshape(tau, (batch, tau._shape[-1], 1))
    if other._device.type != "cpu":  # the native kernel (LAPACK) reads host memory: a device's operands go through it
        host = empty(result._shape, result.dtype, tau3.cpu()._device)
        _C.ormqr_(host, _batch3(input).cpu(), tau3.cpu(), _batch3(other).cpu(), bool(left), bool(transpose))
        result = host.to(other._device)
    else:
        _C.ormqr_(result, _batch3(input), tau3, _batch3(other), bool(left), bool(transpose))
    return write_out(views.reshape(result, other._shape), out)


declare(__name__, """
linalg_eig             fn=eig linalg=eig
linalg_eigvals         fn=eigvals linalg=eigvals
linalg_ldl_factor_ex   fn=ldl_factor_ex linalg=ldl_factor_ex
linalg_ldl_factor      fn=ldl_factor linalg=ldl_factor
linalg_ldl_solve       fn=ldl_solve linalg=ldl_solve
geqrf                  function method
ormqr                  function method
""")
