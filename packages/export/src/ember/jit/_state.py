"""Flags TorchScript code reads (``is_scripting``/``is_tracing``) and the method decorators."""

from __future__ import annotations

import threading
from typing import Final  # noqa: F401 - re-exported as ember.jit.Final


class _Flags(threading.local):
    def __init__(self):
        self.scripting = 0
        self.tracing = 0


FLAGS = _Flags()


def is_scripting() -> bool:
    """True while a scripted module or function runs (TorchScript's ``torch.jit.is_scripting``)."""
    return FLAGS.scripting > 0


def is_tracing() -> bool:
    """True while ``ember.jit.trace`` records a program."""
    return FLAGS.tracing > 0


class FunctionModifiers:
    EXPORT = "export"
    DEFAULT = "default"
    IGNORE = "ignore"
    UNUSED = "unused"
    COPY_TO_SCRIPT_WRAPPER = "copy_to_script_wrapper"


def _set(fn, modifier):
    fn._ember_jit_modifier = modifier
    return fn


def export(fn):
    """Marks a method as part of the scripted module's interface (beside ``forward``)."""
    return _set(fn, FunctionModifiers.EXPORT)


def ignore(drop=False, **kwargs):
    """Leaves a method as plain Python (called as is; never saved). ``ignore(drop=True)`` is ``unused``."""
    if callable(drop):
        return _set(drop, FunctionModifiers.IGNORE)
    return (lambda fn: _set(fn, FunctionModifiers.UNUSED)) if drop else (lambda fn: _set(fn, FunctionModifiers.IGNORE))


def unused(fn):
    """Marks a method that scripted code must not call: calling it raises."""
    if isinstance(fn, property):
        return fn

    def stub(*args, **kwargs):
        raise RuntimeError(f"Tried to call unused method {fn.__qualname__}: it is marked @ember.jit.unused")

    stub.__name__, stub.__qualname__, stub.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    return _set(stub, FunctionModifiers.UNUSED)


def get_modifier(fn):
    return getattr(fn, "_ember_jit_modifier", None)


def _overload(fn):
    return fn


def _overload_method(fn):
    return fn


def annotate(the_type, the_value):
    """TorchScript's type hint for a value: returns the value."""
    return the_value
