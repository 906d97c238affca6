"""The op database: one record per op of the op table and per public function (PyTorch's OpInfo idea).

Each ``OpEntry`` says how to call the function on ember and on PyTorch, which sample inputs to
try (dtypes, empty, 0-dim, broadcast, non-contiguous, storage offsets), which inputs must raise
and what, the tolerances, and what the op supports (gradients, forward AD, ``out=``, in-place,
method). Generic tests in every package read it: tensor-core (forward vs PyTorch, meta, in-place,
out=, error types, completeness), autograd (gradcheck, gradients vs PyTorch, forward AD) and nn
(nn.functional entries registered there with ``register``). The CUDA suite can run the same
samples on its device.

Used by test suites only: it imports PyTorch (the oracle) when an entry is called.
"""

from __future__ import annotations

from ._calls import aten, both, meth, pub
from ._compare import DEFAULT_TOLS, assert_match, exception_family, run_forward, to_torch
from ._spec import (
    ALL_DTYPES,
    CORE_DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    DType,
    ErrorInput,
    OpEntry,
    Sample,
    T,
    call_sample,
    materialize,
)

_DB: dict = {}


def op_db() -> dict:
    """{op-table name: OpEntry} for every op ember declares (built on first use)."""
    if "ops" not in _DB:
        from ._table import op_entries

        _DB["ops"] = op_entries()
    return _DB["ops"]


def function_db() -> dict:
    """{qualified public name: OpEntry} for public functions that are not ops (``"linalg.norm"``)."""
    if "functions" not in _DB:
        from ._public import function_entries

        _DB["functions"] = function_entries()
    return _DB["functions"]


def register(entry: OpEntry) -> OpEntry:
    """Adds an entry from a package above tensor-core (nn.functional, ...) to the function table."""
    function_db()[entry.name] = entry
    return entry


def entries(*, kind: str = "all", test: str | None = None) -> list:
    """Entries (ops, functions or all) that run ``test`` (see ``OpEntry.runs``), sorted by name."""
    pool = []
    if kind in ("all", "op"):
        pool += list(op_db().values())
    if kind in ("all", "function"):
        pool += list(function_db().values())
    return sorted((e for e in pool if test is None or e.runs(test)), key=lambda e: e.name)


__all__ = [
    "ALL_DTYPES", "CORE_DTYPES", "DEFAULT_TOLS", "FLOAT_DTYPES", "INT_DTYPES", "DType", "ErrorInput", "OpEntry",
    "Sample", "T", "assert_match", "aten", "both", "call_sample", "entries", "exception_family", "function_db",
    "materialize", "meth", "op_db", "pub", "register", "run_forward", "to_torch",
]
