"""ember.signal.windows against torch.signal.windows: values, dtypes, the periodic (sym=False)
forms, the edge lengths 0 and 1, and the argument errors."""

import numpy as np
import pytest
import torch
import torch.signal.windows as tw

import ember
import ember.signal.windows as ew

CASES = [("bartlett", {}), ("blackman", {}), ("cosine", {}), ("exponential", {}), ("exponential", {"tau": 2.5}),
         ("gaussian", {}), ("gaussian", {"std": 3.0}), ("general_cosine", {"a": [0.5, 0.3, 0.2]}),
         ("general_hamming", {}), ("general_hamming", {"alpha": 0.6}), ("hamming", {}), ("hann", {}),
         ("kaiser", {}), ("kaiser", {"beta": 4.0}), ("nuttall", {})]


@pytest.mark.parametrize("name,kw", CASES)
@pytest.mark.parametrize("M", [0, 1, 2, 7, 16])
@pytest.mark.parametrize("sym", [True, False])
def test_windows_match_torch(name, kw, M, sym):
    for dtype in ("float32", "float64"):
        got = getattr(ew, name)(M, sym=sym, dtype=getattr(ember, dtype), **kw)
        want = getattr(tw, name)(M, sym=sym, dtype=getattr(torch, dtype), **kw)
        assert str(got.dtype).split(".")[-1] == dtype and tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6 if dtype == "float32" else 1e-12,
                                   atol=1e-7 if dtype == "float32" else 1e-14)
    assert getattr(ew, name)(M, **kw).dtype is ember.get_default_dtype()
    assert getattr(ew, name)(M, requires_grad=True, **kw).requires_grad


def test_window_errors_match_torch():
    for mod in (ew, tw):
        lib = ember if mod is ew else torch
        with pytest.raises(ValueError, match="non-negative window length"):
            mod.hann(-1)
        with pytest.raises(ValueError, match="float32 or float64"):
            mod.hann(4, dtype=lib.int32)
        with pytest.raises(ValueError, match="Center must be None"):
            mod.exponential(4, center=1.0)
        with pytest.raises(ValueError, match="Tau must be positive"):
            mod.exponential(4, tau=0.0)
        with pytest.raises(ValueError, match="Standard deviation"):
            mod.gaussian(4, std=-1.0)
        with pytest.raises(ValueError, match="beta must be non-negative"):
            mod.kaiser(4, beta=-1.0)
        with pytest.raises(TypeError):
            mod.general_cosine(4, a=None)
        with pytest.raises(ValueError, match="cannot be empty"):
            mod.general_cosine(4, a=[])
    np.testing.assert_allclose(ew.exponential(6, center=1.0, sym=False).numpy(),
                               tw.exponential(6, center=1.0, sym=False).numpy(), rtol=1e-6, atol=1e-6)


def test_functional_module_reexports():
    import torch.functional as tf

    for name in ember.functional.__all__:
        assert hasattr(tf, name) and getattr(ember.functional, name) is getattr(ember, name)
