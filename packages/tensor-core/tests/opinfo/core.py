"""The OpInfo record, paired-input builders and the shared comparison loop."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

import ember
from ember._src.ops.shape.views import slice_op

ALL_NAMES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
FLOAT_NAMES = ("float16", "bfloat16", "float32", "float64")
INT_NAMES = ("uint8", "int8", "int16", "int32", "int64")
LAYOUTS = ("contiguous", "transposed", "sliced", "expanded")

E_DTYPES = {n: getattr(ember, n) for n in ALL_NAMES}
T_DTYPES = {n: getattr(torch, n) for n in ALL_NAMES}


@dataclass
class Sample:
    """One call: ``args`` hold (ember, torch) pairs or plain Python values; kwargs are shared."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    desc: str = ""

    def ember_args(self):
        return [a[0] if isinstance(a, Pair) else a for a in self.args]

    def torch_args(self):
        return [a[1] if isinstance(a, Pair) else a for a in self.args]


class Pair(tuple):
    """(ember tensor, torch tensor) with the same values, dtype and layout."""


@dataclass
class OpInfo:
    name: str
    ember_fn: Callable
    torch_fn: Callable
    samples: Callable  # samples(dtype_name) -> list[Sample]
    dtypes: tuple = ALL_NAMES
    tols: dict = field(default_factory=dict)  # dtype name -> (rtol, atol)
    errors: Callable | None = None  # errors() -> list[(Sample, exception type)]
    inplace: str | None = None  # method name of the in-place variant (``abs_``)
    check_out: bool = False  # the op takes out=

    def __repr__(self) -> str:
        return self.name


def rng_values(name: str, shape, low=-5.0, high=5.0, seed=0, nonzero=False) -> np.ndarray:
    """Random values representable in dtype ``name`` (as float64/int64/bool arrays)."""
    rng = np.random.default_rng(seed)
    if name == "bool":
        arr = rng.integers(0, 2, size=shape).astype(bool)
        if nonzero:
            arr[...] = True
        return arr
    if name in INT_NAMES:
        lo = max(int(low), 0) if name == "uint8" else int(low)
        arr = rng.integers(lo, max(int(high), lo + 1), size=shape).astype(np.int64)
        if nonzero:
            arr[arr == 0] = 1
        return arr
    arr = rng.uniform(low, high, size=shape)
    if name in ("float16", "bfloat16"):
        arr = torch.from_numpy(arr).to(T_DTYPES[name]).double().numpy()
    if nonzero:
        arr[arr == 0] = 1.0
    return arr


def pair_of(arr: np.ndarray, name: str) -> Pair:
    """Both tensors from the same NumPy values, converted to dtype ``name``."""
    arr = np.array(arr, copy=True)
    t = torch.from_numpy(arr.copy()).to(T_DTYPES[name])
    e = ember.tensor(arr).to(E_DTYPES[name])
    return Pair((e, t))


def make(shape, name: str, layout="contiguous", low=-5.0, high=5.0, seed=0, nonzero=False) -> Pair:
    """A pair of ``shape`` in the given memory layout (see conftest.make_pair)."""
    shape = tuple(shape)
    if layout == "sliced":
        base = (shape[0] * 2,) + shape[1:]
    elif layout == "transposed":
        base = shape[:-2] + (shape[-1], shape[-2])
    elif layout == "expanded":
        base = (1,) + shape[1:]
    else:
        base = shape
    e, t = pair_of(rng_values(name, base, low, high, seed, nonzero), name)
    if layout == "sliced":
        e, t = slice_op(e, 0, 0, base[0], 2), t[::2]
    elif layout == "transposed":
        e, t = e.transpose(-1, -2), t.transpose(-1, -2)
    elif layout == "expanded":
        e, t = e.expand(*shape), t.expand(*shape)
    return Pair((e, t))


def special_values(name: str) -> np.ndarray:
    """Edge values of a dtype: nan/inf/-0.0 for floats, min/max/-1 for integers."""
    if name == "bool":
        return np.array([True, False])
    if name in INT_NAMES:
        info = np.iinfo(name)
        vals = [info.min, info.max, 0, 1, 2, info.max - 1] + ([] if name == "uint8" else [-1, -2, info.min + 1])
        return np.array(vals, dtype=np.int64)
    vals = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5,
            1e-3, -1e-3, 3.0, -3.0, 10.0, -10.0, 0.999, -0.999]
    return np.array(vals)


def to_torch(t):
    if t.dtype is ember.bfloat16:
        return torch.from_numpy(t.float().numpy().copy()).to(torch.bfloat16)
    return torch.from_numpy(np.array(t.numpy(), copy=True))


def assert_close(e_result, t_result, tol=None, desc=""):
    """Shape, dtype and values (nan equal nan, -0.0 sign ignored) of ember vs torch."""
    if isinstance(t_result, (tuple, list)):
        assert len(e_result) == len(t_result)
        for a, b in zip(e_result, t_result):
            assert_close(a, b, tol, desc)
        return
    assert isinstance(e_result, ember.Tensor), f"{desc}: expected a Tensor, got {type(e_result)}"
    assert tuple(e_result.shape) == tuple(t_result.shape), desc
    assert e_result.dtype.name == str(t_result.dtype).split(".")[-1], f"{desc}: {e_result.dtype} vs {t_result.dtype}"
    rtol, atol = tol if tol else (None, None)
    if rtol is None and t_result.dtype in (torch.float16, torch.bfloat16):
        rtol, atol = (1.6e-2, 1e-5) if t_result.dtype == torch.bfloat16 else (1e-3, 1e-5)
    torch.testing.assert_close(to_torch(e_result), t_result, rtol=rtol, atol=atol, equal_nan=True,
                               check_dtype=False, msg=lambda m: f"{desc}: {m}")


def run_sample(op: OpInfo, sample: Sample, dtype_name: str):
    """Calls the op on both sides; if torch raises, ember must raise the same exception type."""
    try:
        expected = op.torch_fn(*sample.torch_args(), **sample.kwargs)
    except Exception as exc:  # noqa: BLE001 - the type is what is compared
        try:
            op.ember_fn(*sample.ember_args(), **sample.kwargs)
        except type(exc):
            return None
        except Exception as got:
            raise AssertionError(f"{op.name} {sample.desc}: torch raised {type(exc).__name__}({exc}), "
                                 f"ember raised {type(got).__name__}({got})") from got
        raise AssertionError(
            f"{op.name} {sample.desc}: torch raised {type(exc).__name__}({exc}), ember did not"
        ) from None
    got = op.ember_fn(*sample.ember_args(), **sample.kwargs)
    assert_close(got, expected, op.tols.get(dtype_name), f"{op.name}[{dtype_name}] {sample.desc}")
    return got
