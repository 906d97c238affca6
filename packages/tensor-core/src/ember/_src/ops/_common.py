"""Helpers shared by op families: allocation, dtype conversion, out= handling."""

from __future__ import annotations

from ... import _C
from .. import dtypes as dt
from ..device import META
from ..shapes import numel
from ..tensor import Tensor, new_empty_tensor

HALF_TYPES = (dt.float16, dt.bfloat16)


def empty(shape: tuple, dtype, device) -> Tensor:
    return new_empty_tensor(shape, dtype, device)


def convert(t: Tensor, dtype) -> Tensor:
    """``t`` as ``dtype`` (itself if it already is); a fresh contiguous copy otherwise."""
    if t.dtype is dtype:
        return t
    out = new_empty_tensor(t._shape, dtype, t._device)
    if t._device is not META:
        _C.copy_(out, t)
    return out


def compute_dtype(dtype):
    """Kernels compute float16/bfloat16 in float32."""
    return dt.float32 if dtype in HALF_TYPES else dtype


def check_same_device(a: Tensor, b: Tensor) -> None:
    if a._device != b._device and a.ndim != 0 and b.ndim != 0:
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, "
            f"{a._device} and {b._device}!"
        )


def write_out(result: Tensor, out: Tensor | None) -> Tensor:
    """Implements ``out=``: resizes an empty/mismatched out, checks the dtype cast, copies."""
    if out is None:
        return result
    if not isinstance(out, Tensor):
        raise TypeError(f"out must be a Tensor, got {type(out).__name__}")
    if not dt.can_cast(result.dtype, out.dtype):
        raise RuntimeError(f"result type {_type_name(result.dtype)} can't be cast to the desired output type "
                           f"{_type_name(out.dtype)}")
    if out._shape != result._shape:
        if numel(out._shape) != 0:
            import warnings

            warnings.warn(
                f"An output with one or more elements was resized since it had shape {list(out._shape)}, "
                f"which does not match the required output shape {list(result._shape)}.",
                UserWarning,
                stacklevel=3,
            )
        fresh = new_empty_tensor(result._shape, out.dtype, out._device)
        out._storage, out._shape, out._stride, out._offset = fresh._storage, fresh._shape, fresh._stride, 0
    if out._device is not META:
        _C.copy_(out, result)
    out._bump_version()
    return out


_TYPE_NAMES = {
    "bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long",
    "float16": "Half", "bfloat16": "BFloat16", "float32": "Float", "float64": "Double",
    "complex64": "ComplexFloat", "complex128": "ComplexDouble",
}


def _type_name(d) -> str:
    """PyTorch's ScalarType name used in its error messages (Float, Long, ...)."""
    return _TYPE_NAMES.get(d.name, d.name)


type_name = _type_name
