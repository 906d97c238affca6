"""Forward-mode (JVP) rules of the decompositions whose tangent from the backward formula was not
PyTorch's: the backward formulas symmetrize the input's cotangent (the kernels read one triangle),
while PyTorch's forward rules take the input's tangent dA as it is, so for a tangent that is not
symmetric the two differ. The rules here follow PyTorch's (``cholesky_jvp``, ``linalg_eig_jvp``
with ``is_hermitian``, the singular values of ``linalg_svd_jvp``).
"""

from __future__ import annotations

import ember

from ._common import arg
from ._registry import FORMULAS

OPS = ember.ops


def _cholesky_ex_jvp(tangents, inputs, outputs):
    # A = L L^H: L^-1 dA L^-H = phi^-1(L^-1 dL), so dL = L phi(L^-1 dA L^-H) with phi the lower
    # triangle with a halved diagonal.
    da = tangents[0]
    if da is None:
        return None, None
    upper = inputs.kwargs.get("upper", arg(inputs, 1, "upper", False))
    low = outputs[0].mT if upper else outputs[0]
    x = ember.linalg.solve_triangular(low, da, upper=False)
    x = ember.linalg.solve_triangular(low.mT, x, upper=True, left=False)
    # (the diagonal halved by a product, not diag_embed, which writes in place: refused under vmap)
    phi = ember.tril(x) - 0.5 * x * ember.eye(x.shape[-1], dtype=x.dtype)
    dl = low @ phi
    return (dl.mT if upper else dl), None


def _eigh_vectors(inputs, outputs):
    values, v = outputs[0], outputs[1]
    if v.numel() == 0 and values.numel():  # eigvalsh did not compute the eigenvectors
        return OPS["linalg_eigh"](inputs.args[0], arg(inputs, 1, "UPLO", "L"))[1], False
    return v, True


def _eigh_jvp(tangents, inputs, outputs):
    # dP = V^H dA V; dL = diag(dP); dV = V (dP / E) with E[i, j] = L[j] - L[i] off the diagonal, 0 on it.
    da = tangents[0]
    if da is None:
        return None, None
    values = outputs[0]
    v, has_vectors = _eigh_vectors(inputs, outputs)
    dp = v.mT @ da @ v
    d_values = ember.diagonal(dp, 0, -2, -1)
    if not has_vectors:
        return d_values, None
    n = values.shape[-1]
    eye = ember.eye(n, dtype=values.dtype)
    gaps = values.unsqueeze(-2) - values.unsqueeze(-1) + eye
    return d_values, v @ ((dp / gaps) * (1 - eye))


def _svd_jvp(tangents, inputs, outputs):
    da = tangents[0]
    if da is None:
        return None, None, None
    u, _, vh = outputs
    if u.ndim >= 2:  # the singular vectors' tangents: from the backward formula, as before
        from ..forward_ad import _jvp_by_double_backward

        return _jvp_by_double_backward(FORMULAS["linalg_svd"], tangents, inputs.args, inputs.kwargs, outputs)
    # svdvals: dS = diag(U^H dA V) (PyTorch computes the vectors to differentiate the values).
    u, _, vh = OPS["linalg_svd"](inputs.args[0], False)
    d_s = ember.diagonal(u.mT @ da @ vh.mT, 0, -2, -1)
    return None, d_s, None


def register() -> None:
    for name, rule in (("linalg_cholesky_ex", _cholesky_ex_jvp), ("linalg_eigh", _eigh_jvp),
                       ("linalg_svd", _svd_jvp)):
        if name in FORMULAS:
            FORMULAS[name].jvp = rule
