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
