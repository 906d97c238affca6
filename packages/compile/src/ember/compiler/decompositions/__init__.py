"""Decompositions of ember's composite ops into a small set of primitives.

``DECOMPOSITIONS`` maps an op name to a Python function over ember ops with that op's
signature. ``get_decompositions(names)`` picks some, ``core_decompositions()`` returns those that
lower to the core set (pointwise ops, reductions, views, matmul and convolution). Inductor,
``make_fx(decomposition_table=...)`` and export's ``run_decompositions`` share this table.
"""

from . import _composites, _losses  # noqa: F401 - registers the table's rows
from ._registry import (
    DECOMPOSITIONS,
    DecompositionTable,
    core_decompositions,
    get_decompositions,
    register_decomposition,
)

__all__ = [
    "DECOMPOSITIONS",
    "DecompositionTable",
    "core_decompositions",
    "get_decompositions",
    "register_decomposition",
]
