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


def _raised(fn, *args):
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - the exception is the result
        return type(e).__name__, str(e).splitlines()[0][:110]
    return None


@pytest.mark.parametrize("spelling", [
    lambda t: t * 2 if bool(t.sum() > 0) else t,  # bool() of a bool tensor: Eq(u0, 1)
    lambda t: t * 2 if bool(t.sum()) else t,  # of a float tensor: Ne(zuf0, 0.0)
    lambda t: t * 2 if bool(t.sum().long()) else t,  # of an int tensor: Ne(u0, 0)
    lambda t: t * 2 if t.any() else t,  # a truth test, not bool(): Data-dependent branching
    lambda t: t * 2 if not t.any() else t,
])
def test_fullgraph_bool_of_a_tensor_raises_what_torch_raises(spelling):
    results = {}
    for lib in (torch, ember):
        lib._dynamo.reset()
        x = lib.linspace(-1, 2, 4)
        results[lib.__name__] = _raised(lib.compile(spelling, fullgraph=True, backend="eager"), x)
        lib._dynamo.reset()
        assert lib.compile(spelling, backend="eager")(x).tolist() == spelling(x).tolist()
    assert results["ember"] == results["torch"]
    assert results["torch"] is not None


def test_bool_of_a_tensor_is_an_item_break_in_explain():
    reasons = {}
    for lib in (torch, ember):
        ex = lib._dynamo.explain(lambda t: t * 2 if bool(t.sum()) else t)(lib.ones(3))
        reasons[lib.__name__] = (ex.graph_count, ex.graph_break_count, [str(r.reason)[:60] for r in ex.break_reasons])
    assert reasons["ember"] == reasons["torch"]


def test_disabled_function_under_fullgraph_is_torchs_unsupported():
    results = {}
    for lib in (torch, ember):
        @lib.compiler.disable
        def opaque(t):
            return t * 3

        lib._dynamo.reset()
        results[lib.__name__] = _raised(lib.compile(lambda t: opaque(t + 1) - 1, fullgraph=True), lib.ones(2))
    assert results["ember"] == results["torch"] == ("Unsupported", "Skip calling `torch.compiler.disable()`d function")


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_unknown_dynamo_knob_is_an_attribute_error(lib):
    with pytest.raises(AttributeError, match="config.no_such_knob does not exist"):
        lib._dynamo.config.no_such_knob = 1
    assert not hasattr(lib._dynamo.config, "no_such_knob")
    with pytest.raises(AttributeError):
        with lib._dynamo.config.patch(no_such_knob=1):
            pass
    assert lib._dynamo.config.accumulated_cache_size_limit == 256


def test_accumulated_cache_size_limit_stops_compiling():
    compiled, calls = _counting(ember, lambda t: t.sum() * 2, dynamic=False)
    with ember._dynamo.config.patch(accumulated_cache_size_limit=2):
        values = [compiled(ember.ones(n)).item() for n in range(1, 6)]
    assert values == [2.0 * n for n in range(1, 6)]
    assert len(calls) == 2


def test_float_tolist_break_reason_is_dynamos():
    reasons = {}
    for lib in (torch, ember):
        ex = lib._dynamo.explain(lambda t: t * len([v for v in t.round().tolist() if v > 0]))(lib.linspace(-1, 2, 4))
        reasons[lib.__name__] = [str(r.reason).splitlines()[0] for r in ex.break_reasons]
    assert reasons["ember"] == reasons["torch"] == ["Tensor.tolist() with non-integer tensor"]


def test_inductor_config_module_is_importable_as_torchs():
    import importlib

    pytest.importorskip("ember.export")  # ember._inductor is ember-export's

    config = importlib.import_module("ember._inductor.config")
    assert config is importlib.import_module("ember.compiler.inductor.config")
    with config.patch(max_autotune=True):
        assert ember._inductor.config.max_autotune is True
    assert config.max_autotune is False
