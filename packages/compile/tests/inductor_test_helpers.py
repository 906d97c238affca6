"""Helpers for the inductor tests: trace with make_fx, compile with compile_fx, compare three ways.

Each check runs one program on ember eagerly, on ember compiled, and on PyTorch (the oracle):
the program takes the framework module (``ember`` or ``torch``) as its first argument, since
ember's public API spells everything as PyTorch does.
"""

from __future__ import annotations

import numpy as np
import torch

import ember
from ember.compiler import make_fx
from ember.compiler.inductor import _compile_fx, compile_fx

TORCH_DTYPES = {
    ember.float32: torch.float32, ember.float64: torch.float64, ember.float16: torch.float16,
    ember.bfloat16: torch.bfloat16, ember.int64: torch.int64, ember.int32: torch.int32, ember.int16: torch.int16,
    ember.int8: torch.int8, ember.uint8: torch.uint8, ember.bool: torch.bool,
}
def spy_on_builds(monkeypatch) -> list:
    """The list every artifact ``lower_and_build`` makes from now on (forward and backward graphs)
    is appended to, for a test fixture to hand over."""
    out = []
    original = _compile_fx.lower_and_build

    def spy(gm, inputs):
        out.append(original(gm, inputs))
        return out[-1]

    monkeypatch.setattr(_compile_fx, "lower_and_build", spy)
    return out


SPECIALS = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.75, 1e-3, 40.0, -40.0]


def to_torch(t):
    if not isinstance(t, ember.Tensor):
        return t
    dtype = TORCH_DTYPES[t.dtype]
    if t.dtype is ember.bfloat16:
        return torch.from_numpy(t.float().numpy().copy()).to(torch.bfloat16).as_strided(t.shape, t.stride())
    base = torch.from_numpy(np.array(t.numpy(), copy=True)).to(dtype)
    return base


def make_input(shape, dtype, seed=0, specials=True, low=-3.0, high=3.0):
    """A tensor of ``dtype`` with random values and (for floats) NaN, infinities and signed zeros."""
    g = np.random.default_rng(seed)
    n = int(np.prod(shape)) if shape else 1
    if dtype is ember.bool:
        data = g.random(n) > 0.5
        return ember.tensor(data.reshape(shape))
    if not dtype.is_floating_point:
        lo, hi = (0, 100) if dtype is ember.uint8 else (-50, 50)
        data = g.integers(lo, hi, n)
        return ember.tensor(data.reshape(shape)).to(dtype)
    data = g.uniform(low, high, n)
    if specials and n >= len(SPECIALS):
        data[: len(SPECIALS)] = SPECIALS
        g.shuffle(data)
    return ember.tensor(data.reshape(shape), dtype=ember.float64).to(dtype)


def compile_program(program, inputs):
    """(compiled callable, GraphModule) of ``program(ember, *inputs)``."""
    gm = make_fx(lambda *xs: program(ember, *xs))(*inputs)
    return compile_fx(gm, list(inputs)), gm


def _flat(out):
    if isinstance(out, (list, tuple)):
        return [x for o in out for x in _flat(o)]
    return [out]


def assert_close(got, want, rtol, atol, what=""):
    assert got.dtype is want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    g = got.double().numpy() if got.dtype.is_floating_point else got.numpy()
    w = want.double().numpy() if want.dtype.is_floating_point else want.numpy()
    if got.dtype.is_floating_point:
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(g, w, err_msg=what)


def check(program, *inputs, rtol=1e-5, atol=1e-6, torch_rtol=None, torch_atol=None, lowered=True, kernels=None):
    """Compiled vs eager ember vs PyTorch on ``program``; returns the compiled callable."""
    compiled, _ = compile_program(program, inputs)
    if lowered:
        art = compiled.artifact
        assert art is not None, "the graph fell back to eager"
        assert art.extern_count == 0, f"{art.extern_count} ops were not lowered:\n{art.wrapper_source}"
        if kernels is not None:
            assert art.kernel_count == kernels, f"{art.kernel_count} kernels, expected {kernels}:\n" + \
                art.wrapper_source
    got = _flat(compiled(*inputs))
    want = _flat(program(ember, *inputs))
    ref = _flat(program(torch, *[to_torch(x) for x in inputs]))
    assert len(got) == len(want) == len(ref)
    for i, (g, w, r) in enumerate(zip(got, want, ref)):
        assert_close(g, w, rtol, atol, f"output {i} vs eager")
        r = r.float() if r.dtype == torch.bfloat16 else r
        r = (ember.tensor(r.item()) if r.dim() == 0 else ember.tensor(r.numpy())).to(w.dtype)
        assert_close(g, r, torch_rtol or rtol, torch_atol or atol, f"output {i} vs torch")
    return compiled


def tolerances(dtype):
    """(rtol, atol) for a compiled result against eager in ``dtype``."""
    if dtype is ember.float16:
        return 1e-3, 1e-3
    if dtype is ember.bfloat16:
        return 1e-2, 1e-2
    if dtype is ember.float64:
        return 1e-12, 1e-12
    return 2e-6, 1e-6
