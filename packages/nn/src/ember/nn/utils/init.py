"""``skip_init``: build a module without running its parameter initialization."""

from __future__ import annotations

import inspect

from ..modules.module import Module

__all__ = ["skip_init"]


def skip_init(module_cls, *args, **kwargs):
    """``module_cls(*args, **kwargs)`` with uninitialized (empty) parameters and buffers.

    The module is built on the ``meta`` device (no data, so initializers cost nothing) and then
    given fresh uninitialized storage on ``device``.
    """
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    final_device = kwargs.pop("device", "cpu")
    kwargs["device"] = "meta"
    return module_cls(*args, **kwargs).to_empty(device=final_device)
