"""Derivatives of the LAPACK-backed ops (det, slogdet, inv, solve, cholesky, eigh).

Written with the ops themselves (inverse via ``linalg_inv_ex``, solves via
``linalg_solve_ex``) so higher-order gradients work. The decompositions (qr, svd, eigh, lstsq)
follow PyTorch's formulas, including where it refuses (qr's complete mode on tall matrices).
Registered when the op exists.
"""

from __future__ import annotations

import ember

from ._common import arg, register_if_defined

OPS = ember.ops


def _inv(a):
    return OPS["linalg_inv_ex"](a)[0]


def _solve(a, b, left=True):
    return OPS["linalg_solve_ex"](a, b, left=left)[0]


def _mat(t):
    return t.unsqueeze(-1).unsqueeze(-1)


def _det(grads, inputs, outputs):
    a = inputs.args[0]
    return (_mat(grads[0] * outputs[0]) * _inv(a).mT,)


def _slogdet(grads, inputs, outputs):
    g = grads[1] if len(grads) > 1 else None
    if g is None:
        return (None,)
    return (_mat(g) * _inv(inputs.args[0]).mT,)


def _inv_ex(grads, inputs, outputs):
    g = grads[0]
    if g is None:
        return (None,)
    inv_t = outputs[0].mT
    return (-(inv_t @ g @ inv_t),)


def _is_vector_rhs(a, b) -> bool:
    return b.ndim == 1 or (b.ndim == a.ndim - 1 and tuple(b.shape) == tuple(a.shape[:-1]))


def _solve_ex(grads, inputs, outputs):
    g = grads[0]
    if g is None:
        return None, None
    a, b = inputs.args[0], inputs.args[1]
    left = inputs.kwargs.get("left", True)
    x = outputs[0]
    if not left:
        grad_b = _solve(a.mT, g, left=False)  # g A^{-T}
        return -(x.mT @ grad_b), grad_b
    grad_b = _solve(a.mT, g)
    if _is_vector_rhs(a, b):
        return -(grad_b.unsqueeze(-1) @ x.unsqueeze(-2)), grad_b
    return -(grad_b @ x.mT), grad_b


def _cholesky_ex(grads, inputs, outputs):
    # gA = sym(L^{-T} phi(L^T gL) L^{-1}), phi: lower triangle with a halved diagonal.
    g = grads[0]
    if g is None:
        return (None,)
    upper = inputs.kwargs.get("upper", arg(inputs, 1, "upper", False))
    low = outputs[0].mT if upper else outputs[0]
    g_low = g.mT if upper else g
    m = low.mT @ g_low
    phi = ember.tril(m) - 0.5 * ember.diag_embed(ember.diagonal(m, 0, -2, -1))
    low_inv = _inv(low)
    s = low_inv.mT @ phi @ low_inv
    return (0.5 * (s + s.mT),)


def _eigh(grads, inputs, outputs):
    # gA = V (skew(V^T gV) / 2 / E + diag(gL)) V^T with E[i, j] = L[j] - L[i] (PyTorch's, unsymmetrized).
    g_values = grads[0]
    g_vectors = grads[1] if len(grads) > 1 else None
    if g_values is None and g_vectors is None:
        return (None,)
    values, v = outputs[0], outputs[1]
    if v.numel() == 0 and values.numel():  # eigvalsh did not compute the eigenvectors
        v = OPS["linalg_eigh"](inputs.args[0].detach(), arg(inputs, 1, "UPLO", "L"))[1]
    if g_vectors is None:
        return ((v * g_values.unsqueeze(-2)) @ v.mT,)
    vg = v.mT @ g_vectors
    inner = 0.5 * (vg - vg.mT) / _gaps(values)
    if g_values is not None:
        inner = inner + ember.diag_embed(g_values)
    return (v @ inner @ v.mT,)


def _gaps(values):
    """values[j] - values[i], with ones on the diagonal (where the numerator is zero)."""
    gaps = values.unsqueeze(-2) - values.unsqueeze(-1)
    n = values.shape[-1]
    return gaps + ember.eye(n, dtype=values.dtype)


def _tri_solve_right(x, r):
    """x R^{-T} for upper-triangular R."""
    return _solve(r.mT, x, left=False)


def _qr_square_or_tall(g_q, g_r, q, r):
    # gA = Q (gR + tril(skew(Q^T gQ) + skew(R gR^T)) R^{-T}) + (gQ - Q Q^T gQ) R^{-T}
    m = r @ g_r.mT if g_r is not None else None
    if g_q is not None:
        qg = q.mT @ g_q
        m = qg - qg.mT if m is None else m - m.mT + qg - qg.mT
    else:
        m = m - m.mT
    low = ember.tril(m)
    grad = q @ _tri_solve_right(low, r)
    if g_r is not None:
        grad = grad + q @ g_r
    if g_q is not None:
        grad = grad + _tri_solve_right(g_q - q @ qg, r)
    return grad


def _qr(grads, inputs, outputs):
    g_q, g_r = grads[0], grads[1] if len(grads) > 1 else None
    if g_q is None and g_r is None:
        return (None,)
    mode = arg(inputs, 1, "mode", "reduced")
    q, r = outputs[0], outputs[1]
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please "
                           "use linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.")
    m, n = q.shape[-2], r.shape[-1]
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
    if m >= n:
        return (_qr_square_or_tall(g_q, g_r, q, r),)
    # Wide A = [X | Y], R = [U | V]: X = Q U is a square QR, Y = Q V.
    a = inputs.args[0]
    y = a[..., m:]
    g_v = g_r[..., m:] if g_r is not None else None
    g_u = g_r[..., :m] if g_r is not None else None
    g_q_x = g_q
    if g_v is not None:
        g_q_x = y @ g_v.mT if g_q_x is None else g_q_x + y @ g_v.mT
    grad_x = _qr_square_or_tall(g_q_x, g_u, q, r[..., :m])
    grad_y = q @ g_v if g_v is not None else ember.zeros(tuple(y.shape), dtype=q.dtype)
    return (ember.cat([grad_x, grad_y], -1),)


def _svd(grads, inputs, outputs):
    # PyTorch's svd_backward; with full_matrices only the first k columns of U / rows of Vh count.
    g_u, g_s, g_vh = (tuple(grads) + (None, None, None))[:3]
    if g_u is None and g_s is None and g_vh is None:
        return (None,)
    u, s, vh = outputs
    k = s.shape[-1]
    full_matrices = arg(inputs, 1, "full_matrices", True)
    if u.ndim < 2:  # svdvals did not compute the singular vectors
        u, _, vh = OPS["linalg_svd"](inputs.args[0].detach(), False)
        full_matrices = False
    if full_matrices:
        u, vh = u[..., :k], vh[..., :k, :]
        g_u = g_u[..., :k] if g_u is not None else None
        g_vh = g_vh[..., :k, :] if g_vh is not None else None
    m, n = u.shape[-2], vh.shape[-1]
    if g_u is None and g_vh is None:
        return ((u @ (g_s.unsqueeze(-1) * vh)) if m >= n else ((u * g_s.unsqueeze(-2)) @ vh),)
    s2 = s * s
    e = _gaps(s2)
    if g_u is not None:
        uhgu = u.mT @ g_u
        uhgu = uhgu - uhgu.mT
    if g_vh is not None:
        vhgv = vh @ g_vh.mT
        vhgv = vhgv - vhgv.mT
    if g_u is not None and g_vh is not None:
        inner = (uhgu * s.unsqueeze(-2) + s.unsqueeze(-1) * vhgv) / e
    elif g_u is not None:
        inner = (uhgu / e) * s.unsqueeze(-2)
    else:
        inner = s.unsqueeze(-1) * (vhgv / e)
    if g_s is not None:
        inner = inner + ember.diag_embed(g_s)
    if m > k and g_u is not None:
        grad = u @ inner
        gu_sinv = g_u / s.unsqueeze(-2)
        grad = (grad + gu_sinv - u @ (u.mT @ gu_sinv)) @ vh
    elif n > k and g_vh is not None:
        grad = inner @ vh
        sinv_gvh = g_vh / s.unsqueeze(-1)
        grad = u @ (grad + sinv_gvh - (sinv_gvh @ vh.mT) @ vh)
    else:
        grad = u @ (inner @ vh) if m >= n else (u @ inner) @ vh
    return (grad,)


def _pinv_backward(g, pinv, a):
    """PyTorch's pinv_backward: the gradient of A from the gradient of pinv(A)."""
    m, n = a.shape[-2], a.shape[-1]
    pinv_h, g_h = pinv.mT, g.mT
    if m <= n:
        k = g_h @ pinv
        k_pinv_h = k @ pinv_h
        return -(pinv @ k).mT + k_pinv_h - (a @ pinv) @ k_pinv_h + (pinv_h @ pinv) @ (g_h - k @ a)
    k = pinv @ g_h
    pinv_h_k = pinv_h @ k
    return -(k @ pinv).mT + (g_h - a @ k) @ pinv @ pinv_h + pinv_h_k - pinv_h_k @ pinv @ a


def _lstsq(grads, inputs, outputs):
    # The solution is pinv(A) B; PyTorch differentiates only the solution.
    g = grads[0]
    if g is None:
        return None, None
    a, b = inputs.args[0], inputs.args[1]
    vector = b.ndim == a.ndim - 1
    g_m = g.unsqueeze(-1) if vector else g
    b_m = b.unsqueeze(-1) if vector else b
    pinv = ember.linalg.pinv(a)
    grad_b = pinv.mT @ g_m
    return _pinv_backward(g_m @ b_m.mT, pinv, a), grad_b.squeeze(-1) if vector else grad_b


register_if_defined("linalg_det", _det, save_output=True)
register_if_defined("linalg_slogdet", _slogdet)
register_if_defined("linalg_inv_ex", _inv_ex, save_output=True)
register_if_defined("linalg_solve_ex", _solve_ex, save_output=True)
register_if_defined("linalg_cholesky_ex", _cholesky_ex, save_output=True)
register_if_defined("linalg_eigh", _eigh, save_output=True)
register_if_defined("linalg_qr", _qr, save_output=True)
register_if_defined("linalg_svd", _svd, save_output=True)
register_if_defined("linalg_lstsq", _lstsq, nondiff_outputs=(2, 3))
