"""pad, interpolate, pixel_shuffle/unshuffle and one_hot against torch."""

from __future__ import annotations

import pytest

import ember
from ember._src.ops.nn import resample as nn_resample

from conftest import assert_same, from_torch, make_pair

torch = pytest.importorskip("torch")
F = torch.nn.functional

PAD_CASES = [
    ((2, 3, 5), (2, 1)),
    ((2, 3, 5, 4), (1, 2, 3, 0)),
    ((1, 2, 3, 4, 5), (1, 1, 2, 0, 1, 2)),
    ((3, 5), (-1, 2)),
]


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("case", PAD_CASES)
def test_pad(case, mode):
    shape, pads = case
    ex, tx = make_pair(shape, "float32")
    assert_same(nn_resample.pad(ex, pads, mode=mode), F.pad(tx, pads, mode=mode))


@pytest.mark.parametrize("dtype", ["int64", "bool", "float16", "bfloat16", "float64"])
def test_pad_dtypes_and_layouts(dtype):
    ex, tx = make_pair((3, 4, 5), dtype, layout="transposed")
    assert_same(nn_resample.pad(ex, (1, 2, 0, 1), value=1), F.pad(tx, (1, 2, 0, 1), value=1))
    if dtype != "bool":  # torch has no bool replication_pad kernel
        assert_same(nn_resample.pad(ex, (1, 2, 0, 1), mode="replicate"), F.pad(tx, (1, 2, 0, 1), mode="replicate"))
    assert_same(ember.constant_pad_nd(ex, (2, -1, 1, 1, 1, 0)), torch.constant_pad_nd(tx, (2, -1, 1, 1, 1, 0)))


@pytest.mark.parametrize("mode", [1, 2, 3])
def test_pad_backward(mode):
    ex, tx = make_pair((2, 3, 5, 4), "float64")
    pads = (2, 1, 1, 3)
    tx.requires_grad_(True)
    ty = F.pad(tx, pads, mode=["constant", "reflect", "replicate", "circular"][mode])
    eg, tg = make_pair(tuple(ty.shape), "float64", seed=3)
    (expected,) = torch.autograd.grad(ty, tx, tg)
    assert_same(nn_resample._pad_enum_backward_op(eg, ex, pads, mode), expected)


PAD_ERRORS = [
    lambda m, x: m.pad(x, (3, 3), mode="reflect"),
    lambda m, x: m.pad(x, (1,)),
    lambda m, x: m.pad(x, (1,) * 8),
    lambda m, x: m.pad(x, (5, 5), mode="circular"),
    lambda m, x: m.pad(x, (-5, -5)),
    lambda m, x: m.pad(x, (1, 1), mode="reflect", value=1.0),
]


@pytest.mark.parametrize("fn", PAD_ERRORS)
def test_pad_errors(fn):
    tx = torch.randn(2, 3, 3)
    with pytest.raises(RuntimeError) as expected:
        fn(F, tx)
    with pytest.raises(RuntimeError) as got:
        fn(nn_resample, from_torch(tx))
    assert str(got.value) == str(expected.value)


def test_pad_not_implemented():
    for fn in (lambda m, x: m.pad(x, (1,) * 6, mode="reflect"), lambda m, x: m.pad(x, (1, 1), mode="foo")):
        with pytest.raises(NotImplementedError):
            fn(F, torch.randn(2, 3, 3))
        with pytest.raises(NotImplementedError):
            fn(nn_resample, ember.zeros(2, 3, 3))


INTERP_CASES = [
    ((2, 3, 5), dict(size=9, mode="nearest")),
    ((2, 3, 5), dict(scale_factor=1.7, mode="linear", align_corners=False)),
    ((2, 3, 5), dict(size=3, mode="linear", align_corners=True)),
    ((2, 2, 4, 5), dict(size=(7, 3), mode="nearest")),
    ((2, 2, 4, 5), dict(scale_factor=2, mode="nearest")),
    ((2, 2, 4, 5), dict(scale_factor=(1.5, 0.6), mode="nearest-exact")),
    ((2, 2, 4, 5), dict(size=(8, 11), mode="bilinear")),
    ((2, 2, 4, 5), dict(scale_factor=2.5, mode="bilinear", align_corners=True)),
    ((2, 2, 4, 5), dict(size=(9, 3), mode="bicubic")),
    ((2, 2, 4, 5), dict(scale_factor=1.3, mode="bicubic", align_corners=True)),
    ((2, 2, 4, 5), dict(scale_factor=1.3, mode="bilinear", recompute_scale_factor=True)),
    ((2, 2, 6, 5), dict(size=(3, 2), mode="area")),
    ((1, 2, 3, 4, 5), dict(size=(5, 2, 7), mode="trilinear")),
    ((1, 2, 3, 4, 5), dict(scale_factor=2, mode="nearest")),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("case", INTERP_CASES)
def test_interpolate(case, dtype):
    shape, kw = case
    ex, tx = make_pair(shape, dtype)
    tol = dict(rtol=2e-2, atol=5e-2) if dtype == "bfloat16" else dict(rtol=1e-5, atol=1e-5)
    assert_same(nn_resample.interpolate(ex, **kw), F.interpolate(tx, **kw), **tol)


@pytest.mark.parametrize("case", [c for c in INTERP_CASES if c[1]["mode"] not in ("area",)])
def test_interpolate_backward(case):
    shape, kw = case
    ex, tx = make_pair(shape, "float64")
    tx.requires_grad_(True)
    ty = F.interpolate(tx, **kw)
    eg, tg = make_pair(tuple(ty.shape), "float64", seed=3)
    (expected,) = torch.autograd.grad(ty, tx, tg)
    k = len(shape) - 2
    sf = kw.get("scale_factor")
    scales = [None] * k if sf is None or kw.get("recompute_scale_factor") else (
        list(sf) if isinstance(sf, tuple) else [sf] * k)
    got = nn_resample._upsample_backward_op(eg, shape, kw["mode"], bool(kw.get("align_corners")), scales)
    assert_same(got, expected)


def test_interpolate_noncontiguous():
    ex, tx = make_pair((2, 3, 4, 6), "float32", layout="transposed")
    assert_same(nn_resample.interpolate(ex, size=(5, 7), mode="bilinear"),
                F.interpolate(tx, size=(5, 7), mode="bilinear"))


INTERP_ERRORS = [
    (ValueError, lambda m, x: m.interpolate(x, size=8, scale_factor=2)),
    (ValueError, lambda m, x: m.interpolate(x)),
    (ValueError, lambda m, x: m.interpolate(x, size=8, align_corners=True)),
    (ValueError, lambda m, x: m.interpolate(x, size=(8, 8, 8))),
    (NotImplementedError, lambda m, x: m.interpolate(x, size=8, mode="linear")),
    (NotImplementedError, lambda m, x: m.interpolate(x, size=8, mode="foo")),
    (RuntimeError, lambda m, x: m.interpolate(x, size=0, mode="bilinear")),
]


@pytest.mark.parametrize("case", INTERP_ERRORS)
def test_interpolate_errors(case):
    exc, fn = case
    tx = torch.randn(2, 3, 4, 4)
    with pytest.raises(exc):
        fn(F, tx)
    with pytest.raises(exc):
        fn(nn_resample, from_torch(tx))


@pytest.mark.parametrize("shape,r", [((2, 8, 3, 2), 2), ((1, 2, 18, 2, 3), 3), ((9, 2, 2), 3)])
def test_pixel_shuffle(shape, r):
    ex, tx = make_pair(shape, "float32")
    shuffled = ember.pixel_shuffle(ex, r)
    assert_same(shuffled, F.pixel_shuffle(tx, r))
    assert_same(ember.pixel_unshuffle(shuffled, r), F.pixel_unshuffle(F.pixel_shuffle(tx, r), r))


@pytest.mark.parametrize("fn", [
    lambda m, x: m.pixel_shuffle(x, 3), lambda m, x: m.pixel_shuffle(x[0, 0], 2),
    lambda m, x: m.pixel_shuffle(x, 0), lambda m, x: m.pixel_unshuffle(x[..., :3], 2),
])
def test_pixel_shuffle_errors(fn):
    tx = torch.randn(2, 8, 4, 4)
    with pytest.raises(RuntimeError) as expected:
        fn(F, tx)
    with pytest.raises(RuntimeError) as got:
        fn(ember, from_torch(tx))
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("num_classes", [-1, 7])
def test_one_hot(num_classes):
    t = torch.tensor([[0, 3, 2], [5, 1, 1]])
    assert_same(nn_resample.one_hot(from_torch(t), num_classes), F.one_hot(t, num_classes))
    assert_same(nn_resample.one_hot(from_torch(t).t(), num_classes), F.one_hot(t.t(), num_classes))
    assert_same(nn_resample.one_hot(ember.zeros(0, dtype=ember.int64), 3),
                F.one_hot(torch.zeros(0, dtype=torch.int64), 3))


@pytest.mark.parametrize("args", [([1, 5], 3), ([1, -1], 3), ([], -1)])
def test_one_hot_errors(args):
    values, n = args
    with pytest.raises(RuntimeError) as expected:
        F.one_hot(torch.tensor(values, dtype=torch.int64), n)
    with pytest.raises(RuntimeError) as got:
        nn_resample.one_hot(ember.tensor(values, dtype=ember.int64), n)
    assert str(got.value) == str(expected.value)
    with pytest.raises(RuntimeError, match="LongTensor"):
        nn_resample.one_hot(ember.tensor([1.0]), 3)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("kw", [
    {"size": (3, 4)}, {"size": (11, 5)}, {"scale_factor": 0.5}, {"scale_factor": (0.3, 1.7)}, {"size": (20, 30)},
    {"size": (3, 4), "align_corners": True}, {"scale_factor": 0.37, "recompute_scale_factor": True},
])
def test_interpolate_antialias_matches_torch(mode, kw):
    import numpy as np

    a = np.random.default_rng(3).standard_normal((2, 3, 17, 13)).astype(np.float32)
    x = ember.tensor(a, requires_grad=True)
    xt = torch.tensor(a, requires_grad=True)
    y = ember.nn.functional.interpolate(x, mode=mode, antialias=True, **kw)
    yt = torch.nn.functional.interpolate(xt, mode=mode, antialias=True, **kw)
    assert tuple(y.shape) == tuple(yt.shape) and type(y.grad_fn).__name__ == type(yt.grad_fn).__name__
    assert np.abs(y.detach().numpy() - yt.detach().numpy()).max() < 1e-4
    (y * y).sum().backward()
    (yt * yt).sum().backward()
    assert np.abs(x.grad.numpy() - xt.grad.numpy()).max() < 1e-3


def test_interpolate_antialias_refuses_other_modes():
    for lib in (ember, torch):
        with pytest.raises(ValueError, match="Anti-alias option is restricted"):
            lib.nn.functional.interpolate(lib.ones(1, 1, 4), size=2, mode="linear", antialias=True)
