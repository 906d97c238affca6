"""The op database covers every op of the op table and every public function (naming the missing)."""

from __future__ import annotations

import inspect

import pytest

import ember
import ember.fft
import ember.linalg
import ember.special
from ember._src.dispatch import OPS
from ember.testing import _opdb as db


def _public_functions():
    names = []
    for ns in ("", "linalg", "fft", "special"):
        mod = getattr(ember, ns) if ns else ember
        for n in dir(mod):
            obj = getattr(mod, n)
            if n.startswith("_") or not callable(obj) or inspect.isclass(obj) or inspect.ismodule(obj):
                continue
            names.append(f"{ns}.{n}" if ns else n)
    return names


def _core_ops() -> set:
    """The op table's ops declared by ember-tensor-core itself: the upper packages' (compile's cond and
    while_loop) and the custom ops other suites register while the whole test run shares one process
    are theirs to test."""
    def declared_here(op) -> bool:
        # (A composite op has no kernel: its decomposition names the package that declared it - nn's
        # linear and adaptive_avg_pool2d exist only once a test of the same process imported nn.)
        fns = [f for f in (op.meta, op.kernels.get("cpu"), op.kernels.get("meta"),
                           getattr(op, "decomposition", None)) if f is not None]
        return not fns or any((getattr(f, "__module__", None) or "").startswith("ember._src") for f in fns)

    return {name for name, op in OPS.items() if "::" not in name and declared_here(op)}


def test_every_op_has_an_entry():
    missing = sorted(_core_ops() - set(db.op_db()))
    assert not missing, f"ops without an op-database entry: {missing}"


def test_every_public_function_has_an_entry():
    missing = sorted(set(_public_functions()) - set(db.function_db()))
    assert not missing, f"public functions without an op-database entry: {missing}"


@pytest.mark.parametrize("entry", [pytest.param(e, id=e.name) for e in db.entries()])
def test_entry_is_runnable_or_says_what_covers_it(entry):
    if entry.covered_by is not None:
        assert entry.reason, f"{entry.name}: covered_by without a reason"
        return
    assert entry.call is not None and entry.samples is not None, f"{entry.name}: no call or samples"
    assert entry.samples("float32"), f"{entry.name}: no samples"
