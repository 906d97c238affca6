"""Checkpoints: ``save``/``load`` in PyTorch's format, and ``safetensors`` files.

``load(weights_only=True)`` (the default) never runs code from a file: ember interprets the
pickle itself and allows only the globals a checkpoint of tensors needs, plus those the user
allows with ``add_safe_globals``/``safe_globals`` (see docs/deviations.md, "Checkpoints").
"""

from . import _safe_globals, _torch_globals
from ._checkpoint import load, save
from ._errors import UnpicklingError, describe
from ._safe_globals import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals
from ._zipfile_format import ZipReader


def get_unsafe_globals_in_checkpoint(f) -> list:
    """The ``module.name`` globals a checkpoint names that ``weights_only`` loading would refuse."""
    import os


    source = describe(f)
    fh = open(f, "rb") if isinstance(f, (str, bytes, os.PathLike)) else f
    try:
        reader = ZipReader(fh, source, use_mmap=False)
        try:
            data = reader.read("data.pkl")
        finally:
            reader.close()
    finally:
        if fh is not f:
            fh.close()
    unsafe = []
    for name in _safe_globals.globals_in_pickle(data):
        module, _, qualname = name.rpartition(".")
        if _safe_globals.user_global(module, qualname) is not None:
            continue
        try:
            _torch_globals.find_global(module, qualname, source)
        except UnpicklingError:
            unsafe.append(name)
    return unsafe


__all__ = [
    "UnpicklingError", "add_safe_globals", "clear_safe_globals", "get_safe_globals",
    "get_unsafe_globals_in_checkpoint", "load", "safe_globals", "safetensors", "save",
]


def __getattr__(name):
    if name == "safetensors":  # imported on first use (it needs json)
        import importlib

        return importlib.import_module(__name__ + ".safetensors")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
