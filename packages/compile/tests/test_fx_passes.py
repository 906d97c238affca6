"""FX passes from PyTorch's documentation, run unchanged on torch.fx (oracle) and ember.fx.

Each pass is written once against a framework ``lib`` and its ``fx`` module: Interpreter and
Transformer subclasses, replacing ops in place, inserting nodes, decomposing with Proxies,
dead code elimination, ShapeProp and subgraph_rewriter.replace_pattern.
"""

from __future__ import annotations

import operator

import numpy as np
import pytest
import torch
import torch.fx
import torch.fx.passes.shape_prop
import torch.fx.subgraph_rewriter
from fx_test_helpers import assert_close, copy_weights, full_structure, structure, to_ember, to_torch

import ember
import ember.fx
import ember.fx.passes.shape_prop
import ember.fx.subgraph_rewriter

FRAMEWORKS = ((torch, torch.fx, to_torch), (ember, ember.fx, to_ember))


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _sigmoid_then_neg(lib):
    def fn(x):
        return lib.sigmoid(x).neg()

    return fn


def test_interpreter_subclass_swaps_ops():
    # The NegSigmSwapInterpreter example of torch.fx.Interpreter's docstring.
    x = _rand(3, 4)
    outs = []
    for lib, fx, convert in FRAMEWORKS:
        class NegSigmSwapInterpreter(fx.Interpreter):
            def call_function(self, target, args, kwargs, lib=lib):
                if target == lib.sigmoid:
                    return lib.neg(*args, **kwargs)
                return super().call_function(target, args, kwargs)

            def call_method(self, target, args, kwargs):
                if target == "neg":
                    call_self, *args_tail = args
                    return call_self.sigmoid(*args_tail, **kwargs)
                return super().call_method(target, args, kwargs)

        gm = fx.symbolic_trace(_sigmoid_then_neg(lib))
        outs.append(NegSigmSwapInterpreter(gm).run(convert(x)))
    assert_close(outs[1], outs[0])
    assert_close(outs[1], torch.sigmoid(torch.neg(to_torch(x))))


def test_transformer_subclass_swaps_ops():
    x = _rand(3, 4)
    results = []
    for lib, fx, convert in FRAMEWORKS:
        class NegSigmSwapXformer(fx.Transformer):
            def call_function(self, target, args, kwargs, lib=lib):
                if target == lib.sigmoid:
                    return lib.neg(*args, **kwargs)
                return super().call_function(target, args, kwargs)

            def call_method(self, target, args, kwargs):
                if target == "neg":
                    call_self, *args_tail = args
                    return call_self.sigmoid(*args_tail, **kwargs)
                return super().call_method(target, args, kwargs)

        gm = fx.symbolic_trace(_sigmoid_then_neg(lib))
        transformed = NegSigmSwapXformer(gm).transform()
        results.append((transformed, transformed(convert(x))))
    (tgm, tout), (egm, eout) = results
    assert full_structure(egm) == full_structure(tgm)
    assert_close(eout, tout)
    assert isinstance(egm, ember.fx.GraphModule)


def test_identity_transformer_and_interpreter_keep_the_program():
    def make(lib):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = lib.nn.Linear(4, 4)

            def forward(self, x):
                return lib.relu(self.lin(x)).sum(dim=1) + self.lin.bias.sum()

        return M()

    torch_model, model = make(torch), make(ember)
    copy_weights(torch_model, model)
    gm = ember.fx.symbolic_trace(model)
    again = ember.fx.Transformer(gm).transform()
    assert again.code == gm.code
    x = to_ember(_rand(2, 4))
    expected = torch_model(to_torch(_rand(2, 4)))
    assert_close(again(x), expected, atol=1e-5)
    assert_close(ember.fx.Interpreter(gm).run(x), expected, atol=1e-5)
    # boxed_run empties the caller's list.
    args = [x]
    assert_close(ember.fx.Interpreter(gm).boxed_run(args), expected, atol=1e-5)
    assert args == []


def test_interpreter_error_names_the_node():
    def fn(x):
        return x.view(7, 7)

    gm = ember.fx.symbolic_trace(fn)
    with pytest.raises(RuntimeError, match="While executing %view"):
        ember.fx.Interpreter(gm).run(ember.ones(3))


def test_replace_ops_in_place():
    # torch.fx docs, "Direct Graph Manipulation": turn every add into a mul.
    def make(lib):
        def fn(x, y):
            return lib.add(x, y) + lib.add(y, y)

        return fn

    x, y = _rand(2, 2), _rand(2, 2, seed=1)
    results = []
    for lib, fx, convert in FRAMEWORKS:
        traced = fx.symbolic_trace(make(lib))
        for node in traced.graph.nodes:
            if node.op == "call_function" and node.target == lib.add:
                node.target = lib.mul
        traced.recompile()
        results.append((traced, traced(convert(x), convert(y))))
    (tgm, tout), (egm, eout) = results
    assert full_structure(egm) == full_structure(tgm)
    assert_close(eout, tout)
    assert "ember.mul(x, y)" in egm.code


def test_insert_relu_after_every_add():
    def make(lib):
        def fn(x):
            return (x + 1) * (x + 2)

        return fn

    x = _rand(3)
    results = []
    for lib, fx, convert in FRAMEWORKS:
        gm = fx.symbolic_trace(make(lib))
        for node in list(gm.graph.nodes):
            if node.op == "call_function" and node.target is operator.add:
                with gm.graph.inserting_after(node):
                    relu = gm.graph.call_function(lib.relu, (node,))
                node.replace_all_uses_with(relu, delete_user_cb=lambda user, relu=relu: user is not relu)
        gm.graph.lint()
        gm.recompile()
        results.append((gm, gm(convert(x))))
    (tgm, tout), (egm, eout) = results
    assert full_structure(egm) == full_structure(tgm)
    assert_close(eout, tout)


def test_decompose_with_proxies():
    # torch.fx docs, "Proxy/Retracing": rewrite F.relu as (x > 0) * x on a new graph.
    def make(lib):
        class M(lib.nn.Module):
            def forward(self, x):
                return lib.nn.functional.relu(x) + 1.0

        return M()

    x = _rand(4, 3)
    results = []
    for lib, fx, convert in FRAMEWORKS:
        def relu_decomposition(v):
            return (v > 0) * v

        rules = {lib.nn.functional.relu: relu_decomposition}
        model = make(lib)
        graph = fx.Tracer().trace(model)
        new_graph = fx.Graph()
        env = {}
        tracer = fx.proxy.GraphAppendingTracer(new_graph)
        for node in graph.nodes:
            if node.op == "call_function" and node.target in rules:
                proxy_args = [fx.Proxy(env[a.name], tracer) if isinstance(a, fx.Node) else a for a in node.args]
                env[node.name] = rules[node.target](*proxy_args).node
            else:
                env[node.name] = new_graph.node_copy(node, lambda a, env=env: env[a.name])
        gm = fx.GraphModule(model, new_graph)
        results.append((gm, gm(convert(x))))
    (tgm, tout), (egm, eout) = results
    assert full_structure(egm) == full_structure(tgm)
    assert_close(eout, tout)


def test_dead_code_elimination():
    def make(lib):
        class M(lib.nn.Module):
            def forward(self, x):
                a = x + 1  # noqa: F841 - dead on purpose
                b = lib.relu(x)
                return x + 2 + b.sum()

        return M()

    results = []
    for lib, fx, convert in FRAMEWORKS:
        gm = fx.symbolic_trace(make(lib))
        before = len(gm.graph.nodes)
        assert gm.graph.eliminate_dead_code() is True
        gm.recompile()
        results.append((gm, before, gm(convert(_rand(3)))))
    (tgm, tbefore, tout), (egm, ebefore, eout) = results
    assert ebefore == tbefore and full_structure(egm) == full_structure(tgm)
    assert_close(eout, tout)


def test_dead_code_elimination_keeps_inplace_and_random_ops():
    g = ember.fx.Graph()
    x = g.placeholder("x")
    g.call_function(ember.ops.add_, (x, 1.0))
    g.call_function(ember.ops.uniform_, (x,))
    g.call_function(ember.ops.add, (x, 1.0))  # pure: removed
    g.output(x)
    assert g.eliminate_dead_code() is True
    assert [n.target for n in g.nodes if n.op == "call_function"] == [ember.ops.add_, ember.ops.uniform_]


def test_shape_prop_matches_torch():
    def make(lib):
        return lib.nn.Sequential(lib.nn.Linear(5, 7), lib.nn.ReLU(), lib.nn.Flatten(0))

    results = []
    torch_model = make(torch)
    for lib, fx, convert in FRAMEWORKS:
        model = make(lib)
        if lib is ember:
            copy_weights(torch_model, model)
        else:
            model = torch_model
        gm = fx.symbolic_trace(model)
        shape_prop_module = torch.fx.passes.shape_prop if lib is torch else ember.fx.passes.shape_prop
        shape_prop_module.ShapeProp(gm).propagate(convert(_rand(3, 5)))
        results.append(gm)
    tgm, egm = results
    for tn, en in zip(tgm.graph.nodes, egm.graph.nodes, strict=True):
        if "tensor_meta" not in tn.meta:
            assert "tensor_meta" not in en.meta
            continue
        tm, em = tn.meta["tensor_meta"], en.meta["tensor_meta"]
        assert tuple(em.shape) == tuple(tm.shape), en.name
        assert str(em.dtype).split(".")[-1] == str(tm.dtype).split(".")[-1]
        assert tuple(em.stride) == tuple(tm.stride) and em.requires_grad == tm.requires_grad
        assert em.is_quantized is False and em.qparams == {}
        val = en.meta["val"]
        assert tuple(val.shape) == tuple(tm.shape) and tuple(val.stride()) == tuple(tm.stride)
        assert val.dtype == em.dtype
    assert ember.fx.passes.shape_prop.TensorMetadata._fields == torch.fx.passes.shape_prop.TensorMetadata._fields


def test_shape_prop_reports_the_failing_node():
    def fn(x):
        return x.view(5, 5)

    gm = ember.fx.symbolic_trace(fn)
    with pytest.raises(RuntimeError, match="ShapeProp error for: node=%view"):
        ember.fx.passes.shape_prop.ShapeProp(gm).propagate(ember.ones(3))


def _rewrite(lib, fx, fn, pattern, replacement):
    gm = fx.symbolic_trace(fn)
    rewriter = torch.fx.subgraph_rewriter if lib is torch else ember.fx.subgraph_rewriter
    matches = rewriter.replace_pattern(gm, pattern, replacement)
    return gm, matches


def _docs_rewrite_program(lib):
    class M(lib.nn.Module):
        def forward(self, x, w1, w2):
            m1 = lib.cat([w1, w2]).sum()
            m2 = lib.cat([w1, w2]).sum()
            return x + lib.max(m1) + lib.max(m2)

    def pattern(w1, w2):
        return lib.cat([w1, w2]).sum()

    def replacement(w1, w2):
        return lib.stack([w1, w2])

    return M, pattern, replacement


def test_replace_pattern_docs_example():
    # torch.fx.subgraph_rewriter.replace_pattern's docstring example.
    results = []
    w1, w2, x = _rand(3), _rand(3, seed=1), _rand(3, seed=2)
    for lib, fx, convert in FRAMEWORKS:
        M, pattern, replacement = _docs_rewrite_program(lib)
        gm = fx.symbolic_trace(M())
        rewriter = torch.fx.subgraph_rewriter if lib is torch else ember.fx.subgraph_rewriter
        matches = rewriter.replace_pattern(gm, pattern, replacement)
        results.append((gm, matches, gm(convert(x), convert(w1), convert(w2))))
    (tgm, tmatches, tout), (egm, ematches, eout) = results
    assert len(ematches) == len(tmatches) == 2
    assert full_structure(egm) == full_structure(tgm)
    assert_close(eout, tout)
    for tm, em in zip(tmatches, ematches, strict=True):
        assert em.anchor.name == tm.anchor.name
        assert {k.name: v.name for k, v in em.nodes_map.items()} == {k.name: v.name for k, v in tm.nodes_map.items()}


@pytest.mark.parametrize("case", ["distinct_placeholders", "internal_use", "chain", "literal"])
def test_replace_pattern_matching_rules(case):
    def program(lib):
        def relu_sigmoid(x):
            return lib.sigmoid(lib.relu(x))

        def tanh(x):
            return lib.tanh(x)

        if case == "distinct_placeholders":  # x + y must not match a + a
            return (lambda a: lib.add(a, a)), (lambda x, y: lib.add(x, y)), (lambda x, y: lib.mul(x, y))
        if case == "internal_use":  # relu is used outside the match: no replacement
            def fn(a):
                r = lib.relu(a)
                return lib.sigmoid(r) + r

            return fn, relu_sigmoid, tanh
        if case == "chain":  # two matches, the second one's input is the first one's output
            def fn(a):
                return lib.sigmoid(lib.relu(lib.sigmoid(lib.relu(a)))) * 2

            return fn, relu_sigmoid, tanh

        def fn(a):  # literal arguments must be equal
            return a.sum(1) + a.sum(2)

        return fn, (lambda x: x.sum(1)), (lambda x: x.mean(1))

    results = []
    x = _rand(2, 3, 3)
    for lib, fx, convert in FRAMEWORKS:
        fn, pattern, replacement = program(lib)
        gm, matches = _rewrite(lib, fx, fn, pattern, replacement)
        gm.graph.lint()
        results.append((gm, matches, gm(convert(x))))
    (tgm, tmatches, tout), (egm, ematches, eout) = results
    assert len(ematches) == len(tmatches)
    assert full_structure(egm) == full_structure(tgm)
    assert_close(eout, tout)
    for tm, em in zip(tmatches, ematches, strict=True):
        assert {k.name: v.name for k, v in em.nodes_map.items()} == {k.name: v.name for k, v in tm.nodes_map.items()}


def test_replace_pattern_with_filters():
    def fn(a):
        return ember.relu(a) + ember.relu(a + 1)

    gm = ember.fx.symbolic_trace(fn)

    def only_on_placeholder_inputs(match, original_graph, pattern_graph):
        return all(getattr(n, "op", None) == "placeholder" for n in match.placeholder_nodes)

    replaced = ember.fx.subgraph_rewriter.replace_pattern_with_filters(
        gm, lambda x: ember.relu(x), lambda x: ember.sigmoid(x), [only_on_placeholder_inputs])
    assert len(replaced) == 1
    # The replacement goes just before the first user of what it replaces (the final add).
    assert [k[1] for k in structure(gm) if k[0] == "call_function"] == ["operator.add", "relu", "sigmoid",
                                                                          "operator.add"]
    assert [n.target for n in replaced[0].replacements] == [ember.sigmoid]


def _split_program(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(4, 4)
            self.inner = lib.nn.Sequential(lib.nn.ReLU(), lib.nn.Linear(4, 4))
            self.p = lib.nn.Parameter(lib.ones(4))

        def forward(self, x, y):
            a = self.lin(x) + self.p
            b = self.inner(a)
            c = b * y
            d = a - c
            return d, b

    return M()


def test_split_module_matches_torch():
    from torch.fx.passes.split_module import split_module as torch_split

    from ember.fx.passes.split_module import split_module as ember_split

    parts = {"lin": 0, "add": 0, "inner_0": 1, "inner_1": 1, "mul": 1, "sub": 2}
    torch_model = _split_program(torch)
    model = _split_program(ember)
    copy_weights(torch_model, model)
    results = []
    for fx, split, root, convert in ((torch.fx, torch_split, torch_model, to_torch),
                                     (ember.fx, ember_split, model, to_ember)):
        gm = fx.symbolic_trace(root)
        qualname_map = {}
        split_gm = split(gm, root, lambda n: parts[n.name], qualname_map=qualname_map)
        results.append((split_gm, qualname_map, split_gm(convert(_rand(3, 4)), convert(_rand(3, 4, seed=1)))))
    (tsplit, tmap, tout), (esplit, emap, eout) = results
    assert full_structure(esplit) == full_structure(tsplit)
    for name in ("submod_0", "submod_1", "submod_2"):
        assert full_structure(getattr(esplit, name)) == full_structure(getattr(tsplit, name)), name
    assert emap == tmap
    assert sorted(esplit.state_dict()) == sorted(tsplit.state_dict())
    assert_close(eout, tout, atol=1e-5)
