"""Derivatives of the LAPACK-backed ops (det, slogdet, inv, solve, cholesky, eigh).

Written with the ops themselves (inverse via ``linalg_inv_ex``, solves via
``linalg_solve_ex``) so higher-order gradients work. qr, svd, lstsq and eigh's eigenvectors
have no derivative yet: their backward raises. Registered when the op exists.
"""

from __future__ import annotations

import ember

from ._common import arg, not_implemented, register_if_defined

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
    g_values = grads[0]
    g_vectors = grads[1] if len(grads) > 1 else None
    if g_vectors is not None:
        return not_implemented("linalg_eigh (eigenvectors)")(grads, inputs, outputs)
    if g_values is None:
        return (None,)
    v = outputs[1]
    if v.numel() == 0 and g_values.numel():  # eigvalsh did not compute the eigenvectors
        v = OPS["linalg_eigh"](inputs.args[0].detach(), arg(inputs, 1, "UPLO", "L"))[1]
    return ((v * g_values.unsqueeze(-2)) @ v.mT,)


register_if_defined("linalg_det", _det, save_output=True)
register_if_defined("linalg_slogdet", _slogdet)
register_if_defined("linalg_inv_ex", _inv_ex, save_output=True)
register_if_defined("linalg_solve_ex", _solve_ex, save_output=True)
register_if_defined("linalg_cholesky_ex", _cholesky_ex, save_output=True)
register_if_defined("linalg_eigh", _eigh, save_output=True)
for _name in ("linalg_qr", "linalg_svd", "linalg_lstsq"):
    register_if_defined(_name, not_implemented(_name))
