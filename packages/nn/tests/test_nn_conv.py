"""Conv and ConvTranspose layers against torch.nn with identical weights."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from layer_helpers import assert_close, check_layer, check_state_dict, copy_state, input_pair, make_pair

import ember
import ember.nn as nn

# (class name, constructor args, constructor kwargs, input shape)
CONV_CASES = [
    ("Conv1d", (3, 4, 3), {}, (2, 3, 7)),
    ("Conv1d", (3, 4, 3), {}, (3, 7)),  # unbatched
    ("Conv1d", (4, 6, 2), {"stride": 2, "padding": 1, "dilation": 2, "groups": 2}, (2, 4, 9)),
    ("Conv1d", (3, 2, 3), {"padding": "valid", "bias": False}, (1, 3, 5)),
    ("Conv1d", (2, 2, 3), {"padding": 2, "padding_mode": "reflect"}, (2, 2, 6)),
    ("Conv1d", (2, 2, 3), {"padding": 1, "padding_mode": "circular"}, (2, 2, 5)),
    ("Conv2d", (3, 4, 3), {"padding": 1}, (2, 3, 6, 5)),
    ("Conv2d", (3, 4, (2, 3)), {"stride": (2, 1), "padding": (1, 0)}, (3, 6, 5)),  # unbatched
    ("Conv2d", (4, 4, 3), {"groups": 4, "dilation": (1, 2), "bias": False}, (1, 4, 7, 8)),  # depthwise
    ("Conv2d", (2, 3, 3), {"padding": "same", "dilation": 2}, (2, 2, 6, 6)),
    ("Conv2d", (2, 3, (2, 3)), {"padding": (1, 2), "padding_mode": "replicate"}, (2, 2, 5, 4)),
    ("Conv2d", (2, 3, 3), {"padding": 1, "padding_mode": "reflect", "stride": 2}, (1, 2, 6, 6)),
    ("Conv2d", (2, 3, 3), {"padding": (2, 1), "padding_mode": "circular"}, (1, 2, 4, 5)),
    ("Conv2d", (2, 2, 4), {"padding": "same", "padding_mode": "reflect"}, (1, 2, 6, 6)),
    ("Conv3d", (2, 3, 2), {"padding": 1, "stride": (1, 2, 1)}, (2, 2, 4, 5, 4)),
    ("Conv3d", (2, 2, (1, 2, 3)), {"groups": 2}, (2, 4, 3, 5)),  # unbatched
    ("Conv3d", (2, 2, 3), {"padding": 1, "padding_mode": "replicate"}, (1, 2, 3, 4, 4)),
    ("ConvTranspose1d", (3, 4, 3), {"stride": 2, "padding": 1, "output_padding": 1}, (2, 3, 5)),
    ("ConvTranspose1d", (4, 2, 2), {"groups": 2, "dilation": 3, "bias": False}, (4, 6)),  # unbatched
    ("ConvTranspose2d", (3, 2, 3), {"stride": 2}, (2, 3, 4, 3)),
    ("ConvTranspose2d", (4, 6, (2, 3)), {"stride": (2, 3), "padding": (1, 0), "output_padding": (1, 2),
                                         "groups": 2}, (1, 4, 3, 3)),
    ("ConvTranspose2d", (2, 2, 3), {"dilation": 2, "padding": 2}, (2, 4, 4)),  # unbatched
    ("ConvTranspose3d", (2, 3, 2), {"stride": 2, "padding": (0, 1, 0)}, (1, 2, 2, 3, 2)),
    ("ConvTranspose3d", (2, 2, (1, 2, 2)), {"output_padding": (0, 1, 0), "stride": (1, 2, 1)}, (2, 2, 3, 3)),
]


def _pair(name, args, kwargs, dtype="float32"):
    return make_pair(getattr(torch.nn, name), getattr(nn, name), *args, dtype=dtype, **kwargs)


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}-{c[3]}-{'-'.join(map(str, c[2].values()))}")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_forward_backward_match_torch(case, dtype):
    name, args, kwargs, shape = case
    tm, em = _pair(name, args, kwargs, dtype)
    check_layer(tm, em, shape, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_same_padding_with_even_kernel(dtype):
    # PyTorch warns about the padded copy once per process, and another package's tests expect
    # that warning: the reference here pads explicitly (one more at the end) instead.
    tm = torch.nn.Conv1d(3, 4, 4).to(getattr(torch, dtype))
    em = nn.Conv1d(3, 4, 4, padding="same").to(getattr(ember, dtype))
    copy_state(tm, em)
    xe, xt = input_pair((2, 3, 8), dtype)
    with pytest.warns(UserWarning, match="Using padding='same' with even kernel lengths and odd dilation"):
        ye = em(xe)
    yt = torch.nn.functional.conv1d(torch.nn.functional.pad(xt, (1, 2)), tm.weight, tm.bias)
    assert_close(ye, yt)
    ye.sum().backward()
    yt.sum().backward()
    for e, t in ((xe, xt), (em.weight, tm.weight), (em.bias, tm.bias)):
        assert_close(e.grad, t.grad)
    assert em._reversed_padding_repeated_twice == [1, 2]


@pytest.mark.parametrize("name,args,kwargs,shape,output_size", [
    ("ConvTranspose1d", (2, 3, 3), {"stride": 3}, (2, 2, 4), [12]),
    ("ConvTranspose2d", (2, 3, 3), {"stride": 2, "padding": 1}, (1, 2, 4, 5), [8, 10]),
    ("ConvTranspose2d", (2, 3, 3), {"stride": 2}, (2, 4, 5), [3, 10, 11]),  # unbatched, sizes with channels
    ("ConvTranspose3d", (2, 2, 2), {"stride": 2}, (1, 2, 2, 2, 2), [1, 2, 5, 4, 5]),
])
def test_conv_transpose_output_size(name, args, kwargs, shape, output_size):
    tm, em = _pair(name, args, kwargs, "float64")
    check_layer(tm, em, shape, "float64", forward_kwargs={"output_size": output_size})


@pytest.mark.parametrize("output_size", [[7, 7], [11, 11], [1, 2, 3]])
def test_conv_transpose_bad_output_size(output_size):
    tm, em = _pair("ConvTranspose2d", (2, 3, 3), {"stride": 2}, "float32")
    xe, xt = input_pair((1, 2, 4, 4))
    with pytest.raises(ValueError) as t_err:
        tm(xt, output_size=output_size)
    with pytest.raises(ValueError) as e_err:
        em(xe, output_size=output_size)
    assert str(e_err.value).split(" (for")[0] == str(t_err.value).split(" (for")[0]


REPR_CASES = [
    ("Conv1d", (3, 4, 3), {}),
    ("Conv1d", (4, 6, 3), {"stride": 2, "padding": "valid", "groups": 2, "bias": False, "padding_mode": "reflect"}),
    ("Conv2d", (3, 8, 3), {"padding": 1}),
    ("Conv2d", (3, 8, (1, 3)), {"padding": "same", "dilation": (2, 1)}),
    ("Conv2d", (4, 8, 3), {"padding": (0, 0), "dilation": 1, "groups": 4, "padding_mode": "circular"}),
    ("Conv3d", (2, 2, 1), {"stride": (1, 2, 3)}),
    ("ConvTranspose1d", (3, 6, 2), {"output_padding": 1, "stride": 2}),
    ("ConvTranspose2d", (3, 6, (2, 3)), {"stride": 2, "output_padding": 1, "dilation": 2, "bias": False}),
    ("ConvTranspose3d", (2, 4, 3), {"groups": 2, "padding": (1, 0, 1)}),
]


@pytest.mark.parametrize("name,args,kwargs", REPR_CASES)
def test_repr_state_dict_and_attributes(name, args, kwargs):
    tm, em = getattr(torch.nn, name)(*args, **kwargs), getattr(nn, name)(*args, **kwargs)
    assert repr(em) == repr(tm)
    check_state_dict(tm, em)
    for attr in ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "transposed",
                 "output_padding", "groups", "padding_mode", "_reversed_padding_repeated_twice"):
        assert getattr(em, attr) == getattr(tm, attr), attr


def test_repr_inside_a_model():
    t = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ConvTranspose2d(4, 1, 2, stride=2))
    e = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ConvTranspose2d(4, 1, 2, stride=2))
    assert repr(e) == repr(t)


@pytest.mark.parametrize("name,args", [("Conv2d", (6, 16, 3)), ("Conv1d", (8, 40, 5)),
                                       ("ConvTranspose2d", (16, 6, 3)), ("Conv3d", (4, 8, 2))])
def test_default_init_bounds(name, args):
    ember.manual_seed(0)
    em, tm = getattr(nn, name)(*args, groups=2), getattr(torch.nn, name)(*args, groups=2)
    fan_in = tm.weight.shape[1] * math.prod(tm.weight.shape[2:])
    bound = 1 / math.sqrt(fan_in)  # kaiming_uniform_(a=sqrt(5)) and the bias rule agree on it
    for pe, pt in ((em.weight, tm.weight), (em.bias, tm.bias)):
        e_abs, t_abs = pe.detach().abs().max().item(), pt.detach().abs().max().item()
        assert e_abs <= bound and t_abs <= bound
    assert em.weight.detach().abs().max().item() > 0.9 * bound  # the whole range is used
    assert abs(em.weight.detach().mean().item()) < 0.1 * bound
    assert em.weight.requires_grad and em.weight.is_contiguous()


def test_reset_parameters_redraws():
    m = nn.Conv2d(2, 3, 3)
    before = m.weight.detach().clone()
    m.reset_parameters()
    assert not ember.equal(before, m.weight.detach())


@pytest.mark.parametrize("kwargs,message", [
    ({"groups": 0}, "groups must be a positive integer"),
    ({"groups": 4}, "in_channels must be divisible by groups"),
    ({"in_channels": 4, "groups": 4}, "out_channels must be divisible by groups"),
    ({"padding": "full"}, "Invalid padding string 'full'"),
    ({"padding": "same", "stride": 2}, "padding='same' is not supported for strided convolutions"),
    ({"padding_mode": "mirror"}, "padding_mode must be one of"),
])
def test_constructor_errors(kwargs, message):
    full = {"in_channels": 2, "out_channels": 6, "kernel_size": 3} | kwargs
    with pytest.raises(ValueError, match=message):
        torch.nn.Conv2d(**full)
    with pytest.raises(ValueError, match=message):
        nn.Conv2d(**full)


def test_transposed_rejects_padding_modes():
    for mod in (torch.nn, nn):
        with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for ConvTranspose2d'):
            mod.ConvTranspose2d(2, 2, 3, padding_mode="reflect")


@pytest.mark.parametrize("shape", [(2, 7), (1, 1, 3, 7), (2, 2, 7)])
def test_forward_input_errors(shape):
    tm, em = _pair("Conv1d", (3, 4, 3), {})
    xe, xt = input_pair(shape)
    with pytest.raises(RuntimeError):
        tm(xt)
    with pytest.raises(RuntimeError):
        em(xe)


def test_kernel_larger_than_input_is_runtime_error():
    tm, em = _pair("Conv2d", (1, 1, 5), {})
    xe, xt = input_pair((1, 1, 3, 3))
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
        tm(xt)
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
        em(xe)


@pytest.mark.parametrize("name,tname,args,shape", [
    ("LazyConv1d", "Conv1d", (4, 3), (2, 3, 6)),
    ("LazyConv2d", "Conv2d", (4, 3), (3, 5, 5)),
    ("LazyConv3d", "Conv3d", (2, 2), (1, 2, 3, 3, 3)),
    ("LazyConvTranspose1d", "ConvTranspose1d", (4, 3), (2, 3, 6)),
    ("LazyConvTranspose2d", "ConvTranspose2d", (4, 3), (2, 3, 3, 3)),
    ("LazyConvTranspose3d", "ConvTranspose3d", (2, 2), (2, 2, 2, 2)),
])
def test_lazy_conv_materializes(name, tname, args, shape):
    em, tm = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(em) == repr(tm)
    xe, xt = input_pair(shape, requires_grad=False)
    ye, yt = em(xe), tm(xt)
    assert type(em).__name__ == type(tm).__name__ == tname
    assert repr(em) == repr(tm) and tuple(ye.shape) == tuple(yt.shape)
    assert tuple(em.weight.shape) == tuple(tm.weight.shape)
    check_state_dict(tm, em)


def test_lazy_conv_bad_input_rank():
    for mod in (torch.nn, nn):
        m = mod.LazyConv2d(4, 3)
        x = (torch if mod is torch.nn else ember).zeros(3, 3)
        with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input to LazyConv2d"):
            m(x)


def test_deepcopy_and_pickle_keep_weights_and_laziness():
    import copy
    import pickle

    m = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"), nn.ConvTranspose2d(3, 2, 2, stride=2))
    for clone in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert repr(clone) == repr(m)
        for (name, a), b in zip(m.state_dict().items(), clone.state_dict().values()):
            assert ember.equal(a, b), name
        x = ember.randn(1, 2, 4, 4)
        assert ember.allclose(clone(x), m(x))
    lazy = copy.deepcopy(nn.LazyConv1d(3, 2))
    assert tuple(lazy(ember.randn(2, 5, 4)).shape) == (2, 3, 3) and type(lazy) is nn.Conv1d


@pytest.mark.parametrize("name,args,shape", [("Conv2d", (2, 3, 3), (1, 2, 5, 5)),
                                             ("ConvTranspose1d", (2, 3, 2), (2, 2, 4))])
def test_float16_layers_close_to_torch(name, args, shape):
    tm, em = _pair(name, args, {"padding": 1}, "float32")
    tm, em = tm.half(), em.half()
    xe, xt = input_pair(shape, requires_grad=False)
    ye, yt = em(xe.half()), tm(xt.half())
    assert ye.dtype is ember.float16
    np.testing.assert_allclose(ye.detach().float().numpy(), yt.detach().float().numpy(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("pad", [0, 2])
def test_conv_tbc_matches_torch(pad):
    xe, xt = input_pair((6, 2, 3), "float64")
    we, wt = input_pair((3, 3, 4), "float64", seed=1)
    be, bt = input_pair((4,), "float64", seed=2)
    ye, yt = nn.functional.conv_tbc(xe, we, be, pad), torch.conv_tbc(xt, wt, bt, pad)
    assert_close(ye, yt)
    ye.sum().backward()
    yt.sum().backward()
    for e, t in ((xe, xt), (we, wt), (be, bt)):
        assert_close(e.grad, t.grad)


@pytest.mark.parametrize("shapes", [((6, 3), (3, 3, 4), (4,)), ((6, 2, 3), (3, 4), (4,)), ((6, 2, 3), (3, 3, 4), (2,)),
                                    ((6, 2, 3), (3, 2, 4), (4,))])
def test_conv_tbc_errors(shapes):
    for lib in (torch, nn.functional):
        args = [(ember if lib is nn.functional else torch).zeros(*s) for s in shapes]
        with pytest.raises(RuntimeError):
            lib.conv_tbc(*args, 0)


def test_conv_transpose_bad_output_size_message_prints_it_as_given():
    msgs = []
    for lib in (ember, torch):
        with pytest.raises(ValueError) as err:
            lib.nn.ConvTranspose2d(1, 1, 3, stride=2)(lib.ones(1, 1, 3, 3), output_size=(20, 20))
        msgs.append(str(err.value).replace("ember.", "torch."))
    assert msgs[0] == msgs[1]
    assert "output size of (20, 20)" in msgs[0]
