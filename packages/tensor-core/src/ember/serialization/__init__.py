"""Checkpoints: ``save``/``load`` in PyTorch's format, and ``safetensors`` files.

Loading never runs code from a file: ember interprets the pickle itself and allows only the
globals a checkpoint of tensors needs (see docs/deviations.md, "Checkpoints").
"""

from . import safetensors
from ._checkpoint import load, save
from ._errors import UnpicklingError

__all__ = ["UnpicklingError", "load", "safetensors", "save"]
