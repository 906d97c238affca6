"""Padding layers: zero, constant, reflection, replication and circular, for 1, 2 and 3 spatial dims."""

from __future__ import annotations

from collections.abc import Iterable

from ember import Tensor

from .. import functional as F
from .module import Module

__all__ = [
    "CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
    "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
]


def _ntuple(x, n: int) -> tuple:
    # An iterable is taken as given (PyTorch does not check its length here); a number is repeated.
    return tuple(x) if isinstance(x, Iterable) else (x,) * n


class _CircularPadNd(Module):
    _dims: int

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _ntuple(padding, 2 * self._dims)

    def forward(self, input: Tensor) -> Tensor:
        d = self._dims
        if input.dim() != d + 1 and input.dim() != d + 2:
            raise ValueError(f"expected {d + 1}D or {d + 2}D input (got {input.dim()}D input)")
        return F.pad(input, self.padding, "circular")

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(Module):
    _dims: int

    def __init__(self, padding, value: float) -> None:
        super().__init__()
        self.value = value
        self.padding = _ntuple(padding, 2 * self._dims)

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class _ReflectionPadNd(Module):
    _dims: int

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _ntuple(padding, 2 * self._dims)

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "reflect")

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ReplicationPadNd(Module):
    _dims: int

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _ntuple(padding, 2 * self._dims)

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "replicate")

    def extra_repr(self) -> str:
        return f"{self.padding}"


class CircularPad1d(_CircularPadNd):
    """Pads the last 1 dim: wraps around."""

    _dims = 1


class CircularPad2d(_CircularPadNd):
    """Pads the last 2 dims: wraps around."""

    _dims = 2


class CircularPad3d(_CircularPadNd):
    """Pads the last 3 dims: wraps around."""

    _dims = 3


class ReflectionPad1d(_ReflectionPadNd):
    """Pads the last 1 dim: mirrors the input, without repeating the edge."""

    _dims = 1


class ReflectionPad2d(_ReflectionPadNd):
    """Pads the last 2 dims: mirrors the input, without repeating the edge."""

    _dims = 2


class ReflectionPad3d(_ReflectionPadNd):
    """Pads the last 3 dims: mirrors the input, without repeating the edge."""

    _dims = 3


class ReplicationPad1d(_ReplicationPadNd):
    """Pads the last 1 dim: repeats the edge value."""

    _dims = 1


class ReplicationPad2d(_ReplicationPadNd):
    """Pads the last 2 dims: repeats the edge value."""

    _dims = 2


class ReplicationPad3d(_ReplicationPadNd):
    """Pads the last 3 dims: repeats the edge value."""

    _dims = 3


class ConstantPad1d(_ConstantPadNd):
    """Pads the last 1 dim with ``value``."""

    _dims = 1


class ConstantPad2d(_ConstantPadNd):
    """Pads the last 2 dims with ``value``."""

    _dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Pads the last 3 dims with ``value``."""

    _dims = 3


class ZeroPad1d(ConstantPad1d):
    """Pads the last 1 dim with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pads the last 2 dims with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    """Pads the last 3 dims with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"
