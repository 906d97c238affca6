"""Derivatives of linalg.eig (complex results of a real matrix, PyTorch's convention) and the
LAPACK ops PyTorch does not differentiate (ldl_factor_ex, ldl_solve, geqrf: their backward
raises as PyTorch's does). ormqr is differentiable through its composite path."""

from __future__ import annotations

import ember

from ._common import not_implemented, register_if_defined


def _complex_solve(M, B):
    # M^-1 B for complex M through the real 2n x 2n system [[Re, -Im], [Im, Re]] (ember's LAPACK
    # family is real-only).
    mr, mi = M.real, M.imag
    big = ember.cat([ember.cat([mr, -mi], -1), ember.cat([mi, mr], -1)], -2)
    rhs = ember.cat([B.real, B.imag], -2)
    x = ember.linalg.solve(big, rhs)
    n = M.shape[-1]
    return ember.complex(x[..., :n, :].contiguous(), x[..., n:, :].contiguous())


def _eig(grads, inputs, outputs):
    # gA = V^-H (diag(gL) + (V^H gV - V^H V diag(Re(diag(V^H gV)))) / conj(E)) V^H,
    # E_ij = L_j - L_i off the diagonal; the eigenvectors are normalized to norm 1 (LAPACK).
    gL, gV = grads[0], grads[1]
    L, V = outputs[0], outputs[1]
    Vh = V.mH
    if gV is not None:
        VhgV = Vh @ gV
        re_diag = VhgV.diagonal(0, -2, -1).real
        ret = VhgV - Vh @ (V * re_diag.unsqueeze(-2).to(V.dtype))
        Lc = ember.conj_physical(L)
        E = Lc.unsqueeze(-2) - Lc.unsqueeze(-1)
        n = L.shape[-1]
        eye = ember.eye(n, dtype=ember.bool)
        E = ember.where(eye, ember.ones_like(E), E)
        ret = ember.where(eye, ember.zeros_like(ret), ret / E)
        if gL is not None:
            ret = ret + ember.diag_embed(gL)
    else:
        ret = ember.diag_embed(gL)
    return (_complex_solve(Vh, ret @ Vh),)


register_if_defined("linalg_eig", _eig, save_output=True)
register_if_defined("linalg_ldl_factor_ex", not_implemented("linalg_ldl_factor_ex"))
register_if_defined("linalg_ldl_solve", not_implemented("linalg_ldl_solve"))
register_if_defined("geqrf", not_implemented("geqrf", NotImplementedError))
