"""Shared helpers of the autograd tests: paired ember/torch leaves and gradient comparison."""

from __future__ import annotations

import numpy as np
import torch

import ember

_NP = {"float32": np.float32, "float64": np.float64}


def leaf_pair(shape, dtype: str = "float32", seed: int = 0, requires_grad: bool = True, low=-1.0, high=1.0):
    """The same random values as an ember leaf and a torch leaf."""
    rng = np.random.default_rng(seed)
    data = rng.uniform(low, high, shape).astype(_NP[dtype])
    e = ember.tensor(data.copy(), requires_grad=requires_grad)
    t = torch.tensor(data.copy(), requires_grad=requires_grad)
    return e, t


def to_numpy(x):
    if isinstance(x, torch.Tensor):
        return x.detach().numpy()
    return x.detach().numpy()


def assert_close(e, t, rtol=1e-5, atol=1e-6):
    """Compares an ember tensor with a torch tensor (shape, dtype name, values)."""
    assert e is not None and t is not None, (e, t)
    assert tuple(e.shape) == tuple(t.shape), (tuple(e.shape), tuple(t.shape))
    assert e.dtype.name == str(t.dtype).replace("torch.", ""), (e.dtype, t.dtype)
    np.testing.assert_allclose(to_numpy(e), to_numpy(t), rtol=rtol, atol=atol)


# -- op checks shared by the formula tests (gradcheck + gradients against torch) ----------------


def make_arrays(shapes, seed: int = 0, low=-1.0, high=1.0):
    """float64 arrays of ``shapes`` with values in [low, high)."""
    rng = np.random.default_rng(seed)
    return [rng.uniform(low, high, s) for s in shapes]


def leaves(arrays, layout: str = "contiguous"):
    """Matching (ember, torch) float64 leaves; ``layout='transposed'`` makes them non-contiguous."""
    es, ts = [], []
    for a in arrays:
        if layout == "transposed" and a.ndim >= 2:
            base = np.ascontiguousarray(np.swapaxes(a, -1, -2))
            e = ember.tensor(base.copy()).transpose(-1, -2)
            t = torch.tensor(base.copy()).transpose(-1, -2)
        else:
            e, t = ember.tensor(a.copy()), torch.tensor(a.copy())
        es.append(e.requires_grad_(True))
        ts.append(t.requires_grad_(True))
    return es, ts


def _flat_outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def grads_match_torch(fn, arrays, layout="contiguous", rtol=1e-6, atol=1e-8, seed=1):
    """Runs ``fn(module, *inputs)`` with ember and torch and compares outputs and input grads."""
    es, ts = leaves(arrays, layout)
    e_out = [o for o in _flat_outputs(fn(ember, *es)) if o.dtype.is_floating_point]
    t_out = [o for o in _flat_outputs(fn(torch, *ts)) if o.dtype.is_floating_point]
    assert len(e_out) == len(t_out)
    rng = np.random.default_rng(seed)
    e_loss, t_loss = 0, 0
    for eo, to in zip(e_out, t_out):
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
        assert tuple(eg.shape) == tuple(tg.shape)
        np.testing.assert_allclose(eg.detach().numpy(), tg.numpy(), rtol=rtol, atol=atol, err_msg=f"input {i}")
