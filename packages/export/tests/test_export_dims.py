"""Dim, derived dims, hints and dynamic_shapes validation, beside torch.export's."""

from __future__ import annotations

import io
import re

import pytest
import torch

import ember
from ember.export import Dim, UserError, export


def test_dim_api_matches_torch():
    for kwargs in ({}, {"min": 3, "max": 10}, {"min": 0}, {"max": 7}, {"min": 1}):
        e, t = Dim("b", **kwargs), torch.export.Dim("b", **kwargs)
        assert repr(e) == repr(t)
        assert e.min == t.min and (e.max == t.max or str(t.max) == "int_oo")
    eb, tb = Dim("b", min=2, max=10), torch.export.Dim("b", min=2, max=10)
    for fn in (lambda d: 2 * d + 1, lambda d: d - 1, lambda d: d * 3, lambda d: 3 * d + 2, lambda d: d + 4):
        e, t = fn(eb), fn(tb)
        assert repr(e) == repr(t) and (e.min, e.max) == (t.min, t.max)
    with pytest.raises(AssertionError, match="inconsistent min=5, max=2"):
        Dim("x", min=5, max=2)
    for lib_dim in (Dim, torch.export.Dim):
        with pytest.raises(AssertionError, match="Dim name must be a valid identifier, got 1bad"):
            lib_dim("1bad")
    with pytest.raises(NotImplementedError, match="positive integer"):
        eb * eb
    with pytest.raises(TypeError):
        eb // 2
    assert repr(Dim.AUTO) == repr(torch.export.Dim.AUTO)
    assert repr(Dim.AUTO(min=3)) == repr(torch.export.Dim.AUTO(min=3))
    assert repr(Dim.STATIC) == repr(torch.export.Dim.STATIC) and repr(Dim.DYNAMIC) == repr(torch.export.Dim.DYNAMIC)


class _Shift(ember.nn.Module):
    def forward(self, x, y):
        return x[:, :-1] + y


class _Flatten7(ember.nn.Module):
    def forward(self, x):
        return x.reshape(x.shape[0] * 7)


def test_derived_dims_share_one_symbol():
    b = Dim("b", min=2, max=10)
    ep = export(_Shift(), (ember.randn(4, 7), ember.randn(4, 6)), dynamic_shapes=({1: b + 1}, {1: b}))
    assert {str(k): (v.lower, v.upper) for k, v in ep.range_constraints.items()} == {"s0": (2, 10),
                                                                                       "s0 + 1": (3, 11)}
    module = ep.module()
    assert module(ember.randn(4, 11), ember.randn(4, 10)).shape == (4, 10)
    with pytest.raises(AssertionError, match="Guard failed"):
        module(ember.randn(4, 9), ember.randn(4, 7))
    with pytest.raises(AssertionError, match="<= 10"):
        module(ember.randn(4, 12), ember.randn(4, 11))


def test_unrelated_dims_that_must_be_equal_suggest_the_relation():
    b = Dim("b", min=2, max=10)
    with pytest.raises(UserError, match=r"(?s)Constraints violated \(c\).*must always be related.*c = b \+ 1"):
        export(_Shift(), (ember.randn(4, 7), ember.randn(4, 6)), dynamic_shapes=({1: Dim("c")}, {1: b}))


def test_specialized_dim_is_a_constraint_violation_with_the_fix():
    x = ember.randn(4, 7)
    with pytest.raises(UserError, match=r"(?s)Constraints violated \(c\).*Suggested fixes:\n  c = 7"):
        export(_Flatten7(), (x,), dynamic_shapes={"x": {1: Dim("c")}})
    with pytest.raises(UserError, match=r"Constraints violated \(x.size\(\)\[1\]\)"):
        export(_Flatten7(), (x,), dynamic_shapes={"x": {1: Dim.DYNAMIC}})
    # AUTO lets the dim specialize; STATIC and None keep it static.
    for spec in (Dim.AUTO, Dim.STATIC, None):
        ep = export(_Flatten7(), (x,), dynamic_shapes={"x": {1: spec}})
        assert ep.range_constraints == {}


def test_auto_dim_becomes_dynamic_when_it_can():
    ep = export(ember.nn.Linear(4, 2), (ember.randn(3, 4),), dynamic_shapes=({0: Dim.AUTO, 1: Dim.AUTO},))
    # dim 1 feeds the weight, so it specializes; dim 0 stays dynamic (PyTorch's VR[2, int_oo]).
    assert repr(list(ep.range_constraints.values())) == "[VR[2, int_oo]]"
    assert ep.module()(ember.randn(9, 4)).shape == (9, 2)


def test_divisibility_suggests_a_derived_dim():
    class Pairs(ember.nn.Module):
        def forward(self, x):
            return x.view(x.shape[0] // 2, 2, x.shape[1]).sum(1)

    with pytest.raises(UserError, match=r"(?s)batch.*_batch = Dim\('_batch'.*batch = 2\*_batch"):
        export(Pairs(), (ember.randn(8, 3),), dynamic_shapes={"x": {0: Dim("batch")}})
    half = Dim("half", max=16)
    ep = export(Pairs(), (ember.randn(8, 3),), dynamic_shapes={"x": {0: 2 * half}})
    ember.testing.assert_close(ep.module()(ember.ones(12, 3)), ember.full((6, 3), 2.0))


def test_dynamic_shapes_structure_errors_match_torch():
    x, y = ember.randn(4, 7), ember.randn(4, 6)
    with pytest.raises(UserError, match="`inputs` has 2 elements, but `dynamic_shapes` has 1 elements"):
        export(_Shift(), (x, y), dynamic_shapes=({1: Dim("c")},))
    with pytest.raises(UserError, match=r"top-level keys must be the arg names \['x', 'y'\]"):
        export(_Shift(), (x, y), dynamic_shapes={"x": {1: Dim("c")}})
    with pytest.raises(UserError, match="same length as the actual tensor shape"):
        export(_Shift(), (x, y), dynamic_shapes=([None], None))
    from ember.compiler._exc import ConstraintViolationError

    with pytest.raises(ConstraintViolationError, match=r"4 not in range \[2, 3\]"):  # torch's type and text
        export(_Shift(), (x, y), dynamic_shapes=({0: Dim("b", max=3)}, {0: Dim("b", max=3)}))
    with pytest.raises(UserError, match="different definitions"):
        export(_Shift(), (x, y), dynamic_shapes=({0: Dim("b", max=8)}, {0: Dim("b", max=9)}))


def test_dynamic_dims_may_be_related_like_torch():
    # Dim.DYNAMIC refuses a specialization but, as Dim.AUTO, accepts an equality or an offset.
    def build(lib):
        class Shifted(lib.nn.Module):
            def forward(self, x, y):
                return x[1:] + y

        return Shifted()

    def shapes(ep):
        return [str(tuple(n.meta["val"].shape)) for n in ep.graph.nodes if n.op == "placeholder"]

    results = []
    for lib in (torch, ember):
        d = lib.export.Dim.DYNAMIC
        ep = lib.export.export(build(lib), (lib.randn(6, 3), lib.randn(5, 3)), dynamic_shapes=({0: d}, {0: d}))
        results.append((sorted(str(v) for v in ep.range_constraints.values()), len(set(shapes(ep)))))
        out = ep.module()(lib.ones(9, 3), lib.ones(8, 3))
        assert tuple(out.shape) == (8, 3)
        with pytest.raises(Exception):  # noqa: B017 - each library's own guard error
            ep.module()(lib.ones(9, 3), lib.ones(9, 3))
        with pytest.raises(lib._dynamo.exc.UserError, match="specialized it to be a constant"):
            lib.export.export(build(lib), (lib.randn(6, 3), lib.randn(5, 3)), dynamic_shapes=({0: d}, None))
    assert results[0] == results[1] == (["VR[2, int_oo]", "VR[3, int_oo]"], 2)


def test_einsum_keeps_dynamic_dims_like_torch():
    # einsum views its operands with as_strided: the sizes stayed symbolic only after as_strided
    # kept SymInts (they became the example's ints: a view error at other sizes).
    import numpy as np

    def build(lib):
        class Scores(lib.nn.Module):
            def forward(self, q, k):
                return lib.einsum("bhqd,bhkd->bhqk", q, k).softmax(-1)

        return Scores()

    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 2, 3, 4)).astype(np.float32), rng.standard_normal((2, 2, 5, 4)).astype(np.float32)
    q2, k2 = rng.standard_normal((3, 2, 6, 4)).astype(np.float32), rng.standard_normal((3, 2, 7, 4)).astype(np.float32)
    outs = []
    for lib in (torch, ember):
        b, t, u = lib.export.Dim("b"), lib.export.Dim("t"), lib.export.Dim("u")
        ep = lib.export.export(build(lib), (lib.tensor(q), lib.tensor(k)), dynamic_shapes=({0: b, 2: t}, {0: b, 2: u}))
        outs.append(ep.module()(lib.tensor(q2), lib.tensor(k2)).numpy())
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-6)


def _lstm_with_state(lib):
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = lib.nn.LSTM(4, 6, batch_first=True)

        def forward(self, x, h0, c0):
            out, _ = self.lstm(x, (h0, c0))
            return out[:, -1]

    return Net()


def test_lstm_specializes_the_sequence_and_keeps_the_batch_like_torch():
    # The LSTM's guard ties batch*seq to batch*5: only the sequence length specializes (a size is
    # never 0), so a named seq dim is reported alone, and AUTO dims keep the batch dynamic.
    results = []
    for lib in (torch, ember):
        lib.manual_seed(0)
        net = _lstm_with_state(lib)
        x, h0, c0 = lib.randn(3, 5, 4), lib.zeros(1, 3, 6), lib.zeros(1, 3, 6)
        dim = lib.export.Dim
        b, s = dim("b"), dim("s")
        with pytest.raises(torch._dynamo.exc.UserError if lib is torch else UserError) as info:
            lib.export.export(net, (x, h0, c0), dynamic_shapes=({0: b, 1: s}, {1: b}, {1: b}))
        message = str(info.value)
        assert "Constraints violated (s)!" in message and "Suggested fixes:\n  s = 5" in message
        auto = {0: dim.AUTO, 1: dim.AUTO}
        ep = lib.export.export(net, (x, h0, c0), dynamic_shapes=(auto, {1: dim.AUTO}, {1: dim.AUTO}))
        out = ep.module()(lib.randn(7, 5, 4), lib.zeros(1, 7, 6), lib.zeros(1, 7, 6))
        with pytest.raises(AssertionError, match=r"Guard failed: x.size\(\)\[1\] == 5"):
            ep.module()(lib.randn(7, 6, 4), lib.zeros(1, 7, 6), lib.zeros(1, 7, 6))
        results.append((tuple(out.shape), len(ep.range_constraints)))
    assert results[0] == results[1] == ((7, 6), 1)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_recurrent_layers_keep_an_unbounded_batch_dim_like_torch(kind):
    # A thread-count heuristic compared the symbolic batch with a constant: the guard
    # 9*b < 16777216 made an unbounded Dim("b") a constraint violation for nn.RNN.
    shapes = []
    for lib in (torch, ember):
        lib.manual_seed(0)
        layer = getattr(lib.nn, kind)(4, 3, batch_first=True)
        ep = lib.export.export(layer, (lib.randn(2, 3, 4),), dynamic_shapes=({0: lib.export.Dim("b")},))
        shapes.append(tuple(ep.module()(lib.randn(7, 3, 4))[0].shape))
        assert [repr(v) for v in ep.range_constraints.values()] == ["VR[0, int_oo]"]
    assert shapes[0] == shapes[1] == (7, 3, 3)


def test_group_norm_decomposition_keeps_the_batch_symbolic():
    # native_group_norm's N argument was int()-ed: run_decompositions (and ONNX) computed every
    # batch with the example's N (wrong values, or an error) at other batch sizes.
    import numpy as np

    layer_t = torch.nn.GroupNorm(2, 4)
    layer = ember.nn.GroupNorm(2, 4)
    ep = export(layer, (ember.randn(2, 4, 3),), dynamic_shapes=({0: Dim("b")},)).run_decompositions()
    x = np.linspace(-3, 3, 5 * 4 * 3, dtype=np.float32).reshape(5, 4, 3)
    got = ep.module()(ember.tensor(x)).detach().numpy()
    np.testing.assert_allclose(got, layer_t(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_shapes_collection_and_call_spec_match_torch():
    def run(lib):
        class Net(lib.nn.Module):
            def forward(self, inputs, scale=None):
                return inputs["x"] @ inputs["others"][0] + inputs["others"][1] * scale

        x, w, b, s = lib.randn(3, 4), lib.randn(4, 5), lib.randn(3, 5), lib.randn(1)
        args = ({"x": x, "others": [w, b]},)
        shapes = lib.export.ShapesCollection()
        d = lib.export.Dim("d")
        shapes[x] = {0: d}
        shapes[b] = {0: d}
        structure = repr(shapes.dynamic_shapes(Net(), args, {"scale": s}))
        ep = lib.export.export(Net(), args, {"scale": s}, dynamic_shapes=shapes)
        out = ep.module()({"x": lib.randn(7, 4), "others": [w, lib.randn(7, 5)]}, scale=s)
        in_spec, out_spec = ep.call_spec
        assert ep.call_spec.in_spec is in_spec and ep.call_spec.out_spec is out_spec
        with pytest.raises(AssertionError, match="Cannot assign shape to non-tensor"):
            shapes[3] = {0: d}
        stray = lib.export.ShapesCollection()
        stray[lib.randn(2)] = {0: d}
        with pytest.raises(ValueError, match="not found in args"):
            stray.dynamic_shapes(Net(), args)
        return structure, tuple(out.shape), [repr(v) for v in ep.range_constraints.values()]

    assert run(ember) == run(torch)


def test_exported_module_sizes_below_two_and_mode_switches_like_torch():
    # The trace's lower bound 2 (0/1 specialization) is not checked at run time, a bound the
    # program asked for is; ep.module() refuses train()/eval() as PyTorch's does.
    outcomes = []
    for lib in (ember, torch):
        lib.manual_seed(0)
        m = lib.nn.Linear(4, 3)
        row = []
        for lo in (2, 3):
            ep = lib.export.export(m, (lib.randn(5, 4),),
                                   dynamic_shapes={"input": {0: lib.export.Dim("b", min=lo, max=64)}})
            for n in (0, 1, 2, 3):
                try:
                    row.append(tuple(ep.module()(lib.randn(n, 4)).shape))
                except AssertionError as exc:
                    row.append(str(exc))
        mod = ep.module()
        for switch in (mod.train, mod.eval):
            with pytest.raises(NotImplementedError, match="is not supported yet"):
                switch()
        row.append(mod.training)
        outcomes.append(row)
    assert outcomes[0] == outcomes[1]


def test_example_outside_its_dims_range_raises_constraint_violation_like_torch():
    from torch.fx.experimental.symbolic_shapes import ConstraintViolationError as TorchError

    from ember.compiler._exc import ConstraintViolationError

    for lib, error in ((torch, TorchError), (ember, ConstraintViolationError)):
        m = lib.nn.Linear(4, 3)
        for dim, text in ((lib.export.Dim("b", min=2, max=4), r"5 not in range \[2, 4\]"),
                          (lib.export.Dim("b", min=6), r"5 not in range \[6, int_oo\]")):
            with pytest.raises(error, match=text):
                lib.export.export(m, (lib.randn(5, 4),), dynamic_shapes={"input": {0: dim}})


def test_additional_inputs_infer_dynamic_dims_like_torch():
    found = []
    for lib in (torch, ember):
        class M(lib.nn.Module):
            def forward(self, x, y):
                return (x * 2).sum(0) + y

        more = lib.export.AdditionalInputs()
        more.add((lib.ones(5, 3), lib.ones(3)))
        more.add((lib.ones(7, 3), lib.ones(3)))
        shapes = more.dynamic_shapes(M(), (lib.ones(2, 3), lib.ones(3)))
        ep = lib.export.export(M(), (lib.ones(2, 3), lib.ones(3)), dynamic_shapes=more)
        with pytest.raises(AssertionError, match="must be a tuple"):
            more.add([lib.ones(1)])
        with pytest.raises(AssertionError):
            ep.module()(lib.ones(9, 3), lib.ones(4))  # y stayed static
        found.append(({k: [str(s) for s in v] for k, v in shapes.items()}, len(ep.range_constraints),
                      ep.module()(lib.ones(9, 3), lib.ones(3)).tolist()))
    assert found[1] == found[0]
    assert found[0][0] == {"x": ["DimHint(DYNAMIC)", "None"], "y": ["None"]}


def test_two_equal_dims_suggest_the_later_one_in_terms_of_the_earlier_like_torch():
    import torch

    def fixes(lib):
        class Add(lib.nn.Module):
            def forward(self, x, y):
                return x + y

        out = []
        for first, second in (("a", "z"), ("z", "a"), ("n", "m")):
            dims = ({0: lib.export.Dim(first)}, {0: lib.export.Dim(second)})
            with pytest.raises(lib._dynamo.exc.UserError) as info:
                lib.export.export(Add(), (lib.ones(4), lib.ones(4)), dynamic_shapes=dims)
            message = str(info.value)
            out.append((message.splitlines()[0].split("!")[0], message.split("Suggested fixes:\n")[1].splitlines()[0]))
        return out

    assert fixes(ember) == fixes(torch) == [("Constraints violated (z)", "  z = a"),
                                            ("Constraints violated (a)", "  a = z"),
                                            ("Constraints violated (m)", "  m = n")]


def _floor_reshapes(lib):
    class Quarters(lib.nn.Module):  # the -1 dim is 3*n / (4*(n // 4)): sympy.solve finds only n = 16
        def forward(self, x):
            return x.reshape(x.shape[0] // 4, 4, -1).sum(1)

    class Fours(lib.nn.Module):  # 3*n divisible by 4
        def forward(self, x):
            return x.view(-1, 4) + 1

    class Pairs(lib.nn.Module):
        def forward(self, x):
            return x.view(x.shape[0] // 2, 2, x.shape[1]).sum(1)

    return {"quarters": Quarters(), "fours": Fours(), "pairs": Pairs()}


@pytest.mark.parametrize("name", ["quarters", "fours", "pairs"])
@pytest.mark.parametrize("hint", ["AUTO", "DYNAMIC"])
def test_floor_and_divisibility_guards_keep_an_auto_dim_like_torch(name, hint):
    # torch 2.13 keeps the dim symbolic and checks such guards on each call (an AssertionError
    # "Guard failed" where they do not hold); ember specialized the dim to the example's 16
    tp = torch.export.export(_floor_reshapes(torch)[name], (torch.ones(16, 3),),
                             dynamic_shapes={"x": {0: getattr(torch.export.Dim, hint)}})
    ep = export(_floor_reshapes(ember)[name], (ember.ones(16, 3),), dynamic_shapes={"x": {0: getattr(Dim, hint)}})
    assert [str(r) for r in ep.range_constraints.values()] == [str(r) for r in tp.range_constraints.values()]
    for n in (8, 12, 13, 32):
        data = torch.arange(n * 3, dtype=torch.float32).reshape(n, 3)
        try:
            want = tp.module()(data)
        except AssertionError:
            with pytest.raises(AssertionError, match="Guard failed"):
                ep.module()(ember.tensor(data.numpy()))
            continue
        assert ep.module()(ember.tensor(data.numpy())).tolist() == want.tolist()


def _first_half(lib):
    class FirstHalf(lib.nn.Module):
        def forward(self, x):
            return x[: x.shape[0] // 2] * 2

    return FirstHalf()


@pytest.mark.parametrize("spec", [{}, {"max": 100}, {"min": 4, "max": 100}])
def test_slicing_by_a_floor_of_a_named_dim_suggests_a_multiple_like_torch(spec):
    # torch 2.13 refuses x[: n // 2] for a named Dim (its guard n // 2 <= n is not proved over the
    # range) and suggests n = 2*_n; ember suggested specializing n. The suggestion exports in both.
    with pytest.raises(torch._dynamo.exc.UserError, match=r"(?s)satisfy the generated guard.*n = 2\*_n") as t_exc:
        torch.export.export(_first_half(torch), (torch.arange(10.0),),
                            dynamic_shapes={"x": {0: torch.export.Dim("n", **spec)}})
    with pytest.raises(UserError, match=r"(?s)satisfy the generated guard.*n = 2\*_n") as e_exc:
        export(_first_half(ember), (ember.arange(10.0),), dynamic_shapes={"x": {0: Dim("n", **spec)}})
    t_fix = re.search(r"_n = Dim\('_n', max=(\w+)\)", str(t_exc.value)).group(1)
    e_fix = re.search(r"_n = Dim\('_n', max=(\w+)\)", str(e_exc.value)).group(1)
    assert t_fix == e_fix
    tp = torch.export.export(_first_half(torch), (torch.arange(10.0),),
                             dynamic_shapes={"x": {0: 2 * torch.export.Dim("_n", max=50)}})
    ep = export(_first_half(ember), (ember.arange(10.0),), dynamic_shapes={"x": {0: 2 * Dim("_n", max=50)}})
    for n in (4, 6, 12):
        assert ep.module()(ember.arange(float(n))).tolist() == tp.module()(torch.arange(float(n))).tolist()


def _half_rows(lib):
    class HalfRows(lib.nn.Module):
        def forward(self, x):
            return x.reshape(x.shape[0] // 2, -1) * 2

    return HalfRows()


@pytest.mark.parametrize("hint", ["AUTO", "DYNAMIC"])
def test_auto_dim_keeps_an_unexpressible_guard_as_a_call_check_like_torch(hint):
    # reshape(b // 2, -1) needs 3*b divisible by b // 2: no range says that, so torch keeps the
    # dim dynamic and ep.module() checks the guard per call; a named Dim is an error in both
    tp = torch.export.export(_half_rows(torch), (torch.ones(8, 3),),
                             dynamic_shapes={"x": {0: getattr(torch.export.Dim, hint)}})
    ep = export(_half_rows(ember), (ember.ones(8, 3),), dynamic_shapes={"x": {0: getattr(Dim, hint)}})
    assert [str(r) for r in ep.range_constraints.values()] == [str(r) for r in tp.range_constraints.values()]
    buffer = io.BytesIO()
    ember.export.save(ep, buffer)
    buffer.seek(0)
    for program in (ep, ember.export.load(buffer)):
        for n in (6, 10, 5, 4, 9):
            data = torch.arange(n * 3, dtype=torch.float32).reshape(n, 3)
            try:
                want = tp.module()(data)
            except AssertionError:
                with pytest.raises(AssertionError, match="Guard failed"):
                    program.module()(ember.tensor(data.numpy()))
                continue
            assert program.module()(ember.tensor(data.numpy())).tolist() == want.tolist()
    with pytest.raises(torch._dynamo.exc.UserError):
        torch.export.export(_half_rows(torch), (torch.ones(8, 3),), dynamic_shapes={"x": {0: torch.export.Dim("b")}})
    with pytest.raises(UserError, match="Constraints violated"):
        export(_half_rows(ember), (ember.ones(8, 3),), dynamic_shapes={"x": {0: Dim("b")}})


def _range_items(ep) -> list:
    return [(re.sub(r"s\d+", "s", str(k)), str(v)) for k, v in ep.range_constraints.items()]


def test_derived_dims_ranges_and_their_order_like_torch():
    # a root only derived dims use (2*_n, _n + 1) is listed last with at least 2, as torch 2.13's
    # (ember gave it the Dim's min, 0, and listed it first); a root an input dim is keeps its min
    def build(lib):
        class Twice(lib.nn.Module):
            def forward(self, x):
                return x * 2

        class Pair(lib.nn.Module):
            def forward(self, x, y):
                return x[1:] + y

        return Twice(), Pair()

    found = []
    for lib in (ember, torch):
        D = lib.export.Dim
        twice, pair = build(lib)
        got = [_range_items(lib.export.export(twice, (lib.ones(10),), dynamic_shapes=(spec,)))
               for spec in ({0: 2 * D("_n", max=50)}, {0: D("_n", max=50) + 1}, {0: 2 * D("_n", min=3, max=50)})]
        n = D("n", max=50)
        got.append(_range_items(lib.export.export(pair, (lib.ones(10), lib.ones(9)),
                                                  dynamic_shapes=({0: n + 1}, {0: n}))))
        found.append(got)
    assert found[0] == found[1]


def _outcome(fn, *args):
    try:
        return [tuple(t.shape) for t in fn(*args)]
    except Exception as exc:
        return type(exc).__name__


@pytest.mark.parametrize("sizes", [(12, 13), (11, 12), (100, 101), (101, 102), (11, 13), (5, 5)])
def test_module_of_a_multiple_dim_accepts_what_torch_accepts(sizes):
    """ep.module() binds a root seen only through derived dims (``2*_n``, ``2*_n + 1``) to its
    solution, integer or not, as PyTorch 2.13's guards do (an odd size of a ``2*_n`` dim passes),
    checks the derived dims' ranges and their relation; the graph reads each derived size from its
    own input, so the values equal torch's (``y[1:]`` of a 12 is 11 long, not ``2*(11 // 2)``)."""
    outs = {}
    for lib in (torch, ember):
        class M(lib.nn.Module):
            def forward(self, x, y):
                return x[: x.shape[0] // 2] * 2, y[1:] + 1

        n = 2 * lib.export.Dim("_n", max=50)
        ep = lib.export.export(M(), (lib.randn(10, 3), lib.randn(11)), dynamic_shapes=({0: n}, {0: n + 1}))
        x, y = lib.randn(sizes[0], 3), lib.randn(sizes[1])
        outs[lib.__name__] = _outcome(ep.module(), x, y)
    assert outs["ember"] == outs["torch"], outs
    with pytest.raises(AssertionError, match=re.escape("Guard failed: x.size()[0] <= 100")):
        ep.module()(ember.randn(102, 3), ember.randn(103))


def test_module_checks_the_exported_dims_of_a_tensor_of_another_rank_like_torch():
    for shape in [(5,), (), (5, 3, 2), (5, 3, 1)]:
        outs = {}
        for lib in (torch, ember):
            class M(lib.nn.Module):
                def forward(self, x):
                    return (x.sum(-1),)

            ep = lib.export.export(M(), (lib.randn(4, 3),), dynamic_shapes=({0: lib.export.Dim("b")},))
            x = lib.randn(shape)
            outs[lib.__name__] = _outcome(ep.module(), x)
        # fewer dims: IndexError (torch's guard reads x.size()[1]); more: the graph runs
        assert outs["ember"] == outs["torch"], (shape, outs)
