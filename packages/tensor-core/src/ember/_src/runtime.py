"""Process-wide switches and small introspection helpers of the top-level API."""

from __future__ import annotations

from ._native import _C
from .ops._common import type_name
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


def typename(obj, /) -> str:
    """``torch.FloatTensor`` for tensors; else the qualified name of the class (of a class, a
    function or module itself), without the ``builtins.`` prefix: ``typename(5) == 'int'``."""
    if isinstance(obj, Tensor):
        return f"torch.{type_name(obj.dtype)}Tensor"
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module = type(obj).__module__ or ""
        qualname = type(obj).__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


def is_nonzero(input: Tensor) -> bool:
    if input.numel() != 1:
        what = "no values" if input.numel() == 0 else "more than one value"
        raise RuntimeError(f"Boolean value of Tensor with {what} is ambiguous")
    return bool(input.item())


# -- inter-op threads, warnings, denormals, anomaly mode --------------------------------------

# ember runs no inter-op thread pool (ops run on the calling thread, each parallel inside); the
# setting is kept for programs that read it back, with PyTorch's checks.
_INTEROP_THREADS = [0]
_WARN_ALWAYS = [False]


def get_num_interop_threads() -> int:
    if _INTEROP_THREADS[0] == 0:
        _INTEROP_THREADS[0] = _C.get_num_threads()
    return _INTEROP_THREADS[0]


def set_num_interop_threads(num: int) -> None:
    if isinstance(num, bool) or not isinstance(num, int):
        raise RuntimeError(f"set_num_interop_threads expects an int, but got {type(num).__name__}")
    if num <= 0:
        raise RuntimeError("set_num_interop_threads expects a positive integer")
    _INTEROP_THREADS[0] = num


def set_warn_always(b: bool, /) -> None:
    """When on, warnings that PyTorch issues once per process are issued every time."""
    _WARN_ALWAYS[0] = bool(b)


def is_warn_always_enabled() -> bool:
    return _WARN_ALWAYS[0]


def set_flush_denormal(mode: bool) -> bool:
    """Flushes denormal floats to zero on x86 (FTZ/DAZ); returns False where unsupported."""

    return bool(_C.set_flush_denormal(bool(mode)))


def _anomaly_module():
    # Anomaly mode belongs to ember-autograd; the core reaches it through the plugin (loaded on
    # first use), never by importing the upper package.
    from . import plugins

    plugin = plugins.load("autograd")
    return None if plugin is None else getattr(plugin, "anomaly_mode", None)


def is_anomaly_enabled() -> bool:
    module = _anomaly_module()
    return False if module is None else bool(module.is_anomaly_enabled())


def is_anomaly_check_nan_enabled() -> bool:
    module = _anomaly_module()
    return False if module is None else bool(module.is_anomaly_check_nan_enabled())


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    module = _anomaly_module()
    if module is None:
        if enabled:
            raise RuntimeError("anomaly detection needs the autograd engine: install the 'ember-autograd' package")
        return
    module.set_detect_anomaly(bool(enabled), check_nan)
