"""ember._export: PyTorch's ``torch._export.aot_compile`` / ``aot_load``.

``aot_compile(f, args)`` exports ``f`` and compiles it into one shared library (kernels, call
plan and weights inside) and returns its path; ``aot_load(path, device)`` runs it.
"""

from __future__ import annotations

import os

from ember.export._aoti import aot_compile_library
from ember.export._aoti_runtime import aot_load


def aot_compile(f, args: tuple, kwargs: dict | None = None, *, dynamic_shapes=None, options: dict | None = None,
                remove_runtime_assertions: bool = False, disable_constraint_solver: bool = False,
                same_signature: bool = True) -> str:
    """Exports ``f`` (a module) on ``args`` and compiles it ahead of time; returns the library's path
    (``options["aot_inductor.output_path"]`` chooses it)."""
    from ember.export import export
    from ember.nn import Module

    if not isinstance(f, Module):
        raise ValueError(f"aot_compile expects an nn.Module, got {type(f).__name__}")
    ep = export(f, args, kwargs, dynamic_shapes=dynamic_shapes)
    path = (options or {}).get("aot_inductor.output_path")
    if path is not None and os.path.isdir(path):
        path = os.path.join(path, "model.so")
    return aot_compile_library(ep, path)


__all__ = ["aot_compile", "aot_load"]
