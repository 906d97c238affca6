"""addmm with a 1-d bias (nn.Linear) takes cuBLASLt's bias epilogue on CUDA: values against the
float64 CPU product over dtypes, transposed and sliced (misaligned) operands, odd sizes, and the
cases that keep the copy-and-GEMM path (alpha/beta not 1, a 2-d or broadcast bias), with
gradients through F.linear (GPU only)."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import host, needs_gpu

import ember

pytestmark = [pytest.mark.gpu, needs_gpu]
F = pytest.importorskip("ember.nn.functional")

REL = {ember.float32: 1e-5, ember.float16: 3e-3, ember.bfloat16: 2e-2}


def _np(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def _check(got, want, dtype):
    g, w = host(got), np.asarray(want)
    assert got.dtype is dtype and g.shape == w.shape
    err = np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-30)
    assert err < REL[dtype], err


@pytest.mark.parametrize("dtype", [ember.bfloat16, ember.float16, ember.float32])
@pytest.mark.parametrize("m,k,n", [(64, 32, 48), (5, 7, 3), (1, 1, 1), (257, 130, 1)])
def test_addmm_bias_epilogue_matches_float64(dtype, m, k, n):
    x, w, b = _np((m, k), 0), _np((n, k), 1), _np((n,), 2)
    dx, dw, db = (ember.tensor(a).to(dtype).cuda() for a in (x, w, b))
    ref = x.astype(np.float64) @ w.T + b
    _check(ember.addmm(db, dx, dw.t()), ref, dtype)  # weight transposed, as nn.Linear passes it
    _check(ember.addmm(db, dx, dw.t().contiguous()), ref, dtype)
    _check(F.linear(dx, dw, db), ref, dtype)


@pytest.mark.parametrize("dtype", [ember.bfloat16, ember.float32])
def test_misaligned_operands_and_bias(dtype):
    x, w, b = _np((33, 17), 3), _np((9, 16), 4), _np((10,), 5)
    dx = ember.tensor(x).to(dtype).cuda()[:, 1:]  # row stride 17, offset 1: not 16-byte aligned
    dw = ember.tensor(w).to(dtype).cuda()
    db = ember.tensor(b).to(dtype).cuda()[1:]
    _check(ember.addmm(db, dx, dw.t()), x[:, 1:] @ w.T + b[1:], dtype)


def test_other_addmm_forms_keep_their_semantics():
    x, w, b = _np((6, 4), 6), _np((5, 4), 7), _np((5,), 8)
    dx, dw, db = (ember.tensor(a).float().cuda() for a in (x, w, b))
    _check(ember.addmm(db, dx, dw.t(), beta=0.5, alpha=2.0), 2 * x @ w.T + 0.5 * b, ember.float32)
    _check(ember.addmm(db.view(1, 5), dx, dw.t()), x @ w.T + b, ember.float32)
    _check(ember.addmm(db[:1], dx, dw.t()), x @ w.T + b[0], ember.float32)  # a (1,) bias broadcasts
    nan_bias = db.clone()
    nan_bias[2] = float("nan")
    got = host(ember.addmm(nan_bias, dx, dw.t()))
    assert np.isnan(got[:, 2]).all() and np.isfinite(np.delete(got, 2, axis=1)).all()


def test_linear_gradients_through_the_epilogue():
    x, w, b, g = _np((8, 6), 9), _np((3, 6), 10), _np((3,), 11), _np((8, 3), 12)
    outs = {}
    for device in ("cpu", "cuda"):
        tx, tw, tb = (ember.tensor(a).float().to(device).requires_grad_() for a in (x, w, b))
        F.linear(tx, tw, tb).backward(ember.tensor(g).float().to(device))
        outs[device] = [host(t.grad) for t in (tx, tw, tb)]
    for got, want in zip(outs["cuda"], outs["cpu"]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
