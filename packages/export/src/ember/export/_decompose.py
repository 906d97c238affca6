"""``ExportedProgram.run_decompositions``: re-export through a decomposition table.

The program's own module (``ep.module()``) is exported again with compile's ``make_fx``
applying the table (compile's ``core_decompositions()`` when none is given), with the same
dynamic dims rebuilt from the program's symbolic input shapes and range constraints. The
result has the same signature targets; only the ops change.
"""

from __future__ import annotations

import importlib.util

import sympy

from ._dims import Dim
from ._program import ExportedProgram


def default_table() -> dict:
    if importlib.util.find_spec("ember.compiler.decompositions") is None:
        return {}
    from ember.compiler import decompositions

    return dict(decompositions.core_decompositions())


def _dynamic_shapes(ep: ExportedProgram) -> tuple:
    dims: dict = {}
    names = getattr(ep, "_dim_names", {})
    out = []
    for check in ep.user_input_checks():
        if check is None:
            out.append(None)
            continue
        _, shape, _ = check
        spec = {}
        for d, size in enumerate(shape):
            if isinstance(size, int):
                continue
            (sym,) = size.free_symbols
            if sym not in dims:
                vr = ep.range_constraints.get(sym)
                lo, hi = (vr.lower, vr.upper) if vr is not None else (None, None)
                dims[sym] = Dim(names.get(sym, str(sym)), min=lo, max=hi)
            poly = sympy.Poly(size, sym)
            coeff, offset = (int(c) for c in (poly.coeff_monomial(sym), poly.coeff_monomial(1)))
            spec[d] = dims[sym] if (coeff, offset) == (1, 0) else coeff * dims[sym] + offset
        out.append(spec or None)
    return tuple(out)


def run_decompositions(ep: ExportedProgram, table: dict | None = None) -> ExportedProgram:
    from ._trace import export

    table = default_table() if table is None else dict(table)
    args, kwargs = ep.example_inputs
    module = ep.module()
    flat_inputs = list(args) + list(kwargs.values())
    shapes = _dynamic_shapes(ep)
    dynamic = shapes if any(s is not None for s in shapes) and len(shapes) == len(flat_inputs) else None
    new = export(module, tuple(args), kwargs, dynamic_shapes=dynamic, _decomposition_table=table)
    return new
