"""Shared helpers of the GPU tests: skip without a GPU, compare a CUDA result with the CPU one."""

from __future__ import annotations

import numpy as np
import pytest

import ember

needs_gpu = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA GPU")

TOL = {ember.float32: (2e-5, 2e-5), ember.float64: (1e-10, 1e-10), ember.float16: (2e-3, 2e-3),
       ember.bfloat16: (1.6e-2, 1.6e-2)}


def host(t):
    """A CUDA (or CPU) tensor as a float64 (or exact integer/bool) NumPy array."""
    t = t.detach().cpu()
    if t.dtype in (ember.float16, ember.bfloat16):
        t = t.float()
    return t.numpy()


def assert_same(gpu, cpu, dtype=None, rtol=None, atol=None):
    assert gpu.device.type == "cuda", gpu.device
    assert tuple(gpu.shape) == tuple(cpu.shape), (gpu.shape, cpu.shape)
    assert gpu.dtype is cpu.dtype, (gpu.dtype, cpu.dtype)
    # Tolerances follow the result's dtype (a float result of integer inputs is still rounded), or the
    # inputs' where they are less precise (float16 inputs of a bool result are compared exactly anyway).
    r, a = TOL.get(cpu.dtype, (0, 0))
    if dtype in TOL and cpu.dtype.is_floating_point:
        r, a = max(r, TOL[dtype][0]), max(a, TOL[dtype][1])
    r = r if rtol is None else rtol
    a = a if atol is None else atol
    g, c = host(gpu), host(cpu)
    if g.dtype.kind in "fc":
        np.testing.assert_allclose(g, c, rtol=r, atol=a, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, c)


def rand(shape, dtype=ember.float32, low=-2.0, high=2.0, seed=0):
    g = np.random.default_rng(seed)
    if dtype is ember.bool:
        return ember.tensor(g.random(shape) > 0.5)
    if not dtype.is_floating_point:
        return ember.tensor(g.integers(-5, 6, size=shape)).to(dtype)
    return ember.tensor(g.uniform(low, high, size=shape)).to(dtype)
