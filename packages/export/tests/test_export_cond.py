"""cond and while_loop in exported programs (subgraph nodes, as torch.export has them), saved and
loaded, and as ONNX If/Loop run by ONNX Runtime; custom ops from ember.library in exports."""

from __future__ import annotations

import importlib
import io

import numpy as np
import pytest
import torch

import ember
from ember.export import Dim, InputKind, export, load, save, while_loop


def _branchy(lib):
    class Branchy(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(3, 3)
            self.scale = lib.nn.Parameter(lib.ones(3) * 0.5)  # read only inside the false branch

        def forward(self, x):
            return lib.cond(x.sum() > 0, lambda v: self.fc(v).relu(), lambda v: (v * self.scale).exp().neg(), (x,))

    return Branchy()


def _pair_models():
    from export_models import copy_weights

    model_e, model_t = _branchy(ember), _branchy(torch)
    copy_weights(model_t, model_e)
    return model_e, model_t


def _roundtrip(ep):
    buf = io.BytesIO()
    save(ep, buf)
    buf.seek(0)
    return load(buf)


def _hop_nodes(graph, name):
    return [n for n in graph.nodes if n.op == "call_function" and name in str(n.target)]


def test_exported_cond_has_subgraphs_like_torch_export_and_round_trips():
    model_e, model_t = _pair_models()
    ep = export(model_e, (ember.randn(2, 3),), dynamic_shapes=({0: Dim("b", max=8)},))
    ep_t = torch.export.export(model_t, (torch.randn(2, 3),), dynamic_shapes=({0: torch.export.Dim("b", max=8)},))
    # one cond node reading two subgraphs by get_attr, under torch's names
    assert len(_hop_nodes(ep.graph, "cond")) == len(_hop_nodes(ep_t.graph, "cond")) == 1
    attrs = sorted(n.target for n in ep.graph.nodes if n.op == "get_attr")
    assert attrs == sorted(n.target for n in ep_t.graph.nodes if n.op == "get_attr") == ["false_graph_0",
                                                                                         "true_graph_0"]
    # the weight read in a branch is a PARAMETER input of the program, as in torch
    kinds = [s.kind.name for s in ep.graph_signature.input_specs]
    assert kinds == [s.kind.name for s in ep_t.graph_signature.input_specs]
    assert sum(s.kind is InputKind.PARAMETER for s in ep.graph_signature.input_specs) == 3
    assert str(next(iter(ep.range_constraints.values()))) == str(next(iter(ep_t.range_constraints.values())))
    loaded = _roundtrip(ep)
    for values in (np.ones((4, 3)), -np.ones((5, 3)), np.linspace(-1, 1, 6).reshape(2, 3)):
        xe, xt = ember.from_numpy(values.astype(np.float32)), torch.from_numpy(values.astype(np.float32))
        want = ep_t.module()(xt).detach().numpy()
        np.testing.assert_allclose(ep.module()(xe).detach().numpy(), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(loaded.module()(xe).detach().numpy(), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(AssertionError, match="Guard failed"):
        ep.module()(ember.ones(9, 3))


def _reshapes(lib):
    class Reshapes(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(6, 2)

        def forward(self, x):
            def yes(v):
                return self.lin(v.reshape(v.shape[0], 6))

            def no(v):
                # (a copy: a branch returning a view of its input is refused, as by torch.cond)
                return v.reshape(v.shape[0] * 3, 2)[:, :1].reshape(-1, 3)[:, 1:].clone()

            return lib.cond(x.sum() > 0, yes, no, (x,))

    return Reshapes()


def test_sizes_inside_subgraphs_follow_dynamic_dims():
    model = _reshapes(ember)
    ep = export(model, (ember.randn(4, 2, 3),), dynamic_shapes=({0: Dim("b")},))
    sizes = [n for n in ep.graph_module.false_graph_0.graph.nodes if "sym_size" in str(n.target)]
    assert sizes, "the subgraph reads its batch size from its own input"
    loaded = _roundtrip(ep)
    for b in (2, 5, 7):
        for sign in (1.0, -1.0):
            x = ember.randn(b, 2, 3).abs() * sign
            ember.testing.assert_close(ep.module()(x), model(x))
            ember.testing.assert_close(loaded.module()(x), model(x))
    pytest.importorskip("onnxruntime")
    program = importlib.import_module("ember.onnx").export(model, (ember.randn(4, 2, 3),),
                                                           dynamic_shapes=({0: Dim("b")},))
    for b in (3, 6):
        for sign in (1.0, -1.0):
            x = ember.randn(b, 2, 3).abs() * sign
            ember.testing.assert_close(program(x)[0], model(x).detach(), rtol=1e-4, atol=1e-5)


def _counter(lib):
    class Counter(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = lib.nn.Parameter(lib.tensor([0.5, -1.0, 2.0]))

        def forward(self, i, x):
            fn = lib._higher_order_ops.while_loop
            return fn(lambda i, x: (i < 6) & (x.abs().sum() < 100), lambda i, x: (i + 1, x * self.w + 1), (i, x))

    return Counter()


def test_exported_while_loop_matches_torch_and_round_trips():
    model_e, model_t = _counter(ember), _counter(torch)
    ep = export(model_e, (ember.tensor(0), ember.ones(3)))
    ep_t = torch.export.export(model_t, (torch.tensor(0), torch.ones(3)))
    assert len(_hop_nodes(ep.graph, "while_loop")) == len(_hop_nodes(ep_t.graph, "while_loop")) == 1
    assert sorted(n.target for n in ep.graph.nodes if n.op == "get_attr") == sorted(
        n.target for n in ep_t.graph.nodes if n.op == "get_attr")
    loaded = _roundtrip(ep)
    for start, values in ((0, [1.0, 2.0, 3.0]), (4, [0.1, 0.2, 0.3]), (9, [1.0, 1.0, 1.0]), (0, [50.0, 60, 0])):
        want = ep_t.module()(torch.tensor(start), torch.tensor(values))
        for got in (ep.module()(ember.tensor(start), ember.tensor(values)),
                    loaded.module()(ember.tensor(start), ember.tensor(values))):
            assert int(got[0]) == int(want[0])
            np.testing.assert_allclose(got[1].detach().numpy(), want[1].detach().numpy(), rtol=1e-6, atol=1e-6)
    assert while_loop is ember._higher_order_ops.while_loop


def test_cond_and_while_loop_become_onnx_if_and_loop():
    pytest.importorskip("onnxruntime")
    import ember.onnx

    model_e, _ = _pair_models()
    program = ember.onnx.export(model_e, (ember.randn(2, 3),), dynamic_shapes=({0: Dim("b")},))
    assert [n.op_type for n in program.model.graph.node].count("If") == 1
    for x in (ember.ones(4, 3), -ember.ones(3, 3), ember.randn(6, 3)):
        ember.testing.assert_close(program(x)[0], model_e(x).detach(), rtol=1e-4, atol=1e-5)
    counter = _counter(ember)
    loop_program = ember.onnx.export(counter, (ember.tensor(0), ember.ones(3)))
    assert [n.op_type for n in loop_program.model.graph.node].count("Loop") == 1
    for start, values in ((0, [1.0, 2.0, 3.0]), (9, [1.0, 1.0, 1.0]), (2, [40.0, 0.0, 1.0])):
        got = loop_program(ember.tensor(start), ember.tensor(values))
        want = counter(ember.tensor(start), ember.tensor(values))
        assert int(got[0]) == int(want[0])
        ember.testing.assert_close(got[1], want[1].detach())


def test_library_custom_op_exports_as_one_node_and_loads_by_name():
    from ember.library import custom_op

    name = "exporttest::shifted_tanh"
    if name in ember._src.dispatch.OPS:
        op = ember.ops.exporttest.shifted_tanh
    else:
        @custom_op(name, mutates_args=())
        def op(x: ember.Tensor, shift: float) -> ember.Tensor:
            return (x + shift).tanh()

        op.register_fake(lambda x, shift: ember.empty_like(x))

    class Net(ember.nn.Module):
        def forward(self, x):
            return op(x, 0.5) * 2

    ep = export(Net(), (ember.randn(3, 4),), dynamic_shapes=({0: Dim("b")},))
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert targets.count(ember.ops.exporttest.shifted_tanh) == 1
    loaded = _roundtrip(ep)
    x = ember.randn(5, 4)
    ember.testing.assert_close(loaded.module()(x), (x + 0.5).tanh() * 2)
    pytest.importorskip("onnx")
    with pytest.raises(RuntimeError, match="exporttest::shifted_tanh"):
        importlib.import_module("ember.onnx").export(Net(), (ember.randn(3, 4),))


def test_nested_cond_exports_saves_and_decomposes_inside_subgraphs():
    class Nested(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = ember.nn.Linear(3, 3)

        def forward(self, x):
            def inner(v):
                return ember.cond(v.mean() > 0.5, lambda u: u.softmax(-1), lambda u: u * 100, (v,))

            return ember.cond(x.sum() > 0, lambda a: inner(self.lin(a)), lambda a: a.log_softmax(-1), (x,))

    model = Nested()
    ep = export(model, (ember.randn(2, 3),))
    assert isinstance(ep.graph_module.true_graph_0.true_graph_0, ember.fx.GraphModule)
    loaded = _roundtrip(ep)
    decomposed = ep.run_decompositions()
    ops = {str(n.target) for n in decomposed.graph_module.false_graph_0.graph.nodes if n.op == "call_function"}
    assert "ember.ops.log_softmax" not in ops and "ember.ops.exp" in ops
    inputs = [ember.ones(2, 3), -ember.ones(2, 3), ember.randn(2, 3)]
    with ember.no_grad():
        model.lin.bias.fill_(5.0)  # makes the inner predicate true for positive inputs
        ep = export(model, (ember.randn(2, 3),))
        loaded, decomposed = _roundtrip(ep), ep.run_decompositions()
        for x in inputs:
            for program in (ep, loaded, decomposed):
                ember.testing.assert_close(program.module()(x), model(x))


def test_dynamic_export_after_static_one_keeps_the_dim_like_torch():
    # The branch subgraphs are memoized by structure; looking up a static export's entry with a
    # symbolic batch size compared the sizes and specialized the dim.
    model_e, model_t = _pair_models()
    x = np.ones((2, 3), np.float32)
    for lib, model in ((torch, model_t), (ember, model_e)):
        lib.export.export(model, (lib.tensor(x),))
        ep = lib.export.export(model, (lib.tensor(x),), dynamic_shapes={"x": {0: lib.export.Dim("b")}})
        for batch in (5, 1):
            probe = np.linspace(-1, 1, batch * 3, dtype=np.float32).reshape(batch, 3)
            got = ep.module()(lib.tensor(probe)).detach().numpy()
            np.testing.assert_allclose(got, model(lib.tensor(probe)).detach().numpy(), rtol=1e-6, atol=1e-6)
    ep_e = export(model_e, (ember.tensor(x),), dynamic_shapes={"x": {0: Dim("b")}})
    ep_t = torch.export.export(model_t, (torch.tensor(x),), dynamic_shapes={"x": {0: torch.export.Dim("b")}})
    assert [str(v) for v in ep_e.range_constraints.values()] == [str(v) for v in ep_t.range_constraints.values()]


@pytest.mark.parametrize("example", [3, 8], ids=["false_at_example", "true_at_example"])
def test_cond_on_a_dynamic_size_keeps_the_predicate_symbolic_like_torch(example):
    def build(lib):
        class SizeBranch(lib.nn.Module):
            def forward(self, x):
                return lib.cond(x.shape[0] > 4, lambda v: v.sin(), lambda v: v.cos(), (x,))

        return SizeBranch()

    tp = torch.export.export(build(torch), (torch.randn(example, 4),),
                             dynamic_shapes=({0: torch.export.Dim("b", min=2, max=16)},))
    ep = export(build(ember), (ember.randn(example, 4),), dynamic_shapes=({0: Dim("b", min=2, max=16)},))
    # no specialization: the whole range stays, as in torch, and one cond node picks at run time
    assert [(r.lower, r.upper) for r in ep.range_constraints.values()] == [
        (int(r.lower), int(r.upper)) for r in tp.range_constraints.values()]
    assert len(_hop_nodes(ep.graph, "cond")) == 1
    for program in (ep, _roundtrip(ep), ep.run_decompositions()):
        for n in (2, 3, 5, 16):
            x = np.random.randn(n, 4).astype(np.float32)
            want = tp.module()(torch.from_numpy(x)).numpy()
            np.testing.assert_allclose(program.module()(ember.from_numpy(x)).numpy(), want, rtol=1e-6, atol=1e-6)
    onnx_program = ember.onnx.export(build(ember), (ember.randn(example, 4),),
                                     dynamic_shapes=({0: Dim("b", min=2, max=16)},))
    for n in (3, 9):
        x = ember.randn(n, 4)
        np.testing.assert_allclose(onnx_program(x)[0].numpy(), (x.sin() if n > 4 else x.cos()).numpy(), atol=1e-6)


def _earlier_line_models(lib):
    class Earlier(lib.nn.Module):  # the predicate computed lines before the cond
        def forward(self, x):
            p = x.shape[0] > 4
            y = x + 1
            return lib.cond(p, lambda v: v.sin(), lambda v: v.cos(), (y,))

    class Combined(lib.nn.Module):  # two comparisons joined with &, still undecided
        def forward(self, x):
            p = (x.shape[0] > 4) & (x.shape[0] < 8)
            return lib.cond(p, lambda v: v.sin(), lambda v: v.cos(), (x,))

    class Parity(lib.nn.Module):  # a size expression with a remainder
        def forward(self, x):
            n = x.shape[0]
            even = n % 2 == 0
            return lib.cond(even, lambda v: v.sin(), lambda v: v.cos(), (x,))

    return [Earlier(), Combined(), Parity()]


def test_cond_on_a_size_predicate_from_an_earlier_line_stays_symbolic_like_torch():
    for model_e, model_t in zip(_earlier_line_models(ember), _earlier_line_models(torch)):
        tp = torch.export.export(model_t, (torch.randn(6, 3),),
                                 dynamic_shapes={"x": {0: torch.export.Dim("b", min=2, max=10)}})
        ep = export(model_e, (ember.randn(6, 3),), dynamic_shapes={"x": {0: Dim("b", min=2, max=10)}})
        assert [(r.lower, r.upper) for r in ep.range_constraints.values()] == [
            (int(r.lower), int(r.upper)) for r in tp.range_constraints.values()]
        assert len(_hop_nodes(ep.graph, "cond")) == 1
        for n in (3, 6, 7, 9):
            x = np.random.randn(n, 3).astype(np.float32)
            want = tp.module()(torch.from_numpy(x)).numpy()
            np.testing.assert_allclose(ep.module()(ember.from_numpy(x)).numpy(), want, rtol=1e-6, atol=1e-6)


def test_deciding_a_size_comparison_in_python_guards_like_torch():
    def build(lib):
        class Decide(lib.nn.Module):
            def forward(self, x):
                p = x.shape[0] > 4
                if p:  # decided here: a guard, which the range b in [2, 10] violates
                    return x.sin()
                return x.cos()

        return Decide()

    with pytest.raises(torch._dynamo.exc.UserError):
        torch.export.export(build(torch), (torch.randn(6, 3),),
                            dynamic_shapes={"x": {0: torch.export.Dim("b", min=2, max=10)}})
    with pytest.raises(ember.compiler._exc.UserError, match=r"b > 4"):
        export(build(ember), (ember.randn(6, 3),), dynamic_shapes={"x": {0: Dim("b", min=2, max=10)}})
    # within a range that implies it, the decision is no guard at all, as in torch
    ep = export(build(ember), (ember.randn(6, 3),), dynamic_shapes={"x": {0: Dim("b", min=5, max=10)}})
    x = np.random.randn(7, 3).astype(np.float32)
    np.testing.assert_allclose(ep.module()(ember.from_numpy(x)).numpy(), np.sin(x), rtol=1e-6, atol=1e-6)
