"""The fused-attention op pair's CPU definition (``_scaled_dot_product_flash_attention`` and its
backward, the reference for device kernels) against PyTorch's scaled_dot_product_attention."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import ember


@pytest.mark.parametrize("b,h,hk,lq,s,d,e,causal,mask", [
    (2, 4, 2, 7, 9, 8, 6, False, None),
    (1, 2, 2, 5, 5, 4, 4, True, None),
    (1, 2, 2, 5, 6, 4, 4, False, "bool"),
    (1, 2, 1, 5, 6, 4, 3, False, "float"),
])
def test_flash_pair_matches_torch(b, h, hk, lq, s, d, e, causal, mask):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(*shape, dtype=torch.float64, generator=g, requires_grad=True)
               for shape in ((b, h, lq, d), (b, hk, s, d), (b, hk, s, e)))
    m = None
    if mask == "bool":
        m = torch.rand(lq, s, generator=g) > 0.3
        m[:, 0] = True  # every row sees a key (PyTorch's backward gives NaN on rows that see none)
    elif mask == "float":
        m = torch.randn(1, h, lq, s, dtype=torch.float64, generator=g)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal,
                                                           enable_gqa=h != hk)
    grad = torch.randn(ref.shape, dtype=torch.float64, generator=g)
    ref.backward(grad)
    eq, ek, ev = (ember.tensor(t.detach().numpy()).requires_grad_() for t in (q, k, v))
    em = None if m is None else ember.tensor(m.numpy())
    out, lse = ember.ops._scaled_dot_product_flash_attention(eq, ek, ev, em, causal, 1 / math.sqrt(d))
    assert lse.dtype is ember.float64 and tuple(lse.shape) == (b, h, lq)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-12, atol=1e-12)
    out.backward(ember.tensor(grad.numpy()))
    for mine, theirs in ((eq, q), (ek, k), (ev, v)):
        np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_rows_that_see_no_key_give_zeros():
    q, k, v = ember.randn(1, 1, 3, 4, dtype=ember.float64), ember.randn(1, 1, 2, 4, dtype=ember.float64), \
        ember.randn(1, 1, 2, 4, dtype=ember.float64)
    mask = ember.tensor([[True, False], [False, False], [True, True]])
    out, lse = ember.ops._scaled_dot_product_flash_attention(q, k, v, mask, False, 0.5)
    assert out[0, 0, 1].abs().sum().item() == 0.0 and lse[0, 0, 1].item() == -math.inf
    dq, dk, dv = ember.ops._scaled_dot_product_flash_attention_backward(ember.ones_like(out), q, k, v, out, lse,
                                                                        mask, False, 0.5)
    assert np.isfinite(dq.numpy()).all() and dq[0, 0, 1].abs().sum().item() == 0.0
    with pytest.raises(NotImplementedError, match="derivative"):
        qg = q.clone().requires_grad_()
        o = ember.ops._scaled_dot_product_flash_attention(qg, k, v, None, False, 0.5)[0]
        (gq,) = ember.autograd.grad(o.sum(), qg, create_graph=True)
        gq.sum().backward()
