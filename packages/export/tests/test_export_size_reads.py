"""Python reading a symbolic size during export (``int(n)``, ``float(n)``, ``math.*``, ``n / 2``):
torch.export 2.13 is the oracle for which reads specialize the dim (a constraint violation for a
``Dim``/``Dim.DYNAMIC``, a static dim for ``Dim.AUTO``) and which stay symbolic."""

from __future__ import annotations

import math
import threading
from math import log2 as imported_log2  # bound before any export: export must see through it too

import pytest
import torch

import ember
from ember.export import Dim, export

READS = {
    "int": lambda n: int(n),
    "float": lambda n: float(n),
    "bool": lambda n: bool(n),
    "sqrt": lambda n: math.sqrt(n),
    "log2": lambda n: math.log2(n),
    "log2_imported": lambda n: imported_log2(n),
    "floor_div": lambda n: math.floor(n / 2),
    "ceil_div": lambda n: math.ceil(n / 4),
    "true_div": lambda n: n / 2,
    "square": lambda n: n ** 2,
    "floor_int": lambda n: math.floor(n),
    "trunc_div": lambda n: math.trunc((n + 1) / 2),
    # symbolic floats beyond ratios (session 16): torch computes them in the graph
    "pow_half": lambda n: n ** 0.5,
    "inv_pow_half": lambda n: 1 / n ** 0.5,
    "n_times_pow_half": lambda n: n * n ** 0.5 - 0.5,
    # int() of a symbolic float: the dim stays symbolic under a guard on the value (torch's)
    "int_pow_half": lambda n: int(n ** 0.5),
    "int_half": lambda n: int(n / 2),
}


def _module(lib, read):
    class M(lib.nn.Module):
        def forward(self, x):
            return x * read(x.shape[0])

    return M()


def _outcome(lib, how, kind):
    exp = lib.export
    dim = {"named": exp.Dim("b"), "AUTO": exp.Dim.AUTO, "DYNAMIC": exp.Dim.DYNAMIC}[kind]
    try:
        ep = exp.export(_module(lib, READS[how]), (lib.ones(6, 3),), dynamic_shapes={"x": {0: dim}})
    except Exception as exc:
        return type(exc).__name__, str(exc).split("!")[0]
    dynamic = [str(v) for v in ep.range_constraints.values()]
    try:
        value = float(ep.module()(lib.ones(8, 3))[0, 0])
    except Exception as exc:
        value = type(exc).__name__
    return dynamic, value


CASES = [(how, kind) for how in ("int", "float", "sqrt", "log2", "log2_imported")
         for kind in ("named", "AUTO", "DYNAMIC")]
CASES += [(how, "named") for how in ("bool", "floor_div", "ceil_div", "true_div", "square", "floor_int", "trunc_div")]
CASES += [("true_div", "AUTO"), ("floor_div", "DYNAMIC")]
CASES += [(how, kind) for how in ("pow_half", "inv_pow_half", "n_times_pow_half", "int_pow_half", "int_half")
          for kind in ("named", "AUTO", "DYNAMIC")]


def _sliced(lib, stop):
    class M(lib.nn.Module):
        def forward(self, x):
            return x[:stop(x.shape[0])] * 2

    return M()


STOPS = {"int_pow_half": lambda n: int(n ** 0.5), "round_half": lambda n: round(n / 2)}


@pytest.mark.parametrize("kind", ["named", "AUTO", "DYNAMIC"])
@pytest.mark.parametrize("stop", sorted(STOPS))
def test_float_of_size_as_a_size_matches_torch(stop, kind):
    # the size x[:int(n ** 0.5)] keeps n symbolic for AUTO/DYNAMIC with torch's guard (its sizes
    # 16..24 pass, others fail the call); x[:round(n / 2)] keeps it symbolic with no guard (halves
    # to even); a named Dim is a constraint violation for both
    def outcome(lib):
        dim = {"named": lib.export.Dim("b"), "AUTO": lib.export.Dim.AUTO, "DYNAMIC": lib.export.Dim.DYNAMIC}[kind]
        try:
            ep = lib.export.export(_sliced(lib, STOPS[stop]), (lib.ones(16, 3),),
                                   dynamic_shapes={"x": {0: dim}})
        except Exception as exc:
            return type(exc).__name__
        shapes = []
        for n in (9, 16, 20, 25):
            try:
                shapes.append(tuple(ep.module()(lib.ones(n, 3)).shape))
            except Exception as exc:
                shapes.append(type(exc).__name__)
        return [str(v) for v in ep.range_constraints.values()], shapes

    assert outcome(ember) == outcome(torch)


@pytest.mark.parametrize("how,kind", CASES)
def test_size_read_matches_torch_export(how, kind):
    mine = _outcome(ember, how, kind)
    theirs = _outcome(torch, how, kind)
    if theirs[0] == "UserError":
        # torch names an AUTO/DYNAMIC dim L['x'].size()[0]; ember x.size()[0]
        assert mine == ("UserError", theirs[1].replace("L['x']", "x")), mine
    else:
        assert mine == theirs


def test_specialization_names_the_line():
    class M(ember.nn.Module):
        def forward(self, x):
            return x * int(x.shape[0])  # the read

    with pytest.raises(ember.export.UserError) as info:  # noqa: PT012
        export(M(), (ember.ones(6, 3),), dynamic_shapes={"x": {0: Dim("b")}})
    assert "specialized it to be a constant (6)" in str(info.value)
    assert "# the read" in str(info.value)


def test_ember_own_int_reads_do_not_guard():
    # a module whose size arithmetic runs inside ember (view/reshape with -1, flatten) stays dynamic
    class M(ember.nn.Module):
        def forward(self, x):
            return ember.flatten(x, 1).reshape(x.shape[0] // 2, -1)

    ep = export(M(), (ember.ones(6, 3, 2),), dynamic_shapes={"x": {0: Dim("b", min=2) * 2}})
    assert ep.module()(ember.ones(10, 3, 2)).shape == (5, 12)


def test_symbolic_float_outside_export_is_plain():
    # compile's lazy capture makes no symbolic floats: n / 2 is a Python float
    @ember.compile(backend="eager", dynamic=True)
    def f(x):
        return x * (x.shape[0] / 2)

    assert f(ember.ones(6)).tolist() == [3.0] * 6
    assert f(ember.ones(8)).tolist() == [4.0] * 8


def test_math_log_wrappers_are_per_thread_and_removed():
    """Two exports whose traces overlap on two threads (A enters, B enters, A leaves, B leaves): the
    math.log wrappers act only on the tracing thread, and math (and this file's imported log2) hold
    the plain builtins afterwards."""
    originals = (math.log, math.log2, imported_log2)
    a_in, b_in, a_done, other = threading.Event(), threading.Event(), threading.Event(), []

    class A(ember.nn.Module):
        def forward(self, x):
            if not a_in.is_set():
                a_in.set()
                b_in.wait(60)  # A leaves its trace only after B entered its own
                other.append(math.log2(8))  # a plain call on the tracing thread
            return x * imported_log2(x.shape[0])

    class B(ember.nn.Module):
        def forward(self, x):
            if not b_in.is_set():
                b_in.set()
                a_done.wait(60)  # B is inside its trace until A's export has finished
            return x + 1

    results = {}

    def run(name, mod):
        results[name] = export(mod, (ember.ones(4),), dynamic_shapes=({0: Dim.AUTO},))
        if name == "A":
            a_done.set()

    ta = threading.Thread(target=run, args=("A", A()))
    ta.start()
    assert a_in.wait(60)
    tb = threading.Thread(target=run, args=("B", B()))
    tb.start()
    # meanwhile this thread calls the (possibly wrapped) functions: plain values, nothing specializes
    assert math.log2(1024) == 10.0 and imported_log2(4) == 2.0
    ta.join(60)
    tb.join(60)
    assert (math.log, math.log2, imported_log2) == originals
    assert other == [3.0]
    assert [str(v) for v in results["A"].range_constraints.values()] == []  # A's size specialized (torch)
    assert len(results["B"].range_constraints) == 1  # B's stayed dynamic


def test_pow_half_program_survives_save_load(tmp_path):
    # the graph computes n ** 0.5 and the int() guard is a runtime check, both kept by save/load
    ep = export(_sliced(ember, lambda n: int(n ** 0.5)), (ember.ones(16, 3),), dynamic_shapes={"x": {0: Dim.AUTO}})
    ember.export.save(ep, tmp_path / "p.pt2")
    loaded = ember.export.load(tmp_path / "p.pt2").module()
    assert loaded(ember.ones(20, 3)).shape == (4, 3)
    with pytest.raises(AssertionError, match="Guard failed"):
        loaded(ember.ones(9, 3))
    ep = export(_sliced(ember, lambda n: round(n / 2)), (ember.ones(16, 3),), dynamic_shapes={"x": {0: Dim.AUTO}})
    ember.export.save(ep, tmp_path / "r.pt2")  # the graph's round() is allowed in a saved graph
    loaded = ember.export.load(tmp_path / "r.pt2").module()
    assert [loaded(ember.ones(n, 3)).shape[0] for n in (9, 10, 11)] == [4, 5, 6]
