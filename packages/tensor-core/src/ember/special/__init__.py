"""``ember.special``: PyTorch's ``torch.special`` names for the special functions of the core."""

from ember._src.ops import pointwise as _pw
from ember._src.ops import special_fns as _sf

from ._extra import (
    chebyshev_polynomial_t,
    chebyshev_polynomial_u,
    chebyshev_polynomial_v,
    chebyshev_polynomial_w,
    entr,
    hermite_polynomial_h,
    hermite_polynomial_he,
    laguerre_polynomial_l,
    legendre_polynomial_p,
    log_softmax,
    logit,
    logsumexp,
    ndtr,
    ndtri,
    round,
    shifted_chebyshev_polynomial_t,
    shifted_chebyshev_polynomial_u,
    shifted_chebyshev_polynomial_v,
    shifted_chebyshev_polynomial_w,
    softmax,
    xlog1py,
    xlogy,
)

polygamma = _pw.polygamma
digamma = psi = _pw.digamma
gammaln = _pw.lgamma
multigammaln = _pw.mvlgamma
erf = _pw.erf
erfc = _pw.erfc
erfinv = _pw.erfinv
expm1 = _pw.expm1
exp2 = _pw.exp2
log1p = _pw.log1p
expit = _pw.sigmoid
i0 = _sf.i0
i1 = _sf.special_i1
gammainc = _sf.igamma
gammaincc = _sf.igammac
sinc = _sf.sinc

__all__ = [
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
    "digamma", "entr", "erf", "erfc", "erfinv", "exp2", "expit", "expm1", "gammainc", "gammaincc", "gammaln",
    "hermite_polynomial_h", "hermite_polynomial_he", "i0", "i1", "laguerre_polynomial_l", "legendre_polynomial_p",
    "log1p", "log_softmax", "logit", "logsumexp", "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round",
    "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "sinc", "softmax", "xlog1py", "xlogy",
]
