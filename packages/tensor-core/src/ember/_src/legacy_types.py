"""PyTorch's legacy tensor types (``FloatTensor``, ``LongTensor``, ...) and numeric constants.

``ember.FloatTensor(2, 3)`` is an uninitialized float32 tensor of that shape,
``ember.FloatTensor([1, 2])`` copies data, and ``isinstance(x, ember.FloatTensor)`` holds for
every float32 CPU tensor: old programs and tutorials still use all three.
"""

from __future__ import annotations

import math
import operator

from . import dtypes
from .ops.creation.factories import empty, tensor
from .shapes import Size
from .storage import is_storage_object, tensor_over_storage
from .tensor import Tensor

pi = math.pi
e = math.e
inf = math.inf
nan = math.nan
newaxis = None


class _LegacyTensorType(type):
    """Metaclass: calling a legacy type builds a tensor; isinstance checks dtype and device."""

    dtype: object

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type == "cpu"

    def __call__(cls, *args, device=None):
        if device is not None and str(device).split(":")[0] != "cpu":
            raise RuntimeError(f"legacy constructor expects device type: cpu but device type: {device} was passed")
        if not args:
            return empty((0,), dtype=cls.dtype)
        if len(args) == 1 and isinstance(args[0], Tensor):
            source = args[0]
            if source.dtype is not cls.dtype:
                raise TypeError(f"expected {cls.dtype} (got {source.dtype})")
            return source.view_as(source)
        if len(args) == 1 and is_storage_object(args[0]):
            return tensor_over_storage(args[0], cls.dtype)
        if len(args) == 1 and isinstance(args[0], Size):
            return empty(tuple(args[0]), dtype=cls.dtype)
        if all(_is_int(a) for a in args):
            return empty(tuple(operator.index(a) for a in args), dtype=cls.dtype)
        if len(args) == 1:
            data = args[0]
            if isinstance(data, (bool, int, float, complex)):
                raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
            return tensor(data, dtype=cls.dtype)
        raise TypeError(f"{cls.__name__}(): expected sizes (ints), a sequence of data or a tensor, got {args!r:.80}")


def _is_int(value) -> bool:
    # A size: an int or what converts to one (np.int64, a 0-d integer array); a NumPy array of
    # one or more dimensions has __index__ too, but it is data (LongTensor(np_array) copies it).
    if isinstance(value, (bool, float, Tensor)):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def _legacy(name: str, dtype) -> type:
    return _LegacyTensorType(name, (), {"dtype": dtype, "__module__": "ember", "__qualname__": name})


FloatTensor = _legacy("FloatTensor", dtypes.float32)
DoubleTensor = _legacy("DoubleTensor", dtypes.float64)
HalfTensor = _legacy("HalfTensor", dtypes.float16)
BFloat16Tensor = _legacy("BFloat16Tensor", dtypes.bfloat16)
ByteTensor = _legacy("ByteTensor", dtypes.uint8)
CharTensor = _legacy("CharTensor", dtypes.int8)
ShortTensor = _legacy("ShortTensor", dtypes.int16)
IntTensor = _legacy("IntTensor", dtypes.int32)
LongTensor = _legacy("LongTensor", dtypes.int64)
BoolTensor = _legacy("BoolTensor", dtypes.bool)

__all__ = [
    "BFloat16Tensor", "BoolTensor", "ByteTensor", "CharTensor", "DoubleTensor", "FloatTensor", "HalfTensor",
    "IntTensor", "LongTensor", "ShortTensor", "e", "inf", "nan", "newaxis", "pi",
]
