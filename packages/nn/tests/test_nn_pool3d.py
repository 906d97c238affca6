"""3-d pooling (functional and layers) and the lazy norm layers against torch."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from layer_helpers import assert_close, input_pair

import ember
import ember.nn as nn
import ember.nn.functional as F

# (class name, constructor args, constructor kwargs, input shape)
POOL3D_CASES = [
    ("MaxPool3d", (2,), {}, (2, 3, 4, 5, 6)),
    ("MaxPool3d", ((2, 3, 2),), {"stride": (1, 2, 2), "padding": (1, 1, 0), "dilation": (1, 1, 2),
                                 "ceil_mode": True}, (2, 2, 5, 6, 7)),
    ("MaxPool3d", (3,), {"stride": 2, "padding": 1}, (3, 5, 5, 7)),  # unbatched
    ("AvgPool3d", (2,), {}, (2, 3, 4, 6, 5)),
    ("AvgPool3d", ((3, 2, 3),), {"stride": (2, 1, 2), "padding": 1, "ceil_mode": True}, (2, 2, 5, 6, 7)),
    ("AvgPool3d", ((3, 2, 3),), {"stride": (2, 1, 2), "padding": 1, "ceil_mode": True, "count_include_pad": False},
     (2, 2, 5, 6, 7)),
    ("AvgPool3d", (3,), {"padding": 1, "divisor_override": 5}, (2, 5, 4, 6)),  # unbatched
    ("LPPool3d", (2, 2), {}, (2, 3, 4, 5, 6)),
    ("LPPool3d", (1.5, (2, 3, 2)), {"stride": 1, "ceil_mode": True}, (2, 4, 5, 5)),
    ("LPPool3d", (math.inf, 2), {}, (1, 2, 4, 4, 5)),
    ("AdaptiveAvgPool3d", ((3, 2, 4),), {}, (2, 3, 5, 7, 9)),
    ("AdaptiveAvgPool3d", (1,), {}, (2, 3, 4, 5, 3)),
    ("AdaptiveAvgPool3d", ((None, 3, 2),), {}, (3, 4, 7, 5)),  # unbatched
    ("AdaptiveMaxPool3d", ((3, 4, 2),), {}, (2, 3, 7, 9, 5)),
    ("AdaptiveMaxPool3d", (2,), {}, (3, 5, 5, 4)),
    ("AdaptiveMaxPool3d", ((2, None, 3),), {}, (1, 2, 5, 4, 7)),
]


@pytest.mark.parametrize("case", POOL3D_CASES, ids=lambda c: f"{c[0]}-{c[3]}-{'-'.join(map(str, c[2].values()))}")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_forward_backward_match_torch(case, dtype):
    name, args, kwargs, shape = case
    tm, em = getattr(torch.nn, name)(*args, **kwargs), getattr(nn, name)(*args, **kwargs)
    low = 0.1 if name.startswith("LP") and args[0] == 1.5 else -1.0  # real fractional powers
    xe, xt = input_pair(shape, dtype, low=low)
    ye, yt = em(xe), tm(xt)
    assert_close(ye, yt, dtype)
    g = np.random.default_rng(1).standard_normal(tuple(yt.shape)).astype(dtype)
    ye.backward(ember.tensor(g))
    yt.backward(torch.tensor(g))
    assert_close(xe.grad, xt.grad, dtype)
    assert repr(em) == repr(tm)


@pytest.mark.parametrize("kwargs", [{}, {"stride": (1, 2, 1), "padding": 1, "ceil_mode": True},
                                    {"dilation": (2, 1, 1), "padding": (1, 0, 1)}])
def test_max_pool3d_indices(kwargs):
    xe, xt = input_pair((2, 3, 5, 6, 4), "float64")
    ye, ie = F.max_pool3d(xe, 3 if kwargs.get("dilation") is None else 2, return_indices=True, **kwargs)
    yt, it = torch.nn.functional.max_pool3d(xt, 3 if kwargs.get("dilation") is None else 2, return_indices=True,
                                            **kwargs)
    assert_close(ye, yt)
    assert_close(ie, it)
    ye2, ie2 = F.max_pool3d_with_indices(xe, 3 if kwargs.get("dilation") is None else 2, **kwargs)
    assert_close(ie2, it)
    assert_close(ye2, yt)


def test_max_pool3d_ties_pick_first_like_torch():
    # Repeated values: the winning index is the first in (d, h, w) order, as PyTorch's scan.
    data = np.tile(np.array([1.0, 2.0, 2.0, 1.0]), 2 * 4 * 4).reshape(1, 2, 4, 4, 4)
    ye, ie = F.max_pool3d(ember.tensor(data), 2, return_indices=True)
    yt, it = torch.nn.functional.max_pool3d(torch.tensor(data), 2, return_indices=True)
    assert_close(ie, it)
    ye, ie = F.adaptive_max_pool3d(ember.tensor(data), (3, 2, 3), return_indices=True)
    yt, it = torch.nn.functional.adaptive_max_pool3d(torch.tensor(data), (3, 2, 3), return_indices=True)
    assert_close(ie, it)
    assert_close(ye, yt)


def test_adaptive_max_pool3d_indices_and_grad():
    xe, xt = input_pair((2, 3, 6, 5, 7), "float32")
    ye, ie = F.adaptive_max_pool3d_with_indices(xe, (4, 3, 5))
    yt, it = torch.nn.functional.adaptive_max_pool3d_with_indices(xt, (4, 3, 5))
    assert_close(ie, it)
    (ye * ye).sum().backward()
    (yt * yt).sum().backward()
    assert_close(xe.grad, xt.grad, "float32")


def test_empty_batch():
    for fe, ft in [(lambda x: F.max_pool3d(x, 2), lambda x: torch.nn.functional.max_pool3d(x, 2)),
                   (lambda x: F.avg_pool3d(x, 2), lambda x: torch.nn.functional.avg_pool3d(x, 2)),
                   (lambda x: F.adaptive_avg_pool3d(x, 2), lambda x: torch.nn.functional.adaptive_avg_pool3d(x, 2))]:
        assert_close(fe(ember.zeros(0, 2, 3, 4, 4)), ft(torch.zeros(0, 2, 3, 4, 4)))


ERROR_CASES = [
    ("max_pool3d", (5, 5, 5), {"kernel_size": 3, "padding": 2}),  # not 4-d/5-d
    ("max_pool3d", (2, 3, 4, 5, 6), {"kernel_size": 3, "padding": 2}),  # pad over half the kernel
    ("max_pool3d", (2, 3, 4, 5, 6), {"kernel_size": 5}),  # output too small
    ("max_pool3d", (2, 3, 4, 5, 6), {"kernel_size": (2, 2)}),
    ("max_pool3d", (2, 3, 4, 5, 6), {"kernel_size": 2, "stride": (1, 1)}),
    ("max_pool3d", (2, 3, 4, 5, 6), {"kernel_size": 2, "stride": 0}),
    ("max_pool3d", (2, 3, 4, 5, 6), {"kernel_size": 2, "dilation": 0}),
    ("max_pool3d", (2, 0, 4, 5, 6), {"kernel_size": 2}),
    ("avg_pool3d", (2, 3, 4, 5, 6), {"kernel_size": 3, "padding": 2}),
    ("avg_pool3d", (2, 3, 4, 5, 6), {"kernel_size": 5}),
    ("avg_pool3d", (2, 3, 4, 5, 6), {"kernel_size": (2, 2)}),
    ("avg_pool3d", (2, 3, 4, 5, 6), {"kernel_size": 2, "divisor_override": 0}),
    ("avg_pool3d", (4, 5, 6), {"kernel_size": 2}),
    ("adaptive_avg_pool3d", (4, 5, 6), {"output_size": 2}),
    ("adaptive_max_pool3d", (4, 5, 6), {"output_size": 2}),
    ("adaptive_avg_pool3d", (2, 3, 4, 5, 6), {"output_size": (2, 2)}),
    ("adaptive_max_pool3d", (2, 3, 4, 5, 6), {"output_size": (2, 2)}),
    ("adaptive_max_pool3d", (2, 3, 4, 5, 6), {"output_size": (2, -1, 2)}),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_errors_match_torch(case):
    name, shape, kwargs = case
    with pytest.raises(RuntimeError) as te:
        getattr(torch.nn.functional, name)(torch.zeros(shape), **kwargs)
    with pytest.raises(RuntimeError) as ee:
        getattr(F, name)(ember.zeros(shape), **kwargs)
    assert str(ee.value) == str(te.value)


@pytest.mark.parametrize("name,shape", [("LazyBatchNorm1d", (4, 3)), ("LazyBatchNorm1d", (4, 3, 5)),
                                        ("LazyBatchNorm2d", (2, 3, 4, 4)), ("LazyBatchNorm3d", (2, 3, 2, 3, 4)),
                                        ("LazyInstanceNorm1d", (2, 3, 5)), ("LazyInstanceNorm2d", (2, 3, 4, 4)),
                                        ("LazyInstanceNorm3d", (2, 3, 2, 3, 4))])
@pytest.mark.parametrize("kwargs", [{}, {"affine": False}, {"track_running_stats": False, "bias": False}])
def test_lazy_norm_matches_torch(name, shape, kwargs):
    em, tm = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    assert repr(em) == repr(tm)
    assert em.has_uninitialized_params() == tm.has_uninitialized_params()
    xe, xt = input_pair(shape, "float32")
    ye, yt = em(xe), tm(xt)
    assert type(em).__name__ == type(tm).__name__ == name.removeprefix("Lazy")
    assert repr(em) == repr(tm)
    assert_close(ye, yt, "float32")
    assert sorted(em.state_dict()) == sorted(tm.state_dict())
    for key, value in tm.state_dict().items():
        assert type(em.state_dict()[key]) is ember.Tensor
        assert tuple(em.state_dict()[key].shape) == tuple(value.shape)
    for (ne, pe), (nt, pt) in zip(em.named_parameters(), tm.named_parameters()):
        assert ne == nt and isinstance(pe, nn.Parameter) and tuple(pe.shape) == tuple(pt.shape)



def test_lazy_norm_loads_a_checkpoint_before_its_first_input():
    # Uninitialized running stats are lazy like the parameters: load_state_dict materializes them.
    trained = torch.nn.LazyBatchNorm2d()
    trained(torch.randn(2, 3, 4, 4))
    state = {k: ember.tensor(v.numpy()) for k, v in trained.state_dict().items()}
    em, tm = nn.LazyBatchNorm2d(), torch.nn.LazyBatchNorm2d()
    assert repr(nn.UninitializedBuffer()) == repr(torch.nn.UninitializedBuffer())
    em.load_state_dict(state)
    tm.load_state_dict(trained.state_dict())
    for key, value in tm.state_dict().items():
        np.testing.assert_array_equal(em.state_dict()[key].numpy(), value.numpy())

def test_pdist_reexported():
    xe, xt = input_pair((5, 3), "float64")
    assert_close(F.pdist(xe, 1.5), torch.nn.functional.pdist(xt, 1.5))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,kwargs,output_size", [((2, 3, 4, 6, 6), {}, None),
                                                      ((2, 3, 5, 5, 7), {}, (5, 5, 7)),
                                                      ((3, 5, 6, 4), {"stride": 1, "padding": (0, 1, 0)}, None)])
def test_max_unpool3d_inverts_max_pool3d(dtype, shape, kwargs, output_size):
    k = (1, 2, 3) if kwargs else 2
    xe, xt = input_pair(shape, dtype)
    pe, ie = nn.MaxPool3d(k, return_indices=True, **kwargs)(xe)
    pt, it = torch.nn.MaxPool3d(k, return_indices=True, **kwargs)(xt)
    ue, ut = nn.MaxUnpool3d(k, **kwargs), torch.nn.MaxUnpool3d(k, **kwargs)
    assert repr(ue) == repr(ut)
    ye, yt = ue(pe, ie, output_size), ut(pt, it, output_size)
    assert_close(ye, yt, dtype)
    (ye * ye).sum().backward()
    (yt * yt).sum().backward()
    assert_close(xe.grad, xt.grad, dtype)


UNPOOL_ERRORS = [
    (lambda i: i + 1000, {}, RuntimeError),
    (lambda i: i.int(), {}, RuntimeError),
    (lambda i: i[:1], {}, RuntimeError),
    (lambda i: i, {"output_size": (9, 5, 7)}, ValueError),
    (lambda i: i, {"output_size": (5, 5)}, ValueError),
]


@pytest.mark.parametrize("case", UNPOOL_ERRORS, ids=lambda c: str(c[1:]))
def test_max_unpool3d_errors(case):
    change, kwargs, exc = case
    torch.manual_seed(0)
    xt = torch.randn(2, 3, 4, 6, 6)
    pt, it = torch.nn.functional.max_pool3d(xt, 2, return_indices=True)
    pe, ie = ember.tensor(pt.numpy()), ember.tensor(it.numpy())
    with pytest.raises(exc) as te:
        torch.nn.functional.max_unpool3d(pt, change(it), 2, **kwargs)
    with pytest.raises(exc) as ee:
        F.max_unpool3d(pe, change(ie), 2, **kwargs)
    # PyTorch scans planes in parallel: which invalid index it names varies, so that message is cut there.
    assert str(ee.value).split(": ")[0] == str(te.value).split(": ")[0]
    if "invalid max index" not in str(te.value):
        assert str(ee.value) == str(te.value)
    with pytest.raises(RuntimeError, match="4d or 5d"):
        F.max_unpool3d(pe[0, 0], ie[0, 0], 2)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_reduced_precision_like_torch(dtype):
    torch.manual_seed(0)
    xt = torch.randn(2, 3, 5, 6, 7).to(getattr(torch, dtype))
    xe = ember.tensor(xt.float().numpy()).to(getattr(ember, dtype))
    # Max pooling is exact; adaptive averaging accumulates in float32 and rounds once.
    assert_close(F.max_pool3d(xe, 3, 2, 1).float(), torch.nn.functional.max_pool3d(xt, 3, 2, 1).float(), rtol=0,
                 atol=0)
    assert_close(F.adaptive_max_pool3d(xe, (2, 3, 4)).float(),
                 torch.nn.functional.adaptive_max_pool3d(xt, (2, 3, 4)).float(), rtol=0, atol=0)
    ulp = 2.0 ** (-10 if dtype == "float16" else -7)
    assert_close(F.adaptive_avg_pool3d(xe, (2, 3, 4)).float(),
                 torch.nn.functional.adaptive_avg_pool3d(xt, (2, 3, 4)).float(), rtol=ulp, atol=ulp)
    with pytest.raises(NotImplementedError) as te:
        torch.nn.functional.avg_pool3d(xt, 2)
    with pytest.raises(NotImplementedError) as ee:
        F.avg_pool3d(xe, 2)
    assert str(ee.value) == str(te.value)
