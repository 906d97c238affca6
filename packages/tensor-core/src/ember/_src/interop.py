"""Interop with NumPy (zero-copy both ways where dtypes allow), pickling, and DLPack."""

from __future__ import annotations

import numpy as np

from .. import _C
from . import dtypes as dt
from .device import CPU, META
from .tensor import Tensor, make_tensor

_NUMPY_TO_EMBER = {np.dtype(d._numpy): d for d in dt.ALL_DTYPES if d._numpy is not None}


def is_numpy_array(obj) -> bool:
    return isinstance(obj, np.ndarray)


def numpy_dtype(d) -> np.dtype:
    if d._numpy is None:
        from .ops._common import type_name

        raise TypeError(f"Got unsupported ScalarType {type_name(d)}")
    return np.dtype(d._numpy)


def to_numpy(t: Tensor, force: bool = False) -> np.ndarray:
    """The tensor's memory as a NumPy array (no copy)."""
    if t._device is META:
        raise RuntimeError("can't convert meta device type tensor to numpy.")
    if t._device.type != "cpu":
        raise TypeError(f"can't convert {t._device.type} device type tensor to numpy. Use Tensor.cpu() first.")
    if t._requires_grad and not force:
        raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
    if t.dtype is dt.bfloat16 and force:
        t = t.to(dt.float32)
    npd = numpy_dtype(t.dtype)
    item = t.dtype.itemsize
    return np.ndarray(t._shape, dtype=npd, buffer=t._storage, offset=t._offset * item,
                      strides=tuple(s * item for s in t._stride))


def to_numpy_copy(t: Tensor) -> np.ndarray:
    return np.array(to_numpy(t, force=True), copy=True)


def read_scalar(t: Tensor):
    if t.dtype is dt.bfloat16:
        t = t.to(dt.float32)
    return to_numpy(t, force=True).reshape(()).item() if t.ndim else to_numpy(t, force=True).item()


def from_numpy(arr: np.ndarray) -> Tensor:
    """A tensor sharing ``arr``'s memory (``arr`` is kept alive by the tensor)."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(arr).__name__})")
    d = _NUMPY_TO_EMBER.get(arr.dtype.newbyteorder("=") if arr.dtype.byteorder not in "=|" else arr.dtype)
    if d is None or not arr.dtype.isnative:
        raise TypeError(
            f"can't convert np.ndarray of type {arr.dtype}. The only supported types are: float64, float32, float16, "
            "int64, int32, int16, int8, uint8, and bool."
        )
    item = arr.itemsize
    if any(s < 0 for s in arr.strides):
        raise ValueError(
            "At least one stride in the given numpy array is negative, and tensors with negative strides are not "
            "currently supported. (You can probably work around this by making a copy of your array  with "
            "array.copy().) "
        )
    if any(s % item for s in arr.strides):
        raise ValueError("given numpy array strides not a multiple of the element byte size. Copy the numpy array "
                         "to reallocate the memory.")
    shape = tuple(arr.shape)
    strides = tuple(s // item for s in arr.strides)
    if arr.size == 0:
        nbytes = 0
    else:
        nbytes = (sum((n - 1) * s for n, s in zip(shape, strides)) + 1) * item
    address = arr.__array_interface__["data"][0]
    storage = _C.Storage.borrow(address, nbytes, arr)
    return make_tensor(storage, shape, strides, 0, d, CPU)


def from_numpy_copy(arr: np.ndarray) -> Tensor:
    if arr.dtype == np.dtype("O"):
        raise TypeError("can't convert np.ndarray of type numpy.object_.")
    if arr.dtype.kind in "iu" and arr.dtype not in _NUMPY_TO_EMBER:
        arr = arr.astype(np.int64)
    if arr.dtype.kind == "f" and arr.dtype not in _NUMPY_TO_EMBER:
        arr = arr.astype(np.float64)
    src = from_numpy(np.ascontiguousarray(arr).reshape(arr.shape))  # ascontiguousarray makes 0-d arrays 1-d
    return src.clone()


def _rebuild(data: bytes, dtype_name: str, shape: tuple, requires_grad: bool = False) -> Tensor:
    d = dt._dtype_by_name(dtype_name)
    storage_dtype = dt.float32 if d is dt.bfloat16 else d
    arr = np.frombuffer(data, dtype=numpy_dtype(storage_dtype)).reshape(shape)
    t = from_numpy(arr.copy())
    if d is dt.bfloat16:
        t = t.to(dt.bfloat16)
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensor_reduce(t: Tensor):
    """Pickle support (used by multiprocessing and copy); ``ember.save`` does not pickle."""
    src = t.detach()
    if src.dtype is dt.bfloat16:
        src = src.to(dt.float32)
    return (_rebuild, (to_numpy_copy(src).tobytes(), t.dtype.name, tuple(t._shape), t._requires_grad))
