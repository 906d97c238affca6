"""Weight and spectral normalization (parametrized and legacy hook-based) against PyTorch:
outputs, gradients, power-iteration buffers, state-dict keys, removal and errors."""

from __future__ import annotations

import warnings

import pytest
import torch
from layer_helpers import assert_close, from_torch, input_pair

import ember

TU, EU = torch.nn.utils, ember.nn.utils

_LAYERS = {
    "linear": (lambda lib: lib.nn.Linear(4, 5), (3, 4)),
    "conv2d": (lambda lib: lib.nn.Conv2d(2, 3, 3), (2, 2, 5, 5)),
    "convT1d": (lambda lib: lib.nn.ConvTranspose1d(3, 2, 3), (2, 3, 6)),
}


def _pair(layer):
    """A torch and an ember layer with the same weights, and the input shape."""
    build, shape = _LAYERS[layer]
    tm, em = build(torch), build(ember)
    em.load_state_dict({k: from_torch(v) for k, v in tm.state_dict().items()})
    return tm, em, shape


def _load_from_torch(em, tm):
    em.load_state_dict({k: from_torch(v) for k, v in tm.state_dict().items()})


def _run(tm, em, shape, steps=2):
    """Several forward/backward steps: outputs, input and parameter grads (and buffers) agree."""
    for step in range(steps):
        xe, xt = input_pair(shape, seed=step)
        ye, yt = em(xe), tm(xt)
        assert_close(ye, yt)
        ye.square().sum().backward()
        yt.square().sum().backward()
        assert_close(xe.grad, xt.grad)
        tparams = dict(tm.named_parameters())
        for name, p in em.named_parameters():
            assert_close(p.grad, tparams[name].grad)
        tbufs = dict(tm.named_buffers())
        for name, b in em.named_buffers():
            assert_close(b, tbufs[name])


@pytest.mark.parametrize("dim", [0, 1, None, -1])
@pytest.mark.parametrize("layer", ["linear", "conv2d"])
def test_parametrized_weight_norm(layer, dim):
    tm, em, shape = _pair(layer)
    TU.parametrizations.weight_norm(tm, dim=dim)
    EU.parametrizations.weight_norm(em, dim=dim)
    assert list(em.state_dict()) == list(tm.state_dict())
    assert repr(em) == repr(tm)
    for key, value in tm.state_dict().items():
        assert_close(em.state_dict()[key], value)
    _run(tm, em, shape)


def test_parametrized_weight_norm_loads_legacy_checkpoint():
    tm, em, shape = _pair("linear")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        TU.weight_norm(tm)
    legacy = {k: from_torch(v) for k, v in tm.state_dict().items()}
    assert set(legacy) == {"weight_g", "weight_v", "bias"}
    EU.parametrizations.weight_norm(em)
    em.load_state_dict(legacy)
    xe, xt = input_pair(shape)
    ye, yt = em(xe), tm(xt)
    assert_close(ye, yt)
    ye.sum().backward()
    yt.sum().backward()
    assert_close(em.parametrizations.weight.original0.grad, tm.weight_g.grad)
    assert_close(em.parametrizations.weight.original1.grad, tm.weight_v.grad)


@pytest.mark.parametrize("dim", [0, 1, None])
@pytest.mark.parametrize("layer", ["linear", "conv2d"])
def test_legacy_weight_norm(layer, dim):
    tm, em, shape = _pair(layer)
    with pytest.warns(FutureWarning, match="deprecated"):
        TU.weight_norm(tm, dim=dim)
    with pytest.warns(FutureWarning, match="deprecated"):
        EU.weight_norm(em, dim=dim)
    assert list(em.state_dict()) == list(tm.state_dict()) == ["bias", "weight_g", "weight_v"]
    assert_close(em.weight_g, tm.weight_g)
    _run(tm, em, shape)
    TU.remove_weight_norm(tm)
    EU.remove_weight_norm(em)
    assert list(em.state_dict()) == list(tm.state_dict())
    assert isinstance(em.weight, ember.nn.Parameter)
    _run(tm, em, shape, steps=1)


def test_legacy_weight_norm_errors():
    em = ember.nn.Linear(3, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        EU.weight_norm(em)
        with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks"):
            EU.weight_norm(em)
    with pytest.raises(ValueError, match="weight_norm of 'bias' not found"):
        EU.remove_weight_norm(em, "bias")


@pytest.mark.parametrize("n_iter", [1, 3])
@pytest.mark.parametrize("layer", ["linear", "conv2d", "convT1d"])
def test_parametrized_spectral_norm(layer, n_iter):
    tm, em, shape = _pair(layer)
    TU.parametrizations.spectral_norm(tm, n_power_iterations=n_iter)
    EU.parametrizations.spectral_norm(em, n_power_iterations=n_iter)
    assert list(em.state_dict()) == list(tm.state_dict())
    assert em.parametrizations.weight[0].dim == tm.parametrizations.weight[0].dim
    _load_from_torch(em, tm)  # the random power-iteration start vectors
    _run(tm, em, shape, steps=2)  # training: the buffers advance identically
    tm.eval()
    em.eval()
    _run(tm, em, shape, steps=1)


def test_parametrized_spectral_norm_1d_and_remove():
    tm, em = torch.nn.Linear(3, 4), ember.nn.Linear(3, 4)
    _load_from_torch(em, tm)
    TU.parametrizations.spectral_norm(tm, "bias")
    EU.parametrizations.spectral_norm(em, "bias")
    assert list(em.state_dict()) == list(tm.state_dict())
    _run(tm, em, (2, 3), steps=1)
    TU.parametrize.remove_parametrizations(tm, "bias")
    EU.parametrize.remove_parametrizations(em, "bias")
    assert_close(em.bias, tm.bias)


def test_parametrized_spectral_norm_errors():
    with pytest.raises(IndexError, match="Dimension out of range"):
        EU.parametrizations.spectral_norm(ember.nn.Linear(3, 4), dim=2)
    with pytest.raises(ValueError, match="n_power_iterations"):
        EU.parametrizations.spectral_norm(ember.nn.Linear(3, 4), n_power_iterations=0)
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'nope'"):
        EU.parametrizations.spectral_norm(ember.nn.Linear(3, 4), "nope")


@pytest.mark.parametrize("layer", ["linear", "conv2d", "convT1d"])
def test_legacy_spectral_norm(layer):
    tm, em, shape = _pair(layer)
    TU.spectral_norm(tm)
    EU.spectral_norm(em)
    tsd, esd = tm.state_dict(), em.state_dict()
    assert list(esd) == list(tsd)
    assert esd._metadata[""]["spectral_norm"] == tsd._metadata[""]["spectral_norm"]
    _load_from_torch(em, tm)
    _run(tm, em, shape, steps=2)
    tm.eval()
    em.eval()
    _run(tm, em, shape, steps=1)
    TU.remove_spectral_norm(tm)
    EU.remove_spectral_norm(em)
    assert list(em.state_dict()) == list(tm.state_dict())
    assert not em._state_dict_hooks and not em._load_state_dict_pre_hooks
    _run(tm, em, shape, steps=1)


def test_legacy_spectral_norm_errors():
    em = EU.spectral_norm(ember.nn.Linear(3, 3))
    with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks"):
        EU.spectral_norm(em)
    with pytest.raises(ValueError, match="spectral_norm of 'bias' not found"):
        EU.remove_spectral_norm(em, "bias")
    with pytest.raises(ValueError, match="n_power_iterations"):
        EU.spectral_norm(ember.nn.Linear(3, 3), n_power_iterations=0)


def test_legacy_spectral_norm_loads_version_none_checkpoint():
    # Checkpoints from before weight_v was stored: weight, weight_orig, weight_u, no metadata.
    tm, em, shape = _pair("linear")
    TU.spectral_norm(tm)
    EU.spectral_norm(em)
    tm.eval()
    tm(torch.zeros(1, 4))  # sets tm.weight from the current buffers
    old = {k: v for k, v in tm.state_dict().items() if k != "weight_v"}
    old["weight"] = tm.weight.detach().clone()
    tm2 = TU.spectral_norm(torch.nn.Linear(4, 5))
    tm2.load_state_dict(dict(old))
    em.load_state_dict({k: from_torch(v) for k, v in old.items()})
    assert_close(em.weight_v, tm2.weight_v, rtol=1e-3, atol=1e-4)
