"""Exps of computed values through the prelude's AVX-512 exp: masked softmax's exp-sum (the
producer stored in the output row, then ``ember_exp_shift_sum_f32`` in place) and pointwise
kernels of rows (``ember_exp_row_f32`` in place over the output row, then the rest of the
expression). Values against eager ember and PyTorch (NaN/inf rows, fully masked rows, row lengths
around the 16- and 32-float blocks, the portable branch without AVX-512), the exp itself bit for
bit eager's and within 1 ulp of a float64 reference, the code using the helpers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from inductor_test_helpers import check, make_input, spy_on_builds

import ember
from ember.compiler.inductor import _codecache, config


def _masked_softmax(m, x, mask):
    return m.softmax((x * 0.125).masked_fill(mask, float("-inf")), -1)


def _exp_of_rows(m, x, c):
    # a pointwise kernel of rows (the per-row shift keeps its two loops): exp of a producer, then more
    return (x * 2 - c.unsqueeze(-1)).exp() * 3 - x


def _kernels(compiled):
    return compiled.artifact.cpp_source.split("EMBER_KERNEL void ")[1:]


@pytest.mark.parametrize("cols", [16, 17, 31, 32, 33, 48, 100, 128])
def test_masked_softmax_exp_sum_takes_the_vector_exp(cols):
    x = make_input((2, 3, cols, cols), ember.float32, seed=cols, specials=False, low=-40, high=40)
    x[0, 1, 2, 0] = float("nan")
    x[1, 0, 3] = float("inf")
    x[1, 2, 1] = float("-inf")
    mask = ember.ones(cols, cols, dtype=ember.bool).triu(1)
    mask[5] = True  # a row masked whole: NaN, as eager's and PyTorch's
    compiled = check(_masked_softmax, x, mask, rtol=1e-5, atol=1e-6)
    (kernel,) = _kernels(compiled)
    assert "ember_exp_shift_sum_f32(" in kernel and "ember_expf(" not in kernel, kernel


@pytest.mark.parametrize("cols", [16, 17, 33, 100, 2048])
def test_exp_rows_of_a_pointwise_kernel(cols):
    x = make_input((5, cols), ember.float32, seed=cols, specials=True, low=-60, high=50)
    c = make_input((5,), ember.float32, seed=1, specials=False)
    c[2] = float("inf")
    compiled = check(_exp_of_rows, x, c, rtol=1e-6, atol=1e-6)
    (kernel,) = _kernels(compiled)
    assert "ember_exp_row_f32(" in kernel and "ember_expf(" not in kernel, kernel


def test_long_or_short_rows_keep_the_inline_exp():
    # past EXP_ROW_MAX (the extra passes cost more than the exp saves) and under 16 columns
    for cols in (8, 4096):
        x = make_input((3, cols), ember.float32, seed=cols, specials=False)
        c = make_input((3,), ember.float32, seed=1, specials=False)
        (kernel,) = _kernels(check(_exp_of_rows, x, c, rtol=1e-6, atol=1e-6))
        assert "ember_exp_row_f32(" not in kernel and "ember_expf(" in kernel, kernel


def test_cross_entropy_backward_rows():
    g = np.random.default_rng(0)
    x = g.standard_normal((64, 512)).astype(np.float32) * 4
    x[3, 7] = np.inf
    y = g.integers(0, 512, 64)
    y[5] = -100  # ignored row
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ember.compile(lambda a, b: ember.nn.functional.cross_entropy(a, b))(ex, ember.tensor(y)).backward()
    torch.nn.functional.cross_entropy(tx, torch.tensor(y)).backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-8)


def test_exp_is_eager_bit_for_bit_and_within_one_ulp(monkeypatch):
    # every 1009th float32 of [-104, 89] and the edges: the prelude's AVX-512 exp against eager
    # ember's exp (identical bits) and a float64 reference (max ulp error printed with -s)
    lo, hi = np.float32(-104.0).view(np.int32), np.float32(89.0).view(np.int32)
    neg = np.arange(np.int32(np.float32(-0.0).view(np.int32)) & 0x7FFFFFFF, lo & 0x7FFFFFFF, 1009, dtype=np.int64)
    pos = np.arange(0, hi, 1009, dtype=np.int64)
    bits = np.concatenate([(neg | 0x80000000).astype(np.uint32), pos.astype(np.uint32)])
    vals = bits.view(np.float32)
    vals = np.concatenate([vals, np.array([88.72, 88.73, -103.97, -87.3, np.inf, -np.inf, np.nan, 0.0, -0.0],
                                          np.float32)])
    n = len(vals) // 1024 * 1024
    rows = vals[:n].reshape(-1, 1024)
    zero = np.zeros(rows.shape[0], np.float32)
    builds = spy_on_builds(monkeypatch)
    got = ember.compile(lambda a, c: (a - c.unsqueeze(-1)).exp())(ember.tensor(rows), ember.tensor(zero))
    assert "ember_exp_row_f32(" in builds[-1].cpp_source
    got = got.numpy().ravel()
    want = ember.tensor(rows).exp().numpy().ravel()
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    ref = np.exp(rows.astype(np.float64)).ravel()
    finite = np.isfinite(ref) & (ref > np.finfo(np.float32).tiny) & (ref < np.finfo(np.float32).max)
    ulp = np.spacing(ref[finite].astype(np.float32)).astype(np.float64)
    err = np.abs(got[finite].astype(np.float64) - ref[finite]) / ulp
    print(f"max ulp error vs float64 over {finite.sum()} values: {err.max():.3f}")
    assert err.max() <= 1.0


@pytest.mark.parametrize("cols", [17, 40])
def test_portable_branch(monkeypatch, cols):
    x = make_input((2, 2, cols, cols), ember.float32, seed=cols, specials=False, low=-20, high=20)
    mask = ember.ones(cols, cols, dtype=ember.bool).triu(1)
    c = make_input((3,), ember.float32, seed=1, specials=False)
    with config.patch({"cpp.extra_flags": ("-mno-avx512f",)}):
        assert "-mno-avx512f" in _codecache.flags()
        check(_masked_softmax, x, mask, rtol=1e-5, atol=1e-6)
        check(_exp_of_rows, x[0, 0, :3], c, rtol=1e-6, atol=1e-6)
