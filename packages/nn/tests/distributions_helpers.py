"""Shared helpers for the ember.distributions tests: build identical ember/torch parameters, compare."""

import numpy as np
import torch

import ember


def pair(array, requires_grad=False, dtype="float32"):
    """Returns (ember tensor, torch tensor) holding the same values."""
    a = np.asarray(array, dtype=dtype)
    e = ember.tensor(a.copy())
    t = torch.tensor(a.copy())
    if requires_grad:
        e.requires_grad_()
        t.requires_grad_()
    return e, t


def to_ember(t):
    return ember.tensor(t.detach().numpy().copy())


def close(e, t, rtol=1e-5, atol=1e-5):
    """Asserts an ember result matches torch's in shape, dtype name and values."""
    assert tuple(e.shape) == tuple(t.shape), (tuple(e.shape), tuple(t.shape))
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (e.dtype, t.dtype)
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol, equal_nan=True)


def rng(seed=0):
    return np.random.default_rng(seed)
