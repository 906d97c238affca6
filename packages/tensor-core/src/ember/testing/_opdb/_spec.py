"""The records of the op database and how a sample becomes the same call on ember and on PyTorch.

An entry says how to call a function on a *library* (``call(L)`` returns the callable for the
module ``L``, ember or torch), so one description drives both sides. A sample holds tensor
*specs*, not tensors: each spec is materialized per library, dtype and device from the same
seeded NumPy values and re-viewed with the same geometry (transposed, stepped, at a storage
offset, expanded), so both libraries see equal inputs in equal layouts, on the CPU, on the meta
device, or as float64 leaves for gradient checks. PyTorch is imported lazily: it is the oracle of
the test suites, never a dependency of ember.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

ALL_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
INT_DTYPES = ("uint8", "int8", "int16", "int32", "int64")
# The dtypes the CI forward tests run by default; `nox -s opdb` (EMBER_OPDB_FULL=1) runs all ten.
CORE_DTYPES = ("bool", "int64", "float32")
# Memory layouts a spec can take; "offset" starts the tensor at storage offset 3.
LAYOUTS = ("contiguous", "transposed", "sliced", "offset", "expanded")


@dataclass(frozen=True)
class T:
    """A tensor argument: shape, value range and layout; ``dtype`` None means the sample's dtype."""

    shape: tuple
    dtype: str | None = None
    layout: str = "contiguous"
    low: float | None = None  # None: -3 (0 for kind "index")
    high: float | None = None  # None: 3
    kind: str = "any"  # any | positive | nonzero | unit (in (-1, 1)) | index | spd | sorted | mask
    grad: bool = True  # a float leaf that gradient tests differentiate
    seed: int = 0


@dataclass(frozen=True)
class DType:
    """A dtype argument (``dtype=DType("float64")``), turned into ``L.float64`` per library."""

    name: str


@dataclass
class Sample:
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    desc: str = ""
    grad: bool = True  # usable by the gradient tests (a float sample with differentiable inputs)
    inplace: bool = True  # usable by the in-place test (self is not expanded or promoted)


@dataclass
class ErrorInput:
    """A call that must raise ``exc`` (PyTorch's exception type; ``match`` a regex of its message)."""

    sample: Sample
    exc: type
    match: str | None = None


@dataclass
class OpEntry:
    """One op of the op table or one public function.

    call        L -> callable on library module L (ember or torch)
    samples     dtype name -> list of Sample
    errors      () -> list of ErrorInput (checked on both libraries)
    dtypes      the dtypes the forward tests try (torch raising is compared too)
    tols        dtype name -> (rtol, atol)
    grad        differentiable: gradcheck + gradients vs torch on float64 samples
    forward_ad  forward-mode AD (jvp vs torch) supported
    out         takes ``out=``
    inplace     name of the in-place Tensor method (``"abs_"``) or None
    method      name of the Tensor method (``"abs"``) or None
    random      results are random: only shapes and dtypes are compared
    covered_by  for ops without a public call of their own (backward kernels, fused cells): the
                entry whose tests run them, with ``reason`` saying how
    skip        tests (by name: forward, meta, grad, forward_ad, out, inplace) this entry does not
                run, each with the reason
    """

    name: str
    call: Callable | None = None
    samples: Callable | None = None
    errors: Callable | None = None
    dtypes: tuple = CORE_DTYPES
    tols: dict = field(default_factory=dict)
    grad: bool = False
    forward_ad: bool = False
    out: bool = False
    inplace: str | None = None
    method: str | None = None
    random: bool = False
    covered_by: str | None = None
    reason: str = ""
    skip: dict = field(default_factory=dict)
    requires: tuple = ()  # modules the entry needs beyond tensor-core ("ember.nn"): tests skip without them
    kind: str = "op"  # op | function
    namespace: str = ""  # for functions: "", "linalg", "fft", "special", "nn.functional", ...

    def __repr__(self) -> str:
        return f"OpEntry({self.name})"

    def runs(self, test: str) -> bool:
        return self.covered_by is None and self.samples is not None and test not in self.skip


# -- materializing ---------------------------------------------------------------------------------


def _values(spec: T, dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shape = spec.shape
    if spec.kind == "spd":
        n = shape[-1]
        a = rng.uniform(-1, 1, shape)
        out = a @ np.swapaxes(a, -1, -2) + n * np.eye(n)
        return out
    if spec.kind == "mask" or dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool) if spec.kind != "nonzero" else np.ones(shape, bool)
    if spec.kind == "index":
        return rng.integers(int(spec.low or 0), int(spec.high or 3), size=shape).astype(np.int64)
    low = -3.0 if spec.low is None else spec.low
    high = 3.0 if spec.high is None else spec.high
    if spec.kind == "positive":
        low, high = 0.5, max(high, 1.0)
    elif spec.kind == "unit":
        low, high = -0.9, 0.9
    if dtype in INT_DTYPES:
        lo = max(int(low), 0) if dtype == "uint8" else int(np.floor(low))
        arr = rng.integers(lo, max(int(np.ceil(high)), lo + 1) + 1, size=shape).astype(np.int64)
        if spec.kind in ("nonzero", "positive"):
            arr[arr == 0] = 1
        return arr
    arr = rng.uniform(low, high, size=shape)
    if spec.kind == "sorted":
        arr = np.sort(arr, axis=-1)
    if spec.kind == "nonzero":
        arr[np.abs(arr) < 0.1] = 0.5
    return arr


def _base_shape(shape: tuple, layout: str) -> tuple:
    if layout == "transposed" and len(shape) >= 2:
        return shape[:-2] + (shape[-1], shape[-2])
    if layout == "sliced" and shape:
        return (shape[0] * 2,) + shape[1:]
    if layout == "expanded" and shape:
        return (1,) + shape[1:]
    if layout == "offset":
        return (int(np.prod(shape)) + 3,) if shape else (4,)
    return shape


def _view(x, shape: tuple, layout: str):
    """Re-views ``x`` (made at the base shape) so that it has ``shape`` in ``layout``."""
    if layout == "transposed" and len(shape) >= 2:
        return x.transpose(-1, -2)
    if layout == "sliced" and shape:
        return x[::2]
    if layout == "expanded" and shape:
        return x.expand(*shape)
    if layout == "offset":
        stride = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
        return x.as_strided(shape, stride, 3)
    return x


def _dtype_of(lib, name: str):
    return getattr(lib, name)


def to_lib(arr: np.ndarray, dtype: str, lib, device: str = "cpu"):
    """A ``lib`` tensor of ``dtype`` from NumPy values (bfloat16 rounds through float32 on both sides)."""
    import torch

    t = torch.from_numpy(np.ascontiguousarray(arr)).to(_dtype_of(torch, dtype))
    if lib is torch:
        return t if device == "cpu" else t.to(device)
    import ember

    if dtype == "bfloat16":
        e = ember.from_numpy(t.float().numpy().copy()).to(ember.bfloat16)
    else:
        e = ember.from_numpy(t.numpy().copy())
    return e if device == "cpu" else e.to(device)


def materialize(value, dtype: str, lib, *, device: str = "cpu", requires_grad: bool = False, seed: int = 0,
                leaves: list | None = None):
    """The library object for one argument: specs become tensors, DType a dtype, lists recurse."""
    if isinstance(value, T):
        d = value.dtype or dtype
        if value.kind in ("index", "mask"):
            d = value.dtype or ("int64" if value.kind == "index" else "bool")
        shape = tuple(value.shape)
        base = _base_shape(shape, value.layout)
        s = seed * 7919 + value.seed * 104729 + zlib.crc32(repr(shape).encode())
        if value.layout == "offset" and value.kind in ("spd", "sorted", "index", "mask"):
            # Values with structure are made at their shape and copied behind the offset.
            inner = _values(value, d, s).reshape(-1)
            arr = np.concatenate([np.zeros(3, inner.dtype), inner])
        else:
            arr = _values(T(base, d, value.layout, value.low, value.high, value.kind), d, s)
        x = to_lib(arr, d, lib, device)
        if requires_grad and value.grad and d in FLOAT_DTYPES:
            # The leaf is the whole underlying tensor; the argument is its view, so gradients flow
            # through the non-contiguous geometry (and into the elements an expansion repeats).
            x = x.detach().requires_grad_(True)
            if leaves is not None:
                leaves.append(x)
        return _view(x, shape, value.layout)
    if isinstance(value, DType):
        return _dtype_of(lib, value.name)
    if isinstance(value, list):
        return [materialize(v, dtype, lib, device=device, requires_grad=requires_grad, seed=seed + i,
                            leaves=leaves) for i, v in enumerate(value)]
    if isinstance(value, tuple):
        return tuple(materialize(v, dtype, lib, device=device, requires_grad=requires_grad, seed=seed + i,
                                 leaves=leaves) for i, v in enumerate(value))
    return value


def call_sample(entry: OpEntry, sample: Sample, dtype: str, lib, **kw):
    """Materializes ``sample`` for ``lib`` and calls the entry there; returns (result, args, kwargs, leaves)."""
    leaves: list = []
    args = [materialize(a, dtype, lib, seed=i, leaves=leaves, **kw) for i, a in enumerate(sample.args)]
    kwargs = {k: materialize(v, dtype, lib, seed=100 + i, leaves=leaves, **kw)
              for i, (k, v) in enumerate(sample.kwargs.items())}
    return entry.call(lib)(*args, **kwargs), args, kwargs, leaves
