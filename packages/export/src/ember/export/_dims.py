"""``Dim``: named dynamic dimensions for ``export(dynamic_shapes=...)`` (PyTorch's API).

A ``Dim("batch", min=2, max=64)`` names a size that may vary between calls of the exported
program. ``2 * batch`` and ``batch + 1`` are derived dims: sizes that are fixed increasing
linear functions of a root dim, so that inputs related by the model (a sequence and the same
sequence shifted by one) share one symbol. ``Dim.AUTO``, ``Dim.STATIC`` and ``Dim.DYNAMIC``
are hints: let the tracer decide, force a static size, or require a dynamic one.
"""

from __future__ import annotations

import enum
import sys

# PyTorch reports an unbounded maximum as int_oo; sys.maxsize - 1 is its stand-in in checks.
INT_OO = sys.maxsize - 1


class _DimHintType(enum.Enum):
    AUTO = "AUTO"
    STATIC = "STATIC"
    DYNAMIC = "DYNAMIC"


class _DimHint:
    """``Dim.AUTO``/``Dim.STATIC``/``Dim.DYNAMIC``; AUTO and DYNAMIC accept ``(min=, max=)``."""

    __slots__ = ("type", "min", "max")

    def __init__(self, type: _DimHintType, min: int | None = None, max: int | None = None):
        self.type = type
        self.min = min
        self.max = max

    def __call__(self, min: int | None = None, max: int | None = None) -> _DimHint:
        if self.type is _DimHintType.STATIC:
            raise TypeError("Dim.STATIC does not take a range")
        if min is not None and max is not None and min > max:
            raise AssertionError(f"min must be <= max, got min={min}, max={max}")
        return _DimHint(self.type, min, max)

    def __eq__(self, other) -> bool:
        return (isinstance(other, _DimHint) and (self.type, self.min, self.max)
                == (other.type, other.min, other.max))

    def __hash__(self) -> int:
        return hash((self.type, self.min, self.max))

    def __repr__(self) -> str:
        bounds = "".join(f", {k}={v}" for k, v in (("min", self.min), ("max", self.max)) if v is not None)
        return f"DimHint({self.type.value}{bounds})"


class Dim:
    """A named dynamic dimension with an inclusive range ``[min, max]``.

    Args:
        name: a Python identifier, used in error messages and suggested fixes.
        min: smallest allowed size (default 0).
        max: largest allowed size (default unbounded).

    Example:
        >>> batch = Dim("batch", min=2, max=64)
        >>> (2 * batch + 1).min
        5
    """

    AUTO = _DimHint(_DimHintType.AUTO)
    STATIC = _DimHint(_DimHintType.STATIC)
    DYNAMIC = _DimHint(_DimHintType.DYNAMIC)

    def __init__(self, name: str, *, min: int | None = None, max: int | None = None):
        if not isinstance(name, str):
            raise TypeError(f"Dim name must be a str, got {type(name).__name__}")
        if not name.isidentifier():
            raise AssertionError(f"Dim name must be a valid identifier, got {name}")  # PyTorch's type
        lo = 0 if min is None else int(min)
        hi = INT_OO if max is None else int(max)
        if lo > hi:
            raise AssertionError(f"Cannot create Dim with inconsistent min={min}, max={max}")
        if lo < 0:
            raise ValueError(f"Dim {name} must have a non-negative min, got {min}")
        self.__name__ = name
        self.min = lo
        self.max = hi

    # A Dim names the root of a family of derived dims.
    @property
    def root(self) -> Dim:
        return self

    def evaluate(self, value: int) -> int:
        """The size this dim takes when its root is ``value`` (the identity for a root dim)."""
        return value

    def _readable(self) -> str:
        return self.__name__

    def __repr__(self) -> str:
        parts = [repr(self.__name__)]
        if self.min != 2:  # PyTorch omits the default-like min of 2
            parts.append(f"min={self.min}")
        if self.max != INT_OO:
            parts.append(f"max={self.max}")
        return f"Dim({', '.join(parts)})"

    def _derive(self, coeff: int, offset: int) -> _DerivedDim:
        root = self.root
        c, o = coeff * self.coeff, coeff * self.offset + offset
        return _DerivedDim(root, c, o)

    coeff = 1
    offset = 0

    def __add__(self, other) -> _DerivedDim:
        if type(other) is not int:
            raise NotImplementedError(
                f"Attempted to add {other} to {self._readable()}, where an integer was expected. "
                "(Only increasing linear operations with integer coefficients are supported.)")
        return self._derive(1, other)

    __radd__ = __add__

    def __sub__(self, other) -> _DerivedDim:
        if type(other) is not int:
            raise NotImplementedError(
                f"Attempted to subtract {other} from {self._readable()}, where an integer was expected. "
                "(Only increasing linear operations with integer coefficients are supported.)")
        return self._derive(1, -other)

    def __rsub__(self, other):
        raise NotImplementedError(
            f"Attempted to negate {self._readable()}. "
            "(Only increasing linear operations with integer coefficients are supported.)")

    def __mul__(self, other) -> _DerivedDim:
        if type(other) is not int or other <= 0:
            raise NotImplementedError(
                f"Attempted to multiply {self!r} with {other}, where a positive integer was expected. "
                "(Only increasing linear operations with integer coefficients are supported.)")
        return self._derive(other, 0)

    __rmul__ = __mul__


class _DerivedDim(Dim):
    """``coeff * root + offset``: a dim whose size is fixed by its root's."""

    def __init__(self, root: Dim, coeff: int, offset: int):  # noqa: D107 - no Dim.__init__ checks
        self._root = root
        self.coeff = coeff
        self.offset = offset
        self.__name__ = self._readable()

    @property
    def root(self) -> Dim:
        return self._root

    @property
    def min(self) -> int:
        return self.evaluate(self._root.min)

    @property
    def max(self) -> int:
        if self._root.max >= INT_OO:
            return INT_OO
        return self.evaluate(self._root.max)

    def evaluate(self, value: int) -> int:
        return self.coeff * value + self.offset

    def _readable(self) -> str:
        text = self._root.__name__ if self.coeff == 1 else f"{self.coeff}*{self._root.__name__}"
        if self.offset > 0:
            text += f" + {self.offset}"
        elif self.offset < 0:
            text += f" - {-self.offset}"
        return text

    def __repr__(self) -> str:
        return self._readable()


def dims(*names: str, min: int | None = None, max: int | None = None) -> tuple[Dim, ...]:  # noqa: A002
    """Several :class:`Dim` s with the same range (``torch.export.dims``)."""
    return tuple(Dim(name, min=min, max=max) for name in names)


def is_dim(obj) -> bool:
    return isinstance(obj, Dim)


def is_hint(obj) -> bool:
    return isinstance(obj, _DimHint)
