"""Dropout, flatten, padding, pixel shuffle, upsampling, distance and channel shuffle modules against torch.nn."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from nn_layer_helpers import assert_close, check_module, check_state, leaf_pair, to_np

import ember
import ember.nn as enn


def _pair(name, *args, **kwargs):
    return getattr(enn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)


def _check(name, args, shape, dtype="float32", layout="transposed", kwargs=None, **tol):
    e_mod, t_mod = _pair(name, *args, **(kwargs or {}))
    check_state(e_mod, t_mod)
    e, t, el, tl = leaf_pair(shape, dtype, layout=layout)
    check_module(e_mod, t_mod, [e], [t], [el], [tl], dtype, **tol)


# -- dropout ---------------------------------------------------------------------------------

DROPOUTS = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]
SHAPES = {"Dropout": (3, 4), "Dropout1d": (2, 3, 4), "Dropout2d": (2, 3, 2, 2), "Dropout3d": (2, 3, 2, 2, 2),
          "AlphaDropout": (3, 4), "FeatureAlphaDropout": (2, 3, 4)}


@pytest.mark.parametrize("name", DROPOUTS)
@pytest.mark.parametrize("p,inplace", [(0.5, False), (0.2, True), (0.0, False)])
def test_dropout_repr_and_eval_identity(name, p, inplace):
    e_mod, t_mod = _pair(name, p, inplace)
    check_state(e_mod, t_mod)
    assert (e_mod.p, e_mod.inplace) == (p, inplace)
    e_mod.eval(), t_mod.eval()
    e, t, el, tl = leaf_pair(SHAPES[name], "float64", layout="transposed")
    check_module(e_mod, t_mod, [e], [t], [el], [tl], "float64")


@pytest.mark.parametrize("name", DROPOUTS)
@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_dropout_bad_p(name, p):
    with pytest.raises(ValueError):
        getattr(torch.nn, name)(p)
    with pytest.raises(ValueError):
        getattr(enn, name)(p)


def _train_case(name, p, shape, inplace=False, seed=0):
    m = getattr(enn, name)(p, inplace=inplace)
    assert m.training
    ember.manual_seed(seed)
    base = ember.tensor(np.random.default_rng(seed).uniform(0.5, 2.0, shape), requires_grad=True)
    x = base * 1
    out = m(x)
    if inplace:
        assert out is x
    out.sum().backward()
    return to_np(base), to_np(out), to_np(base.grad)


@pytest.mark.parametrize("inplace", [False, True])
def test_dropout_training(inplace):
    p = 0.3
    x, y, g = _train_case("Dropout", p, (40, 50), inplace)
    kept = y != 0
    np.testing.assert_allclose(y[kept], x[kept] / (1 - p), rtol=1e-12)
    frac = 1 - kept.mean()
    assert abs(frac - p) < 5 * math.sqrt(p * (1 - p) / y.size)
    np.testing.assert_allclose(g, kept / (1 - p), rtol=1e-12)


@pytest.mark.parametrize("name,shape", [("Dropout1d", (30, 20, 3)), ("Dropout1d", (40, 3)),
                                        ("Dropout2d", (20, 30, 2, 2)), ("Dropout2d", (30, 20, 4)),
                                        ("Dropout3d", (20, 30, 2, 1, 2)), ("Dropout3d", (40, 2, 2, 2))])
@pytest.mark.parametrize("inplace", [False, True])
def test_channel_dropout_training(name, shape, inplace):
    p = 0.4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Dropout2d on a 3D input warns (tested below)
        x, y, g = _train_case(name, p, shape, inplace)
    unbatched = (name, len(shape)) in (("Dropout1d", 2), ("Dropout3d", 4))
    lead = 1 if unbatched else 2
    planes = (y != 0).reshape(math.prod(shape[:lead]), -1)
    # Each channel is dropped or kept as a whole.
    assert np.all(planes.all(1) | ~planes.any(1))
    kept = y != 0
    np.testing.assert_allclose(y[kept], x[kept] / (1 - p), rtol=1e-12)
    np.testing.assert_allclose(g, kept / (1 - p), rtol=1e-12)
    frac = 1 - planes.all(1).mean()
    assert abs(frac - p) < 5 * math.sqrt(p * (1 - p) / planes.shape[0])


def test_dropout_warnings_and_errors():
    with pytest.warns(UserWarning, match="assuming that channel-wise 1D dropout"):
        enn.Dropout2d()(ember.ones(2, 3, 4))
    with pytest.warns(UserWarning, match="Received a 2-D input to dropout2d"):
        enn.Dropout2d()(ember.ones(2, 3))
    with pytest.warns(UserWarning, match="Received a 3-D input to dropout3d"):
        enn.Dropout3d()(ember.ones(2, 3, 4))
    for bad in [(2,), (2, 3, 4, 5)]:
        with pytest.raises(RuntimeError):
            torch.nn.Dropout1d()(torch.ones(bad))
        with pytest.raises(RuntimeError):
            enn.Dropout1d()(ember.ones(bad))
    with pytest.raises(RuntimeError):
        torch.nn.FeatureAlphaDropout()(torch.ones(5))
    with pytest.raises(RuntimeError):
        enn.FeatureAlphaDropout()(ember.ones(5))


@pytest.mark.parametrize("name", DROPOUTS)
def test_dropout_p_one_zeroes_everything(name):
    m = getattr(enn, name)(1.0)
    x = ember.ones(*SHAPES[name])
    assert not bool(m(x).ne(0).any())


@pytest.mark.parametrize("name,shape", [("AlphaDropout", (50, 60)), ("FeatureAlphaDropout", (300, 40, 2))])
@pytest.mark.parametrize("inplace", [False, True])
def test_alpha_dropout_training(name, shape, inplace):
    p = 0.25
    alpha = 1.7580993408473766
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    ember.manual_seed(1)
    m = getattr(enn, name)(p, inplace=inplace)
    base = ember.tensor(np.random.default_rng(0).standard_normal(shape), requires_grad=True)
    x = base * 1
    y = to_np(m(x))
    xs = to_np(base)
    dropped_value = -alpha * a + alpha * a * p
    dropped = np.isclose(y, dropped_value, rtol=0, atol=1e-12) & ~np.isclose(xs * a + alpha * a * p, dropped_value)
    np.testing.assert_allclose(y[~dropped], xs[~dropped] * a + alpha * a * p, rtol=1e-10)
    if name == "FeatureAlphaDropout":
        planes = dropped.reshape(shape[0] * shape[1], -1)
        assert np.all(planes.all(1) | ~planes.any(1))
        assert abs(planes.all(1).mean() - p) < 0.05
    else:
        assert abs(dropped.mean() - p) < 0.05
    # Alpha dropout keeps zero mean and unit variance of a standard normal input.
    assert abs(y.mean()) < 0.1 and abs(y.std() - 1) < 0.1


# -- Flatten / Unflatten ---------------------------------------------------------------------

@pytest.mark.parametrize("args,shape", [((), (2, 3, 4)), ((0, 1), (2, 3, 4)), ((0, -1), (2, 3)), ((2, 3), (2, 3, 2, 2)),
                                        ((-2, -1), (2, 3, 4))])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_flatten_matches_torch(args, shape, dtype):
    _check("Flatten", args, shape, dtype)


@pytest.mark.parametrize("args,shape", [((1, (2, 3)), (2, 6)), ((-1, [2, 2, 1]), (3, 4)), ((0, (3, -1)), (6, 2))])
def test_unflatten_matches_torch(args, shape):
    _check("Unflatten", args, shape)


def test_unflatten_errors():
    for size in [(2, 2.0), 3, "ab"]:
        with pytest.raises(TypeError):
            torch.nn.Unflatten(1, size)
        with pytest.raises(TypeError):
            enn.Unflatten(1, size)
    with pytest.raises(RuntimeError):
        torch.nn.Unflatten(1, (2, 4))(torch.ones(2, 6))
    with pytest.raises(RuntimeError):
        enn.Unflatten(1, (2, 4))(ember.ones(2, 6))


# -- padding ---------------------------------------------------------------------------------

PAD_CASES = []
for _kind in ["Zero", "Constant", "Reflection", "Replication", "Circular"]:
    for _d, _pads, _shapes in [(1, [2, (1, 2)], [(2, 3, 5), (3, 5)]),
                               (2, [1, (2, 0, 1, 2)], [(2, 2, 4, 5), (2, 4, 5)]),
                               (3, [1, (1, 0, 2, 1, 0, 1)], [(1, 2, 3, 4, 4), (2, 3, 3, 4)])]:
        for _pad in _pads:
            for _shape in _shapes:
                PAD_CASES.append((f"{_kind}Pad{_d}d", _pad, _shape))


@pytest.mark.parametrize("name,padding,shape", PAD_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_padding_matches_torch(name, padding, shape, dtype):
    args = (padding, 1.5) if name.startswith("Constant") else (padding,)
    _check(name, args, shape, dtype)


@pytest.mark.parametrize("name,padding", [("ConstantPad2d", (-1, 1, 0, -2)), ("ZeroPad1d", (-1, 2)),
                                          ("ReplicationPad2d", (0, 1, 2, 0)), ("CircularPad1d", (3, 0))])
def test_padding_negative_and_asymmetric(name, padding):
    args = (padding, -2.0) if name.startswith("Constant") else (padding,)
    shape = (2, 3, 4, 5) if name.endswith("2d") else (2, 3, 5)
    _check(name, args, shape, "float64")


def test_padding_reprs():
    pairs = [_pair("ZeroPad2d", (1, 2, 3, 4)), _pair("ConstantPad3d", 2, 3.5), _pair("ReflectionPad1d", [1, 2]),
             _pair("ReplicationPad3d", 1), _pair("CircularPad2d", (0, 1, 1, 0)), _pair("ConstantPad1d", 1, 0)]
    for e_mod, t_mod in pairs:
        check_state(e_mod, t_mod)
    assert pairs[0][0].padding == (1, 2, 3, 4)


def test_padding_errors():
    for mod in (torch, ember):
        nn = torch.nn if mod is torch else enn
        with pytest.raises(ValueError):
            nn.CircularPad2d(1)(mod.ones(2, 3, 4, 5, 6))
        with pytest.raises(ValueError):
            nn.CircularPad1d(1)(mod.ones(4))
        with pytest.raises(RuntimeError):
            nn.ReflectionPad1d(3)(mod.ones(1, 2, 3))
        with pytest.raises(RuntimeError):
            nn.ConstantPad2d(1, 0.0)(mod.ones(()))


# -- PixelShuffle / PixelUnshuffle / ChannelShuffle ------------------------------------------

@pytest.mark.parametrize("shape,r", [((2, 8, 3, 2), 2), ((9, 2, 2), 3), ((1, 2, 4, 1, 1), 2)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pixel_shuffle_matches_torch(shape, r, dtype):
    _check("PixelShuffle", (r,), shape, dtype)


@pytest.mark.parametrize("shape,r", [((2, 2, 4, 6), 2), ((1, 3, 3), 3), ((1, 2, 2, 4, 2), 2)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pixel_unshuffle_matches_torch(shape, r, dtype):
    _check("PixelUnshuffle", (r,), shape, dtype)


@pytest.mark.parametrize("name,r,shape", [("PixelShuffle", 2, (2, 6, 3, 3)), ("PixelShuffle", 2, (4, 4)),
                                          ("PixelUnshuffle", 2, (2, 3, 5, 4)), ("PixelUnshuffle", 2, (2, 3, 4, 3)),
                                          ("PixelShuffle", 0, (2, 4, 3, 3))])
def test_pixel_shuffle_errors(name, r, shape):
    with pytest.raises(RuntimeError):
        getattr(torch.nn, name)(r)(torch.ones(shape))
    with pytest.raises(RuntimeError):
        getattr(enn, name)(r)(ember.ones(shape))


@pytest.mark.parametrize("shape,groups", [((2, 6, 3), 2), ((1, 6, 2, 2), 3), ((2, 4, 1, 2, 1), 4), ((2, 5, 3), 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_channel_shuffle_matches_torch(shape, groups, dtype):
    _check("ChannelShuffle", (groups,), shape, dtype)


@pytest.mark.parametrize("shape,groups", [((2, 5, 3), 2), ((2, 4, 3), 0), ((2, 4), 2)])
def test_channel_shuffle_errors(shape, groups):
    with pytest.raises(RuntimeError):
        torch.nn.ChannelShuffle(groups)(torch.ones(shape))
    with pytest.raises(RuntimeError):
        enn.ChannelShuffle(groups)(ember.ones(shape))


# -- upsampling ------------------------------------------------------------------------------

UPSAMPLE = [
    ({"scale_factor": 2}, (2, 3, 4)),
    ({"size": 7}, (2, 3, 4)),
    ({"scale_factor": 2, "mode": "linear"}, (2, 3, 4)),
    ({"scale_factor": 1.5, "mode": "linear", "align_corners": True}, (2, 3, 4)),
    ({"scale_factor": (2, 3)}, (1, 2, 3, 4)),
    ({"size": (5, 3), "mode": "bilinear"}, (1, 2, 3, 4)),
    ({"scale_factor": 2.0, "mode": "bilinear", "align_corners": True}, (1, 2, 3, 4)),
    ({"scale_factor": 2, "mode": "bicubic"}, (1, 2, 3, 4)),
    ({"scale_factor": 2, "mode": "nearest-exact"}, (1, 2, 3, 3)),
    ({"scale_factor": 2, "mode": "trilinear"}, (1, 2, 2, 3, 2)),
    ({"size": (3, 4, 2)}, (1, 2, 2, 3, 2)),
    ({"scale_factor": 1.7, "mode": "bilinear", "recompute_scale_factor": True}, (1, 2, 3, 4)),
]


@pytest.mark.parametrize("kwargs,shape", UPSAMPLE)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_upsample_matches_torch(kwargs, shape, dtype):
    _check("Upsample", (), shape, dtype, kwargs=kwargs, rtol=1e-4 if dtype == "float32" else 1e-9, atol=1e-5)


@pytest.mark.parametrize("name,kwargs", [("UpsamplingNearest2d", {"scale_factor": 2}),
                                         ("UpsamplingNearest2d", {"size": (5, 3)}),
                                         ("UpsamplingBilinear2d", {"scale_factor": 2}),
                                         ("UpsamplingBilinear2d", {"size": 6})])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fixed_mode_upsampling_matches_torch(name, kwargs, dtype):
    _check(name, (), (2, 2, 3, 4), dtype, kwargs=kwargs, rtol=1e-4 if dtype == "float32" else 1e-9, atol=1e-5)


def test_upsample_attributes():
    e_mod, t_mod = _pair("Upsample", scale_factor=(2, 3), mode="bilinear")
    assert e_mod.scale_factor == t_mod.scale_factor == (2.0, 3.0)
    assert e_mod.name == "Upsample" and _pair("UpsamplingBilinear2d", 2)[0].align_corners is True
    e_mod, t_mod = _pair("Upsample", size=4)
    assert e_mod.scale_factor is None and repr(e_mod) == repr(t_mod) == "Upsample(size=4, mode='nearest')"


def test_upsample_errors():
    for mod in (torch, ember):
        nn = torch.nn if mod is torch else enn
        with pytest.raises(ValueError):
            nn.Upsample()(mod.ones(1, 1, 3))
        with pytest.raises(ValueError):
            nn.Upsample(size=(2, 3))(mod.ones(1, 1, 3))
        with pytest.raises(ValueError):
            nn.Upsample(scale_factor=2, align_corners=True)(mod.ones(1, 1, 3))
        with pytest.raises(NotImplementedError):
            nn.Upsample(scale_factor=2, mode="bilinear")(mod.ones(1, 1, 3))


# -- distances -------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,shapes", [({}, [(3, 4), (3, 4)]), ({"dim": 0}, [(3, 4), (3, 4)]),
                                           ({"dim": -1, "eps": 0.5}, [(2, 3, 4), (2, 3, 4)]),
                                           ({}, [(3, 4), (1, 4)]), ({"dim": 0}, [(4,), (4,)])])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cosine_similarity_matches_torch(kwargs, shapes, dtype):
    e_mod, t_mod = _pair("CosineSimilarity", **kwargs)
    check_state(e_mod, t_mod)
    pairs = [leaf_pair(s, dtype, seed=i, layout="transposed") for i, s in enumerate(shapes)]
    check_module(e_mod, t_mod, [p[0] for p in pairs], [p[1] for p in pairs], [p[2] for p in pairs],
                 [p[3] for p in pairs], dtype)


@pytest.mark.parametrize("kwargs,shapes", [({}, [(3, 4), (3, 4)]), ({"p": 1.0}, [(3, 4), (3, 4)]),
                                           ({"p": 3.0, "keepdim": True}, [(3, 4), (3, 4)]),
                                           ({"eps": 0.1}, [(4,), (4,)]), ({"keepdim": True}, [(4,), (4,)]),
                                           ({}, [(3, 4), (4,)]), ({"p": float("inf")}, [(3, 4), (3, 4)])])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pairwise_distance_matches_torch(kwargs, shapes, dtype):
    e_mod, t_mod = _pair("PairwiseDistance", **kwargs)
    check_state(e_mod, t_mod)
    pairs = [leaf_pair(s, dtype, seed=i, layout="transposed") for i, s in enumerate(shapes)]
    check_module(e_mod, t_mod, [p[0] for p in pairs], [p[1] for p in pairs], [p[2] for p in pairs],
                 [p[3] for p in pairs], dtype)


def test_distance_attributes():
    m = enn.PairwiseDistance(p=3.0, eps=0.5, keepdim=True)
    assert (m.norm, m.eps, m.keepdim) == (3.0, 0.5, True)
    m = enn.CosineSimilarity(dim=2, eps=1e-3)
    assert (m.dim, m.eps) == (2, 1e-3)


@pytest.mark.parametrize("name,kwargs", [("upsample", {"scale_factor": 2}), ("upsample_nearest", {"size": 5}),
                                         ("upsample_bilinear", {"scale_factor": 2})])
def test_deprecated_upsample_functions(name, kwargs):
    e, t, _, _ = leaf_pair((1, 2, 3, 4), "float64")
    with pytest.warns(UserWarning, match=f"nn.functional.{name}` is deprecated"):
        e_out = getattr(enn.functional, name)(e, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_out = getattr(torch.nn.functional, name)(t, **kwargs)
    assert_close(e_out, t_out)


@pytest.mark.parametrize("kwargs", [
    {}, {"batch_first": True}, {"batch_first": True, "norm_first": True}, {"batch_first": True, "activation": "gelu"},
    {"batch_first": True, "activation": lambda x: x}, {"batch_first": True, "bias": False},
    {"batch_first": True, "nhead": 1},
])
@pytest.mark.parametrize("enable", [True, False])
def test_transformer_encoder_nested_tensor_warning_as_torch(kwargs, enable):
    # ember has no nested tensors; it warns (and sets use_nested_tensor) where PyTorch would.
    results = []
    for lib in (torch, ember):
        options = {"nhead": 2, **kwargs}
        layer = lib.nn.TransformerEncoderLayer(4, dim_feedforward=8, **options)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            encoder = lib.nn.TransformerEncoder(layer, 1, enable_nested_tensor=enable)
        results.append(([str(w.message) for w in caught], encoder.use_nested_tensor))
    assert results[0] == results[1]
