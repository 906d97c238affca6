"""scaled_dot_product_attention's composite backward (the one recorded under create_graph=True) on
query rows whose every key is hidden: PyTorch's math path (_safe_softmax) gives those rows zero
probabilities, zero first derivatives and finite second derivatives; ember used to give NaN."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import ember


def _derivatives(mod, arrays, mask, causal, dtype):
    dt = getattr(mod, dtype)
    q, k, v, g = (mod.tensor(a, dtype=dt) for a in arrays)
    for t in (q, k, v):
        t.requires_grad_(True)
    if mask is not None:
        mask = mod.tensor(mask) if mask.dtype == bool else mod.tensor(mask, dtype=dt)
    out = mod.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                                         dropout_p=0.0)
    first = mod.autograd.grad(out, (q, k, v), g, create_graph=True)
    # A second-order loss that touches every first derivative nonlinearly.
    loss = sum((x * x).sum() + (x * w).sum() for x, w in zip(first, (q, k, v)))
    second = mod.autograd.grad(loss, (q, k, v))
    return [out.detach().numpy()] + [x.detach().numpy() for x in first] + [x.numpy() for x in second]


def _arrays(lq, s, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for shape in ((2, 3, lq, 4), (2, 3, s, 4), (2, 3, s, 5), (2, 3, lq, 5))]


@pytest.mark.parametrize("dtype,tol", [("float32", 2e-4), ("float64", 1e-11)])
@pytest.mark.parametrize("case", ["bool", "bool_causal", "float_neginf", "causal"])
def test_fully_masked_rows_match_torch(dtype, tol, case):
    lq, s = 5, 6
    arrays = _arrays(lq, s)
    rng = np.random.default_rng(1)
    causal = case in ("bool_causal", "causal")
    mask = None
    if case.startswith("bool"):
        mask = rng.random((lq, s)) > 0.4
        mask[0] = True
        mask[2] = False  # query row 2 sees no key
        mask[4, 1:] = False  # with causal too, row 4 keeps key 0 only
    elif case == "float_neginf":
        mask = rng.standard_normal((1, 3, lq, s))
        mask[:, 1, 3, :] = -np.inf  # one head's row 3 sees no key
    ember_mask, torch_mask, torch_causal = mask, mask, causal
    if case == "bool_causal":
        # PyTorch refuses attn_mask with is_causal; its reference is the two masks combined.
        # ember takes the pair (as PyTorch's CPU flash kernel, which has no double backward).
        torch_mask, torch_causal = mask & np.tril(np.ones((lq, s), dtype=bool)), False
    with sdpa_kernel(SDPBackend.MATH):  # PyTorch's CPU flash kernel has no double backward
        want = _derivatives(torch, arrays, torch_mask, torch_causal, dtype)
    got = _derivatives(ember, arrays, ember_mask, causal, dtype)
    for w, g in zip(want, got):
        assert np.isfinite(w).all()
        assert np.isfinite(g).all()
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    if case != "causal":
        masked = (slice(None), slice(None), 2) if case.startswith("bool") else (slice(None), 1, 3)
        assert not got[1][masked].any()  # zero gradient for the query row that sees nothing


def test_first_derivative_without_graph_matches_torch():
    # The native backward pass (no create_graph) on the same fully masked row.
    arrays = _arrays(4, 5, seed=3)
    mask = np.random.default_rng(4).random((4, 5)) > 0.3
    mask[1] = False
    outs = []
    for mod in (torch, ember):
        q, k, v, g = (mod.tensor(a, dtype=mod.float64) for a in arrays)
        for t in (q, k, v):
            t.requires_grad_(True)
        ctx = sdpa_kernel(SDPBackend.MATH) if mod is torch else ember.autograd.set_grad_enabled(True)
        with ctx:
            out = mod.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mod.tensor(mask))
        outs.append([x.numpy() for x in mod.autograd.grad(out, (q, k, v), g)])
    for w, g in zip(*outs):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fully_masked_row_with_dropout_is_finite(dtype):
    # dropout_p > 0 is differentiated through its parts (softmax, dropout, matmul; PyTorch's math
    # path): the masked row's output and first derivatives are 0, the second derivatives finite.
    rng = np.random.default_rng(5)
    dt = getattr(ember, dtype)
    q, k, v = (ember.tensor(rng.standard_normal(s), dtype=dt, requires_grad=True)
               for s in ((2, 2, 4, 3), (2, 2, 5, 3), (2, 2, 5, 3)))
    mask = rng.random((4, 5)) > 0.3
    mask[0] = True
    mask[1] = False
    ember.manual_seed(0)
    out = ember.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=ember.tensor(mask), dropout_p=0.5)
    first = ember.autograd.grad((out * out).sum() + out.sum(), (q, k, v), create_graph=True)
    second = ember.autograd.grad(sum((x * x).sum() for x in first), (q, k, v))
    assert not out[:, :, 1].detach().numpy().any()
    assert not first[0][:, :, 1].detach().numpy().any()
    for t in first + second:
        assert np.isfinite(t.detach().numpy()).all()
    assert np.abs(first[1].detach().numpy()).max() > 0  # the visible rows still have gradients
