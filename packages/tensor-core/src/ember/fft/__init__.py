"""``ember.fft``: discrete Fourier transforms with ``torch.fft``'s API, computed by FFTW3.

Built without FFTW3 (libfftw3-dev), every transform raises a RuntimeError naming it.
"""

from ember._src.ops.spectral.fft import (  # noqa: F401
    __all__,
    fft,
    fft2,
    fftfreq,
    fftn,
    fftshift,
    hfft,
    hfft2,
    hfftn,
    ifft,
    ifft2,
    ifftn,
    ifftshift,
    ihfft,
    ihfft2,
    ihfftn,
    irfft,
    irfft2,
    irfftn,
    rfft,
    rfft2,
    rfftfreq,
    rfftn,
)
