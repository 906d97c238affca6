"""Randomized low-rank factorizations (``svd_lowrank``, ``pca_lowrank``: Halko, Martinsson & Tropp,
2009) and the older norm entry points PyTorch keeps at top level (``frobenius_norm``,
``nuclear_norm``, ``norm_except_dim``), all composites of ember.linalg."""

from __future__ import annotations

from ...optable import declare
from ...tensor import Tensor


def _linalg():
    import ember.linalg as linalg  # the generated namespace, complete once ember is imported

    return linalg


def _check(x, fn: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument 'A' (position 1) must be Tensor, not {type(x).__name__}")


def _approximate_basis(A: Tensor, q: int, niter: int, M) -> Tensor:
    """An orthonormal (m, q) basis approximating A's range: a Gaussian sketch refined by ``niter``
    power iterations, re-orthonormalized by QR after every product (Algorithm 4.4)."""
    import ember

    qr = _linalg().qr
    dtype = A.dtype if A.dtype.is_floating_point or A.dtype.is_complex else ember.get_default_dtype()
    R = ember.randn(A.shape[-1], q, dtype=dtype, device=A.device)

    def prod(X, Y, adjoint=False):
        out = (X.mH if adjoint else X).matmul(Y)
        return out if M is None else out - (M.mH if adjoint else M).matmul(Y)

    Q = qr(prod(A, R)).Q
    for _ in range(niter):
        Q = qr(prod(A, Q, adjoint=True)).Q
        Q = qr(prod(A, Q)).Q
    return Q


def _svd_lowrank(A: Tensor, q: int, niter: int, M):
    m, n = A.shape[-2:]
    if M is not None:
        M = M.broadcast_to(A.shape)
    wide = m < n
    if wide:  # factor the adjoint: the sketch then has the smaller dimension
        A = A.mH
        M = None if M is None else M.mH
    Q = _approximate_basis(A, q, niter, M)
    B = Q.mH.matmul(A)
    if M is not None:
        B = B - Q.mH.matmul(M)
    U, S, Vh = _linalg().svd(B, full_matrices=False)
    U, V = Q.matmul(U), Vh.mH
    return (V, S, U) if wide else (U, S, V)


def svd_lowrank(A: Tensor, q: int | None = 6, niter: int | None = 2, M: Tensor | None = None):
    """(U, S, V) with A ~ U diag(S) V^H of rank ``q`` (of A - M when M is given)."""
    _check(A, "svd_lowrank")
    return _svd_lowrank(A, 6 if q is None else q, 2 if niter is None else niter, M)


def pca_lowrank(A: Tensor, q: int | None = None, center: bool = True, niter: int = 2):
    """The principal directions of A's rows: ``svd_lowrank`` of A with its column means removed."""
    _check(A, "pca_lowrank")
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not (0 <= q <= min(m, n)):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}")
    if not niter >= 0:
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if not center:
        return _svd_lowrank(A, q, niter, None)
    return _svd_lowrank(A - A.mean(dim=-2, keepdim=True), q, niter, None)


def frobenius_norm(input: Tensor, dim, keepdim: bool = False, *, out=None) -> Tensor:
    _check(input, "frobenius_norm")
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) > 2:
        raise RuntimeError(f"Expected at most 2 dimensions, but got {len(dims)} dimensions instead.")
    result = _linalg().vector_norm(input, 2, dims, keepdim)
    return result if out is None else out.resize_(result.shape).copy_(result)


def nuclear_norm(input: Tensor, dim=None, keepdim: bool = False, *, out=None) -> Tensor:
    """The sum of singular values over the last two dims, or over ``dim`` (two dims)."""
    _check(input, "nuclear_norm")
    if isinstance(dim, bool):  # the (input, keepdim) overload
        dim, keepdim = None, dim
    if dim is None:
        if input.ndim != 2:
            raise RuntimeError(f"Expected a tensor with 2 dimensions, but got a tensor with {input.ndim} "
                               f"dimension{'' if input.ndim == 1 else 's'} instead.")
        dim = (0, 1)
    result = _linalg().matrix_norm(input, "nuc", tuple(dim), keepdim)
    return result if out is None else out.resize_(result.shape).copy_(result)


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:
    """The ``pow``-norm over every dim but ``dim`` (kept with size, the others as 1): the weight norm
    of ``nn.utils.weight_norm``; ``dim=-1`` is the norm of everything."""
    _check(v, "norm_except_dim")
    if dim == -1:
        return _linalg().vector_norm(v, pow)
    if dim == 0:
        return _linalg().vector_norm(v.reshape(v.shape[0], -1), pow, 1).reshape((v.shape[0],) + (1,) * (v.ndim - 1))
    if dim == v.ndim - 1:
        return _linalg().vector_norm(v.reshape(-1, v.shape[-1]), pow, 0).reshape((1,) * (v.ndim - 1) +
                                                                                 (v.shape[-1],))
    return norm_except_dim(v.transpose(0, dim), pow, 0).transpose(0, dim)




def householder_product(input: Tensor, tau: Tensor, *, out=None) -> Tensor:
    """The first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^H, where v_i is column i of
    ``input`` below the diagonal with a 1 on it (LAPACK's orgqr/ungqr; ``geqrf``'s output format)."""
    import ember

    fn = "torch.linalg.householder_product"
    _check(input, "householder_product")
    if not isinstance(tau, Tensor):
        raise TypeError(f"householder_product(): argument 'tau' (position 2) must be Tensor, not "
                        f"{type(tau).__name__}")
    if input.ndim < 2:
        raise RuntimeError(f"{fn}: input must have at least 2 dimensions.")
    m, n = input.shape[-2:]
    if m < n:
        raise RuntimeError(f"{fn}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if tau.ndim != input.ndim - 1:
        raise RuntimeError(f"{fn}: Expected tau to have one dimension less than input, but got tau.ndim equal to "
                           f"{tau.ndim} and input.ndim is equal to {input.ndim}")
    k = tau.shape[-1]
    if n < k:
        raise RuntimeError(f"{fn}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if tuple(tau.shape[:-1]) != tuple(input.shape[:-2]):
        raise RuntimeError(f"{fn}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                           f"{list(tau.shape[:-1])}")
    if tau.dtype is not input.dtype:
        from .._common import type_name

        raise RuntimeError(f"{fn}: tau dtype {type_name(tau.dtype)} does not match input dtype "
                           f"{type_name(input.dtype)}")
    batch = tuple(input.shape[:-2])
    q = ember.eye(m, n, dtype=input.dtype, device=input.device).expand(batch + (m, n))
    rows = ember.arange(m, device=input.device)
    for i in reversed(range(k)):  # Q = H_i Q, applied from the last reflector to the first
        v = ember.where(rows > i, input[..., :, i], (rows == i).to(input.dtype))
        vh_q = (v.conj().unsqueeze(-2) @ q)  # (..., 1, n)
        q = q - tau[..., i, None, None] * v.unsqueeze(-1) * vh_q
    return q if out is None else out.resize_(q.shape).copy_(q)


declare(__name__, """
svd_lowrank          function
pca_lowrank          function
frobenius_norm       function
nuclear_norm         function
norm_except_dim      function
linalg_householder_product   fn=householder_product linalg=householder_product
orgqr                function method fn=householder_product
""")
