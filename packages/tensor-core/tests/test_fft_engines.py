"""ember.fft without FFTW: pocketfft (SciPy's, or NumPy's) runs every transform (a fresh install
has no system library); FFTW, when a build links it, is an optional accelerator with equal results."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember

TRANSFORMS = [
    ("fft", {"n": 7}), ("ifft", {"norm": "ortho"}), ("rfft", {"n": 10}), ("irfft", {"n": 9}), ("hfft", {}),
    ("ihfft", {"norm": "forward"}), ("fft2", {}), ("ifftn", {"dim": (0, 2)}), ("rfftn", {"s": (3, 4)}),
    ("irfftn", {"norm": "ortho"}), ("hfftn", {"dim": (1, 2)}), ("ihfft2", {}),
]


def _input(name: str, dtype: str):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 5, 6))
    if name in ("fft", "ifft", "fft2", "ifftn", "irfft", "irfftn", "hfft", "hfftn"):
        x = x + 1j * rng.standard_normal((4, 5, 6))
        x = x.astype(np.complex64 if dtype == "float32" else np.complex128)
    else:
        x = x.astype(dtype)
    # A transposed, offset view: the engine reads strided memory.
    base = np.concatenate([np.zeros((1, 5, 6), x.dtype), x])
    return ember.tensor(base)[1:].transpose(0, 2).transpose(0, 2), torch.tensor(x)


@pytest.mark.parametrize("engine", ["build without FFTW", "numpy", "scipy"])
@pytest.mark.parametrize("name,kwargs", TRANSFORMS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_numpy_engine_matches_torch(monkeypatch, engine, name, kwargs, dtype):
    if engine == "build without FFTW":
        monkeypatch.setattr(ember._C, "fft_available", False)  # what a build without FFTW reports
    else:
        pytest.importorskip(engine)
        monkeypatch.setenv("EMBER_FFT_ENGINE", engine)
    e_in, t_in = _input(name, dtype)
    got = getattr(ember.fft, name)(e_in, **kwargs)
    want = getattr(torch.fft, name)(t_in, **kwargs)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(got.numpy(), want.resolve_conj().numpy(), rtol=tol, atol=tol)


@pytest.mark.skipif(not ember._C.fft_available, reason="this build has no FFTW")
def test_fftw_and_numpy_engines_agree(monkeypatch):
    x = ember.randn(3, 64, dtype=ember.float64)
    fftw = ember.fft.rfft(x)
    for engine in ("numpy", "scipy"):
        monkeypatch.setenv("EMBER_FFT_ENGINE", engine)
        np.testing.assert_allclose(ember.fft.rfft(x).numpy(), fftw.numpy(), rtol=1e-12, atol=1e-12)


def test_empty_and_gradient_through_numpy_engine(monkeypatch):
    monkeypatch.setattr(ember._C, "fft_available", False)
    assert tuple(ember.fft.fft(ember.ones(0, 4, dtype=ember.complex64)).shape) == (0, 4)
    assert tuple(ember.fft.fftfreq(4).shape) == (4,)
    assert ember.fft.fftshift(ember.arange(4)).tolist() == [2, 3, 0, 1]
