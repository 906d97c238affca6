"""Regression tests for the nn mismatches and missing names issue 17 lists, against PyTorch 2.13."""

from __future__ import annotations

import importlib
import io
import warnings

import numpy as np
import pytest
import torch

import ember


def _copy_params(e_mod, t_mod):
    with torch.no_grad():
        for (_, tp), (_, ep) in zip(t_mod.named_parameters(), e_mod.named_parameters()):
            ep.data = ember.tensor(tp.detach().numpy().copy())


@pytest.mark.parametrize("make,shape", [
    (lambda nn: nn.BatchNorm1d(3), (4, 3)),
    (lambda nn: nn.BatchNorm2d(2), (2, 2, 3, 3)),
    (lambda nn: nn.LayerNorm(3), (4, 3)),
    (lambda nn: nn.GroupNorm(2, 4), (2, 4, 3)),
    (lambda nn: nn.RMSNorm(3), (4, 3)),
    (lambda nn: nn.MaxPool2d(2), (1, 2, 4, 4)),
    (lambda nn: nn.MaxPool1d(2), (1, 2, 6)),
    (lambda nn: nn.AdaptiveMaxPool2d(2), (1, 2, 5, 5)),
])
def test_inplace_relu_after_norms_and_max_pooling(make, shape):
    # The ResNet pattern: the norm's formula must not save (and version-check) its own output.
    x = np.random.default_rng(0).standard_normal(shape)
    grads = []
    torch_module = make(torch.nn)
    for lib, t in ((torch, torch.tensor(x)), (ember, ember.tensor(x))):
        m = torch_module if lib is torch else make(ember.nn)
        if lib is ember:
            _copy_params(m, torch_module)
        block = lib.nn.Sequential(m.double(), lib.nn.ReLU(inplace=True))
        t = t.requires_grad_()
        out = block(t)
        weights = lib.tensor(np.linspace(-1, 2, out.numel()).reshape(tuple(out.shape)))
        (out * weights).sum().backward()
        grads.append(t.grad.detach().numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-8, atol=1e-10)


def test_grid_sample_nan_and_inf_coordinates_give_nan():
    n, inf = float("nan"), float("inf")
    pts = [[a, b] for a in (n, inf, -inf, 1e30, 5.0, 0.3) for b in (0.2, n, inf)]
    grid = np.array(pts, dtype=np.float32).reshape(1, 1, -1, 2)
    x = np.arange(1, 13, dtype=np.float32).reshape(1, 1, 3, 4)
    for align in (False, True):
        want = torch.nn.functional.grid_sample(torch.tensor(x), torch.tensor(grid), align_corners=align)
        got = ember.nn.functional.grid_sample(ember.tensor(x), ember.tensor(grid), align_corners=align)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_nn_parallel_and_module_paths():
    parallel = importlib.import_module("ember.nn.parallel")
    model = ember.nn.Linear(2, 3)
    wrapped = parallel.DataParallel(model)
    assert wrapped.module is model and ember.nn.DataParallel is parallel.DataParallel
    x = ember.ones(4, 2)
    assert (wrapped(x) == model(x)).all()
    assert list(wrapped.state_dict()) == ["module.weight", "module.bias"]
    assert (parallel.data_parallel(model, x) == model(x)).all()
    with pytest.raises(RuntimeError):
        parallel.DataParallel(model, device_ids=[0])
    from ember.nn.modules.activation import MultiheadAttention
    from ember.nn.modules.batchnorm import LazyBatchNorm1d
    from ember.nn.modules.pooling import AdaptiveAvgPool3d, MaxPool3d

    assert MultiheadAttention is ember.nn.MultiheadAttention and MaxPool3d is ember.nn.MaxPool3d
    assert LazyBatchNorm1d is ember.nn.LazyBatchNorm1d and AdaptiveAvgPool3d is ember.nn.AdaptiveAvgPool3d


def test_save_whole_module_and_numpy_arrays():
    model = ember.nn.Sequential(ember.nn.Linear(2, 3), ember.nn.ReLU())
    buf = io.BytesIO()
    ember.save({"model": model, "array": np.arange(3.0)}, buf)
    buf.seek(0)
    with pytest.raises(ember.serialization.UnpicklingError, match="Sequential"):
        ember.load(buf)  # weights_only=True: a module names code
    buf.seek(0)
    back = ember.load(buf, weights_only=False)
    x = ember.randn(5, 2)
    assert (back["model"](x) == model(x)).all()
    assert back["array"].tolist() == [0.0, 1.0, 2.0]
    buf.seek(0)
    unsafe = ember.serialization.get_unsafe_globals_in_checkpoint(buf)
    assert "ember.nn.modules.container.Sequential" in unsafe
    buf.seek(0)
    with ember.serialization.safe_globals([ember.nn.Sequential, ember.nn.Linear, ember.nn.ReLU]):
        allowed = [g for g in ember.serialization.get_unsafe_globals_in_checkpoint(buf) if "ember.nn" in g]
    assert allowed == []


def test_torch_saved_module_loads_as_the_ember_module():
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.save(torch.nn.Linear(2, 2), buf)
    buf.seek(0)
    m = ember.load(buf, weights_only=False)
    assert type(m) is ember.nn.Linear and tuple(m.weight.shape) == (2, 2)
