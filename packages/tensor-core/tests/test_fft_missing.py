"""ember.fft in a build without FFTW3: every transform raises a RuntimeError naming the
library; the frequency and shift helpers, which need no FFT, still work."""

from __future__ import annotations

import pytest

import ember


def test_missing_fftw_raises(monkeypatch):
    monkeypatch.setattr(ember._C, "fft_available", False)  # what a build without FFTW3 reports
    calls = [lambda: ember.fft.fft(ember.ones(4)), lambda: ember.fft.irfftn(ember.ones(2, 3)),
             lambda: ember.fft.rfft2(ember.ones(2, 3)), lambda: ember.fft.ihfft(ember.ones(5))]
    for call in calls:
        with pytest.raises(RuntimeError, match="FFTW3"):
            call()
    assert tuple(ember.fft.fftfreq(4).shape) == (4,)
    assert ember.fft.fftshift(ember.arange(4)).tolist() == [2, 3, 0, 1]


def test_availability_flag_matches_the_build():
    assert isinstance(ember._C.fft_available, bool)
    assert "libfftw3-dev" in ember._C.fft_missing_message
