"""Window functions, stft and istft vs torch.

stft/istft gradients are not compared: ember's autograd engine does not record complex outputs yet
(see packages/autograd/tests/test_autograd_complex_fft.py); both are composed of differentiable ops."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from mathfns_helpers import pair

import ember

from conftest import assert_same, torch

WINDOWS = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"]


@pytest.mark.parametrize("name", WINDOWS)
@pytest.mark.parametrize("length", [0, 1, 2, 5, 8])
@pytest.mark.parametrize("periodic", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_windows(name, length, periodic, dtype):
    e = getattr(ember, name)(length, periodic, dtype=getattr(ember, dtype))
    t = getattr(torch, name)(length, periodic, dtype=getattr(torch, dtype))
    # float16/bfloat16: torch rounds each step of the formula in a way ember's scalar ops do not
    # reproduce exactly (one rounding step apart).
    tol = {"rtol": 1e-6, "atol": 1e-6} if dtype in ("float32", "float64") else {"rtol": 2e-2, "atol": 1e-2}
    assert_same(e, t, **tol)


def test_window_parameters_and_default_dtype():
    assert_same(ember.hamming_window(7, True, 0.6, 0.3), torch.hamming_window(7, True, 0.6, 0.3))
    assert_same(ember.kaiser_window(9, False, 3.5), torch.kaiser_window(9, False, 3.5))
    w = ember.hann_window(4, requires_grad=True)
    assert w.requires_grad and w.dtype == ember.float32


@pytest.mark.parametrize("name", WINDOWS)
def test_window_errors(name):
    with pytest.raises(RuntimeError, match="non-negative"):
        getattr(ember, name)(-1)
    with pytest.raises(RuntimeError, match="floating point"):
        getattr(ember, name)(3, dtype=ember.int64)


def _stft_both(e, t, n_fft, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        we = kwargs.pop("window", None)
        wt = None if we is None else torch.from_numpy(we.numpy().copy())
        return (ember.stft(e, n_fft, window=we, **kwargs), torch.stft(t, n_fft, window=wt, **kwargs))


@pytest.mark.parametrize("shape", [(20,), (2, 17), (1, 8)])
@pytest.mark.parametrize("center, pad_mode", [(True, "reflect"), (True, "constant"), (True, "replicate"),
                                              (True, "circular"), (False, "reflect")])
@pytest.mark.parametrize("normalized", [False, True])
def test_stft_real(shape, center, pad_mode, normalized):
    e, t = pair(shape, "float64", "sliced" if len(shape) == 2 else "contiguous")
    for kwargs in ({}, {"hop_length": 3, "win_length": 6, "window": ember.hann_window(6, dtype=ember.float64)},
                   {"onesided": False}, {"hop_length": 1, "window": ember.hamming_window(8, dtype=ember.float64)}):
        got = _stft_both(e, t, 8, center=center, pad_mode=pad_mode, normalized=normalized, return_complex=True,
                         **kwargs)
        assert_same(*got)


def test_stft_complex_input_and_real_output():
    x = np.random.default_rng(0).normal(size=(2, 16)) + 1j * np.random.default_rng(1).normal(size=(2, 16))
    e, t = ember.tensor(x.astype(np.complex64)), torch.tensor(x.astype(np.complex64))
    assert_same(*_stft_both(e, t, 8, hop_length=4))
    er, tr = pair((16,), "float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(er.stft(8, return_complex=False), tr.stft(8, return_complex=False))
    with pytest.warns(UserWarning, match="window was not provided"):
        ember.stft(er, 8, return_complex=True)


def test_stft_errors():
    x = ember.ones(20)
    w = ember.ones(8)
    with pytest.raises(RuntimeError, match="return_complex"):
        ember.stft(x, 8, window=w)
    with pytest.raises(RuntimeError, match="n_fft"):
        ember.stft(x, 0, window=w, return_complex=True)
    with pytest.raises(RuntimeError, match="n_fft"):
        ember.stft(ember.ones(5), 8, window=w, center=False, return_complex=True)
    with pytest.raises(RuntimeError, match="hop_length"):
        ember.stft(x, 8, hop_length=0, window=w, return_complex=True)
    with pytest.raises(RuntimeError, match="win_length"):
        ember.stft(x, 8, win_length=9, return_complex=True)
    with pytest.raises(RuntimeError, match="window"):
        ember.stft(x, 8, window=ember.ones(7), return_complex=True)
    with pytest.raises(RuntimeError, match="1D or 2D"):
        ember.stft(ember.ones(2, 3, 20), 8, window=w, return_complex=True)
    with pytest.raises(RuntimeError, match="floating point or complex"):
        ember.stft(ember.ones(20, dtype=ember.int64), 8, window=w, return_complex=True)
    with pytest.raises(RuntimeError, match="onesided"):
        ember.stft(ember.ones(20, dtype=ember.complex64), 8, window=w, onesided=True, return_complex=True)


@pytest.mark.parametrize("shape", [(24,), (2, 19)])
@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("win_length, hop", [(8, 2), (6, 3), (8, 4)])
def test_istft_roundtrip(shape, center, win_length, hop):
    e, t = pair(shape, "float64")
    we, wt = ember.hann_window(win_length, dtype=ember.float64), torch.hann_window(win_length, dtype=torch.float64)
    kw = {"hop_length": hop, "win_length": win_length, "center": center}
    se = ember.stft(e, 8, window=we, return_complex=True, **kw)
    st = torch.stft(t, 8, window=wt, return_complex=True, **kw)
    if not center:  # the hann window's zero first sample leaves an uncovered edge
        with pytest.raises(RuntimeError):
            torch.istft(st, 8, window=wt, **kw)
        with pytest.raises(RuntimeError, match="overlap add"):
            ember.istft(se, 8, window=we, **kw)
        return
    assert_same(ember.istft(se, 8, window=we, **kw), torch.istft(st, 8, window=wt, **kw))
    length = shape[-1] - 3
    assert_same(se.istft(8, window=we, length=length, **kw), st.istft(8, window=wt, length=length, **kw))


def test_istft_options_and_errors():
    e, t = pair((2, 20), "float64")
    we, wt = ember.ones(8, dtype=ember.float64), torch.ones(8, dtype=torch.float64)
    se = ember.stft(e, 8, window=we, onesided=False, return_complex=True, normalized=True)
    st = torch.stft(t, 8, window=wt, onesided=False, return_complex=True, normalized=True)
    assert_same(ember.istft(se, 8, window=we, normalized=True), torch.istft(st, 8, window=wt, normalized=True))
    assert_same(ember.istft(se, 8, window=we, normalized=True, return_complex=True),
                torch.istft(st, 8, window=wt, normalized=True, return_complex=True))
    with pytest.warns(UserWarning, match="padded with zeros"):
        padded = ember.istft(se, 8, window=we, normalized=True, center=False, length=30)
    assert_same(padded, torch.istft(st, 8, window=wt, normalized=True, center=False, length=30))
    with pytest.raises(RuntimeError, match="complex-valued"):
        ember.istft(ember.ones(5, 3), 8)
    with pytest.raises(RuntimeError, match="frequency dimension"):
        ember.istft(ember.ones(4, 3, dtype=ember.complex64), 8, window=ember.ones(8))
    with pytest.raises(RuntimeError, match="overlap add"):
        ember.istft(ember.ones(5, 3, dtype=ember.complex64), 8, window=ember.zeros(8))
    with pytest.raises(RuntimeError, match="window"):
        ember.istft(ember.ones(5, 3, dtype=ember.complex64), 8, window=ember.ones(7))
