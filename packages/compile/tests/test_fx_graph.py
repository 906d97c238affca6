"""ember.fx Graph/Node/GraphModule built by hand, against torch.fx doing the same."""

from __future__ import annotations

import copy
import operator

import numpy as np
import pytest
import torch
import torch.fx
from fx_test_helpers import assert_close, full_structure, structure, to_ember, to_torch

import ember
import ember.fx
from ember.fx.immutable_collections import immutable_dict, immutable_list


def build_graph(fx, lib):
    """x, y -> relu(x + y) * 2, sum; built with the Graph API."""
    g = fx.Graph()
    x = g.placeholder("x")
    y = g.placeholder("y", default_value=1.0)
    add = g.call_function(operator.add, (x, y))
    relu = g.call_function(lib.relu, (add,))
    mul = g.call_function(operator.mul, (relu, 2))
    total = g.call_method("sum", (mul,), {"dim": 0})
    g.output((mul, total))
    return g


@pytest.mark.parametrize("pair", ["both"])
def test_hand_built_graph_matches_torch(pair):
    tg, eg = build_graph(torch.fx, torch), build_graph(ember.fx, ember)
    tgm, egm = torch.fx.GraphModule({}, tg), ember.fx.GraphModule({}, eg)
    assert full_structure(egm) == full_structure(tgm)
    assert str(eg).replace("ember.", "torch.") == str(tg)
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    assert_close(egm(to_ember(a), to_ember(b)), tgm(to_torch(a), to_torch(b)))
    # The default of y is used when it is not passed.
    assert_close(egm(to_ember(a)), tgm(to_torch(a)))
    assert "ember.relu(add)" in egm.code
    assert egm.code.replace("ember.", "torch.") == tgm.code


def test_node_use_lists_and_rewrites():
    g = build_graph(ember.fx, ember)
    x, y, add, relu, mul, total, out = list(g.nodes)
    assert add.all_input_nodes == [x, y]
    assert list(x.users) == [add]
    assert list(mul.users) == [total, out]
    assert (add.prev, add.next) == (y, relu)
    # Replace every use of mul with relu.
    changed = mul.replace_all_uses_with(relu)
    assert changed == [total, out]
    assert not mul.users and total.args == (relu,)
    g.erase_node(mul)
    assert len(g.nodes) == 6
    g.lint()
    # update_arg / replace_input_with keep the use lists in step.
    total.update_arg(0, add)
    assert total in add.users and total not in relu.users
    total.replace_input_with(add, x)
    assert total.args == (x,) and total in x.users
    total.update_kwarg("dim", 1)
    assert total.kwargs == {"dim": 1}
    g.lint()


def test_erase_node_with_users_raises_like_torch():
    for fx, lib in ((torch.fx, torch), (ember.fx, ember)):
        g = build_graph(fx, lib)
        add = next(n for n in g.nodes if n.name == "add")
        with pytest.raises(RuntimeError, match="still had 1 users"):
            g.erase_node(add)


def test_args_are_immutable_containers():
    g = ember.fx.Graph()
    x = g.placeholder("x")
    cat = g.call_function(ember.cat, ([x, x],), {"dim": 0})
    assert isinstance(cat.args[0], immutable_list)
    with pytest.raises(NotImplementedError):
        cat.args[0].append(x)
    with pytest.raises(NotImplementedError):
        immutable_dict({"a": 1})["b"] = 2
    assert hash(immutable_list([1, 2])) == hash(immutable_list([1, 2]))
    assert ember.fx.map_arg(cat.args, lambda n: n.name) == (["x", "x"],)


def test_inserting_before_after_and_names():
    for fx, lib in ((torch.fx, torch), (ember.fx, ember)):
        g = fx.Graph()
        x = g.placeholder("x")
        relu = g.call_function(lib.relu, (x,))
        g.output(relu)
        with g.inserting_before(relu):
            neg = g.call_function(operator.neg, (x,))
        with g.inserting_after(neg):
            s2 = g.call_method("sum", (neg,))
        with g.inserting_after(neg):
            s = g.call_method("sum", (neg,))
        s2.args = (s,)
        relu.args = (s2,)
        g.lint()
        names = [n.name for n in g.nodes]
        assert names == ["x", "neg", "sum_2", "sum_1", "relu", "output"], names


def test_eliminate_dead_code_like_torch():
    def build(fx, lib):
        g = fx.Graph()
        x = g.placeholder("x")
        dead = g.call_function(lib.relu, (x,))
        g.call_function(lib.neg, (dead,))
        g.call_function(operator.setitem, (x, 0, 1.0))  # impure: stays
        live = g.call_function(operator.add, (x, 1))
        g.output(live)
        return g

    tg, eg = build(torch.fx, torch), build(ember.fx, ember)
    assert tg.eliminate_dead_code() is True and eg.eliminate_dead_code() is True
    assert structure(ember.fx.GraphModule({}, eg)) == structure(torch.fx.GraphModule({}, tg))
    assert eg.eliminate_dead_code() is False


def test_lint_finds_use_before_definition():
    g = ember.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.neg, (x,))
    b = g.call_function(operator.neg, (a,))
    g.output(b)
    a.prepend(b)  # b now comes before its input
    with pytest.raises(RuntimeError, match="used before it has been defined"):
        g.lint()


def test_node_copy_and_graph_copy():
    src = build_graph(ember.fx, ember)
    dst = ember.fx.Graph()
    val_map = {}
    out = dst.graph_copy(src, val_map)
    dst.output(out)
    dst.lint()
    assert [n.name for n in dst.nodes] == [n.name for n in src.nodes]
    assert all(n.graph is dst for n in dst.nodes)
    relu = next(n for n in src.nodes if n.name == "relu")
    relu.meta["tag"] = 1
    g3 = ember.fx.Graph()
    x = g3.placeholder("z")
    copied = g3.node_copy(relu, lambda n: x)
    assert copied.args == (x,) and copied.meta["tag"] == 1 and copied.target is ember.relu


def test_find_nodes():
    g = build_graph(ember.fx, ember)
    assert [n.name for n in g.find_nodes(op="placeholder")] == ["x", "y"]
    assert [n.name for n in g.find_nodes(op="call_function", target=operator.add)] == ["add"]
    add = g.find_nodes(op="call_function", target=operator.add)[0]
    add.target = operator.sub
    assert g.find_nodes(op="call_function", target=operator.add) == []
    assert g.find_nodes(op="call_function", target=operator.sub) == [add]


def test_format_node_and_stack_trace():
    g = build_graph(ember.fx, ember)
    add = next(iter(g.find_nodes(op="call_function", target=operator.add)))
    expected = "%add : [num_users=1] = call_function[target=operator.add](args = (%x, %y), kwargs = {})"
    assert add.format_node() == expected
    add.stack_trace = 'File "m.py", line 3'
    assert add.meta["stack_trace"] == 'File "m.py", line 3'


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


def test_graph_deepcopy_and_python_code():
    g = build_graph(ember.fx, ember)
    clone = copy.deepcopy(g)
    assert [n.name for n in clone.nodes] == [n.name for n in g.nodes]
    assert all(n.graph is clone for n in clone.nodes)
    clone.lint()
    code = g.python_code(root_module="self")
    assert code.src.lstrip().startswith("def forward(self, x, y = 1.0):")
    assert code.globals["ember"] is ember
    namespace = dict(code.globals)
    exec(code.src, namespace)  # noqa: S102 - the generated source is the subject under test
    out, total = namespace["forward"](None, ember.tensor([[1.0, -3.0]]))
    assert out.tolist() == [[4.0, 0.0]] and total.tolist() == [4.0, 0.0]


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


def test_interpreter_initial_env_skips_nodes():
    g = build_graph(ember.fx, ember)
    gm = ember.fx.GraphModule({}, g)
    relu = next(n for n in g.nodes if n.target is ember.relu)
    x, y = ember.ones(2), ember.ones(2)
    out, _ = ember.fx.Interpreter(gm).run(x, y, initial_env={relu: ember.tensor([5.0, 6.0])})
    assert out.tolist() == [10.0, 12.0]


def test_nodes_sort_by_position_and_output_node():
    import random

    for fx in (torch.fx, ember.fx):
        rng = random.Random(0)
        g = fx.Graph()
        x = g.placeholder("x")
        made = [x]
        for _ in range(60):
            anchor = rng.choice(made)
            where = g.inserting_after(anchor) if anchor is x or rng.random() < 0.5 else g.inserting_before(anchor)
            with where:
                made.append(g.call_function(operator.neg, (x,)))
        for _ in range(60):
            a, b = rng.sample(made[1:], 2)
            a.prepend(b)
        out = g.output(made[-1])
        order = list(g.nodes)
        assert sorted(reversed(order)) == order
        assert order[0] < order[1] and order[-1] > order[0] and order[0] <= order[0]
        assert g.output_node() is out


def test_bad_input_raises_torch_exception_types():
    def attempts(fx):
        g = fx.Graph()
        other = fx.Graph().placeholder("q")
        return [
            lambda: g.create_node("bogus", "x"),
            lambda: g.create_node("call_function", "x"),
            lambda: g.create_node("call_method", operator.add),
            lambda: g.create_node("placeholder", "x", args=[1]),
            lambda: fx.GraphModule(42, g),
            lambda: g.inserting_before(other),
            lambda: fx.map_arg(1, 2),
        ]

    def error_type(fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - the type is what is compared
            return type(e)
        return None

    torch_types = [error_type(f) for f in attempts(torch.fx)]
    ember_types = [error_type(f) for f in attempts(ember.fx)]
    assert ember_types == torch_types and None not in ember_types


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


def test_erasing_while_iterating():
    for fx in (torch.fx, ember.fx):
        g = fx.Graph()
        x = g.placeholder("x")
        a = g.call_function(operator.neg, (x,))
        b = g.call_function(operator.neg, (x,))
        c = g.call_function(operator.neg, (x,))
        g.output(x)
        seen = []
        for node in g.nodes:
            seen.append(node.name)
            if node is a:
                g.erase_node(a)  # the current node
                g.erase_node(b)  # and the next one
        assert seen == ["x", "neg", "neg_2", "output"]
        assert [n.name for n in g.nodes] == ["x", "neg_2", "output"] and c.prev is x
