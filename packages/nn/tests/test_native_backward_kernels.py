"""The native kernels of issue 18's fourth session against torch: the direct small-channel
convolution (forward, input and weight gradients), attention's one-pass backward, and
gelu_backward. Each case also runs shapes that leave the fast path, so both sides of every
dispatch condition are compared."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as F

RNG = np.random.default_rng(18)


def _pair(shape, dtype="float32"):
    a = RNG.standard_normal(shape)
    return (ember.tensor(a).to(getattr(ember, dtype)).requires_grad_(),
            torch.tensor(a).to(getattr(torch, dtype)).requires_grad_())


def _close(e, t, tol):
    np.testing.assert_allclose(e.detach().to(ember.float64).numpy(), t.detach().double().numpy(), rtol=tol, atol=tol)


# (batch, in channels, height, width, out channels, kernel, stride, padding, dilation, bias)
CONV_CASES = [
    (4, 1, 28, 28, 6, 5, 1, 2, 1, True),     # LeNet's first layer (6 of 8 lanes)
    (4, 6, 14, 14, 16, 5, 1, 0, 1, True),    # LeNet's second layer
    (3, 1, 28, 28, 32, 3, 1, 1, 1, False),   # an MNIST stem: two channel blocks
    (3, 5, 13, 11, 20, 3, 2, 1, 1, True),    # stride 2: input gradient by col2im
    (3, 5, 13, 11, 7, 3, 1, 2, 2, True),     # dilation
    (2, 4, 9, 10, 33, 3, 1, 1, 1, True),     # 33 channels: the gemm path
    (2, 8, 9, 10, 9, (3, 2), 1, (0, 1), 1, False),
    (5, 3, 7, 7, 16, 7, 1, 3, 1, True),      # the padding wider than the image's half
    (2, 70, 6, 6, 8, 3, 1, 1, 1, True),      # 630 taps, 8 channels: the gemm path
    (2, 32, 12, 12, 64, 3, 1, 1, 1, True),   # a wider layer whose image fits L2: direct
    (1, 64, 40, 44, 64, 3, 1, 1, 1, True),   # image past L2 (494 KiB), a 3-row band in it: direct
    (2, 5, 11, 13, 12, 3, 1, 0, 1, True),    # rows of 11 two at a time, an odd row count, 6 + 6 channels
    (2, 3, 18, 16, 15, 3, 1, 1, 1, False),   # rows of exactly 16 two at a time, 8 + 7 channels
    (1, 2, 9, 9, 16, 3, 1, 1, 1, True),      # rows of 9, 8 + 8 channels
    (2, 48, 31, 30, 64, 3, 2, 1, 1, False),  # the same at stride 2
    (1, 100, 5, 330, 40, 3, 1, 1, 1, False),  # 3-row band of 398 KiB: the gemm path
    (2, 24, 9, 9, 40, 3, 2, 1, 1, False),    # wider, stride 2
    (1, 16, 6, 6, 48, 1, 1, 0, 1, True),     # 1x1 with many channels: the gemm path
]


@pytest.mark.parametrize("case", CONV_CASES, ids=[str(c[:6]) for c in CONV_CASES])
def test_conv2d_direct_matches_torch(case):
    n, ci, h, w, co, k, stride, pad, dil, bias = case
    k2 = k if isinstance(k, tuple) else (k, k)
    ex, tx = _pair((n, ci, h, w))
    ew, tw = _pair((co, ci) + k2)
    eb, tb = _pair((co,)) if bias else (None, None)
    eo = F.conv2d(ex, ew, eb, stride=stride, padding=pad, dilation=dil)
    to = torch.nn.functional.conv2d(tx, tw, tb, stride=stride, padding=pad, dilation=dil)
    _close(eo, to, 1e-4)
    g = RNG.standard_normal(tuple(to.shape))
    eo.backward(ember.tensor(g).float())
    to.backward(torch.tensor(g).float())
    _close(ex.grad, tx.grad, 1e-4)
    _close(ew.grad, tw.grad, 2e-4)
    if bias:
        _close(eb.grad, tb.grad, 1e-4)


def test_conv1d_and_transpose_take_the_direct_kernels():
    ex, tx = _pair((3, 4, 30))
    ew, tw = _pair((6, 4, 5))
    _close(F.conv1d(ex, ew, padding=2), torch.nn.functional.conv1d(tx, tw, padding=2), 1e-4)
    # conv_transpose2d's forward is the input-gradient kernel.
    ex, tx = _pair((2, 16, 6, 6))
    ew, tw = _pair((16, 6, 5, 5))
    _close(F.conv_transpose2d(ex, ew), torch.nn.functional.conv_transpose2d(tx, tw), 1e-4)


# (query shape, key shape, value shape, mask kind, is_causal, enable_gqa, dtype)
SDPA_CASES = [
    ((2, 3, 70, 16), (2, 3, 70, 16), (2, 3, 70, 8), None, False, False, "float32"),
    ((2, 3, 70, 16), (2, 3, 50, 16), (2, 3, 50, 8), None, True, False, "float32"),
    ((2, 2, 130, 16), (2, 2, 130, 16), (2, 2, 130, 16), None, True, False, "float32"),
    ((2, 4, 70, 16), (2, 2, 90, 16), (2, 2, 90, 8), None, False, True, "float32"),
    ((5, 70, 16), (5, 90, 16), (5, 90, 8), "float", False, False, "float32"),
    ((2, 3, 7, 16), (2, 3, 9, 16), (2, 3, 9, 8), "bool", False, False, "float32"),
    ((2, 2, 3, 7, 16), (2, 2, 3, 9, 16), (2, 2, 3, 9, 8), "bool", False, False, "float64"),
    ((2, 3, 7, 16), (2, 3, 9, 16), (2, 3, 9, 8), None, False, False, "bfloat16"),
    ((2, 3, 7, 16), (1, 3, 9, 16), (1, 3, 9, 8), None, False, False, "float32"),  # broadcast: composite
]


@pytest.mark.parametrize("case", SDPA_CASES, ids=[str(i) for i in range(len(SDPA_CASES))])
def test_attention_native_backward_matches_torch(case):
    qs, ks, vs, mask_kind, causal, gqa, dtype = case
    (eq, tq), (ek, tk), (ev, tv) = _pair(qs, dtype), _pair(ks, dtype), _pair(vs, dtype)
    em = tm = None
    if mask_kind == "float":
        m = RNG.standard_normal((qs[-2], ks[-2]))
        em, tm = ember.tensor(m).to(eq.dtype), torch.tensor(m).to(tq.dtype)
    elif mask_kind == "bool":
        m = RNG.random((qs[-2], ks[-2])) > 0.3
        m[2] = False  # a row that sees no key: zero output and zero gradient
        em, tm = ember.tensor(m), torch.tensor(m)
    eo = F.scaled_dot_product_attention(eq, ek, ev, attn_mask=em, is_causal=causal, enable_gqa=gqa)
    to = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm, is_causal=causal, enable_gqa=gqa)
    g = RNG.standard_normal(tuple(to.shape))
    eo.backward(ember.tensor(g).to(eo.dtype))
    to.backward(torch.tensor(g).to(to.dtype))
    tol = {"float32": 1e-4, "float64": 1e-10, "bfloat16": 5e-2}[dtype]
    for e, t in ((eq, tq), (ek, tk), (ev, tv)):
        _close(e.grad, t.grad, tol)


def test_attention_double_backward_keeps_the_composite():
    (eq, tq), (ek, tk), (ev, tv) = _pair((1, 2, 5, 4), "float64"), _pair((1, 2, 6, 4), "float64"), \
        _pair((1, 2, 6, 3), "float64")
    eo = F.scaled_dot_product_attention(eq, ek, ev)
    to = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv)
    (eg,) = ember.autograd.grad(eo.sum(), eq, create_graph=True)
    (tg,) = torch.autograd.grad(to.sum(), tq, create_graph=True)
    _close(ember.autograd.grad((eg * eg).sum(), ek)[0], torch.autograd.grad((tg * tg).sum(), tk)[0], 1e-10)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_gelu_backward_matches_torch(approximate, dtype):
    a = RNG.standard_normal((33, 37)) * 3
    a[0, :6] = [0.0, np.inf, -np.inf, np.nan, 50.0, -50.0]
    g = RNG.standard_normal(a.shape)
    e = ember.ops["gelu_backward"](ember.tensor(g).to(getattr(ember, dtype)), ember.tensor(a).to(getattr(ember, dtype)),
                                   approximate=approximate)
    t = torch.ops.aten.gelu_backward(torch.tensor(g).to(getattr(torch, dtype)),
                                     torch.tensor(a).to(getattr(torch, dtype)), approximate=approximate)
    assert e.dtype is getattr(ember, dtype)
    tol = {"float32": 1e-5, "float64": 1e-12, "bfloat16": 2e-2}[dtype]
    np.testing.assert_allclose(e.to(ember.float64).numpy(), t.double().numpy(), rtol=tol, atol=tol, equal_nan=True)
    # Through autograd, and twice (the composite records the double backward).
    (ex, tx) = _pair((4, 5), "float64")
    eg = ember.autograd.grad(F.gelu(ex, approximate=approximate).sum(), ex, create_graph=True)[0]
    tg = torch.autograd.grad(torch.nn.functional.gelu(tx, approximate=approximate).sum(), tx, create_graph=True)[0]
    _close(eg, tg, 1e-12)
    _close(ember.autograd.grad(eg.sum(), ex)[0], torch.autograd.grad(tg.sum(), tx)[0], 1e-12)


def test_gelu_backward_rejects_a_bad_approximation():
    with pytest.raises(RuntimeError, match="approximate"):
        ember.ops["gelu_backward"](ember.ones(3), ember.ones(3), approximate="fast")


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,dim", [((6, 40), 1), ((40, 6), 0), ((3, 4, 5, 6), 2), ((3, 17), -1), ((2, 9, 33), 1)])
def test_softmax_backward_matches_torch(fn, shape, dim):
    ex, tx = _pair(shape)
    g = RNG.standard_normal(shape)
    getattr(ember, fn)(ex, dim).backward(ember.tensor(g).float())
    getattr(torch, fn)(tx, dim).backward(torch.tensor(g).float())
    _close(ex.grad, tx.grad, 1e-5)
    # The kernels themselves, with PyTorch's schema (input_dtype picks the result's dtype).
    y = getattr(torch, fn)(tx.detach().double(), dim)
    name = "_softmax_backward_data" if fn == "softmax" else "_log_softmax_backward_data"
    e = ember.ops[name](ember.tensor(g), ember.tensor(y.numpy()), dim, ember.float32)
    t = getattr(torch.ops.aten, name)(torch.tensor(g), y, dim, torch.float32)
    assert e.dtype is ember.float32
    _close(e, t, 1e-6)


def test_softmax_backward_with_dtype_and_double_backward():
    ex, tx = _pair((4, 5), "float64")
    eg = ember.autograd.grad(ember.softmax(ex, 1, dtype=ember.float32).pow(2).sum(), ex, create_graph=True)[0]
    tg = torch.autograd.grad(torch.softmax(tx, 1, dtype=torch.float32).pow(2).sum(), tx, create_graph=True)[0]
    assert eg.dtype is ember.float64
    _close(eg, tg, 1e-6)
    _close(ember.autograd.grad(eg.sum(), ex)[0], torch.autograd.grad(tg.sum(), tx)[0], 1e-5)
