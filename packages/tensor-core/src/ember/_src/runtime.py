"""Process-wide switches and small introspection helpers of the top-level API."""

from __future__ import annotations

from .tensor import Tensor

_DETERMINISTIC = {"mode": False, "warn_only": False}
_MATMUL_PRECISION = ["highest"]


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Every CPU kernel in ember is deterministic already; the setting is recorded."""
    _DETERMINISTIC["mode"] = bool(mode)
    _DETERMINISTIC["warn_only"] = bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    return _DETERMINISTIC["mode"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _DETERMINISTIC["warn_only"]


def set_float32_matmul_precision(precision: str) -> None:
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"Invalid precision {precision!r}: expected 'highest', 'high' or 'medium'")
    _MATMUL_PRECISION[0] = precision


def get_float32_matmul_precision() -> str:
    return _MATMUL_PRECISION[0]


def typename(obj) -> str:
    if isinstance(obj, Tensor):
        from .ops._common import type_name

        return f"torch.{type_name(obj.dtype)}Tensor"
    return type(obj).__module__ + "." + type(obj).__qualname__


def is_nonzero(input: Tensor) -> bool:
    if input.numel() != 1:
        raise RuntimeError(f"Boolean value of Tensor with {'no' if input.numel() == 0 else 'more than one'} values "
                           "is ambiguous")
    return bool(input.item())
