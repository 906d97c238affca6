"""The same programs through ember.export and torch.export: signature kinds, user input/output
counts and range constraints agree; run_decompositions and unflatten keep the program's meaning."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from export_models import cnn, copy_weights, encoder_layer, mini_gpt, mlp

import ember
from ember.export import Dim, export, unflatten

# torch.export takes seconds per program on a 2-core machine: the larger ones are marked slow.
CASES = [
    ("cnn_train", cnn, (4, 1, 8, 8), {0: ("batch", 2, 64)}, "train"),
    pytest.param("mlp", mlp, (4, 6), {0: ("batch", 2, 64)}, "train", marks=pytest.mark.slow),
    pytest.param("cnn_eval", cnn, (4, 1, 8, 8), {0: ("batch", 2, 64)}, "eval", marks=pytest.mark.slow),
    pytest.param("encoder_layer", encoder_layer, (3, 6, 16), {0: ("batch", 2, 64)}, "eval", marks=pytest.mark.slow),
]


def _kinds(specs):
    return [s.kind.name for s in specs]


@pytest.mark.parametrize("name,build,shape,dyn,mode", CASES)
def test_signature_matches_torch_export(name, build, shape, dyn, mode):
    e_model, t_model = build(ember), build(torch)
    getattr(e_model, mode)()
    getattr(t_model, mode)()
    e_dims = tuple([{d: Dim(n, min=lo, max=hi) for d, (n, lo, hi) in dyn.items()}])
    t_dims = tuple([{d: torch.export.Dim(n, min=lo, max=hi) for d, (n, lo, hi) in dyn.items()}])
    ep = export(e_model, (ember.randn(*shape),), dynamic_shapes=e_dims)
    tp = torch.export.export(t_model, (torch.randn(*shape),), dynamic_shapes=t_dims).run_decompositions()
    es, ts = ep.graph_signature, tp.graph_signature
    assert _kinds(es.input_specs) == _kinds(ts.input_specs)
    assert [s.target for s in es.input_specs] == [s.target for s in ts.input_specs]
    assert sorted(_kinds(es.output_specs)) == sorted(_kinds(ts.output_specs))
    assert sorted(es.buffers_to_mutate.values()) == sorted(ts.buffers_to_mutate.values())
    assert len(es.user_inputs) == len(ts.user_inputs) and len(es.user_outputs) == len(ts.user_outputs)
    assert sorted((v.lower, v.upper) for v in ep.range_constraints.values()) == \
        sorted((int(v.lower), int(v.upper)) for v in tp.range_constraints.values())
    assert set(ep.state_dict) == set(tp.state_dict)


@pytest.mark.slow
def test_mini_gpt_signature_and_values_match_torch():
    ember.manual_seed(0)
    torch.manual_seed(0)
    e_model, t_model = mini_gpt(ember).eval(), mini_gpt(torch).eval()
    copy_weights(t_model, e_model)
    ep = export(e_model, (ember.randint(0, 50, (2, 8)),),
                dynamic_shapes={"idx": {0: Dim("batch", max=32), 1: Dim("seq", max=16)}})
    tp = torch.export.export(t_model, (torch.randint(0, 50, (2, 8)),),
                             dynamic_shapes={"idx": {0: torch.export.Dim("batch", max=32),
                                                     1: torch.export.Dim("seq", max=16)}})
    assert _kinds(ep.graph_signature.input_specs) == _kinds(tp.graph_signature.input_specs)
    assert list(ep.graph_signature.parameters) == list(tp.graph_signature.parameters)
    assert sorted((v.lower, v.upper) for v in ep.range_constraints.values()) == \
        sorted((int(v.lower), int(v.upper)) for v in tp.range_constraints.values())
    idx = torch.randint(0, 50, (3, 11))
    want = tp.module()(idx).detach().numpy()
    got = ep.module()(ember.from_numpy(idx.numpy().copy())).detach().numpy()
    assert abs(got - want).max() < 1e-4


def test_run_decompositions_lowers_to_core_ops_and_keeps_values():
    ember.manual_seed(0)
    model = mini_gpt(ember).eval()
    ep = export(model, (ember.randint(0, 50, (2, 8)),),
                dynamic_shapes={"idx": {0: Dim("batch", max=32), 1: Dim("seq", max=16)}})
    lowered = ep.run_decompositions()
    before = {getattr(n.target, "name", None) for n in ep.graph.nodes}
    after = {getattr(n.target, "name", None) for n in lowered.graph.nodes}
    # layer_norm stays whole in the exported graph (as torch.export's aten.layer_norm) and is
    # decomposed below native_layer_norm by the core table.
    assert "layer_norm" in before and not {"layer_norm", "native_layer_norm"} & after
    assert lowered.graph_signature.parameters == ep.graph_signature.parameters
    assert [str(k) for k in lowered.range_constraints] == [str(k) for k in ep.range_constraints]
    with ember.no_grad():
        for b, t in [(2, 8), (3, 5), (1, 16)]:
            idx = ember.randint(0, 50, (b, t))
            ember.testing.assert_close(lowered.module()(idx), model(idx), rtol=1e-4, atol=1e-5)


def test_unflatten_rebuilds_the_module_tree():
    model = cnn(ember).eval()
    ep = export(model, (ember.randn(2, 1, 8, 8),), dynamic_shapes=({0: Dim("batch")},))
    tree = unflatten(ep)
    assert set(tree.state_dict()) == set(model.state_dict())
    assert isinstance(tree.get_submodule("0"), ember.nn.Module)
    x = ember.randn(5, 1, 8, 8)
    with ember.no_grad():
        ember.testing.assert_close(tree(x), model(x))


def _nested_model(lib):
    class Block(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(3, 3)

        def forward(self, x):
            return self.fc(x) * 2

    class Model(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = lib.nn.ModuleList([Block(), Block()])
            self.shared = self.layers[0]  # one block under two names: each call takes the next name

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return self.shared(x).relu()

    return Model()


def _node_meta(ep, lib_name):
    out = {}
    for node in ep.graph_module.graph.nodes:
        if node.op == "output":
            continue
        stack = node.meta.get("nn_module_stack")
        if stack is not None:
            stack = {k: (path, cls.replace(f"{lib_name}.nn.", "nn.").rpartition("<locals>.")[2])
                     for k, (path, cls) in stack.items()}
        tm = node.meta["tensor_meta"]
        out[node.name] = (stack, tuple(node.meta["val"].shape), str(node.meta["val"].dtype).split(".")[1],
                          tuple(tm.shape), tm.stride, tm.requires_grad)
    return out


def test_node_meta_matches_torch_export():
    """nn_module_stack (keys, paths, classes), val and tensor_meta per node, as PyTorch's readers see them."""
    ep = export(_nested_model(ember), (ember.randn(2, 3),))
    tp = torch.export.export(_nested_model(torch), (torch.randn(2, 3),))
    assert _node_meta(ep, "ember") == _node_meta(tp, "torch")
    assert [e.fqn for e in ep.module_call_graph] == [e.fqn for e in tp.module_call_graph]
    decomposed = {n.name: n.meta.get("nn_module_stack") for n in ep.run_decompositions().graph.nodes}
    assert list(decomposed["mul_2"]) == ["L__self__", "L__self__shared"]


def test_exported_module_kwarg_mismatch_message_like_torch():
    messages = []
    for lib in (ember, torch):
        class M(lib.nn.Module):
            def forward(self, x, *, y, z=None):
                return x + y

        ep = lib.export.export(M(), (lib.ones(2),), {"y": lib.ones(2)})
        assert ep.tensor_constants == {}
        row = []
        for kw in ({}, {"y": lib.ones(2), "w": lib.ones(2)}, {"z": lib.ones(2)}):
            with pytest.raises(ValueError) as info:
                ep.module()(lib.ones(2), **kw)
            row.append(str(info.value))
        messages.append(row)
    assert messages[0] == messages[1]


def _call_args(text: str) -> list:
    """The argument lists of the op calls in generated code, op names left out."""
    import re

    return [m.group(1) for m in re.finditer(r"= (?:ember\.ops|torch\.ops\.aten)\.[\w.]+\((.*?)\);", text)]


def test_graph_prints_op_calls_without_trailing_defaults_like_torch():
    def build(lib):
        class M(lib.nn.Module):
            def forward(self, x):
                return x.sum() + x.sum(1, keepdim=True).sum() + lib.softmax(x, -1).sum() + x.mean()

        return M()

    x = torch.randn(2, 4)
    ep = export(build(ember), (ember.tensor(x.numpy()),))
    tp = torch.export.export(build(torch), (x,))
    # torch spells sum's dim as a list ([1]); ember's op takes the int
    assert _call_args(ep.graph_module.code) == [a.replace("[1]", "1") for a in _call_args(tp.graph_module.code)]
    assert "args = (%x,)" in str(ep.graph) and "args = (%x, -1)" in str(ep.graph)
    # the code runs with the defaults left out
    assert ember.allclose(ep.module()(ember.tensor(x.numpy())), ember.tensor(tp.module()(x).numpy()))


def test_none_inputs_are_user_inputs_like_torch():
    def build(lib):
        class M(lib.nn.Module):
            def forward(self, x, y=None, z=None):
                return x * 2 if y is None else x + y

        return M()

    x = torch.randn(2, 4)
    ep = export(build(ember), (ember.tensor(x.numpy()), None), {"z": None})
    tp = torch.export.export(build(torch), (x, None), {"z": None})
    assert ep.graph_signature.user_inputs == tp.graph_signature.user_inputs == ("x", None, None)
    assert [(s.kind.name, type(s.arg).__name__, s.arg.name) for s in ep.graph_signature.input_specs] == [
        (s.kind.name, type(s.arg).__name__, s.arg.name) for s in tp.graph_signature.input_specs]
    assert ep.call_spec.in_spec.num_leaves == tp.call_spec.in_spec.num_leaves == 3
    e_mod, t_mod = ep.module(), tp.module()
    e_ph = [n.name for n in e_mod.graph.nodes if n.op == "placeholder"]
    assert e_ph == [n.name for n in t_mod.graph.nodes if n.op == "placeholder"] == ["x", "y", "z"]
    out = e_mod(ember.ones(2, 4), None, z=None)
    assert ember.equal(out, ember.tensor(t_mod(torch.ones(2, 4), None, z=None).numpy()))


def test_number_and_none_inputs_are_unused_placeholders_of_the_graph_like_torch(tmp_path):
    def build(lib):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = lib.nn.Linear(3, 3)

            def forward(self, x, n, s=None, *, scale=2.0):
                y = self.fc(x) * n * scale
                return y if s is None else y + s

        return M()

    model_t = build(torch)
    model_e = build(ember)
    model_e.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in model_t.state_dict().items()})
    x = torch.randn(2, 3)
    tp = torch.export.export(model_t, (x, 3, None), {"scale": 0.5})
    ep = export(model_e, (ember.tensor(x.numpy()), 3, None), {"scale": 0.5})

    def placeholders(graph):
        return [(n.name, len(n.users)) for n in graph.nodes if n.op == "placeholder"]

    want = placeholders(tp.graph)
    assert want[3:] == [("n", 0), ("s", 0), ("scale", 0)]
    assert placeholders(ep.graph) == want
    assert [n.meta["val"] for n in ep.graph.nodes if n.op == "placeholder"][3:] == [3, None, 0.5]
    assert str(ep.graph_signature) == str(tp.graph_signature)
    ember.export.save(ep, str(tmp_path / "m.ep"))
    loaded = ember.export.load(str(tmp_path / "m.ep"))
    expected = tp.module()(x, 3, None, scale=0.5).detach().numpy()
    for program in (ep, ep.run_decompositions(), loaded):
        assert placeholders(program.graph) == want
        got = program.module()(ember.tensor(x.numpy()), 3, None, scale=0.5).detach().numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    ep.validate()


def test_tree_spec_repr_like_torch():
    import collections

    import torch.utils._pytree as torch_pytree

    from ember.export import _pytree

    pair = collections.namedtuple("pair", "a b")
    for tree in [((1, 2), {"z": 3}), [1, [2, [3, None]], {"a": 5, "b": (6,)}], (), {"x": []}, pair(1, (2, 3)), 5]:
        assert repr(_pytree.tree_flatten(tree)[1]) == repr(torch_pytree.tree_flatten(tree)[1])


def test_nested_input_leaves_are_named_by_their_path_like_torch():
    import collections

    Pair = collections.namedtuple("Pair", "a b")

    def build(lib):
        class M(lib.nn.Module):
            def forward(self, d, lst, t):
                return d["x"] + lst[0] * lst[1] + t.a - t.b * d["y"]

        return M()

    x = np.linspace(-1, 1, 4, dtype=np.float32)
    results = []
    for lib in (torch, ember):
        o = lib.tensor(x)
        args = ({"x": o, "y": o * 5}, [o, o * 2], Pair(o, o * 3))
        ep = lib.export.export(build(lib), args)
        names = [n.name for n in ep.graph.nodes if n.op == "placeholder"]
        results.append((names, [s.arg.name for s in ep.graph_signature.input_specs],
                        ep.module()(*args).detach().numpy()))
    assert results[1][0] == results[0][0] == ["d_x", "d_y", "lst_0", "lst_1", "t_a", "t_b"]
    assert results[1][1] == results[0][1]
    np.testing.assert_allclose(results[1][2], results[0][2], rtol=1e-6, atol=1e-6)


def test_dialect_and_verifiers_like_torch():
    # export gives the training IR, run_decompositions the ATen dialect, and save/load keeps it
    # (ember reported "ATEN" and verifiers None for every program)
    import io

    found = []
    for lib in (ember, torch):
        ep = lib.export.export(lib.nn.Linear(3, 2), (lib.ones(2, 3),))
        programs = [ep, ep.run_decompositions()]
        for p in list(programs):
            buf = io.BytesIO()
            lib.export.save(p, buf)
            buf.seek(0)
            programs.append(lib.export.load(buf))
        found.append([(p.dialect, [v.__name__ for v in p.verifiers], p.verifiers[0].dialect) for p in programs])
        for p in programs:
            p.verifiers[0]().check(p)
    assert found[0] == found[1]
