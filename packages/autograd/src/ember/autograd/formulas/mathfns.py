"""Derivatives of the math-function ops (tensor-core ``ops/reduction/statistics.py``,
``ops/pointwise/special.py``, ``ops/pointwise/number_theory.py``, ``ops/linalg/solves.py``,
``ops/random/counting.py``, ``ops/pointwise/special_more.py``): logcumsumexp, i0/i1, i0e/i1e,
erfcx, log_ndtr, zeta (in its second argument), igamma/igammac,
frexp and the LU factorization, following PyTorch's formulas; gcd/lcm carry no gradient and the
samplers a zero one. Written with ember ops so higher-order gradients work; registered only when
the op exists in the tensor-core this runs with.
"""

from __future__ import annotations

import ember

from ._common import register_if_defined, zero_grads
from ._registry import FORMULAS, NON_DIFFERENTIABLE

OPS = ember.ops


def _reverse_logcumsumexp(x, dim):
    return OPS["logcumsumexp"](x.flip(dim), dim).flip(dim)


def _logcumsumexp(grads, inputs, outputs):
    # d out_i / d x_j = exp(x_j - out_i) for j <= i; the sum over i >= j is a reversed
    # logcumsumexp, taken separately over the positive and negative parts of the gradient.
    g, (x, dim), out = grads[0], inputs.args, outputs[0]
    if g is None:
        return None, None
    if g.ndim == 0 or g.numel() == 0:
        return g, None
    lowest = ember.scalar_tensor(ember.finfo(g.dtype).min, dtype=g.dtype)
    log_abs = g.abs().log()
    positive = ember.where(g > 0, log_abs, lowest)
    negative = ember.where(g < 0, log_abs, lowest)
    return ((_reverse_logcumsumexp(positive - out, dim) + x).exp()
            - (_reverse_logcumsumexp(negative - out, dim) + x).exp(), None)


def _i0(grads, inputs, outputs):
    return (grads[0] * OPS["special_i1"](inputs.args[0]),)


def _i1(grads, inputs, outputs):
    # i1'(x) = i0(x) - i1(x) / x, which is 0.5 at x = 0 (where the quotient would be 0 / 0).
    x, out = inputs.args[0], outputs[0]
    eps = ember.finfo(x.dtype).eps if x.dtype.is_floating_point else ember.finfo(ember.float32).eps
    not_tiny = x.abs() > eps
    safe = ember.where(not_tiny, x, eps)
    slope = OPS["i0"](safe) - out * safe.reciprocal()
    return (grads[0] * ember.where(not_tiny, slope, 0.5),)


def _i0e(grads, inputs, outputs):
    # d/dx e^-|x| I0(x) = i1e(x) - sgn(x) i0e(x)
    x = inputs.args[0]
    return (grads[0] * (OPS["special_i1e"](x) - x.sgn() * outputs[0]),)


def _i1e(grads, inputs, outputs):
    # d/dx e^-|x| I1(x) = i0e(x) - i1e(x) (sgn(x) + 1 / x), 0.5 at x = 0
    x, out = inputs.args[0], outputs[0]
    eps = ember.finfo(x.dtype).eps if x.dtype.is_floating_point else ember.finfo(ember.float32).eps
    not_tiny = x.abs() > eps
    safe = ember.where(not_tiny, x, eps)
    slope = OPS["special_i0e"](safe) - out * (safe.sgn() + safe.reciprocal())
    return (grads[0] * ember.where(not_tiny, slope, 0.5),)


def _erfcx(grads, inputs, outputs):
    # d/dx e^(x^2) erfc(x) = 2 x erfcx(x) - 2 / sqrt(pi)
    x = inputs.args[0]
    return (grads[0] * (2 * x * outputs[0] - 1.1283791670955126),)


def _log_ndtr(grads, inputs, outputs):
    # phi(x) / Phi(x), through the logs so the far left tail does not divide 0 by 0
    x = inputs.args[0]
    return (grads[0] * (-0.5 * x * x - outputs[0]).exp() * 0.3989422804014327,)


def _zeta(grads, inputs, outputs):
    x, q = inputs.args[0], inputs.args[1]
    if getattr(x, "requires_grad", False):
        raise RuntimeError("the derivative for 'zeta' is not implemented.")
    return None, grads[0] * -x * OPS["special_zeta"](x + 1, q)


def _igamma_other(a, x):
    """d P(a, x) / dx = exp(-x) x^(a - 1) / Gamma(a)."""
    return ((a - 1) * x.log() - x - a.lgamma()).exp()


def _igamma_backward(sign: int, name: str):
    def backward(grads, inputs, outputs):
        a, x = inputs.args
        if a.requires_grad:
            raise RuntimeError(f"the derivative for '{name}: input' is not implemented.")
        return None, sign * grads[0] * _igamma_other(a, x)

    return backward


def _frexp(grads, inputs, outputs):
    g = grads[0]
    return (None if g is None else g / outputs[1].to(g.dtype).exp2(),)


def _lu_factor_ex(grads, inputs, outputs):
    # PyTorch's linalg_lu_backward for A = P L U, with gL, gU the two triangles of gLU. Square:
    # gA = P L^-H [tril(L^H gL, -1) + triu(gU U^H)] U^-H; the wide (m < n) and tall (m > n)
    # cases solve against the leading square block and append the trailing part's gradient.
    g = grads[0]
    if g is None:
        return (None,)
    lu, pivots = outputs[0], outputs[1]
    m, n = lu.shape[-2], lu.shape[-1]
    k = min(m, n)
    P, L, U = ember.lu_unpack(lu, pivots)
    solve = OPS["linalg_solve_ex"]
    g_l = g[..., :, :k].tril(-1)
    g_u = g[..., :k, :].triu()
    if m == n:
        grad = (L.mH @ g_l).tril(-1) + (g_u @ U.mH).triu()
        grad = solve(L.mH, solve(U.mH, grad, left=False)[0])[0]
    elif m < n:
        grad = solve(U[..., :k].mH, (L.mH @ g_l - g_u @ U.mH).tril(-1), left=False)[0]
        grad = ember.cat([grad + g_u[..., :k], g_u[..., k:]], dim=-1)
        grad = solve(L.mH, grad)[0]
    else:
        grad = solve(L[..., :k, :].mH, (g_u @ U.mH - L.mH @ g_l).triu())[0]
        grad = ember.cat([grad + g_l[..., :k, :], g_l[..., k:, :]], dim=-2)
        grad = solve(U.mH, grad, left=False)[0]
    return (P @ grad,)


register_if_defined("logcumsumexp", _logcumsumexp, save_output=True)


def _logcumsumexp_jvp(tangents, inputs, outputs):
    # The backward above is not linear in its cotangent (log|g|), so the JVP cannot come from a
    # double backward: d out_i = sum_{j<=i} exp(x_j) t_j / sum_{j<=i} exp(x_j), shifted by the max
    # over dim for range (PyTorch's logcumsumexp_jvp).
    x, dim = inputs.args[0], inputs.args[1]
    t = tangents[0]
    if t is None:
        return None
    if x.numel() == 0:
        return ember.zeros_like(outputs[0])
    top = x.amax(dim, keepdim=True) if x.ndim else x
    top = ember.where(top.isfinite(), top, ember.zeros((), dtype=top.dtype))
    w = (x - top).exp()
    return (w * t).cumsum(dim) / w.cumsum(dim)
register_if_defined("i0", _i0)
register_if_defined("special_i1", _i1, save_output=True)
register_if_defined("special_i0e", _i0e, save_output=True)
register_if_defined("special_i1e", _i1e, save_output=True)
register_if_defined("special_erfcx", _erfcx, save_output=True)
register_if_defined("special_log_ndtr", _log_ndtr, save_output=True)
register_if_defined("special_zeta", _zeta)
register_if_defined("igamma", _igamma_backward(1, "igamma"))
register_if_defined("igammac", _igamma_backward(-1, "igammac"))
register_if_defined("frexp.Tensor", _frexp, save_output=True)
register_if_defined("linalg_lu_factor_ex", _lu_factor_ex, save_output=True)
register_if_defined("poisson", zero_grads)
def standard_gamma_grad(alpha, x):
    """d x / d alpha of a Gamma(alpha, 1) sample x (implicit reparameterization, as PyTorch's
    ``_standard_gamma_grad``): x = F^-1(u; alpha) for the CDF F, so dx/dalpha = -(dF/dalpha) / f(x; alpha);
    dF/dalpha by a central difference of the regularized incomplete gamma function in float64."""
    a64, x64 = alpha.double(), x.double()
    h = 1e-4 * a64.clamp(min=1e-2)
    dcdf = (OPS["igamma"](a64 + h, x64) - OPS["igamma"](a64 - h, x64)) / (2 * h)
    log_pdf = (a64 - 1) * x64.log() - x64 - ember.lgamma(a64)
    return (-dcdf * (-log_pdf).exp()).to(alpha.dtype)


def _standard_gamma(grads, inputs, outputs):
    return (grads[0] * standard_gamma_grad(inputs.args[0], outputs[0]),)


register_if_defined("_standard_gamma", _standard_gamma, save_output=True)
register_if_defined("binomial", zero_grads)
NON_DIFFERENTIABLE.update(name for name in ("gcd", "lcm", "gcd_", "lcm_") if name in OPS)

if "logcumsumexp" in FORMULAS:
    FORMULAS["logcumsumexp"].jvp = _logcumsumexp_jvp
