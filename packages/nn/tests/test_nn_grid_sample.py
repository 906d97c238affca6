"""affine_grid and grid_sample (2-d and 3-d, every mode) against torch, forward and gradients."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from layer_helpers import assert_close, input_pair

import ember
import ember.nn.functional as F

_NP = {"float32": np.float32, "float64": np.float64}


def _grid_pair(shape, dtype, seed=3, spread=1.3):
    # Past [-1, 1] on purpose: exercises every padding mode, including several reflections.
    data = np.random.default_rng(seed).uniform(-spread, spread, shape).astype(_NP[dtype])
    return ember.tensor(data.copy(), requires_grad=True), torch.tensor(data.copy(), requires_grad=True)


def _check(input_shape, grid_shape, dtype, mode, padding_mode, align_corners, spread=1.3):
    xe, xt = input_pair(input_shape, dtype)
    ge, gt = _grid_pair(grid_shape, dtype, spread=spread)
    ye = F.grid_sample(xe, ge, mode, padding_mode, align_corners)
    yt = TF.grid_sample(xt, gt, mode, padding_mode, align_corners)
    assert_close(ye, yt, dtype)
    g = np.random.default_rng(7).standard_normal(tuple(yt.shape)).astype(_NP[dtype])
    ye.backward(ember.tensor(g))
    yt.backward(torch.tensor(g))
    assert_close(xe.grad, xt.grad, dtype)
    # A grid gradient sums over many taps: float32 gets a looser bound.
    tol = {"rtol": 1e-3, "atol": 1e-4} if dtype == "float32" else {"rtol": 1e-8, "atol": 1e-9}
    assert_close(ge.grad, gt.grad, dtype, **tol)  # nearest: zeros in both


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_2d(dtype, mode, padding_mode, align_corners):
    _check((2, 3, 5, 7), (2, 4, 3, 2), dtype, mode, padding_mode, align_corners)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_3d(dtype, mode, padding_mode, align_corners):
    _check((2, 2, 3, 5, 4), (2, 3, 2, 4, 3), dtype, mode, padding_mode, align_corners)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_unit_sizes_and_far_grids(mode, padding_mode):
    # A size-1 axis makes reflection degenerate; far grid points reflect many times.
    _check((1, 2, 1, 6), (1, 3, 5, 2), "float64", mode, padding_mode, True, spread=4.0)
    _check((1, 2, 4, 1), (1, 3, 5, 2), "float64", mode, padding_mode, False, spread=4.0)


def test_grid_sample_strided_inputs():
    xe, xt = input_pair((2, 3, 7, 5), "float64")
    ge, gt = _grid_pair((2, 4, 6, 2), "float64")
    ye = F.grid_sample(xe.transpose(2, 3), ge[:, ::2], align_corners=False)
    yt = TF.grid_sample(xt.transpose(2, 3), gt[:, ::2], align_corners=False)
    assert_close(ye, yt)


def test_grid_sample_default_align_corners_warns():
    xe, _ = input_pair((1, 1, 3, 3), "float32")
    ge, _ = _grid_pair((1, 2, 2, 2), "float32")
    with pytest.warns(UserWarning, match="align_corners=False"):
        F.grid_sample(xe, ge)


def _errors(fe, ft, exc):
    with pytest.raises(exc) as te:
        ft()
    with pytest.raises(exc) as ee:
        fe()
    return str(ee.value), str(te.value)


GRID_ERRORS = [
    ((1, 1, 3, 3), (1, 2, 2, 2), {"mode": "linear"}, ValueError),
    ((1, 1, 3, 3), (1, 2, 2, 2), {"padding_mode": "wrap"}, ValueError),
    ((1, 1, 3, 3), (1, 2, 2, 3), {}, RuntimeError),  # grid's last dim
    ((1, 1, 3, 3), (2, 2, 2, 2), {}, RuntimeError),  # batch
    ((1, 1, 3, 3), (1, 2, 2, 2, 3), {}, RuntimeError),  # rank
    ((1, 3, 3), (1, 2, 2), {}, RuntimeError),
    ((1, 1, 0, 3), (1, 2, 2, 2), {}, RuntimeError),  # empty spatial dim
    ((1, 1, 2, 3, 3), (1, 2, 2, 2, 3), {"mode": "bicubic"}, RuntimeError),
]


@pytest.mark.parametrize("case", GRID_ERRORS, ids=str)
def test_grid_sample_errors(case):
    xs, gs, kwargs, exc = case
    e, t = _errors(lambda: F.grid_sample(ember.zeros(xs), ember.zeros(gs), align_corners=True, **kwargs),
                   lambda: TF.grid_sample(torch.zeros(xs), torch.zeros(gs), align_corners=True, **kwargs), exc)
    assert e == t.replace("torch.", "ember.")


def test_grid_sample_dtype_mismatch():
    with pytest.raises(RuntimeError, match="same dtype"):
        F.grid_sample(ember.zeros(1, 1, 3, 3), ember.zeros(1, 2, 2, 2, dtype=ember.float64), align_corners=True)
    with pytest.raises(TypeError):
        F.grid_sample([1.0], ember.zeros(1, 2, 2, 2), align_corners=True)
    with pytest.raises(NotImplementedError, match="'Long'"):
        F.grid_sample(ember.zeros(1, 1, 3, 3, dtype=ember.int64), ember.zeros(1, 2, 2, 2, dtype=ember.int64),
                      align_corners=True)
    with pytest.raises(IndexError):
        F.grid_sample(ember.zeros(()), ember.zeros(()), align_corners=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("size", [[2, 3, 5, 4], [2, 1, 1, 6], [2, 3, 4, 1, 5], [2, 1, 3, 2, 2]])
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_and_its_gradient(dtype, size, align_corners):
    k = len(size) - 2
    te, tt = input_pair((2, k, k + 1), dtype, low=-2.0, high=2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unit-size grids warn with align_corners, in both
        ye, yt = F.affine_grid(te, size, align_corners), TF.affine_grid(tt, size, align_corners)
    assert_close(ye, yt, dtype)
    g = np.random.default_rng(5).standard_normal(tuple(yt.shape)).astype(_NP[dtype])
    ye.backward(ember.tensor(g))
    yt.backward(torch.tensor(g))
    assert_close(te.grad, tt.grad, dtype)


def test_affine_grid_feeds_grid_sample_end_to_end():
    te, tt = input_pair((2, 2, 3), "float64", low=-1.0, high=1.0)
    xe, xt = input_pair((2, 3, 6, 5), "float64")
    ye = F.grid_sample(xe, F.affine_grid(te, [2, 3, 4, 7], False), align_corners=False, padding_mode="border")
    yt = TF.grid_sample(xt, TF.affine_grid(tt, [2, 3, 4, 7], False), align_corners=False, padding_mode="border")
    assert_close(ye, yt)
    (ye * ye).sum().backward()
    (yt * yt).sum().backward()
    assert_close(te.grad, tt.grad)
    assert_close(xe.grad, xt.grad)


AFFINE_ERRORS = [
    ((2, 2, 3), [2, 3, 4], NotImplementedError),
    ((2, 3, 4), [2, 3, 4, 4], ValueError),
    ((2, 2, 3), [2, 3, 4, 4, 4], ValueError),
    ((2, 2, 3), [2, 3, 0, 4], ValueError),
]


@pytest.mark.parametrize("case", AFFINE_ERRORS, ids=str)
def test_affine_grid_errors(case):
    shape, size, exc = case
    e, t = _errors(lambda: F.affine_grid(ember.zeros(shape), size, False),
                   lambda: TF.affine_grid(torch.zeros(shape), size, False), exc)
    assert e == t.replace("torch.", "ember.")
    with pytest.raises(ValueError, match="floating point"):
        F.affine_grid(ember.zeros(2, 2, 3, dtype=ember.int64), [2, 3, 4, 4], False)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_huge_and_non_finite_grids(mode, padding_mode):
    # Far-away (finite) points match PyTorch (reflection: not so far that fmod loses every digit);
    # NaN/inf points must not crash (PyTorch's values there come from undefined float->int casts,
    # so only the shape is compared).
    xe, xt = input_pair((1, 2, 3, 4), "float64")
    v = 37.3 if padding_mode == "reflection" else 1e30
    far = np.array([[[[v, -v], [-v, 0.5], [0.25, v]]]])
    assert_close(F.grid_sample(xe, ember.tensor(far), mode, padding_mode, False),
                 TF.grid_sample(xt, torch.tensor(far), mode, padding_mode, False))
    bad = ember.tensor([[[[float("nan"), 0.2], [0.3, float("inf")], [-float("inf"), 0.1]]]], dtype=ember.float64)
    assert tuple(F.grid_sample(xe, bad, mode, padding_mode, True).shape) == (1, 2, 1, 3)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_grid_sample_reduced_precision(dtype):
    torch.manual_seed(0)
    xt = torch.randn(2, 3, 5, 6).to(getattr(torch, dtype))
    gt = (torch.rand(2, 4, 3, 2) * 2.4 - 1.2).to(getattr(torch, dtype))
    xe = ember.tensor(xt.float().numpy()).to(getattr(ember, dtype))
    ge = ember.tensor(gt.float().numpy()).to(getattr(ember, dtype))
    ye = F.grid_sample(xe, ge, "nearest", align_corners=False)
    yt = TF.grid_sample(xt, gt, "nearest", align_corners=False)
    assert ye.dtype.name == dtype
    if dtype == "float16":  # PyTorch unnormalizes bfloat16 coordinates in bfloat16: .5 ties may round apart
        assert_close(ye.float(), yt.float(), rtol=0, atol=0)
    # PyTorch interpolates in the reduced type itself; ember in float32, rounding once: a few ulps apart.
    tol = 2.0 ** (-6 if dtype == "float16" else -3)
    assert_close(F.grid_sample(xe, ge, "bilinear", "border", align_corners=True).float(),
                 TF.grid_sample(xt, gt, "bilinear", "border", align_corners=True).float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("call", [
    # a theta batch that does not match size[0]: PyTorch's text is its bmm's
    lambda lib: lib.nn.functional.affine_grid(lib.zeros(2, 2, 3), (3, 1, 4, 4), align_corners=False),
    lambda lib: lib.nn.functional.affine_grid(lib.zeros(2, 3, 4), (1, 1, 2, 2, 2), align_corners=False),
    # the size is printed as given (a tuple here; ember printed a list)
    lambda lib: lib.nn.functional.affine_grid(lib.zeros(1, 3, 3), (1, 1, 4, 4), align_corners=False),
], ids=["2d batch", "3d batch", "theta shape"])
def test_affine_grid_refusals_as_pytorch(call):
    raised = []
    for lib in (torch, ember):
        with pytest.raises(Exception) as info:
            call(lib)
        raised.append((info.type.__name__, str(info.value).replace("ember.", "torch.")))
    assert raised[1] == raised[0]
