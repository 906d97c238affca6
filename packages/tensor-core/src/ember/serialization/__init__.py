"""Checkpoints: ``save``/``load`` in PyTorch's format, and ``safetensors`` files.

Loading never runs code from a file: ember interprets the pickle itself and allows only the
globals a checkpoint of tensors needs (see docs/deviations.md, "Checkpoints").
"""

from ._checkpoint import load, save
from ._errors import UnpicklingError

__all__ = ["UnpicklingError", "load", "safetensors", "save"]


def __getattr__(name):
    if name == "safetensors":  # imported on first use (it needs json)
        import importlib

        return importlib.import_module(__name__ + ".safetensors")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
