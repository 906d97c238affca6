"""Symbolic tracing: one trace over symbolic sizes, judged against torch.export on the same programs."""

from __future__ import annotations

import importlib
import warnings

import export_models  # the tests folder is on sys.path
import numpy as np
import pytest
import torch

import ember
from ember.export import Dim, export
from ember.export._errors import UserError


def _ranges(ep) -> list:
    """Range constraints as sorted (lower, upper) pairs: symbol names differ between the two."""
    def bound(v):
        if "oo" in str(v):
            return "-int_oo" if str(v).startswith("-") else "int_oo"
        return "int_oo" if v > 2**62 else "-int_oo" if v < -2**62 else int(v)

    return sorted(((bound(r.lower), bound(r.upper)) for r in ep.range_constraints.values()), key=str)


def _counting(mod):
    """Wraps ``mod.forward`` to count how often export runs the Python program."""
    calls = [0]
    forward = mod.forward

    def counted(*args, **kwargs):
        calls[0] += 1
        return forward(*args, **kwargs)

    mod.forward = counted
    return calls


def _pair(name):
    torch.manual_seed(0)
    ember.manual_seed(0)
    em, tm = getattr(export_models, name)(ember), getattr(export_models, name)(torch)
    export_models.copy_weights(em, tm)
    return em.eval(), tm.eval()


@pytest.mark.parametrize("name,shape,dims,sizes", [
    ("mlp", (4, 6), {0: "batch"}, [(2, 6), (9, 6), (64, 6)]),
    ("cnn", (3, 1, 8, 8), {0: "batch"}, [(2, 1, 8, 8), (7, 1, 8, 8)]),
    ("encoder_layer", (2, 5, 16), {1: "seq"}, [(2, 3, 16), (2, 11, 16)]),
])
def test_one_trace_matches_torch_export(name, shape, dims, sizes):
    em, tm = _pair(name)
    calls = _counting(em)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    spec = {d: Dim(n, max=64) for d, n in dims.items()}
    tspec = {d: torch.export.Dim(n, max=64) for d, n in dims.items()}
    ep = export(em, (ember.tensor(x),), dynamic_shapes=(spec,))
    tep = torch.export.export(tm, (torch.tensor(x),), dynamic_shapes=(tspec,))
    assert calls[0] == 1  # one trace gives the graph for the whole range
    assert _ranges(ep) == _ranges(tep)
    module = ep.module()
    for size in sizes:
        xs = np.random.default_rng(1).standard_normal(size).astype(np.float32)
        got = module(ember.tensor(xs)).detach().numpy()
        want = tm(torch.tensor(xs)).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


class _Flatten(ember.nn.Module):
    def forward(self, x):
        b, t, c = x.shape
        return x.view(b * t, c).reshape(b, t * c).sum(1)


class _Pairs(ember.nn.Module):
    def forward(self, x, y):
        return x.view(-1, 2, 4).sum(1) + y


def test_view_of_symbolic_products_is_sym_size_arithmetic():
    ep = export(_Flatten(), (ember.randn(3, 5, 4),), dynamic_shapes=({0: Dim("b"), 1: Dim("t")},))
    targets = [getattr(n.target, "__name__", str(n.target)) for n in ep.graph.nodes if n.op == "call_function"]
    assert targets.count("sym_size") == 2 and "mul" in targets
    module = ep.module()
    for b, t in ((2, 2), (6, 9)):
        x = ember.randn(b, t, 4)
        np.testing.assert_allclose(module(x).numpy(), x.numpy().reshape(b, -1).sum(1), rtol=1e-5)


def test_derived_dim_two_times_batch_matches_torch():
    b, tb = Dim("b"), torch.export.Dim("b")
    x, y = np.ones((6, 4), np.float32), np.ones((3, 4), np.float32)
    ep = export(_Pairs(), (ember.tensor(x), ember.tensor(y)), dynamic_shapes=({0: 2 * b}, {0: b}))

    class TPairs(torch.nn.Module):
        def forward(self, x, y):
            return x.view(-1, 2, 4).sum(1) + y

    tep = torch.export.export(TPairs(), (torch.tensor(x), torch.tensor(y)), dynamic_shapes=({0: 2 * tb}, {0: tb}))
    assert sorted(str(k) for k in ep.range_constraints) == ["2*s0", "s0"]
    assert len(ep.range_constraints) == len(tep.range_constraints)
    out = ep.module()(ember.ones(10, 4), ember.ones(5, 4))
    assert out.shape == (5, 4) and float(out.sum()) == 60.0
    with pytest.raises(AssertionError, match="Guard failed"):
        ep.module()(ember.ones(10, 4), ember.ones(4, 4))


class _Specializes(ember.nn.Module):
    def forward(self, x):
        if x.shape[0] == 5:
            return x * 2
        return x


class _Bounded(ember.nn.Module):
    def forward(self, x):
        return x * 2 if x.shape[0] <= 16 else x


def test_specialized_dim_is_reported_with_line_and_fix():
    with pytest.raises(UserError) as info:
        export(_Specializes(), (ember.randn(5, 4),), dynamic_shapes={"x": {0: Dim("batch")}})
    text = str(info.value)
    assert "Constraints violated (batch)!" in text
    assert "specialized it to be a constant (5)" in text
    assert "test_export_symbolic.py" in text and "if x.shape[0] == 5" in text  # the source line
    assert "Suggested fixes:\n  batch = 5" in text

    class TSpecializes(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.shape[0] == 5 else x

    with pytest.raises(torch._dynamo.exc.UserError, match=r"Constraints violated \(batch\)"):
        torch.export.export(TSpecializes(), (torch.randn(5, 4),),
                            dynamic_shapes={"x": {0: torch.export.Dim("batch")}})


def test_bound_guard_suggests_the_range_as_torch_does():
    with pytest.raises(UserError) as info:
        export(_Bounded(), (ember.randn(5, 4),), dynamic_shapes={"x": {0: Dim("batch")}})
    assert "Suggested fixes:\n  batch = Dim('batch', max=16)" in str(info.value)

    class TBounded(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.shape[0] <= 16 else x

    with pytest.raises(torch._dynamo.exc.UserError) as tinfo:
        torch.export.export(TBounded(), (torch.randn(5, 4),), dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    assert "batch = Dim('batch', max=16)" in str(tinfo.value)
    # Dim.AUTO takes the narrower range instead, as torch does.
    ep = export(_Bounded(), (ember.randn(5, 4),), dynamic_shapes={"x": {0: Dim.AUTO}})
    tep = torch.export.export(TBounded(), (torch.randn(5, 4),), dynamic_shapes={"x": {0: torch.export.Dim.AUTO}})
    assert _ranges(ep) == _ranges(tep) == [(2, 16)]


def test_auto_dim_that_specializes_becomes_static():
    ep = export(_Specializes(), (ember.randn(5, 4),), dynamic_shapes={"x": {0: Dim.AUTO}})
    assert ep.range_constraints == {}
    with pytest.raises(AssertionError, match="Guard failed"):
        ep.module()(ember.randn(6, 4))


def test_auto_dims_through_convolution_and_pooling_match_torch():
    """Dim.AUTO on batch, height and width of the CNN: conv/pool sizes are floor expressions whose
    guards (``floor(h/2) >= 1``) the ranges imply; ranges as torch infers them."""
    em, tm = _pair("cnn")
    spec = {0: Dim.AUTO, 2: Dim.AUTO, 3: Dim.AUTO}
    tspec = {0: torch.export.Dim.AUTO, 2: torch.export.Dim.AUTO, 3: torch.export.Dim.AUTO}
    x = np.random.default_rng(0).standard_normal((3, 1, 8, 8)).astype(np.float32)
    ep = export(em, (ember.tensor(x),), dynamic_shapes=(spec,))
    tep = torch.export.export(tm, (torch.tensor(x),), dynamic_shapes=(tspec,))
    assert _ranges(ep) == _ranges(tep) == [(2, "int_oo")] * 3
    for shape in ((2, 1, 9, 12), (5, 1, 16, 7)):
        xs = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(ep.module()(ember.tensor(xs)).detach().numpy(),
                                   tm(torch.tensor(xs)).detach().numpy(), rtol=1e-4, atol=1e-5)


class _ItemSlice(ember.nn.Module):
    def forward(self, x, n):
        k = n.item()
        ember._check(k >= 0)
        ember._check(k <= x.shape[0])
        return x[:k]


class _NonzeroFirst(ember.nn.Module):
    def forward(self, x):
        return ember.nonzero(x) * 2


def test_data_reads_of_inputs_are_never_baked_into_the_graph():
    # x[:n.item()] once traced to the example's n (a program slicing 3 rows for every n), and a
    # nonzero as the first op ran on the example and replaced the input. Both now trace with an
    # unbacked symbol (PyTorch's u0): the graph computes the size from each call's data.
    ep = export(_ItemSlice(), (ember.randn(5, 2), ember.tensor(3)))
    x = ember.arange(10.0).reshape(5, 2)
    for n in (0, 2, 5):
        assert ep.module()(x, ember.tensor(n)).tolist() == x[:n].tolist()
    assert _ranges(ep) == [(0, 5)]
    ep = export(_NonzeroFirst(), (ember.tensor([1.0, 0.0, 2.0]),))
    assert ep.module()(ember.tensor([0.0, 3.0, 4.0])).tolist() == [[2], [4]]


def _unbacked_programs(lib):
    class ItemSize(lib.nn.Module):
        def forward(self, x, y):
            n = x.item()
            lib._check_is_size(n)
            return lib.zeros(n) + y.sum()

    class ItemChecked(lib.nn.Module):
        def forward(self, x):
            n = x.sum().item()
            lib._check(n >= 0)
            lib._check(n <= 10)
            return lib.ones(n, 2).sum(1), lib.arange(n).float().sum()

    class ItemNarrow(lib.nn.Module):
        def forward(self, x, n):
            k = n.item()
            lib._check(k >= 0)
            lib._check(k <= 4)
            return x.narrow(0, 1, k).sum(0), lib.arange(k * 2).view(k, 2).float().sum(1)

    class Nonzero(lib.nn.Module):
        def forward(self, x):
            idx = x.nonzero()
            return idx.sum(0), idx * 2

    class Masked(lib.nn.Module):
        def forward(self, x):
            return x[x > 0].sum(), x[x > 0] * 3

    class Unique(lib.nn.Module):
        def forward(self, x):
            u = lib.unique(x)
            return u.sum(), u * 2

    class ToList(lib.nn.Module):
        def forward(self, x, y):
            a, b = x.tolist()
            return lib.zeros(a).sum() + y * b

    return {"unique": (Unique(), [(lib.tensor([1, 1, 2]),), (lib.tensor([3, 5, 3]),)]),
            "tolist": (ToList(), [(lib.tensor([2, 3]), lib.ones(2)), (lib.tensor([4, -5]), lib.ones(2))]),
            "item_size": (ItemSize(), [(lib.tensor(3), lib.ones(2)), (lib.tensor(5), lib.ones(2))]),
            "item_checked": (ItemChecked(), [(lib.tensor([1, 2]),), (lib.tensor([3, 4]),), (lib.tensor([0, 0]),)]),
            "item_narrow": (ItemNarrow(), [(lib.ones(5, 2), lib.tensor(3)), (lib.ones(5, 2), lib.tensor(1))]),
            "nonzero": (Nonzero(), [(lib.tensor([0, 1, 0, 3]),), (lib.tensor([1, 1, 1, 0]),)]),
            "masked": (Masked(), [(lib.tensor([1.0, -1.0, 2.0]),), (lib.tensor([-1.0, -2.0, 3.0]),)])}


@pytest.mark.parametrize("name", ["item_size", "item_checked", "item_narrow", "nonzero", "masked", "unique",
                                  "tolist"])
def test_unbacked_symbols_export_like_torch(name):
    # .item() used as a size and data-dependent output shapes get unbacked symbols (u0) whose
    # ranges come from the op or from torch._check; the graph runs on new data as eager does.
    results, ranges = [], []
    for lib in (ember, torch):
        mod, inputs = _unbacked_programs(lib)[name]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # _check_is_size is deprecated
            ep = lib.export.export(mod, inputs[0])
            got = [ep.module()(*args) for args in inputs]
        want = [mod(*args) for args in inputs]
        for g, w in zip(got, want):
            for a, b in zip(g if isinstance(g, tuple) else (g,), w if isinstance(w, tuple) else (w,)):
                assert a.tolist() == b.tolist()
        results.append([[t.tolist() for t in (g if isinstance(g, tuple) else (g,))] for g in got])
        ranges.append(_ranges(ep))
    assert results[0] == results[1]
    assert ranges[0] == ranges[1]


def _unbacked_slices(lib):
    """``x[...]`` by an ``.item()`` value, with the facts users state (or none)."""
    def stop(x, k):
        return x[:k.item()] * 2

    def stop_size(x, k):
        n = k.item()
        lib._check_is_size(n)
        return x[:n] * 2

    def stop_nonneg(x, k):
        n = k.item()
        lib._check(n >= 0)
        return x[:n] * 2

    def stop_le(x, k):
        n = k.item()
        lib._check(n <= x.shape[0])
        return x[:n] * 2

    def start(x, k):
        return x[k.item():] + 1

    def start_bounded(x, k):
        n = k.item()
        lib._check_is_size(n)
        lib._check(n <= x.shape[0])
        return x[n:] + 1

    def columns(x, k):
        n = k.item()
        lib._check(n >= 0)
        lib._check(n <= 6)
        return x.reshape(2, 3)[:, :n].sum(1)

    def window(x, k):
        n = k.item()
        return x[2:n]

    return {f.__name__: f for f in (stop, stop_size, stop_nonneg, stop_le, start, start_bounded, columns, window)}


@pytest.mark.parametrize("name", ["stop", "stop_size", "stop_nonneg", "stop_le", "start", "start_bounded",
                                  "columns", "window"])
def test_slicing_by_an_unbacked_int_exports_like_torch(name):
    # PyTorch clamps a slice bound it cannot place in [0, size] into a new unbacked symbol (the
    # slice's size) and keeps Min(size, u0) where u0 >= 0 is known; ember's graph computes the same
    # bounds (``clamp_slice_index``, ``sym_min``), so the program runs on every value as eager.
    # The program is also saved/loaded and decomposed (traced again) and must still agree.
    import io

    results, ranges = [], []
    for lib in (ember, torch):
        fn = _unbacked_slices(lib)[name]

        class M(lib.nn.Module):
            def forward(self, x, k, fn=fn):
                return fn(x, k)

        x = lib.arange(6.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # _check_is_size is deprecated
            ep = lib.export.export(M(), (x, lib.tensor(3)))
        programs = [ep]
        if lib is ember:
            buf = io.BytesIO()
            lib.export.save(ep, buf)
            buf.seek(0)
            programs += [lib.export.load(buf), ep.run_decompositions()]
        for program in programs:
            got = []
            for k in (3, 0, 5, 6, 9, -2, -9):
                try:
                    got.append(program.module()(x, lib.tensor(k)).tolist())
                except RuntimeError as exc:  # a stated fact checked at run time
                    assert "Runtime assertion failed" in str(exc)
                    got.append("assertion")
            results.append(got)
        ranges.append(_ranges(ep))
    assert results[0] == results[1] == results[2] == results[3]
    if name != "start":  # torch's graph also gives the storage offset of x[u0:] a symbol: u2 in [0, oo]
        assert ranges[0] == ranges[1]


def test_deciding_on_an_unbacked_value_raises_like_torch():
    from ember.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    def program(lib):
        class Branch(lib.nn.Module):
            def forward(self, x, y):
                return y * 2 if x.item() > 2 else y

        return Branch()

    with pytest.raises(torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode, match="u0 > 2"):
        torch.export.export(program(torch), (torch.tensor(3), torch.ones(2)))
    with pytest.raises(GuardOnDataDependentSymNode, match="u0 > 2"):
        export(program(ember), (ember.tensor(3), ember.ones(2)))


def test_unbacked_program_saves_and_decomposes():
    import io

    mod, inputs = _unbacked_programs(ember)["item_checked"]
    ep = export(mod, inputs[0])
    buf = io.BytesIO()
    ember.export.save(ep, buf)
    buf.seek(0)
    for loaded in (ember.export.load(buf), ep.run_decompositions()):
        for args in inputs:
            assert [t.tolist() for t in loaded.module()(*args)] == [t.tolist() for t in mod(*args)]
        assert _ranges(loaded) == [(0, 10)]
    # the stated range is checked when the program runs, as in PyTorch
    tmod, tinputs = _unbacked_programs(torch)["item_checked"]
    tep = torch.export.export(tmod, tinputs[0])
    with pytest.raises(RuntimeError, match="u0 <= 10"):
        tep.module()(torch.tensor([6, 6]))
    with pytest.raises(RuntimeError, match="u0 <= 10"):
        ep.module()(ember.tensor([6, 6]))


def _vmapped(lib):
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(3, 2)

        def forward(self, xs, w):
            per_row = lib.func.vmap(lambda v: self.fc(v).sin().sum())(xs)
            dots = lib.func.vmap(lambda a, b: (a * b).sum(-1), in_dims=(0, None))(xs, w)
            return per_row + dots

    return Net()


def test_vmap_inside_forward_is_traced_like_torch_export():
    # vmap's BatchedTensor ops were an export error; its batching rules now trace into plain ops.
    x = np.linspace(-1, 1, 18, dtype=np.float32).reshape(6, 3)
    w = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    results = []
    for lib in (torch, ember):
        lib.manual_seed(0)
        net = _vmapped(lib)
        with lib.no_grad():
            net.fc.weight.copy_(lib.tensor([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]]))
            net.fc.bias.copy_(lib.tensor([0.05, -0.05]))
        ep = lib.export.export(net, (lib.randn(4, 3), lib.tensor(w)),
                               dynamic_shapes=({0: lib.export.Dim("b")}, None))
        results.append(ep.module()(lib.tensor(x), lib.tensor(w)).detach().numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-5, atol=1e-6)


def test_nonzero_static_exports_with_a_dynamic_dim_like_torch():
    # nonzero_static has a static shape: PyTorch exports it; ember ran nonzero (data-dependent).
    def run(lib):
        class Net(lib.nn.Module):
            def forward(self, x):
                return lib.nonzero_static(x > 0.15, size=4) + 1, lib.nonzero_static(x.flatten() > 0.5, size=2,
                                                                                     fill_value=-7)

        x = lib.tensor([[0.1, 0.9, 0.2], [0.7, 0.1, 0.2]])
        ep = lib.export.export(Net(), (x,), dynamic_shapes=({0: lib.export.Dim("b")},))
        cases = (x, lib.tensor([[0.0, 0, 0], [0, 0, 0], [1, 1, 1]]), lib.ones(3, 3))
        return [[t.tolist() for t in ep.module()(c)] for c in cases]

    assert run(ember) == run(torch)


def _branch_on_item(lib):
    class BranchOnItem(lib.nn.Module):
        def forward(self, x, y):
            n = x.sum().item()
            if n > 2:
                return y * n
            return y + 1

    return BranchOnItem()


def test_draft_export_decides_by_real_values_and_reports_like_torch():
    # export refuses `if n > 2` on an .item() value; draft_export takes the example's answer,
    # reports it as a data-dependent failure and asserts it in the graph at run time.
    reports = {}
    for lib in (torch, ember):
        x, y = lib.tensor([1, 2]), lib.arange(6.0)
        shapes = importlib.import_module(f"{lib.__name__}.fx.experimental.symbolic_shapes")
        with pytest.raises(shapes.GuardOnDataDependentSymNode):
            lib.export.export(_branch_on_item(lib), (x, y))
        ep = lib.export.draft_export(_branch_on_item(lib), (x, y))
        report = ep._report
        module = ep.module()
        with pytest.raises(RuntimeError, match="Runtime assertion failed for expression u0 >= 3"):
            module(lib.tensor([0, 1]), y)
        sound = lib.export.draft_export(lib.nn.ReLU(), (y,))._report
        reports[lib.__name__] = (
            type(report).__name__, report.successful(), [str(f.failure_type) for f in report.failures],
            [f.data["expr"] for f in report.failures], "1. Data dependent error." in str(report),
            module(x, y).tolist(), module(lib.tensor([4, 0]), y).tolist(),
            sound.successful(), sound.failures, "Congratulations" in str(sound))
    assert reports["ember"] == reports["torch"]
    assert reports["ember"][2:4] == (["DATA_DEPENDENT_ERROR"], ["u0 > 2"])


def test_guard_free_helpers_answer_unbacked_comparisons_like_torch():
    # guard_or_false / guard_or_true / statically_known_true decide from the symbol's known range
    # (torch._check narrows it) instead of raising GuardOnDataDependentSymNode.
    def answers(lib):
        shapes = importlib.import_module(f"{lib.__name__}.fx.experimental.symbolic_shapes")
        seen = []

        class Helpers(lib.nn.Module):
            def forward(self, x, y):
                n = x.sum().item()
                seen.extend([shapes.guard_or_false(n == 5), shapes.guard_or_true(n == 5),
                             shapes.statically_known_true(n >= 0)])
                lib._check(n >= 0)
                seen.extend([shapes.statically_known_true(n >= 0), shapes.statically_known_true(n >= -3),
                             shapes.statically_known_false(n < 0), shapes.guard_or_false(n < 0),
                             shapes.has_free_symbols(n), shapes.is_concrete_int(n), shapes.is_concrete_int(3)])
                return y * 2

        lib.export.export(Helpers(), (lib.tensor([1, 2]), lib.ones(2)))
        return seen + [shapes.guard_or_false(True), shapes.statically_known_true(False), shapes.guard_or_true(False)]

    assert answers(ember) == answers(torch)
    assert answers(ember)[:4] == [False, True, False, True]
