"""Shared test helpers: PyTorch (CPU build) and NumPy are the oracles."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

# dtype pairs used to build inputs on both sides.
DTYPE_PAIRS = {
    "bool": (ember.bool, torch.bool),
    "uint8": (ember.uint8, torch.uint8),
    "int8": (ember.int8, torch.int8),
    "int16": (ember.int16, torch.int16),
    "int32": (ember.int32, torch.int32),
    "int64": (ember.int64, torch.int64),
    "float16": (ember.float16, torch.float16),
    "bfloat16": (ember.bfloat16, torch.bfloat16),
    "float32": (ember.float32, torch.float32),
    "float64": (ember.float64, torch.float64),
}
FLOAT_NAMES = ["float16", "bfloat16", "float32", "float64"]
INT_NAMES = ["uint8", "int8", "int16", "int32", "int64"]


def to_torch(t: ember.Tensor) -> torch.Tensor:
    """Converts an ember tensor to a torch tensor (by value), keeping the dtype."""
    name = t.dtype.name
    if name == "bfloat16":
        return torch.from_numpy(t.float().numpy().copy()).to(torch.bfloat16)
    return torch.from_numpy(np.array(t.numpy(), copy=True))


def from_torch(t: torch.Tensor) -> ember.Tensor:
    if t.dtype == torch.bfloat16:
        return ember.from_numpy(t.float().numpy().copy()).to(ember.bfloat16)
    return ember.from_numpy(t.detach().numpy().copy())


def make_pair(shape, name: str, low=-5, high=5, seed=0, layout="contiguous"):
    """The same random values as an ember tensor and a torch tensor.

    layout: "contiguous", "transposed" (last two dims swapped in memory), "sliced" (step 2
    on dim 0), "expanded" (a size-1 dim expanded).
    """
    rng = np.random.default_rng(seed)
    if layout == "sliced":
        base_shape = (shape[0] * 2,) + tuple(shape[1:])
    elif layout == "transposed":
        base_shape = tuple(shape[:-2]) + (shape[-1], shape[-2])
    elif layout == "expanded":
        base_shape = (1,) + tuple(shape[1:])
    else:
        base_shape = tuple(shape)
    if name == "bool":
        arr = rng.integers(0, 2, size=base_shape).astype(bool)
    elif name in INT_NAMES:
        lo = 0 if name == "uint8" else low
        arr = rng.integers(lo, high, size=base_shape).astype(name)
    else:
        arr = rng.uniform(low, high, size=base_shape).astype(np.float64)
    e_dtype, t_dtype = DTYPE_PAIRS[name]
    e = ember.tensor(arr).to(e_dtype)
    t = torch.from_numpy(arr.copy()).to(t_dtype)
    if layout == "sliced":
        # Every other row (a step-2 slice), built without relying on __getitem__.
        e = e.as_strided(tuple(shape), (e.stride(0) * 2,) + tuple(e.stride()[1:]), e.storage_offset())
        t = t[::2]
    elif layout == "transposed":
        e, t = e.transpose(-1, -2), t.transpose(-1, -2)
    elif layout == "expanded":
        e, t = e.expand(*shape), t.expand(*shape)
    return e, t


def assert_same(e_result, t_result, rtol=None, atol=None, check_dtype=True):
    """Values, shape and (mapped) dtype of an ember result match torch's."""
    if isinstance(t_result, (tuple, list)):
        assert len(e_result) == len(t_result)
        for a, b in zip(e_result, t_result):
            assert_same(a, b, rtol=rtol, atol=atol, check_dtype=check_dtype)
        return
    if not isinstance(t_result, torch.Tensor):
        assert e_result == pytest.approx(t_result, nan_ok=True)
        return
    assert isinstance(e_result, ember.Tensor), f"expected a Tensor, got {type(e_result)}"
    assert tuple(e_result.shape) == tuple(t_result.shape)
    if check_dtype:
        assert str(e_result.dtype).split(".")[-1] == str(t_result.dtype).split(".")[-1]
    expected = to_torch(e_result)
    if t_result.dtype in (torch.float16, torch.bfloat16):
        rtol = rtol if rtol is not None else (1e-2 if t_result.dtype == torch.bfloat16 else 1e-3)
        atol = atol if atol is not None else 1e-3
    torch.testing.assert_close(expected, t_result, rtol=rtol, atol=atol, equal_nan=True, check_dtype=False)


def raises_like(fn_e, fn_t):
    """Runs ``fn_t()`` (torch), which must raise, then ``fn_e()`` (ember), which must raise the same type
    (or a subclass); returns both messages ``(ember's, torch's)`` for the caller's comparison."""
    with pytest.raises(Exception) as t_err:
        fn_t()
    with pytest.raises(type(t_err.value)) as e_err:
        fn_e()
    return str(e_err.value), str(t_err.value)
