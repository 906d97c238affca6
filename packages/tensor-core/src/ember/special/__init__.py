"""``ember.special``: PyTorch's ``torch.special`` names for the special functions of the core
(each one a name its op's record gives, ``special=``: _src/optable.py)."""

from ember._src.bindings import namespace as _namespace

globals().update(_namespace("special"))

# Functions of torch.special that are no op of the core (written in Python over ops).
from ._extra import (  # noqa: E402
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

__all__ = sorted({*_namespace("special"), *(name for name in dir() if not name.startswith("_"))})
