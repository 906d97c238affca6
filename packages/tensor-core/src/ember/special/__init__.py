"""``ember.special``: PyTorch's ``torch.special`` names for the special functions of the core."""

from ember._src.ops import pointwise as _pw
from ember._src.ops import special_fns as _sf

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

__all__ = ["digamma", "erf", "erfc", "erfinv", "exp2", "expit", "expm1", "gammainc", "gammaincc", "gammaln", "i0",
           "i1", "log1p", "multigammaln", "polygamma", "psi", "sinc"]
