"""FX passes from PyTorch's documentation, run unchanged on torch.fx (oracle) and ember.fx.

Each pass is written once against a framework ``lib`` and its ``fx`` module: replacing ops in
place, inserting nodes, decomposing with Proxies, dead code elimination, ShapeProp,
FakeTensorProp, split_module and the tutorial's Conv/BN fusion.
"""

from __future__ import annotations

import operator

import numpy as np
import pytest
import torch
import torch.fx
import torch.fx.passes.shape_prop
from fx_test_helpers import assert_close, copy_weights, full_structure, to_ember, to_torch

import ember
import ember.fx
import ember.fx.passes.shape_prop

FRAMEWORKS = ((torch, torch.fx, to_torch), (ember, ember.fx, to_ember))


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


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


def test_fake_tensor_prop_matches_torch():
    from torch._subclasses.fake_tensor import FakeTensorMode as TorchFakeMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp as TorchFakeTensorProp

    from ember.fx.passes.fake_tensor_prop import FakeTensorProp

    torch_model = _split_program(torch)
    model = _split_program(ember)
    copy_weights(torch_model, model)
    tgm, egm = torch.fx.symbolic_trace(torch_model), ember.fx.symbolic_trace(model)
    x, y = _rand(3, 4), _rand(3, 4, seed=1)
    TorchFakeTensorProp(tgm, TorchFakeMode(allow_non_fake_inputs=True)).propagate(to_torch(x), to_torch(y))
    FakeTensorProp(egm).propagate(to_ember(x), to_ember(y))

    def metas(gm):
        def one(v):
            if hasattr(v, "shape") and hasattr(v, "stride"):
                # requires_grad is left out: torch's FakeTensorProp reports False below real
                # parameters, ember's reports what eager gives (checked below).
                return (tuple(v.shape), tuple(v.stride()), str(v.dtype).split(".")[-1])
            return v

        return {n.name: ember.fx.node.map_aggregate(n.meta["val"], one) for n in gm.graph.nodes if "val" in n.meta}

    assert metas(egm) == metas(tgm)
    val = next(n for n in egm.graph.nodes if n.name == "sub").meta["val"]
    assert val.requires_grad is model(to_ember(x), to_ember(y))[0].requires_grad is True
    # Nothing was computed: the values carry no data.
    with pytest.raises(RuntimeError):
        val.tolist()


def _conv_bn_net(lib):
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = lib.nn.Conv2d(3, 4, 3, padding=1)
            self.bn = lib.nn.BatchNorm2d(4)
            self.block = lib.nn.Sequential(lib.nn.Conv2d(4, 4, 1), lib.nn.BatchNorm2d(4), lib.nn.ReLU())

        def forward(self, x):
            return self.block(self.bn(self.conv(x))).mean((2, 3))

    return Net()


def _fuse_conv_bn(lib, fx, model):
    # The Conv/BN fusion pass of PyTorch's FX tutorial, written once for both frameworks.
    import copy

    fuse_conv_bn_eval = (torch.nn.utils.fusion if lib is torch else ember.nn.utils.fusion).fuse_conv_bn_eval

    def parent_name(target):
        *parent, name = target.rsplit(".", 1)
        return (parent[0] if parent else ""), name

    def matches_module_pattern(pattern, node, modules):
        if len(node.args) == 0:
            return False
        for expected_type, current in zip(pattern, (node.args[0], node), strict=True):
            if not isinstance(current, fx.Node) or current.op != "call_module":
                return False
            if current.target not in modules or type(modules[current.target]) is not expected_type:
                return False
        return True

    model = copy.deepcopy(model)
    fx_model = fx.symbolic_trace(model)
    modules = dict(fx_model.named_modules())
    new_graph = copy.deepcopy(fx_model.graph)
    for node in new_graph.nodes:
        if matches_module_pattern((lib.nn.Conv2d, lib.nn.BatchNorm2d), node, modules):
            if len(node.args[0].users) > 1:
                continue
            conv, bn = modules[node.args[0].target], modules[node.target]
            fused = fuse_conv_bn_eval(conv, bn)
            parent, name = parent_name(node.args[0].target)
            setattr(modules[parent], name, fused)
            node.replace_all_uses_with(node.args[0])
            new_graph.erase_node(node)
    return fx.GraphModule(fx_model, new_graph)


def test_conv_bn_fusion_tutorial_pass():
    torch_model = _conv_bn_net(torch)
    model = _conv_bn_net(ember)
    # Non-trivial running statistics, then eval mode: fusion folds them into the conv.
    warm = _rand(8, 3, 6, 6, seed=3)
    torch_model(to_torch(warm))
    copy_weights(torch_model, model)
    torch_model.eval()
    model.eval()
    x = _rand(2, 3, 6, 6)
    results = []
    for lib, fx, convert, m in ((torch, torch.fx, to_torch, torch_model), (ember, ember.fx, to_ember, model)):
        fused = _fuse_conv_bn(lib, fx, m)
        with (torch.no_grad() if lib is torch else ember.no_grad()):
            results.append((fused, fused(convert(x)), m(convert(x))))
    (tfused, tout, teager), (efused, eout, eeager) = results
    assert full_structure(efused) == full_structure(tfused)
    assert [n.target for n in efused.graph.nodes if n.op == "call_module"] == ["conv", "block.0", "block.2"]
    assert_close(eout, tout, atol=1e-4)
    assert_close(eout, eeager, atol=1e-4)


def _pass_pipeline(lib, fx, infra_base, infra_manager):
    class AddToMul(infra_base.PassBase):
        def call(self, gm):
            modified = False
            for node in gm.graph.nodes:
                if node.op == "call_function" and node.target == operator.add:
                    node.target = operator.mul
                    modified = True
            return infra_base.PassResult(gm, modified)

    def drop_dead(gm):
        gm.graph.eliminate_dead_code()

    add_to_mul = AddToMul()
    dce = infra_manager.pass_result_wrapper(drop_dead)
    manager = infra_manager.PassManager(
        [dce, add_to_mul], constraints=[infra_manager.this_before_that_pass_constraint(add_to_mul, dce)],
        steps=3)
    return manager, add_to_mul, dce


def test_pass_manager_runs_torch_style_passes():
    import torch.fx.passes.infra.pass_base as torch_base
    import torch.fx.passes.infra.pass_manager as torch_manager

    import ember.fx.passes.infra.pass_base as ember_base
    import ember.fx.passes.infra.pass_manager as ember_manager

    def make(lib):
        def fn(x):
            dead = lib.relu(x)  # noqa: F841 - removed by the pipeline
            return (x + 2) + x

        return fn

    results = []
    for lib, fx, base, manager_module, convert in ((torch, torch.fx, torch_base, torch_manager, to_torch),
                                                   (ember, ember.fx, ember_base, ember_manager, to_ember)):
        manager, add_to_mul, dce = _pass_pipeline(lib, fx, base, manager_module)
        result = manager(fx.symbolic_trace(make(lib)))
        assert manager.passes == [add_to_mul, dce]  # reordered by the constraint
        results.append((result, result.graph_module(convert(_rand(3)))))
    (tresult, tout), (eresult, eout) = results
    assert eresult.modified is tresult.modified is True
    assert full_structure(eresult.graph_module) == full_structure(tresult.graph_module)
    assert_close(eout, tout)

    with pytest.raises(RuntimeError, match="Circular dependency"):
        a, b = (lambda gm: None), (lambda gm: None)
        ember_manager.PassManager([a, b], [ember_manager.this_before_that_pass_constraint(a, b),
                                           ember_manager.this_before_that_pass_constraint(b, a)])(None)


def test_stable_topological_sort_matches_torch():
    from torch.fx.passes.tools_common import stable_topological_sort as torch_sort

    from ember.fx.passes.tools_common import legalize_graph, stable_topological_sort

    def make(lib):
        def fn(x, y):
            a = lib.relu(x)
            b = lib.sigmoid(y)
            c = a * b
            d = lib.neg(a)
            return c + d

        return fn

    results = []
    for lib, fx, sort, convert in ((torch, torch.fx, torch_sort, to_torch),
                                   (ember, ember.fx, stable_topological_sort, to_ember)):
        gm = fx.symbolic_trace(make(lib))
        nodes = {n.name: n for n in gm.graph.nodes}
        nodes["x"].prepend(nodes["neg"])  # neg now runs before its input
        nodes["relu"].prepend(nodes["mul"])  # and mul before both of its inputs
        with pytest.raises(RuntimeError):
            gm.graph.lint()
        sort(gm)
        gm.graph.lint()
        results.append(([n.name for n in gm.graph.nodes], gm(convert(_rand(3)), convert(_rand(3, seed=1)))))
    (torder, tout), (eorder, eout) = results
    assert eorder == torder
    assert_close(eout, tout)
    gm = ember.fx.symbolic_trace(make(ember))
    before = [n.name for n in gm.graph.nodes]
    assert [n.name for n in legalize_graph(gm).graph.nodes] == before  # a valid order is kept as it is


def test_normalized_arguments_match_torch():
    def make(lib):
        F = lib.nn.functional

        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = lib.nn.Linear(3, 3)

            def forward(self, x):
                return F.dropout(self.lin(x), 0.3) + F.softmax(x, dim=1)

        return M()

    normalized = []
    for lib, fx in ((torch, torch.fx), (ember, ember.fx)):
        gm = fx.symbolic_trace(make(lib))
        found = {}
        for node in gm.graph.nodes:
            pair = node.normalized_arguments(gm, normalize_to_only_use_kwargs=True)
            found[node.name] = None if pair is None else (
                pair.args, {k: (v.name if isinstance(v, fx.Node) else v) for k, v in pair.kwargs.items()})
        normalized.append(found)
    assert normalized[1]["lin"] == normalized[0]["lin"] == ((), {"input": "x"})
    assert normalized[1]["dropout"] == normalized[0]["dropout"]
    assert normalized[1]["add"] is normalized[0]["add"] is None  # operator.add has no signature
    assert normalized[1]["softmax"][1]["dim"] == 1 and normalized[1]["softmax"][1]["input"] == "x"
