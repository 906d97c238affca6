"""Anomaly detection: remembers where each node's forward ran and checks gradients for NaN.

``detect_anomaly()`` (context manager / decorator) and ``set_detect_anomaly(mode)`` switch it
on. While on, every recorded node keeps the traceback of its forward call; when a node's
backward fails or returns NaN, a warning shows that traceback and a RuntimeError names the node.
"""

from __future__ import annotations

import functools
import threading
import traceback
import warnings

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "is_anomaly_check_nan_enabled"]


class _State(threading.local):
    def __init__(self):
        self.enabled = False
        self.check_nan = True


_STATE = _State()


def is_enabled() -> bool:
    return _STATE.enabled


def is_anomaly_enabled() -> bool:
    return _STATE.enabled


def is_anomaly_check_nan_enabled() -> bool:
    return _STATE.check_nan


def store_forward_trace(node) -> None:
    node.metadata["traceback_"] = traceback.format_stack()[:-3]


def _warn_forward(node) -> None:
    stack = node.metadata.get("traceback_") if node._metadata else None
    if stack:
        warnings.warn(
            f"Error detected in {node.name()}. Traceback of forward call that caused the error:\n" + "".join(stack),
            UserWarning,
            stacklevel=4,
        )
    else:
        warnings.warn(
            f"Error detected in {node.name()}. No forward pass information available. Enable detect anomaly "
            "during forward pass for more information.",
            UserWarning,
            stacklevel=4,
        )


def run_checked(node, grads):
    """``node.apply(grads)``, reporting the forward call of a node that fails or makes NaN."""
    try:
        outputs = node.apply(grads)
    except Exception:
        _warn_forward(node)
        raise
    if _STATE.check_nan:
        import ember

        for i, g in enumerate(outputs):
            if g is not None and g.dtype.is_floating_point and g.numel() and bool(ember.isnan(g).any()):
                _warn_forward(node)
                raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")
    return outputs


class detect_anomaly:  # noqa: N801
    """Context manager (and decorator) enabling anomaly detection inside its block."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan
        self.prev = (False, True)
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime and should only be enabled "
            "for debugging.",
            UserWarning,
            stacklevel=2,
        )

    def __enter__(self):
        self.prev = (_STATE.enabled, _STATE.check_nan)
        _STATE.enabled, _STATE.check_nan = True, self.check_nan

    def __exit__(self, *exc):
        _STATE.enabled, _STATE.check_nan = self.prev
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.__class__(self.check_nan):
                return func(*args, **kwargs)

        return wrapper


class set_detect_anomaly:  # noqa: N801
    """``set_detect_anomaly(mode)`` switches anomaly detection now; as a context it restores it."""

    def __init__(self, mode: bool, check_nan: bool = True):
        self.prev = (_STATE.enabled, _STATE.check_nan)
        _STATE.enabled, _STATE.check_nan = bool(mode), bool(check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _STATE.enabled, _STATE.check_nan = self.prev
        return False
