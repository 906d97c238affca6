"""cross_entropy on float16/bfloat16 scores read in the kernel's registers (no float32 copy):
the loss and the input gradient against float64 computed from the same rounded scores (each
gradient element rounded once: within half a unit in the last place of its dtype, plus the
float32 arithmetic's error), and against torch, over the layouts the row kernels take
(contiguous rows with a vector tail, strided classes, (N, C, S) positions strided), label
smoothing, weights, ignore_index, and NaN/inf scores."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import ember
import ember.nn.functional as EF

# Unit roundoff of each dtype (half an ulp relative), and a float32-arithmetic allowance.
ROUND = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}


def _pair(x: np.ndarray, dtype: str, transpose: bool):
    if transpose:  # classes strided: a (C, N) buffer seen as (N, C)
        e = ember.tensor(np.ascontiguousarray(x.T)).to(getattr(ember, dtype)).t()
    else:
        e = ember.tensor(x).to(getattr(ember, dtype))
    return e.requires_grad_(), torch.tensor(x).to(getattr(torch, dtype)).requires_grad_()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape,kw,transpose", [
    ((33, 1037), {}, False),
    ((33, 1037), {"label_smoothing": 0.2}, False),
    ((33, 1037), {"ignore_index": 3}, False),
    ((17, 45), {"weight": True, "reduction": "sum"}, False),
    ((17, 45), {}, True),
    ((6, 5, 4, 3), {}, False),
])
def test_half_scores_against_float64(dtype, shape, kw, transpose):
    g = np.random.default_rng(7)
    x = (g.standard_normal(shape) * 3).astype(np.float32)
    y = g.integers(0, shape[1], (shape[0],) + shape[2:])
    kw = dict(kw)
    if kw.get("ignore_index") is not None:
        y.reshape(-1)[::4] = kw["ignore_index"]
    w = g.uniform(0.5, 2.0, shape[1]).astype(np.float32) if kw.pop("weight", False) else None
    ex, tx = _pair(x, dtype, transpose)
    ew = None if w is None else ember.tensor(w).to(ex.dtype)
    tw = None if w is None else torch.tensor(w).to(tx.dtype)
    le = EF.cross_entropy(ex, ember.tensor(y), weight=ew, **kw)
    lt = TF.cross_entropy(tx, torch.tensor(y), weight=tw, **kw)
    le.backward()
    lt.backward()
    assert ex.grad.dtype is ex.dtype and tuple(ex.grad.shape) == shape
    # float64 from the scores (and weights) as rounded to the half type
    x64 = torch.tensor(ex.detach().float().numpy()).double().requires_grad_()
    w64 = None if w is None else torch.tensor(ew.float().numpy()).double()
    l64 = TF.cross_entropy(x64, torch.tensor(y), weight=w64, **kw)
    l64.backward()
    u = ROUND[dtype]
    ref = float(l64.detach())
    assert abs(float(le.detach().float()) - ref) <= u * abs(ref) + 1e-6 * abs(ref) + 1e-6
    ge = ex.grad.float().numpy().astype(np.float64)
    g64 = x64.grad.numpy()
    scale = np.abs(g64).max()
    np.testing.assert_allclose(ge, g64, rtol=u * 1.01, atol=2e-6 * scale)
    # and beside torch at the existing tests' tolerances
    np.testing.assert_allclose(ge, tx.grad.float().numpy(), rtol=3e-2, atol=2e-2 * scale)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_scores_nan_inf_rows(dtype):
    rows = [[1.0, float("nan"), 2.0] + [0.5] * 30, [1.0, float("inf"), 0.0] + [0.1] * 30,
            [0.0] * 33, [-float("inf"), 1.0, 2.0] + [3.0] * 30]
    y = [0, 2, 1, 2]
    ex = ember.tensor(rows).to(getattr(ember, dtype)).requires_grad_()
    tx = torch.tensor(rows).to(getattr(torch, dtype)).requires_grad_()
    le = EF.cross_entropy(ex, ember.tensor(y), reduction="none")
    lt = TF.cross_entropy(tx, torch.tensor(y), reduction="none")
    le.sum().backward()
    lt.sum().backward()
    np.testing.assert_allclose(le.detach().float().numpy(), lt.detach().float().numpy(), rtol=1e-2, equal_nan=True)
    ge, gt = ex.grad.float().numpy(), tx.grad.float().numpy()
    np.testing.assert_array_equal(np.isnan(ge), np.isnan(gt))
    np.testing.assert_allclose(ge[~np.isnan(ge)], gt[~np.isnan(gt)], rtol=3e-2, atol=1e-2)


def test_half_scores_empty_batch():
    ex = ember.zeros(0, 5, dtype=ember.bfloat16, requires_grad=True)
    loss = EF.cross_entropy(ex, ember.zeros(0, dtype=ember.int64), reduction="sum")
    loss.backward()
    assert float(loss.detach()) == 0.0 and tuple(ex.grad.shape) == (0, 5) and ex.grad.dtype is ember.bfloat16
