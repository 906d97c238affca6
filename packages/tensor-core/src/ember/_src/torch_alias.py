"""``sys.modules["torch"] = ember``: make ``import torch.nn.functional`` find ``ember.nn.functional``.

Running a PyTorch program on ember often starts by putting ember in ``sys.modules`` under the
name ``torch``. Attribute access (``torch.nn.Linear``) then works, but an import statement of a
submodule (``import torch.nn.functional as F``, ``from torch.utils.data import DataLoader``) asks
the import system for a module named ``torch.nn.functional``. Without help it would search
ember's ``__path__`` and execute ``ember/nn/functional.py`` a second time as a new module: a
second copy of every class (``isinstance`` against the first copy fails) or, for modules that
register ops, an error. This finder answers such imports with the module already imported as
``ember.<name>`` (importing it first if needed), so both names are one module object.

It acts only while ``sys.modules["torch"]`` is ember itself; with PyTorch imported it does nothing.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

# The finder and loader below implement the protocols (find_spec; create_module, exec_module) without
# importlib.abc's base classes: importlib.abc imports importlib.resources, pathlib, tempfile, ... a
# fifth of `import ember` (issue 18: < 0.1 s), and the import system needs only the methods.


class _ExistingModuleLoader:
    """Hands the import system a module that is already loaded under ember's name."""

    def __init__(self, module):
        self._module = module
        self._own = {k: module.__dict__[k] for k in ("__spec__", "__loader__", "__package__") if k in module.__dict__}

    def create_module(self, spec):
        return self._module

    def exec_module(self, module):
        # Already executed as ember.<name>; undo what the import system wrote over its identity.
        module.__dict__.update(self._own)


class TorchAliasFinder:
    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("torch."):
            return None
        ember = sys.modules.get("ember")
        if ember is None or sys.modules.get("torch") is not ember:
            return None
        real = "ember." + fullname[len("torch."):]
        try:
            module = importlib.import_module(real)
        except ModuleNotFoundError as exc:
            if exc.name != real:
                raise
            raise ModuleNotFoundError(f"No module named '{fullname}' (ember has no '{real}')", name=fullname) from None
        return importlib.util.spec_from_loader(fullname, _ExistingModuleLoader(module))


def install() -> None:
    if not any(isinstance(f, TorchAliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, TorchAliasFinder())
