"""Comparing an ember result with PyTorch's: values, dtypes, shapes, exception types."""

from __future__ import annotations

import numpy as np

from ._spec import OpEntry, Sample, call_sample

# Default (rtol, atol) per result dtype; entries widen them in ``tols``.
DEFAULT_TOLS = {
    "float16": (1e-3, 1e-3),
    "bfloat16": (1.6e-2, 1e-2),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}


def to_torch(t):
    """An ember tensor as a torch tensor with the same values and dtype (through NumPy)."""
    import torch

    import ember

    t = t.detach()
    if t.device.type == "meta":
        return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=getattr(torch, t.dtype.name),
                                   device="meta")
    if t.dtype is ember.bfloat16:
        return torch.from_numpy(t.float().numpy().copy()).to(torch.bfloat16)
    return torch.from_numpy(np.array(t.cpu().resolve_conj().resolve_neg().numpy(), copy=True))


def _dtype_name(d) -> str:
    return str(d).split(".")[-1]


def assert_match(got, expected, *, tol=None, desc: str = "", values: bool = True) -> None:
    """``got`` (ember) equals ``expected`` (torch): structure, shapes, dtypes and (if ``values``) values."""
    import torch

    import ember

    if isinstance(expected, torch.Tensor):
        assert isinstance(got, ember.Tensor), f"{desc}: expected a Tensor, got {type(got).__name__}"
        assert tuple(got.shape) == tuple(expected.shape), f"{desc}: shape {tuple(got.shape)} vs {tuple(expected.shape)}"
        assert got.dtype.name == _dtype_name(expected.dtype), f"{desc}: dtype {got.dtype.name} vs {expected.dtype}"
        if not values or expected.device.type == "meta":
            return
        rtol, atol = tol or DEFAULT_TOLS.get(got.dtype.name, (0.0, 0.0))
        torch.testing.assert_close(to_torch(got), expected.detach(), rtol=rtol, atol=atol, equal_nan=True,
                                   check_dtype=False, check_stride=False, msg=lambda m: f"{desc}: {m}")
        return
    if isinstance(expected, (tuple, list)):
        assert isinstance(got, (tuple, list)), f"{desc}: expected a sequence, got {type(got).__name__}"
        assert len(got) == len(expected), f"{desc}: {len(got)} results vs {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_match(g, e, tol=tol, desc=f"{desc}[{i}]", values=values)
        return
    if isinstance(expected, (torch.dtype, torch.device, torch.Size)):
        assert str(got).replace("ember", "torch") == str(expected), f"{desc}: {got} vs {expected}"
        return
    if isinstance(expected, float) and values:
        assert isinstance(got, (float, int)), f"{desc}: {type(got).__name__} vs float"
        rtol, atol = tol or (1e-6, 1e-6)
        assert np.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True), f"{desc}: {got} vs {expected}"
        return
    if values:
        assert got == expected, f"{desc}: {got!r} vs {expected!r}"


def exception_family(exc: BaseException) -> tuple:
    """The exception types ember may raise where PyTorch raised ``exc``.

    PyTorch's NotImplementedError for an unsupported dtype is a RuntimeError subclass in spirit
    (its C++ "not implemented for" errors); ember's RuntimeError is accepted there too.
    """
    if isinstance(exc, NotImplementedError):
        return (NotImplementedError, RuntimeError)
    return (type(exc),)


def _is_empty(result) -> bool:
    import torch

    items = result if isinstance(result, (tuple, list)) else [result]
    return any(isinstance(r, torch.Tensor) and r.numel() == 0 for r in items)


def run_forward(entry: OpEntry, sample: Sample, dtype: str, *, device: str = "cpu", values: bool = True):
    """Runs ``sample`` on both libraries: results must match, or both raise the same exception type.

    Returns the ember result (None when both raised)."""
    import torch

    import ember

    desc = f"{entry.name}[{dtype}] {sample.desc}"
    try:
        expected, *_ = call_sample(entry, sample, dtype, torch)
    except Exception as exc:  # noqa: BLE001 - the type is what is compared
        try:
            call_sample(entry, sample, dtype, ember, device=device)
        except exception_family(exc):
            return None
        except Exception as got:  # noqa: BLE001
            raise AssertionError(f"{desc}: torch raised {type(exc).__name__}({exc}), ember raised "
                                 f"{type(got).__name__}({got})") from got
        raise AssertionError(f"{desc}: torch raised {type(exc).__name__}({exc}), ember did not") from None
    try:
        got, *_ = call_sample(entry, sample, dtype, ember, device=device)
    except (NotImplementedError, RuntimeError) as exc:
        # PyTorch skips its dtype check on empty inputs (a bool cumsum_ of nothing succeeds); ember
        # checks the dtype first (docs/deviations.md).
        if "not implemented for" in str(exc) and _is_empty(expected):
            return None
        raise
    tol = entry.tols.get(dtype)
    assert_match(got, expected, tol=tol, desc=desc, values=values and not entry.random)
    return got
