"""Complex inputs for the complex and fft tests: the same values as an ember and a torch tensor."""

from __future__ import annotations

import numpy as np
import torch

import ember

COMPLEX_NAMES = ["complex64", "complex128"]
E_COMPLEX = {"complex64": ember.complex64, "complex128": ember.complex128}
T_COMPLEX = {"complex64": torch.complex64, "complex128": torch.complex128}


def cpair(shape, name: str = "complex64", seed: int = 0, layout: str = "contiguous", scale: float = 3.0):
    """Random complex values with real and imaginary parts in [-scale, scale).

    layout: "contiguous", "transposed" (last two dims swapped in memory), "sliced" (step 2 on
    dim 0) or "expanded" (dim 0 of size 1 expanded).
    """
    rng = np.random.default_rng(seed)
    shape = tuple(shape)
    if layout == "sliced":
        base = (shape[0] * 2,) + shape[1:]
    elif layout == "transposed":
        base = shape[:-2] + (shape[-1], shape[-2])
    elif layout == "expanded":
        base = (1,) + shape[1:]
    else:
        base = shape
    arr = np.asarray(rng.uniform(-scale, scale, base) + 1j * rng.uniform(-scale, scale, base)).astype(name)
    e, t = ember.from_numpy(arr.copy()), torch.from_numpy(arr.copy())
    if layout == "sliced":
        e, t = e[::2], t[::2]
    elif layout == "transposed":
        e, t = e.transpose(-1, -2), t.transpose(-1, -2)
    elif layout == "expanded":
        e, t = e.expand(*shape), t.expand(*shape)
    return e, t


def rpair(shape, name: str = "float32", seed: int = 1, layout: str = "contiguous"):
    """Real values in [-3, 3) as an ember and a torch tensor, in the same layouts as cpair."""
    rng = np.random.default_rng(seed)
    shape = tuple(shape)
    base = {"sliced": (shape[0] * 2,) + shape[1:] if shape else shape,
            "transposed": shape[:-2] + shape[-1:] + shape[-2:-1] if len(shape) > 1 else shape,
            "expanded": (1,) + shape[1:] if shape else shape}.get(layout, shape)
    if name.startswith(("int", "uint")):
        arr = rng.integers(-3 if name != "uint8" else 0, 4, base).astype(name)
    else:
        arr = rng.uniform(-3, 3, base).astype(name)
    e, t = ember.from_numpy(arr.copy()), torch.from_numpy(arr.copy())
    if layout == "sliced":
        e, t = e[::2], t[::2]
    elif layout == "transposed":
        e, t = e.transpose(-1, -2), t.transpose(-1, -2)
    elif layout == "expanded":
        e, t = e.expand(*shape), t.expand(*shape)
    return e, t


def check(e_result, t_result, rtol=None, atol=None):
    """Same shape, dtype name and values (NaNs equal)."""
    assert isinstance(e_result, ember.Tensor), type(e_result)
    assert tuple(e_result.shape) == tuple(t_result.shape)
    assert e_result.dtype.name == str(t_result.dtype).split(".")[-1]
    got = torch.from_numpy(np.array(e_result.numpy(), copy=True))
    torch.testing.assert_close(got, t_result.resolve_conj(), rtol=rtol, atol=atol, equal_nan=True)
