"""More factories: empty_strided (+ Tensor.new_empty_strided), frombuffer, the deprecated
end-inclusive ``range``, and the default device factories use (set/get_default_device)."""

from __future__ import annotations

import builtins
import math
import operator
import warnings

from ... import device as _device
from ... import dtypes
from ..._native import _C
from ...device import CPU, to_device
from ...optable import declare
from ...shapes import numel
from ...tensor import Tensor, make_tensor, new_empty_tensor
from .factories import _affine_range, _finish, _resolve, check_pin_memory


def _int_list(name: str, values) -> tuple:
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"empty_strided(): argument '{name}' must be tuple of ints, not {type(values).__name__}")
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        raise TypeError(f"empty_strided(): argument '{name}' must be tuple of ints, got {values!r}") from None


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False) -> Tensor:
    """Uninitialized memory viewed with the given sizes and strides (in elements)."""
    check_pin_memory(pin_memory)
    size, stride = _int_list("size", size), _int_list("stride", stride)
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(size)} sizes, {len(stride)} strides")
    for s in size:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
    if any(st < 0 for st in stride):
        raise RuntimeError(f"empty_strided: negative strides are not supported, got {list(stride)}")
    d, dev = _resolve(dtype, device)
    extent = 0 if numel(size) == 0 else 1 + builtins.sum((s - 1) * st for s, st in zip(size, stride))
    flat = new_empty_tensor((extent,), d, dev)
    out = make_tensor(flat._storage, size, stride, 0, d, dev)
    return _finish(out, requires_grad)


def new_empty_strided(self: Tensor, size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                      pin_memory=False) -> Tensor:
    return empty_strided(size, stride, dtype=self.dtype if dtype is None else dtype,
                         device=self._device if device is None else device, requires_grad=requires_grad,
                         pin_memory=pin_memory)


def frombuffer(buffer, *, dtype, count: int = -1, offset: int = 0, requires_grad: bool = False) -> Tensor:
    """A 1-d tensor sharing the memory of an object with the buffer protocol (bytes, bytearray,
    array.array, mmap, ...); the object is kept alive by the tensor."""
    d = dtypes.to_dtype(dtype)
    count, offset = operator.index(count), operator.index(offset)
    try:
        whole, readonly = _C.Storage._wrap_buffer(buffer)
    except TypeError:
        raise ValueError("object does not implement Python buffer protocol.") from None
    length, size = whole.nbytes(), d.itemsize
    if length <= 0 or count == 0:
        raise ValueError(f"both buffer length ({length}) and count ({count}) must not be 0")
    if offset < 0 or offset >= length:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than buffer length "
                         f"({length} bytes) minus 1")
    if count < 0 and (length - offset) % size:
        raise ValueError(f"buffer length ({length - offset} bytes) after offset ({offset} bytes) must be a "
                         f"multiple of element size ({size})")
    n = (length - offset) // size if count < 0 else count
    if offset + n * size > length:
        raise ValueError(f"requested buffer length ({n} * {size} bytes) after offset ({offset} bytes) must not be "
                         f"greater than actual buffer length ({length} bytes)")
    if readonly:
        warnings.warn("The given buffer is not writable, and ember does not support non-writable tensors. This "
                      "means you can write to the underlying (supposedly non-writable) buffer using the tensor. "
                      "You may want to copy the buffer to protect its data or make it writable before converting "
                      "it to a tensor.", UserWarning, stacklevel=2)
    # A storage starting at the offset, owning a reference to the whole buffer's storage.
    storage = _C.Storage.borrow(whole.data_ptr() + offset, n * size, whole)
    from ...interop import mark_unresizable

    mark_unresizable(storage, whole)
    return _finish(make_tensor(storage, (n,), (1,), 0, d, CPU), requires_grad)


def from_file(filename, shared=None, size: int = 0, *, dtype=None, layout=None, device=None, pin_memory=False,
              requires_grad=False) -> Tensor:
    """A 1-d tensor of ``size`` elements over the file, memory-mapped (``UntypedStorage.from_file``;
    ``shared``: writes reach the file)."""
    from ...storage import UntypedStorage

    check_pin_memory(pin_memory)
    d, dev = _resolve(dtype, device)
    size = operator.index(size)
    storage = UntypedStorage.from_file(filename, bool(shared), size * d.itemsize)
    out = make_tensor(storage, (size,), (1,), 0, d, CPU)
    return _finish(out if dev == CPU else out.to(dev), requires_grad)


def range(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,  # noqa: A001
          requires_grad=False) -> Tensor:
    """Deprecated: values from ``start`` to ``end`` inclusive, of the default float dtype."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=2)
    if end is None:
        raise TypeError('range() missing 1 required positional arguments: "end"')
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    start, end, step = vals
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if any(isinstance(v, float) and not math.isfinite(v) for v in vals):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    d, dev = _resolve(dtype, device)
    n = int(math.floor((end - start) / step)) + 1
    return _finish(_affine_range(n, start, step, d, dev), requires_grad, out)


def set_default_device(device) -> None:
    """Sets the device factories (zeros, tensor, arange, rand, ...) use when none is given."""
    _device.DEFAULT_DEVICE[0] = CPU if device is None else to_device(device)


def get_default_device() -> _device.device:
    return _device.DEFAULT_DEVICE[0]


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
empty_strided               function
from_file                   function
frombuffer                  function
get_default_device          function
new_empty_strided           method
range                       function
set_default_device          function
""")
