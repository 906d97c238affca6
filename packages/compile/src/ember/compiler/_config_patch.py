"""``config.patch(...)`` of ember's settings modules (PyTorch's ``ConfigModule.patch``): a context
manager that is also a decorator, taking ``patch({"a.b": v})``, ``patch("a.b", v)`` or
``patch(a=v)``; the old values come back when the block (or the decorated call) ends."""

from __future__ import annotations

import contextlib
import sys


class ConfigPatch(contextlib.ContextDecorator):
    def __init__(self, module_name: str, changes: dict, unknown) -> None:
        self.module_name = module_name
        self.changes = dict(changes)
        self.unknown = unknown  # (module name, key) -> the exception to raise
        self.saved: list = []

    def _owner(self, key: str):
        *path, name = key.split(".")
        owner = sys.modules[self.module_name]
        for part in path:
            owner = getattr(owner, part, None)
        if owner is None or name.startswith("_") or not hasattr(owner, name) or callable(getattr(owner, name)):
            raise self.unknown(self.module_name, key)
        return owner, name

    def __enter__(self):
        targets = [(*self._owner(key), value) for key, value in self.changes.items()]  # all checked first
        saved = []
        for owner, name, value in targets:
            saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, value)
        self.saved.append(saved)
        return self

    def __exit__(self, *exc):
        for owner, name, value in reversed(self.saved.pop()):
            setattr(owner, name, value)
        return False


def changes_of(arg1=None, arg2=None, **kwargs) -> dict:
    """The ``{key: value}`` of a ``patch`` call in any of its three forms."""
    if arg1 is None:
        return dict(kwargs)
    if isinstance(arg1, dict):
        if arg2 is not None or kwargs:
            raise TypeError("patch() takes a dict, a (name, value) pair or keywords, not several")
        return dict(arg1)
    if isinstance(arg1, str):
        if kwargs:
            raise TypeError("patch() takes a dict, a (name, value) pair or keywords, not several")
        return {arg1: arg2}
    raise TypeError(f"patch() takes a dict, a (name, value) pair or keywords, got {type(arg1).__name__}")


def missing_setting(module_name: str, key: str) -> AttributeError:
    public = module_name.replace("ember.compiler.config", "ember._dynamo.config")
    return AttributeError(f"{public}.{key} does not exist")
