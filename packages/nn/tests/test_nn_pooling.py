"""Pooling layers (and their nn.functional forms) against torch.nn."""

from __future__ import annotations

import math

import pytest
import torch
from layer_helpers import assert_close, check_layer, input_pair

import ember
import ember.nn as nn
import ember.nn.functional as F

# (class name, constructor args, constructor kwargs, input shape)
POOL_CASES = [
    ("MaxPool1d", (3,), {}, (2, 3, 9)),
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1, "dilation": 2, "ceil_mode": True}, (2, 3, 10)),
    ("MaxPool1d", (2,), {"ceil_mode": True}, (3, 7)),  # unbatched
    ("MaxPool2d", (2,), {}, (2, 3, 6, 6)),
    ("MaxPool2d", ((3, 2),), {"stride": (2, 1), "padding": (1, 0)}, (2, 2, 7, 5)),
    ("MaxPool2d", (3,), {"stride": 2, "dilation": (1, 2), "ceil_mode": True}, (1, 2, 8, 9)),
    ("MaxPool2d", (2,), {"padding": 1}, (3, 5, 5)),  # unbatched
    ("AvgPool1d", (3,), {}, (2, 3, 9)),
    ("AvgPool1d", (3,), {"stride": 2, "padding": 1, "count_include_pad": False, "ceil_mode": True}, (2, 2, 8)),
    ("AvgPool1d", (2,), {}, (3, 6)),  # unbatched
    ("AvgPool2d", (2,), {}, (2, 3, 6, 6)),
    ("AvgPool2d", ((3, 2),), {"stride": 2, "padding": (1, 1), "ceil_mode": True}, (1, 2, 7, 6)),
    ("AvgPool2d", (3,), {"padding": 1, "count_include_pad": False}, (2, 2, 5, 5)),
    ("AvgPool2d", (2,), {"divisor_override": 3}, (2, 4, 4)),  # unbatched
    ("LPPool1d", (2, 3), {}, (2, 3, 9)),
    ("LPPool1d", (1.5, 2), {"stride": 1, "ceil_mode": True}, (2, 5)),
    ("LPPool1d", (math.inf, 2), {}, (2, 3, 6)),
    ("LPPool2d", (2, 2), {}, (2, 3, 6, 6)),
    ("LPPool2d", (3, (2, 3)), {"stride": (1, 2)}, (2, 2, 5, 7)),
    ("LPPool2d", (-math.inf, 2), {}, (1, 2, 4, 4)),
    ("AdaptiveAvgPool1d", (4,), {}, (2, 3, 10)),
    ("AdaptiveAvgPool1d", (3,), {}, (3, 7)),
    ("AdaptiveAvgPool2d", ((3, 2),), {}, (2, 3, 7, 5)),
    ("AdaptiveAvgPool2d", (1,), {}, (2, 3, 5, 4)),
    ("AdaptiveAvgPool2d", ((None, 3),), {}, (3, 4, 7)),
    ("AdaptiveMaxPool1d", (4,), {}, (2, 3, 10)),
    ("AdaptiveMaxPool2d", ((3, 4),), {}, (2, 3, 7, 9)),
    ("AdaptiveMaxPool2d", (2,), {}, (3, 5, 5)),
    ("AdaptiveMaxPool2d", ((2, None),), {}, (1, 3, 5, 4)),
]


@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: f"{c[0]}-{c[3]}-{'-'.join(map(str, c[2].values()))}")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_forward_backward_match_torch(case, dtype):
    name, args, kwargs, shape = case
    tm, em = getattr(torch.nn, name)(*args, **kwargs), getattr(nn, name)(*args, **kwargs)
    # Positive inputs keep LPPool's fractional powers real; pooling itself does not care.
    low = 0.1 if name.startswith("LP") and args[0] not in (1, 2, math.inf, -math.inf) else -1.0
    xe, xt = input_pair(shape, dtype, low=low)
    ye, yt = em(xe), tm(xt)
    assert_close(ye, yt, dtype)
    ye.sum().backward()
    yt.sum().backward()
    assert_close(xe.grad, xt.grad, dtype)
    assert repr(em) == repr(tm)
    assert list(em.state_dict()) == []


@pytest.mark.parametrize("name,args,kwargs,shape", [
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1, "return_indices": True}, (2, 3, 9)),
    ("MaxPool2d", (3,), {"stride": 2, "padding": 1, "dilation": 1, "return_indices": True, "ceil_mode": True},
     (2, 3, 8, 7)),
    ("MaxPool2d", (2,), {"return_indices": True}, (3, 4, 4)),
    ("AdaptiveMaxPool1d", (3,), {"return_indices": True}, (2, 3, 8)),
    ("AdaptiveMaxPool2d", ((2, 3),), {"return_indices": True}, (2, 3, 5, 7)),
])
def test_return_indices(name, args, kwargs, shape):
    tm, em = getattr(torch.nn, name)(*args, **kwargs), getattr(nn, name)(*args, **kwargs)
    xe, xt = input_pair(shape, "float64")
    (ye, ie), (yt, it) = em(xe), tm(xt)
    assert_close(ye, yt)
    assert_close(ie, it)
    (ye * ye).sum().backward()
    (yt * yt).sum().backward()
    assert_close(xe.grad, xt.grad)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_int_max_pool_and_ties(dtype):
    # Ties: PyTorch keeps the first maximum of each window.
    data = [[[[1.0, 1.0, 2.0, 2.0], [1.0, 1.0, 2.0, 2.0], [0.0, 3.0, 3.0, 0.0], [3.0, 0.0, 0.0, 3.0]]]]
    xe, xt = ember.tensor(data, dtype=getattr(ember, dtype)), torch.tensor(data, dtype=getattr(torch, dtype))
    ye, ie = F.max_pool2d(xe, 2, return_indices=True)
    yt, it = torch.nn.functional.max_pool2d(xt, 2, return_indices=True)
    assert_close(ye, yt)
    assert_close(ie, it)


@pytest.mark.parametrize("pool_args,shape,output_size", [
    ((2,), (2, 3, 8), None),
    ((3, 2, 1), (1, 2, 9), None),
    ((2,), (2, 3, 9), [9]),
    ((2,), (2, 3, 9), [2, 3, 9]),
])
def test_max_unpool1d_roundtrip(pool_args, shape, output_size):
    xe, xt = input_pair(shape, "float64")
    pe, pt = nn.MaxPool1d(*pool_args, return_indices=True), torch.nn.MaxPool1d(*pool_args, return_indices=True)
    ue, ut = nn.MaxUnpool1d(*pool_args), torch.nn.MaxUnpool1d(*pool_args)
    assert repr(ue) == repr(ut)
    (oe, ie), (ot, it) = pe(xe), pt(xt)
    re, rt = ue(oe, ie, output_size=output_size), ut(ot, it, output_size=output_size)
    assert_close(re, rt)
    re.sum().backward()
    rt.sum().backward()
    assert_close(xe.grad, xt.grad)


@pytest.mark.parametrize("pool_args,shape,output_size", [
    ((2,), (2, 3, 4, 6), None),
    ((3, 2, 1), (1, 2, 7, 5), None),
    ((2,), (3, 5, 5), [5, 5]),  # unbatched, the odd size given back
    (((2, 3), (2, 1)), (1, 1, 6, 5), [1, 1, 7, 5]),
])
def test_max_unpool2d_roundtrip(pool_args, shape, output_size):
    xe, xt = input_pair(shape, "float64")
    pe, pt = nn.MaxPool2d(*pool_args, return_indices=True), torch.nn.MaxPool2d(*pool_args, return_indices=True)
    ue, ut = nn.MaxUnpool2d(*pool_args), torch.nn.MaxUnpool2d(*pool_args)
    assert repr(ue) == repr(ut)
    (oe, ie), (ot, it) = pe(xe), pt(xt)
    re, rt = ue(oe, ie, output_size=output_size), ut(ot, it, output_size=output_size)
    assert_close(re, rt)
    (re * re).sum().backward()
    (rt * rt).sum().backward()
    assert_close(xe.grad, xt.grad)


@pytest.mark.parametrize("change,exc", [
    ("output_size_len", ValueError), ("output_size_range", ValueError), ("int32", RuntimeError),
    ("bad_index", RuntimeError), ("shape", RuntimeError),
])
def test_max_unpool_errors(change, exc):
    results = []
    for lib, fn in ((torch, torch.nn.functional.max_unpool2d), (ember, F.max_unpool2d)):
        x = lib.ones(1, 1, 2, 2)
        idx = lib.tensor([[[[0, 3], [8, 15]]]])
        size = None
        if change == "output_size_len":
            size = [4, 4, 4]
        elif change == "output_size_range":
            size = [6, 4]
        elif change == "int32":
            idx = idx.int()
        elif change == "bad_index":
            idx = idx * 2
        elif change == "shape":
            idx = idx[..., :1]
        with pytest.raises(exc) as err:
            fn(x, idx, 2, output_size=size)
        results.append(str(err.value))
    assert results[1] == results[0]


REPR_CASES = [
    ("MaxPool1d", (3,), {}), ("MaxPool1d", ((3,),), {"stride": 2, "ceil_mode": True}),
    ("MaxPool2d", (2,), {}), ("MaxPool2d", ((3, 2),), {"stride": (1, 2), "padding": 1, "dilation": 2}),
    ("AvgPool1d", (3,), {"padding": 1}), ("AvgPool2d", (2,), {"divisor_override": 2}),
    ("AvgPool2d", ((2, 3),), {"stride": None}),
    ("LPPool1d", (2, 3), {}), ("LPPool2d", (1.5, (2, 2)), {"stride": 1, "ceil_mode": True}),
    ("AdaptiveAvgPool1d", (4,), {}), ("AdaptiveAvgPool2d", ((None, 7),), {}),
    ("AdaptiveMaxPool1d", (2,), {"return_indices": True}), ("AdaptiveMaxPool2d", (3,), {}),
    ("MaxUnpool1d", (2,), {}), ("MaxUnpool2d", ((2, 3),), {"stride": 1, "padding": (0, 1)}),
]


@pytest.mark.parametrize("name,args,kwargs", REPR_CASES)
def test_repr_and_attributes(name, args, kwargs):
    tm, em = getattr(torch.nn, name)(*args, **kwargs), getattr(nn, name)(*args, **kwargs)
    assert repr(em) == repr(tm)
    for attr in vars(tm):
        if not attr.startswith("_") and attr != "training":
            assert getattr(em, attr) == getattr(tm, attr), attr


@pytest.mark.parametrize("call", [
    lambda m, x: m.MaxPool2d(2)(x.reshape(-1)),  # 1-d input
    lambda m, x: m.MaxPool2d(2, padding=2)(x),  # padding more than half the kernel
    lambda m, x: m.MaxPool2d(5)(x),  # window larger than the input
    lambda m, x: m.AvgPool2d(2, stride=0)(x),
    lambda m, x: m.AvgPool1d(2)(x),  # 4-d input to a 1-d pool
    lambda m, x: m.AdaptiveAvgPool2d(2)(x.reshape(-1)),
    lambda m, x: m.AdaptiveMaxPool1d(2)(x),
])
def test_bad_inputs_are_runtime_errors(call):
    xe, xt = input_pair((1, 2, 3, 3), requires_grad=False)
    with pytest.raises(RuntimeError):
        call(torch.nn, xt)
    with pytest.raises(RuntimeError):
        call(nn, xe)


def test_pool_inside_model_in_eval_and_no_grad():
    tm = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3, padding=1), torch.nn.MaxPool2d(2),
                             torch.nn.AdaptiveAvgPool2d(1))
    em = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1))
    assert repr(em) == repr(tm)
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    xe, xt = input_pair((2, 2, 6, 6), requires_grad=False)
    with ember.no_grad(), torch.no_grad():
        assert_close(em.eval()(xe), tm.eval()(xt))
    check_layer(tm, em, (2, 2, 6, 6))


@pytest.mark.parametrize("name", ["AdaptiveAvgPool2d", "AdaptiveMaxPool2d"])
def test_adaptive_tuple_size_on_low_rank_input_is_value_error(name):
    xe, xt = input_pair((4,), requires_grad=False)
    for mod, x in ((torch.nn, xt), (nn, xe)):
        with pytest.raises(ValueError, match="Input dimension should be at least 3"):
            getattr(mod, name)((2, 2))(x)


@pytest.mark.parametrize("call", [
    lambda F, x: F.adaptive_avg_pool2d(x, 0),
    lambda F, x: F.adaptive_max_pool2d(x, (0, 2), return_indices=True),
    lambda F, x: F.adaptive_avg_pool1d(x[0], 0),
    lambda F, x: F.max_pool2d(x[:0], 2),
    lambda F, x: F.avg_pool2d(x[:0], 2),
])
def test_functional_empty_outputs(call):
    xe, xt = input_pair((2, 3, 4, 4), "float64")
    re, rt = call(F, xe), call(torch.nn.functional, xt)
    for a, b in zip(re if isinstance(re, tuple) else (re,), rt if isinstance(rt, tuple) else (rt,)):
        assert_close(a, b)


def test_functional_unfold_fold_match_torch():
    xe, xt = input_pair((2, 3, 6, 7), "float64")
    ue = F.unfold(xe, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    ut = torch.nn.functional.unfold(xt, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    assert_close(ue, ut)
    fe = F.fold(ue, (6, 7), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    ft = torch.nn.functional.fold(ut, (6, 7), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    assert_close(fe, ft)
    fe.sum().backward()
    ft.sum().backward()
    assert_close(xe.grad, xt.grad)


@pytest.mark.parametrize("layout", ["channels_last", "sliced"])
def test_non_contiguous_inputs_through_a_model(layout):
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.MaxPool2d(2),
                             torch.nn.LayerNorm(3), torch.nn.AvgPool2d((2, 1)))
    em = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.MaxPool2d(2), nn.LayerNorm(3),
                       nn.AvgPool2d((2, 1)))
    tm, em = tm.double(), em.double()
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    xe, xt = input_pair((2, 8, 6, 3) if layout == "channels_last" else (4, 3, 8, 6), "float64")
    if layout == "channels_last":  # (N, H, W, C) memory seen as (N, C, H, W)
        ve, vt = xe.permute(0, 3, 1, 2), xt.permute(0, 3, 1, 2)
    else:  # every other sample
        ve, vt = xe[::2], xt[::2]
    assert not ve.is_contiguous()
    ye, yt = em(ve), tm(vt)
    assert_close(ye, yt)
    ye.sum().backward()
    yt.sum().backward()
    assert_close(xe.grad, xt.grad)
    for pe, pt in zip(em.parameters(), tm.parameters()):
        assert_close(pe.grad, pt.grad)
