"""Session-20 compile fixes found by the compile/export programs (tests/programs/s20c_*.py), against torch 2.13:
a KV-cache write ``buf[start:start + 1] = x`` with ``start`` a number argument compiles once as it changes."""

from __future__ import annotations

import pytest
import torch

import ember


def _counting(lib, fn, **kwargs):
    calls = []

    def backend(gm, example_inputs):
        calls.append(1)
        return gm.forward

    lib._dynamo.reset()
    return lib.compile(fn, backend=backend, **kwargs), calls


def _cache_write(lib):
    buf = lib.zeros(16, 3)

    def step(x, start: int):
        buf[start:start + 1] = x  # recorded as the op slice(buf, 0, start, start + 1, 1)
        return buf[:start + 1].sum(0) * 2 + buf[start - 1:start].sum()

    return step


@pytest.mark.parametrize("dynamic", [None, True])
def test_slice_op_bounds_of_a_number_argument_are_symbolic(dynamic):
    results = {}
    for lib in (torch, ember):
        compiled, calls = _counting(lib, _cache_write(lib), dynamic=dynamic)
        values = [compiled(lib.full((1, 3), float(s)), s).tolist() for s in range(3, 9)]
        results[lib.__name__] = (values, len(calls))
    assert results["ember"] == results["torch"]
    assert results["ember"][1] <= 2


def _broken(gm, example_inputs):
    raise RuntimeError("backend exploded")


def _check_suppress_errors(lib):
    lib._dynamo.reset()
    x = lib.linspace(0, 1, 5)
    with lib._dynamo.config.patch(suppress_errors=True):
        fn = lib.compile(lambda t: lib.sin(t) * 2 + 1, backend=_broken)
        assert lib.allclose(fn(x), lib.sin(x) * 2 + 1)
        assert lib.allclose(fn(x + 1), lib.sin(x + 1) * 2 + 1)  # the next call too
    with pytest.raises(lib._dynamo.exc.BackendCompilerFailed, match="backend exploded"):
        lib.compile(lambda t: lib.cos(t) + 1, backend=_broken)(x)


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_suppress_errors_runs_eagerly_after_a_backend_failure(lib):
    _check_suppress_errors(lib)
