"""``parallelize_module``: applies parallel styles to a module or to submodules named by a plan."""

from __future__ import annotations

import fnmatch

from ._styles import ParallelStyle


def _matching(module, pattern: str):
    """Submodules whose dotted name matches ``pattern`` atom by atom (``*`` within one atom)."""
    atoms = pattern.split(".")
    found = []
    for name, sub in module.named_modules():
        if not name:
            continue
        parts = name.split(".")
        if len(parts) == len(atoms) and all(fnmatch.fnmatchcase(p, a) for p, a in zip(parts, atoms)):
            found.append(sub)
    return found


def parallelize_module(module, device_mesh=None, parallelize_plan=None, *, src_data_rank=0):
    """Applies ``parallelize_plan`` (a ParallelStyle, or {submodule name pattern: ParallelStyle})."""
    from .._dtensor import _default_mesh

    mesh = device_mesh if device_mesh is not None else _default_mesh()
    if mesh.ndim != 1:
        raise ValueError(f"parallelize_module expects a 1-D DeviceMesh (the tensor-parallel dim), got {mesh}")
    if parallelize_plan is None:
        return module
    if isinstance(parallelize_plan, ParallelStyle):
        parallelize_plan.src_data_rank = src_data_rank
        return parallelize_plan._apply(module, mesh)
    if not isinstance(parallelize_plan, dict):
        raise TypeError(f"Expect Union[ParallelStyle, Dict[str, ParallelStyle]] for parallelize_plan, "
                        f"{type(parallelize_plan)} found!")
    for pattern, style in parallelize_plan.items():
        targets = _matching(module, pattern)
        if not targets:
            raise ValueError(f"parallelize_plan: no submodule matches '{pattern}'")
        for sub in targets:
            parallelize_module(sub, mesh, style, src_data_rank=src_data_rank)
    return module
