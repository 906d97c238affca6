"""Shared helpers of the test_*_fns.py files: torch/ember pairs of several layouts, and gradients
compared with torch's."""

from __future__ import annotations

import numpy as np

import ember

from conftest import make_pair, torch

LAYOUTS = ["contiguous", "transposed", "sliced"]


def pair(shape, dtype="float32", layout="contiguous", low=-3, high=3, seed=0):
    """make_pair, for any rank: layouts needing two dims fall back to contiguous below that."""
    if layout == "transposed" and len(shape) < 2:
        layout = "contiguous"
    if layout == "sliced" and len(shape) < 1:
        layout = "contiguous"
    return make_pair(shape, dtype, low=low, high=high, seed=seed, layout=layout)


def leaves(arrays):
    es = [ember.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    return es, ts


def grads_match(fn, arrays, rtol=1e-6, atol=1e-8, seed=1):
    """fn(module, *leaves) with ember and torch: the outputs and every leaf's gradient agree."""
    es, ts = leaves(arrays)
    e_out, t_out = fn(ember, *es), fn(torch, *ts)
    e_out = e_out if isinstance(e_out, (tuple, list)) else (e_out,)
    t_out = t_out if isinstance(t_out, (tuple, list)) else (t_out,)
    rng = np.random.default_rng(seed)
    e_loss, t_loss = 0, 0
    for eo, to in zip(e_out, t_out):
        if not to.dtype.is_floating_point and not to.dtype.is_complex:
            continue
        if to.dtype.is_complex:
            eo, to = ember.view_as_real(eo), torch.view_as_real(to)
        np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=rtol, atol=atol)
        w = rng.uniform(-1.0, 1.0, tuple(to.shape))
        e_loss = e_loss + (eo * ember.tensor(w)).sum()
        t_loss = t_loss + (to * torch.tensor(w)).sum()
    e_grads = ember.autograd.grad(e_loss, es, allow_unused=True)
    t_grads = torch.autograd.grad(t_loss, ts, allow_unused=True)
    for i, (eg, tg) in enumerate(zip(e_grads, t_grads)):
        if tg is None:
            assert eg is None or not eg.detach().numpy().any(), f"input {i}: torch gives no gradient"
            continue
        assert eg is not None, f"input {i}: ember gives no gradient"
        np.testing.assert_allclose(eg.detach().numpy(), tg.numpy(), rtol=rtol, atol=atol, err_msg=f"input {i}")
