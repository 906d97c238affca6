"""The FFT engines every install has: pocketfft (BSD-licensed) from a wheel.

ember's FFT ops write into a fresh output tensor; this module fills it from the transforms of
a zero-copy NumPy view of the input, computed by ``scipy.fft`` when SciPy is installed (the
C++ pocketfft: SIMD, and ember's thread count as its workers; several times faster) or by
``numpy.fft`` otherwise (NumPy is a dependency of ember, so this always works). NumPy 2
transforms float32/complex64 in single precision; NumPy 1 computes in double precision and the
result is rounded into the output's dtype. FFTW, when a build links it (``-DEMBER_USE_FFTW=ON``,
GPL), runs instead; ``EMBER_FFT_ENGINE=fftw|scipy|numpy`` picks an engine explicitly.
"""

from __future__ import annotations

import os

from ..._native import _C
from ...interop import to_numpy
from ...tensor import Tensor

# normalization code (0: none, 1: 1/sqrt(n), 2: 1/n) -> pocketfft's ``norm`` for each direction.
_FORWARD_NORM = {0: "backward", 1: "ortho", 2: "forward"}
_INVERSE_NORM = {0: "forward", 1: "ortho", 2: "backward"}

_SCIPY = []  # [scipy.fft or None], found on first use


def _scipy_fft():
    if not _SCIPY:
        try:
            import scipy.fft as sfft
        except ImportError:
            sfft = None
        _SCIPY.append(sfft)
    return _SCIPY[0]


def engine() -> str:
    """The engine the next transform runs on: "fftw", "scipy" or "numpy"."""
    asked = os.environ.get("EMBER_FFT_ENGINE", "").lower()
    if asked == "fftw" and _C.fft_available:
        return "fftw"
    if asked == "numpy" or (asked == "scipy" and _scipy_fft() is None):
        return "numpy"
    if asked == "scipy":
        return "scipy"
    if _C.fft_available:
        return "fftw"
    return "scipy" if _scipy_fft() is not None else "numpy"


def _run(name: str, a, **kwargs):
    if engine() == "scipy":
        return getattr(_scipy_fft(), name)(a, workers=_C.get_num_threads(), **kwargs)
    import numpy as np  # on first use: `import ember` does not import NumPy

    return getattr(np.fft, name)(a, **kwargs)


def _view(t: Tensor):
    return to_numpy(t, force=True)


def c2c(out: Tensor, x: Tensor, dims, normalization: int, forward: bool) -> None:
    axes = list(dims)
    if forward:
        result = _run("fftn", _view(x), axes=axes, norm=_FORWARD_NORM[normalization])
    else:
        result = _run("ifftn", _view(x), axes=axes, norm=_INVERSE_NORM[normalization])
    _view(out)[...] = result


def r2c(out: Tensor, x: Tensor, dims, normalization: int) -> None:
    _view(out)[...] = _run("rfftn", _view(x), axes=list(dims), norm=_FORWARD_NORM[normalization])


def c2r(out: Tensor, x: Tensor, dims, normalization: int, last_dim_size: int) -> None:
    a = _view(x)
    sizes = [a.shape[d] for d in dims[:-1]] + [last_dim_size]
    _view(out)[...] = _run("irfftn", a, s=sizes, axes=list(dims), norm=_INVERSE_NORM[normalization])
