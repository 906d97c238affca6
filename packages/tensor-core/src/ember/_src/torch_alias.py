"""Submodule imports through ``sys.modules['torch'] = ember``.

A program run under ember by aliasing (``sys.modules["torch"] = ember``, then the program's
own ``import torch.nn as nn``) asks the import system for ``torch.nn``. Python looks that name
up in ``sys.modules``, misses, and loads ``ember/nn/__init__.py`` a second time under the name
``torch.nn``: a second copy of every class and op record, which fails as soon as ember's own
code imports ``ember.nn``. This finder answers ``torch.<rest>`` with the module ``ember.<rest>``
itself while ``sys.modules["torch"]`` is ember, so both names are one module.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, module) -> None:
        self._module = module
        self._spec = getattr(module, "__spec__", None)

    def create_module(self, spec):
        return self._module

    def exec_module(self, module) -> None:
        # Already executed under its ember name; the import system has just set __spec__ to the
        # alias's spec, so put back the module's own (reload, pickling by spec stay ember's).
        module.__spec__ = self._spec


class TorchAliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("torch."):
            return None
        ember = sys.modules.get("ember")
        if ember is None or sys.modules.get("torch") is not ember:
            return None
        target_name = "ember." + fullname[len("torch."):]
        try:
            module = importlib.import_module(target_name)
        except ModuleNotFoundError as exc:
            if exc.name == target_name:  # no such ember module: the usual ModuleNotFoundError('torch....')
                return None
            raise
        spec = importlib.machinery.ModuleSpec(fullname, _AliasLoader(module),
                                              is_package=hasattr(module, "__path__"))
        return spec


def install() -> None:
    if not any(isinstance(f, TorchAliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, TorchAliasFinder())
