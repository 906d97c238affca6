"""``ember.testing.assert_close`` with PyTorch's default tolerances and report format."""

from __future__ import annotations

import builtins

from . import dtypes
from .ops.creation import factories as creation
from .ops.creation.factories import tensor
from .ops.pointwise.closeness import isclose
from .ops.pointwise.complex import complex as make_complex
from .tensor import Tensor

# (rtol, atol) by dtype, as torch.testing.assert_close uses.
_DEFAULT_TOLERANCES = {
    dtypes.float16: (1e-3, 1e-5),
    dtypes.bfloat16: (1.6e-2, 1e-5),
    dtypes.float32: (1.3e-6, 1e-5),
    dtypes.float64: (1e-7, 1e-7),
    dtypes.complex64: (1.3e-6, 1e-5),
    dtypes.complex128: (1e-7, 1e-7),
}


def _as_tensor(value):
    if isinstance(value, Tensor):
        return value
    return tensor(value)


def assert_close(actual, expected, *, allow_subclasses: bool = True, rtol=None, atol=None, equal_nan: bool = False,
                 check_device: bool = True, check_dtype: bool = True, check_layout: bool = True,
                 check_stride: bool = False, msg=None):
    """Raises AssertionError unless ``actual`` and ``expected`` are close (values, shape, dtype)."""
    if (rtol is None) != (atol is None):
        raise ValueError("Both 'rtol' and 'atol' must be either specified or omitted")
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)) and not any(
        isinstance(x, (builtins.bool, int, float)) for x in (actual, expected)
    ) and (any(isinstance(x, Tensor) for x in actual) or any(isinstance(x, Tensor) for x in expected)):
        if len(actual) != len(expected):
            raise AssertionError(f"The length of the sequences mismatch: {len(actual)} != {len(expected)}")
        for a, e in zip(actual, expected):
            assert_close(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=check_device,
                         check_dtype=check_dtype, msg=msg)
        return
    if isinstance(actual, dict) and isinstance(expected, dict):
        if set(actual) != set(expected):
            raise AssertionError(f"The keys of the mappings do not match: {set(actual) ^ set(expected)}")
        for k in actual:
            assert_close(actual[k], expected[k], rtol=rtol, atol=atol, equal_nan=equal_nan,
                         check_device=check_device, check_dtype=check_dtype, msg=msg)
        return
    if not isinstance(actual, Tensor) and not isinstance(expected, Tensor):
        if type(actual) is not type(expected) and check_dtype:
            raise AssertionError(f"The values for attribute 'type' do not match: {type(actual)} != {type(expected)}.")
    a, e = _as_tensor(actual), _as_tensor(expected)
    if a.shape != e.shape:
        raise AssertionError(msg or f"The values for attribute 'shape' do not match: {a.shape} != {e.shape}.")
    if check_device and a.device != e.device:
        raise AssertionError(msg or f"The values for attribute 'device' do not match: {a.device} != {e.device}.")
    if check_dtype and a.dtype is not e.dtype:
        raise AssertionError(msg or f"The values for attribute 'dtype' do not match: {a.dtype} != {e.dtype}.")
    if check_stride and a.stride() != e.stride():
        raise AssertionError(msg or f"The values for attribute 'stride()' do not match: {a.stride()} != {e.stride()}.")
    work = dtypes.promote_types(a.dtype, e.dtype)
    if rtol is None:
        rtol, atol = _DEFAULT_TOLERANCES.get(work, (0.0, 0.0))
    a, e = a.detach().to(work), e.detach().to(work)

    close = isclose(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if bool(close.all().item()):
        return
    if msg is not None:
        raise AssertionError(msg if isinstance(msg, str) else msg(""))
    mismatched = int((~close).sum().item())
    total = close.numel()
    kind = "Scalars" if a.ndim == 0 else "Tensor-likes"
    lines = [f"{kind} are not {'close' if rtol or atol else 'equal'}!", "",
             f"Mismatched elements: {mismatched} / {total} ({100.0 * mismatched / total:.1f}%)"]
    if work.is_floating_point or work is not dtypes.bool:
        wide = dtypes.complex128 if work.is_complex else dtypes.float64
        diff = (a.to(wide) - e.to(wide)).abs()
        diff = diff.masked_fill(close, 0)
        flat_index = int(diff.reshape(-1).argmax().item())
        lines.append(f"Greatest absolute difference: {diff.reshape(-1)[flat_index].item()} at index "
                     f"{_unravel(flat_index, a.shape)} (up to {atol} allowed)")
        rel = diff / e.to(wide).abs()
        rel = rel.masked_fill(close, 0).nan_to_num(nan=0.0)
        rel_index = int(rel.reshape(-1).argmax().item())
        lines.append(f"Greatest relative difference: {rel.reshape(-1)[rel_index].item()} at index "
                     f"{_unravel(rel_index, a.shape)} (up to {rtol} allowed)")
    raise AssertionError("\n".join(lines))


def _unravel(flat: int, shape) -> tuple:
    index = []
    for size in reversed(tuple(shape)):
        index.append(flat % size if size else 0)
        flat //= size if size else 1
    return tuple(reversed(index))


def make_tensor(*shape, dtype, device, low=None, high=None, requires_grad: bool = False,
                noncontiguous: bool = False, exclude_zero: bool = False, memory_format=None):
    """A random tensor for tests, as ``torch.testing.make_tensor`` (``memory_format``: the result is
    ``.clone(memory_format=...)`` of it, exclusive with ``noncontiguous``)."""
    if noncontiguous and memory_format is not None:
        raise ValueError(f"The parameters `noncontiguous` and `memory_format` are mutually exclusive, "
                         f"but got noncontiguous={noncontiguous} and memory_format={memory_format}")

    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    dtype = dtypes.to_dtype(dtype)
    if dtype is dtypes.bool:
        result = creation_rand(shape, device) < 0.5
    elif dtype.is_floating_point:
        lo = -9.0 if low is None else low
        hi = 9.0 if high is None else high
        result = (creation_rand(shape, device) * (hi - lo) + lo).to(dtype)
    elif dtype.is_complex:  # real and imaginary parts each uniform in [low, high)

        lo = -9.0 if low is None else low
        hi = 9.0 if high is None else high
        parts = [creation_rand(shape, device) * (hi - lo) + lo for _ in range(2)]
        result = make_complex(*parts).to(dtype)
    else:
        info = dtypes.iinfo(dtype)
        lo = max(info.min, -9 if low is None else low)
        hi = min(info.max, 10 if high is None else high)
        result = (creation_rand(shape, device) * (hi - lo) + lo).floor().to(dtype)
    if exclude_zero:
        result = result.masked_fill(result == 0, 1)
    if noncontiguous and result.numel() > 1:
        doubled = creation.empty(tuple(shape[:-1]) + (shape[-1] * 2,), dtype=dtype, device=device)
        doubled[..., ::2] = result
        result = doubled[..., ::2]
    if memory_format is not None:
        result = result.clone(memory_format=memory_format)
    if requires_grad:
        result.requires_grad_(True)
    return result


def creation_rand(shape, device):
    from . import api

    return api.rand(*shape, device=device, dtype=dtypes.float64)
