"""ember.fx GraphModule: what it copies from its root, its generated code (ember ops, builtins,
constants), recompile, copies, submodules and print_readable, against torch.fx where it applies."""

from __future__ import annotations

import copy
import operator

import numpy as np
import pytest
import torch
import torch.fx
from fx_test_helpers import assert_close, build_graph

import ember
import ember.fx


def test_ember_op_targets_print_as_ember_ops():
    add_op, mul_op = ember.ops["add"], ember.ops["mul"]
    g = ember.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(add_op, (x, x))
    m = g.call_function(mul_op, (a, 3.0))
    g.output(m)
    gm = ember.fx.GraphModule({}, g)
    assert "ember.ops.add(x, x)" in gm.code and "ember.ops.mul(add, 3.0)" in gm.code
    assert "target=ember.ops.add" in str(g)
    t = ember.tensor([1.0, 2.0])
    assert gm(t).tolist() == [6.0, 12.0]


def test_codegen_special_values_and_builtins():
    g = ember.fx.Graph()
    x = g.placeholder("x")
    item = g.call_function(operator.getitem, (x, (slice(None, 2), Ellipsis)))
    clamp = g.call_function(ember.clamp, (item,), {"min": float("-inf"), "max": float("inf")})
    n = g.call_function(len, (x,))
    shape = g.call_function(getattr, (x, "shape"))
    g.output((clamp, n, shape))
    gm = ember.fx.GraphModule({}, g)
    assert "x[(slice(None, 2, None), Ellipsis)]" in gm.code
    assert "min = -inf, max = inf" in gm.code
    assert "len_1 = len(x)" in gm.code and "getattr_1 = x.shape" in gm.code
    t = ember.arange(6.0).reshape(3, 2)
    out, length, shp = gm(t)
    assert out.tolist() == [[0.0, 1.0], [2.0, 3.0]] and length == 3 and tuple(shp) == (3, 2)


class _Holder(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = ember.nn.Linear(3, 2)
        self.sub = ember.nn.Sequential(ember.nn.ReLU(), ember.nn.Linear(2, 2))
        self.register_buffer("scale", ember.tensor([2.0, 3.0]))


def _holder_graph(fx):
    g = fx.Graph()
    x = g.placeholder("x")
    a = g.call_module("lin", (x,))
    b = g.call_module("sub.1", (a,))
    s = g.get_attr("scale")
    g.output(g.call_function(operator.mul, (b, s)))
    return g


def test_graph_module_copies_what_the_graph_names():
    root = _Holder()
    gm = ember.fx.GraphModule(root, _holder_graph(ember.fx), class_name="Holder")
    assert gm.lin is root.lin and gm.sub._modules["1"] is root.sub[1]
    assert not hasattr(gm.sub, "0")  # only what the graph names is copied
    assert sorted(gm.state_dict()) == ["lin.bias", "lin.weight", "scale", "sub.1.bias", "sub.1.weight"]
    assert 'getattr(self.sub, "1")(lin)' in gm.code
    x = ember.randn(4, 3)
    expected = root.sub[1](root.lin(x)) * root.scale
    assert_close(gm(x), expected)
    assert len(list(gm.parameters())) == 4
    assert type(gm).__name__ == "Holder"
    text = gm.print_readable(print_output=False)
    assert text.startswith("class Holder(ember.nn.Module):") and "def forward(self, x):" in text


def test_graph_module_from_dict_root_and_errors():
    lin = ember.nn.Linear(3, 2)
    g = ember.fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_module("layers.lin", (x,)))
    gm = ember.fx.GraphModule({"layers.lin": lin}, g)
    assert gm.layers.lin is lin
    with pytest.raises(RuntimeError, match="not provided in ``root``"):
        ember.fx.GraphModule({}, g)


def test_recompile_after_graph_edit_and_graph_setter():
    g = build_graph(ember.fx, ember)
    gm = ember.fx.GraphModule({}, g)
    relu = next(n for n in gm.graph.nodes if n.target is ember.relu)
    with gm.graph.inserting_after(relu):
        neg = gm.graph.call_function(ember.neg, (relu,))
    relu.replace_all_uses_with(neg, delete_user_cb=lambda u: u is not neg)
    gm.recompile()
    assert "neg = ember.neg(relu)" in gm.code
    a = ember.tensor([[1.0, -2.0]])
    out, _ = gm(a, ember.tensor([[0.5, 0.5]]))
    assert out.tolist() == [[-3.0, -0.0]]
    other = ember.fx.Graph()
    z = other.placeholder("z")
    other.output(other.call_function(operator.neg, (z,)))
    gm.graph = other
    assert gm(ember.tensor([1.0])).tolist() == [-1.0]
    assert other.owning_module is gm


def test_instances_have_their_own_forward():
    g1, g2 = ember.fx.Graph(), ember.fx.Graph()
    for g, fn in ((g1, operator.neg), (g2, operator.pos)):
        x = g.placeholder("x")
        g.output(g.call_function(fn, (x,)))
    gm1, gm2 = ember.fx.GraphModule({}, g1), ember.fx.GraphModule({}, g2)
    t = ember.tensor([1.0])
    assert gm1(t).tolist() == [-1.0] and gm2(t).tolist() == [1.0]
    assert isinstance(gm1, ember.fx.GraphModule) and isinstance(gm1, ember.nn.Module)


def test_deepcopy_and_copy():
    root = _Holder()
    gm = ember.fx.GraphModule(root, _holder_graph(ember.fx))
    gm.meta["k"] = [1]
    clone = copy.deepcopy(gm)
    x = ember.randn(2, 3)
    assert_close(clone(x), gm(x))
    assert clone.lin is not gm.lin and clone.lin.weight is not gm.lin.weight
    assert clone.graph is not gm.graph and [n.name for n in clone.graph.nodes] == [n.name for n in gm.graph.nodes]
    assert clone.meta == {"k": [1]}
    shallow = copy.copy(gm)
    assert shallow.lin is gm.lin and shallow.graph is gm.graph
    assert_close(shallow(x), gm(x))


def test_add_and_delete_submodules():
    gm = ember.fx.GraphModule(_Holder(), _holder_graph(ember.fx))
    assert gm.add_submodule("extra.inner", ember.nn.ReLU())
    assert isinstance(gm.extra.inner, ember.nn.ReLU)
    gm.delete_all_unused_submodules()
    assert not hasattr(gm, "extra")
    assert hasattr(gm, "lin")
    assert gm.delete_submodule("lin") and not gm.delete_submodule("missing")


def test_placeholder_without_value_raises():
    g = ember.fx.Graph()
    x = g.placeholder("x")
    g.output(x)
    gm = ember.fx.GraphModule({}, g)
    with pytest.raises(TypeError):
        gm()
    with pytest.raises(RuntimeError, match="Expected positional argument for parameter x"):
        ember.fx.Interpreter(gm).run()


def test_print_readable_nests_graph_module_children():
    inner = ember.fx.GraphModule({}, build_graph(ember.fx, ember))
    g = ember.fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_module("inner", (x,)))
    outer = ember.fx.GraphModule({"inner": inner}, g, class_name="Outer")
    text = outer.print_readable(print_output=False)
    assert text.splitlines()[0] == "class Outer(ember.nn.Module):"
    assert "    class inner(ember.nn.Module):" in text
    assert "self.inner(x)" in text


def test_constants_without_source_spelling_are_bound_as_globals():
    g = ember.fx.Graph()
    x = g.placeholder("x")
    const = ember.tensor([1.0, 2.0])
    add = g.call_function(operator.add, (x, const))
    item = g.call_function(operator.getitem, (add, (Ellipsis, slice(0, 1))))
    g.output((item, range(2), 1 + 2j, {"k": (1,)}))
    gm = ember.fx.GraphModule({}, g)
    assert "add = x + _tensor_constant" in gm.code and "add[(Ellipsis, slice(0, 1, None))]" in gm.code
    out, rng, cplx, d = gm(ember.zeros(2))
    assert out.tolist() == [1.0] and rng == range(2) and cplx == 1 + 2j and d == {"k": (1,)}


def test_print_readable_annotates_values_like_torch():
    texts = []
    for lib, fx in ((torch, torch.fx), (ember, ember.fx)):
        g = fx.Graph()
        x = g.placeholder("x")
        x.meta["val"] = lib.zeros(3, 4)
        gt = g.call_function(operator.gt, (x, 0))
        gt.meta["val"] = lib.zeros(3, 4, dtype=lib.bool)
        total = g.call_method("sum", (x,), {"dtype": lib.int64})
        total.meta["val"] = lib.zeros((), dtype=lib.int64)
        g.output((gt, total))
        gm = fx.GraphModule({}, g)
        texts.append(gm.print_readable(print_output=False, include_stride=True, include_device=True))
    lines = [[ln.strip() for ln in text.splitlines() if ":" in ln and "=" in ln] for text in texts]
    assert [ln.replace("ember.", "torch.") for ln in lines[1]] == lines[0]
    assert 'gt: "b8[3, 4][4, 1]cpu" = x > 0' in lines[1]


def test_graph_module_pickles_like_torch():
    import io
    import pickle

    x = np.random.default_rng(0).standard_normal((4, 2)).astype(np.float32)
    for lib in (torch, ember):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.ReLU())
        gm = lib.fx.symbolic_trace(model)
        clone = pickle.loads(pickle.dumps(gm))
        assert clone.code == gm.code
        assert [n.op for n in clone.graph.nodes] == [n.op for n in gm.graph.nodes]
        np.testing.assert_allclose(clone(lib.tensor(x)).detach().numpy(), model(lib.tensor(x)).detach().numpy())
        buf = io.BytesIO()
        lib.save(gm, buf)
        buf.seek(0)
        loaded = lib.load(buf, weights_only=False)
        np.testing.assert_allclose(loaded(lib.tensor(x)).detach().numpy(), model(lib.tensor(x)).detach().numpy())
    # a graph of ember ops (make_fx) pickles too: the ops travel by name
    from ember.compiler import make_fx

    traced = make_fx(lambda a: (a.sin() @ a.t()).relu().sum(0))(ember.tensor(x))
    again = pickle.loads(pickle.dumps(traced))
    np.testing.assert_allclose(again(ember.tensor(x)).numpy(), traced(ember.tensor(x)).numpy())
