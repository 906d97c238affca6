"""dtypes, PyTorch's type promotion, finfo/iinfo and the default dtype.

Note [Type promotion]: an op's result dtype is found in three tiers, highest first:
tensors with at least one dimension, 0-d tensors, then Python scalars ("wrapped
numbers", weakly typed). A lower tier only changes the result when it belongs to a
higher *category* (bool < integer < floating < complex): ``int32_tensor + 2.5`` is float32 (the
default dtype), ``float16_tensor + 2.5`` stays float16, ``uint8_tensor + 1000`` stays
uint8, and a 0-d float64 tensor does not upcast a float32 vector.
"""

from __future__ import annotations

import builtins
from typing import Union


class dtype:  # noqa: N801 - PyTorch's spelling
    """A tensor element type, e.g. ``ember.float32``."""

    __slots__ = ("name", "_code", "itemsize", "is_floating_point", "is_signed", "is_complex", "_numpy")

    def __init__(self, name: str, code: int, itemsize: int, floating: bool, signed: bool, numpy_name):
        self.name = name
        self._code = code
        self.itemsize = itemsize
        self.is_floating_point = floating
        self.is_signed = signed
        self.is_complex = False
        self._numpy = numpy_name

    def __repr__(self) -> str:
        return "ember." + self.name

    def to_real(self) -> dtype:
        """The dtype of a complex dtype's parts (complex64 -> float32); other dtypes are their own."""
        return _TO_REAL.get(self, self)

    def to_complex(self) -> dtype:
        """The complex dtype whose parts are this floating dtype (float32 -> complex64)."""
        if self.is_complex:
            return self
        if self not in _TO_COMPLEX:
            raise RuntimeError(f"expected a floating dtype to convert to complex, got {self}")
        return _TO_COMPLEX[self]

    def __reduce__(self):
        return (_dtype_by_name, (self.name,))


# Codes match csrc/common/dtype.h.
bool = dtype("bool", 0, 1, False, False, "bool")
uint8 = dtype("uint8", 1, 1, False, False, "uint8")
int8 = dtype("int8", 2, 1, False, True, "int8")
int16 = dtype("int16", 3, 2, False, True, "int16")
int32 = dtype("int32", 4, 4, False, True, "int32")
int64 = dtype("int64", 5, 8, False, True, "int64")
float16 = dtype("float16", 6, 2, True, True, "float16")
bfloat16 = dtype("bfloat16", 7, 2, True, True, None)
float32 = dtype("float32", 8, 4, True, True, "float32")
float64 = dtype("float64", 9, 8, True, True, "float64")
complex64 = dtype("complex64", 10, 8, False, True, "complex64")
complex128 = dtype("complex128", 11, 16, False, True, "complex128")
complex64.is_complex = complex128.is_complex = True
# No complex32 (PyTorch's chalf): float16/bfloat16 parts widen to complex64.
_TO_REAL = {complex64: float32, complex128: float64}
_TO_COMPLEX = {float16: complex64, bfloat16: complex64, float32: complex64, float64: complex128}

ALL_DTYPES = (bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64, complex64, complex128)
BY_CODE = ALL_DTYPES
_BY_NAME = {d.name: d for d in ALL_DTYPES}
# PyTorch's aliases.
ALIASES = {
    "half": float16,
    "float": float32,
    "double": float64,
    "short": int16,
    "int": int32,
    "long": int64,
    "cfloat": complex64,
    "cdouble": complex128,
}
_BY_NAME.update(ALIASES)


def _dtype_by_name(name: str) -> dtype:
    return _BY_NAME[name]


def is_integral(d: dtype, include_bool: builtins.bool = False) -> builtins.bool:
    if d is bool:
        return include_bool
    return not d.is_floating_point and not d.is_complex


_default_dtype = float32


def get_default_dtype() -> dtype:
    return _default_dtype


def set_default_dtype(d: dtype, /) -> None:
    """Sets the dtype of Python floats and of float tensors created without a dtype."""
    global _default_dtype
    if not isinstance(d, dtype) or not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default_dtype = d


def _rank(d: dtype) -> int:
    return d.itemsize


def promote_types(a: dtype, b: dtype) -> dtype:
    """The smallest dtype that both a and b convert to without losing their category."""
    if not isinstance(a, dtype) or not isinstance(b, dtype):
        raise TypeError("promote_types expects two ember.dtype arguments")
    if a is b:
        return a
    if a is bool:
        return b
    if b is bool:
        return a
    if a.is_complex or b.is_complex:
        # The parts widen to hold both operands' precision; integers fit any complex dtype.
        parts = [d.to_real() for d in (a, b) if d.is_complex or d.is_floating_point]
        real = parts[0] if len(parts) == 1 else promote_types(parts[0], parts[1])
        return real.to_complex()
    if a.is_floating_point and b.is_floating_point:
        if {a, b} == {float16, bfloat16}:
            return float32
        return a if a.itemsize >= b.itemsize else b
    if a.is_floating_point:
        return a
    if b.is_floating_point:
        return b
    # Both integral.
    if a.is_signed == b.is_signed:
        return a if a.itemsize >= b.itemsize else b
    unsigned, signed = (a, b) if not a.is_signed else (b, a)
    if signed.itemsize > unsigned.itemsize:
        return signed
    return int16  # uint8 with int8


def _category(d: dtype) -> int:
    if d is bool:
        return 0
    if d.is_complex:
        return 3
    if d.is_floating_point:
        return 2
    return 1


def _combine(higher, lower):
    """PyTorch's rule for merging a promotion tier into a higher one."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.is_complex:
        return higher
    if lower.is_complex:  # a float tier keeps its precision: float64 + 1j is complex128
        return higher.to_complex() if higher.is_floating_point else promote_types(higher, lower)
    if higher.is_floating_point:
        return higher
    if higher is bool or lower.is_floating_point:
        return promote_types(higher, lower)
    return higher


def numpy_scalar_value(value):
    """The Python number a NumPy scalar (``np.float32(2.5)``, ``np.int64(3)``) stands for, or None
    for anything else. PyTorch's argument parser takes NumPy scalars as numbers; a NumPy bool
    reads as a float there (``tensor([1, 2]) * np.bool_(True)`` is float32), and so here."""
    if type(value).__module__ != "numpy":
        return None
    import numpy

    if isinstance(value, numpy.bool_):
        return float(value)
    if isinstance(value, numpy.number):
        return value.item()
    return None


def scalar_dtype(value) -> dtype:
    """The dtype a Python scalar takes when it stands alone (e.g. ``ember.tensor(2.5)``)."""
    if isinstance(value, builtins.bool):
        return bool
    if isinstance(value, int):
        return int64
    if isinstance(value, float):
        return _default_dtype
    if isinstance(value, complex):
        return _default_dtype.to_complex()
    number = numpy_scalar_value(value)
    if number is not None:
        return scalar_dtype(number)
    raise TypeError(f"expected a bool, int, float or complex, got {type(value).__name__}")


def result_type_of(*operands) -> dtype:
    """Result dtype of an op over tensors and Python scalars (see Note [Type promotion])."""
    dim_result = zero_result = wrapped_result = None
    for x in operands:
        d = getattr(x, "dtype", None)
        if isinstance(d, dtype):
            if x.ndim > 0:
                dim_result = d if dim_result is None else promote_types(dim_result, d)
            else:
                zero_result = d if zero_result is None else promote_types(zero_result, d)
        elif isinstance(x, (builtins.bool, int, float, complex)):
            d = scalar_dtype(x)
            wrapped_result = d if wrapped_result is None else promote_types(wrapped_result, d)
        elif isinstance(x, dtype):
            dim_result = x if dim_result is None else promote_types(dim_result, x)
        elif numpy_scalar_value(x) is not None:
            d = scalar_dtype(numpy_scalar_value(x))
            wrapped_result = d if wrapped_result is None else promote_types(wrapped_result, d)
        else:
            raise TypeError(f"result_type: unsupported operand of type {type(x).__name__}")
    result = _combine(dim_result, _combine(zero_result, wrapped_result))
    if result is None:
        raise TypeError("result_type needs at least one operand")
    return result


def can_cast(from_: dtype, to: dtype) -> builtins.bool:
    """Whether PyTorch allows an in-place or out= result of dtype ``from_`` into ``to``."""
    if not isinstance(from_, dtype) or not isinstance(to, dtype):
        raise TypeError("can_cast expects two ember.dtype arguments")
    return _category(from_) <= _category(to)


class finfo:  # noqa: N801
    """Machine limits of a floating dtype, as ``torch.finfo``."""

    _TABLE = {
        "float16": (16, 1.1920928955078125e-07 * 8192, 65504.0, 6.103515625e-05, 5.960464477539063e-08, 0.001, 3),
        "bfloat16": (16, 0.0078125, 3.3895313892515355e38, 1.1754943508222875e-38, 9.183549615799121e-41, 0.01, 2),
        "float32": (32, 1.1920928955078125e-07, 3.4028234663852886e38, 1.1754943508222875e-38,
                    1.401298464324817e-45, 1e-06, 6),
        "float64": (64, 2.220446049250313e-16, 1.7976931348623157e308, 2.2250738585072014e-308,
                    5e-324, 1e-15, 15),
    }

    def __init__(self, type: dtype | None = None):  # noqa: A002 - PyTorch's name
        type = _default_dtype if type is None else type
        if isinstance(type, dtype):
            type = type.to_real()  # PyTorch: a complex dtype's finfo is its parts'
        if not isinstance(type, dtype) or type.name not in self._TABLE:
            raise TypeError(f"finfo expects a floating-point dtype, got {type}")
        bits, eps, mx, tiny, smallest_sub, resolution, _ = self._TABLE[type.name]
        self.bits = bits
        self.eps = eps
        self.max = mx
        self.min = -mx
        self.tiny = tiny
        self.smallest_normal = tiny
        self.smallest_subnormal = smallest_sub
        self.resolution = resolution
        self.dtype = type.name

    def __repr__(self) -> str:
        # PyTorch prints each limit as a C++ stream does a double: six significant digits (%g).
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.tiny:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:  # noqa: N801
    """Limits of an integer dtype, as ``torch.iinfo``."""

    def __init__(self, type: dtype):  # noqa: A002
        if not isinstance(type, dtype) or type.is_floating_point or type.is_complex:
            raise TypeError(f"iinfo expects an integer dtype, got {type}")
        self.bits = type.itemsize * 8
        if type is bool:
            self.min, self.max = 0, 1
        elif type.is_signed:
            self.min, self.max = -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        else:
            self.min, self.max = 0, (1 << self.bits) - 1
        self.dtype = type.name

    def __repr__(self) -> str:
        # As PyTorch: the limits printed as doubles (int64's as -9.22337e+18).
        return f"iinfo(min={float(self.min):g}, max={float(self.max):g}, dtype={self.dtype})"


DTypeLike = Union[dtype, type, str, None]  # noqa: UP007  (a runtime alias)


def to_dtype(value) -> dtype:
    """A ``dtype=`` argument: an ember dtype, or the Python types float, int, bool and complex, as
    PyTorch's argument parser takes them. Anything else (a string, a NumPy dtype) is a TypeError."""
    if isinstance(value, dtype):
        return value
    if value is builtins.float:
        return float64
    if value is builtins.int:
        return int64
    if value is builtins.bool:
        return bool
    if value is builtins.complex:
        return complex128
    kind = type(value)
    label = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    if isinstance(value, type):
        label = "type"
    raise TypeError(f"argument 'dtype' must be torch.dtype, not {label}")


def from_numpy_dtype(value) -> dtype:
    """The ember dtype of a NumPy dtype (or anything ``numpy.dtype`` accepts), for interop."""
    if isinstance(value, dtype):
        return value
    import numpy as np

    try:
        name = np.dtype(value).name
    except TypeError:
        name = None
    if name in _BY_NAME:
        return _BY_NAME[name]
    raise TypeError(f"cannot interpret {value!r} as an ember dtype")
