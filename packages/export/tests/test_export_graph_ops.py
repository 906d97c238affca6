"""The ops of an exported graph beside torch.export's (torch 2.13): PyTorch's composite ops
(linear, conv, batch_norm, layer_norm, group_norm, dropout, flatten, adaptive_avg_pool2d ...)
stay one node each, in ATen's argument order, and still compute the model's values; ONNX and
AOTInductor read them decomposed."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from export_models import copy_weights

import ember
from ember.compiler import make_fx


def _layers(lib):
    nn, F = lib.nn, lib.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.gn = nn.GroupNorm(2, 4)
            self.pool = nn.MaxPool2d(2)
            self.avg = nn.AdaptiveAvgPool2d(1)
            self.conv1 = nn.Conv1d(4, 4, 1)
            self.emb = nn.Embedding(10, 8)
            self.drop = nn.Dropout(0.1)
            self.ln = nn.LayerNorm(8)
            self.lin = nn.Linear(8, 4)

        def forward(self, x, idx):
            y = self.avg(self.pool(self.gn(self.bn(self.conv(x))))).flatten(1)
            y = self.conv1(y.unsqueeze(-1)).squeeze(-1)
            e = self.ln(self.drop(self.emb(idx)))
            a = F.scaled_dot_product_attention(e, e, e)
            return F.relu(self.lin(a)).sum(1) + y

    return Net()


def _linear_bn(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU())


def _ember_names(ep):
    return [n.target.name for n in ep.graph.nodes if n.op == "call_function" and hasattr(n.target, "name")]


def _torch_names(ep):
    # "aten.linear.default" -> "linear"; operator.getitem has no aten name.
    return [str(n.target).split(".")[1] for n in ep.graph.nodes
            if n.op == "call_function" and str(n.target).startswith("aten.")]


def _inputs(build, lib):
    if build is _linear_bn:
        return (lib.from_numpy(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)),)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    idx = rng.integers(0, 10, (2, 4))
    return lib.from_numpy(x), lib.from_numpy(idx)


@pytest.mark.parametrize("build", [_linear_bn, _layers])
def test_eval_graph_has_torch_export_ops_and_values(build):
    e_model, t_model = build(ember).eval(), build(torch).eval()
    copy_weights(t_model, e_model)
    ep = ember.export.export(e_model, _inputs(build, ember))
    tp = torch.export.export(t_model, _inputs(build, torch))
    assert _ember_names(ep) == _torch_names(tp)
    with ember.no_grad():
        got = ep.module()(*_inputs(build, ember)).numpy()
    want = tp.module()(*_inputs(build, torch)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_linear_bn_relu_keeps_three_nodes_and_decomposes_on_request():
    model = _linear_bn(ember).eval()
    ep = ember.export.export(model, _inputs(_linear_bn, ember))
    assert _ember_names(ep) == ["linear", "batch_norm", "relu"]
    lowered = ep.run_decompositions()
    assert not {"linear", "batch_norm"} & set(_ember_names(lowered))
    x = _inputs(_linear_bn, ember)[0]
    with ember.no_grad():
        ember.testing.assert_close(lowered.module()(x), model(x))


def test_training_batch_norm_updates_running_stats_like_eager():
    ember.manual_seed(0)
    model, twin = _linear_bn(ember).train(), _linear_bn(ember).train()
    twin.load_state_dict(model.state_dict())
    x = _inputs(_linear_bn, ember)[0]
    ep = ember.export.export(model, (x,))
    assert "batch_norm" in _ember_names(ep)
    module = ep.module()
    ember.testing.assert_close(module(x), twin(x))
    ember.testing.assert_close(module.get_buffer("1.running_mean"), twin[1].running_mean)


def test_composites_are_decomposed_for_compile_and_eager_autograd():
    # ember.compile's capture and autograd see the decomposition, not the composite op.
    model = _linear_bn(ember).eval()
    x = _inputs(_linear_bn, ember)[0]
    gm = make_fx(model)(x)
    names = {getattr(n.target, "name", None) for n in gm.graph.nodes}
    assert "linear" not in names and "addmm" in names
    pre = make_fx(model, pre_dispatch=True)(x)
    assert "linear" in {getattr(n.target, "name", None) for n in pre.graph.nodes}
    ep = ember.export.export(model, (x,))
    w = ep.module().get_parameter("0.weight")
    ep.module()(x).sum().backward()
    assert w.grad is not None and w.grad.shape == w.shape


def test_onnx_and_aoti_read_the_decomposed_program(tmp_path):
    pytest.importorskip("onnxruntime")
    model = _layers(ember).eval()
    args = _inputs(_layers, ember)
    with ember.no_grad():
        want = model(*args).numpy()
    program = ember.onnx.export(model, args, dynamo=True)
    got = program(*args)[0]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)
    ep = ember.export.export(model, args)
    path = ember._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "m.pt2"))
    with ember.no_grad():
        out = ember._inductor.aoti_load_package(path)(*args)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)


def _inplace_relu(lib):
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(6, 4)

        def forward(self, x, y):
            return lib.nn.functional.relu(self.lin(x + y), inplace=True)

    return Net()


def test_inplace_op_on_an_intermediate_is_the_value_later_uses_read():
    ep = ember.export.export(_inplace_relu(ember), (ember.ones(2, 6), ember.ones(2, 6)))
    tp = torch.export.export(_inplace_relu(torch), (torch.ones(2, 6), torch.ones(2, 6)))
    assert ep.graph_signature.user_outputs == tp.graph_signature.user_outputs
    assert [n.name for n in ep.graph.nodes] == [n.name for n in tp.graph.nodes]


def test_module_children_and_data_dependent_error_match_torch():
    tp = torch.export.export(_linear_bn(torch)[:2].eval(), _inputs(_linear_bn, torch))
    ep = ember.export.export(_linear_bn(ember)[:2].eval(), _inputs(_linear_bn, ember))
    names = [n for n, _ in ember.export.unflatten(ep).named_children()]
    assert names == [n for n, _ in torch.export.unflatten(tp).named_children()]

    def branchy(lib):
        class Net(lib.nn.Module):
            def forward(self, x):
                return x + 1 if x.sum() > 0 else x - 1

        return Net()

    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode as TorchGuard

    from ember.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    with pytest.raises(TorchGuard):
        torch.export.export(branchy(torch), (torch.ones(3),))
    with pytest.raises(GuardOnDataDependentSymNode) as info:
        ember.export.export(branchy(ember), (ember.ones(3),))
    assert isinstance(info.value, ember.export.UserError)  # what ember raised before


def test_printed_program_has_torch_layout():
    tp = torch.export.export(_linear_bn(torch).eval(), _inputs(_linear_bn, torch))
    ep = ember.export.export(_linear_bn(ember).eval(), _inputs(_linear_bn, ember))
    assert str(ep.graph_signature) == str(tp.graph_signature)
    text, expect = str(ep), str(tp)
    assert text.splitlines()[0] == expect.splitlines()[0] == "ExportedProgram:"
    assert text.splitlines()[1].startswith("    class GraphModule(")
    assert text[text.index("Graph signature:"):] == expect[expect.index("Graph signature:"):]


def test_slice_by_another_inputs_size_keeps_a_derived_dim_like_torch():
    def build(lib):
        class Net(lib.nn.Module):
            def forward(self, x, y):
                return x + y[: x.shape[0]]

        return Net()

    results = []
    for lib in (torch, ember):
        b = lib.export.Dim("b", min=2, max=10)
        ep = lib.export.export(build(lib), (lib.ones(4, 3), lib.ones(6, 3)),
                               dynamic_shapes={"x": {0: b}, "y": {0: b + 2}})
        out = ep.module()(lib.ones(7, 3), lib.arange(27.0).reshape(9, 3))
        results.append((len(ep.range_constraints), out.numpy().tolist()))
    assert results[0] == results[1]
    assert [d.__name__ for d in ember.export.dims("a", "c", max=4)] == ["a", "c"]


def test_pass_rewrites_exported_module_with_aten_names_like_torch():
    class M:
        @staticmethod
        def build(lib):
            class Net(lib.nn.Module):
                def forward(self, x):
                    return lib.relu(x + 1).sum()
            return Net()

    x = np.array([1.0, -3.0, 0.5], np.float32)
    results = []
    for lib in (torch, ember):
        aten = lib.ops.aten
        gm = lib.export.export(M.build(lib), (lib.tensor(x),)).module()
        for n in list(gm.graph.nodes):
            if n.op == "call_function" and n.target == aten.relu.default:
                n.target = aten.sigmoid.default
            elif n.op == "call_function" and n.target == aten.add.Tensor:
                with gm.graph.inserting_after(n):
                    scaled = gm.graph.call_function(aten.mul.Tensor, (n, 2.0))
                n.replace_all_uses_with(scaled)
                scaled.args = (n, 2.0)
        gm.recompile()
        results.append(float(gm(lib.tensor(x))))
    assert results[1] == pytest.approx(results[0], rel=1e-6)


def test_decomposed_train_mode_program_leaves_grad_mode_on_like_torch():
    # BatchNorm's running-stat update runs under no_grad inside the decomposed graph: running the
    # program must switch grad mode back (it stayed off after the call).
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    ys = [np.random.default_rng(k).standard_normal((4, 5)).astype(np.float32) for k in (1, 2)]
    stats = []
    for lib in (torch, ember):
        bn = lib.nn.BatchNorm1d(5).train()
        mod = lib.export.export(bn, (lib.tensor(x),)).run_decompositions().module()
        for y in ys:
            out = mod(lib.tensor(y))
            assert lib.is_grad_enabled()
            assert (lib.ones(2, requires_grad=True) * 2).requires_grad
        stats.append((out.detach().numpy(), mod.running_mean.numpy(), mod.running_var.numpy(),
                      int(mod.num_batches_tracked)))
    for e, t in zip(stats[1][:3], stats[0][:3]):
        np.testing.assert_allclose(e, t, rtol=1e-5, atol=1e-6)
    assert stats[1][3] == stats[0][3] == 2


def test_make_fx_graph_restores_grad_mode_switched_inside():
    def f(x):
        y = x * 2
        with ember.no_grad():
            z = y + 1
        return y, z

    gm = make_fx(f)(ember.ones(3, requires_grad=True))
    y, z = gm(ember.ones(3, requires_grad=True))
    assert ember.is_grad_enabled()
    assert y.requires_grad and not z.requires_grad


def test_one_tensor_passed_as_two_inputs_like_torch():
    # Self-attention exported as attn(x, x, x): two (three) inputs, as in PyTorch; it was refused.
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 8)).astype(np.float32)
    other = rng.standard_normal((3, 5, 8)).astype(np.float32)
    results = []
    for lib in (torch, ember):
        lib.manual_seed(0)
        mha = lib.nn.MultiheadAttention(8, 2, batch_first=True).eval()
        with lib.no_grad():
            for i, p in enumerate(mha.parameters()):
                p.copy_(lib.tensor(np.random.default_rng(i).standard_normal(tuple(p.shape)).astype(np.float32) * 0.2))
        t = lib.tensor(x)
        b = lib.export.Dim("b")
        ep = lib.export.export(mha, (t, t, t), dynamic_shapes=({0: b}, {0: b}, {0: b}))
        assert sum(s.kind.name == "USER_INPUT" for s in ep.graph_signature.input_specs) == 3
        o = lib.tensor(other)
        results.append((ep.module()(t, t, t)[0].detach().numpy(), ep.module()(o, o, o)[0].detach().numpy()))
    for e, t in zip(results[1], results[0]):
        np.testing.assert_allclose(e, t, rtol=1e-5, atol=1e-6)


def _op_names(ep):
    names = []
    for n in ep.graph.nodes:
        if n.op == "call_function":
            names.append(str(n.target).replace("ember.ops.", "").replace("aten.", "").replace(".default", ""))
    return names


def test_run_decompositions_with_a_user_table_like_torch():
    # default_decompositions() less a row keeps that op; {} keeps every op (PyTorch 2.13).
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    found = []
    for lib in (torch, ember):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(4, 3), lib.nn.LayerNorm(3), lib.nn.GELU())
        ep = lib.export.export(model, (lib.tensor(x),))
        expected = model(lib.tensor(x)).detach().numpy()
        kept = {}
        table = lib.export.default_decompositions()
        assert lib.ops.aten.linear.default in table
        del table[lib.ops.aten.linear.default]
        for label, program in (("empty", ep.run_decompositions({})), ("no linear", ep.run_decompositions(table)),
                               ("default", ep.run_decompositions())):
            ops = _op_names(program)
            kept[label] = ("linear" in ops, "layer_norm" in ops)
            np.testing.assert_allclose(program.module()(lib.tensor(x)).detach().numpy(), expected, rtol=1e-5,
                                       atol=1e-6)
        custom = ep.run_decompositions({lib.ops.aten.gelu.default: lambda t, approximate="none": t * 0 + 7})
        assert custom.module()(lib.tensor(x)).detach().numpy().tolist() == [[7.0] * 3] * 2
        found.append(kept)
    assert found[1] == found[0]


def test_is_exporting_branch_in_forward_like_torch():
    results = []
    for lib in (torch, ember):
        class Branchy(lib.nn.Module):
            def forward(self, x, lib=lib):
                if lib.compiler.is_exporting():
                    return x + 100
                return x + 1

        m = Branchy()
        x = lib.zeros(1)
        results.append((m(x).item(), lib.export.export(m, (x,)).module()(x).item(), lib.compiler.is_exporting()))
    assert results[1] == results[0] == (1.0, 100.0, False)


def test_module_graph_is_unlifted_like_torch():
    # ep.module().graph takes the user inputs only (state as get_attr nodes): Interpreter and
    # ShapeProp run it on the user's inputs; buffer updates survive dead-code elimination.
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    found = []
    for lib in (torch, ember):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(3, 5), lib.nn.BatchNorm1d(5), lib.nn.ReLU())
        gm = lib.export.export(model, (lib.tensor(x),)).module()
        ops = [n.op for n in gm.graph.nodes]
        out = lib.fx.Interpreter(gm).run(lib.tensor(x))
        out = out[0] if isinstance(out, (tuple, list)) else out
        lib.fx.passes.shape_prop.ShapeProp(gm).propagate(lib.tensor(x))
        shapes = [tuple(n.meta["tensor_meta"].shape) for n in gm.graph.nodes
                  if n.op == "call_function" and "tensor_meta" in n.meta and "relu" in str(n.target)]
        gm.graph.eliminate_dead_code()
        gm.recompile()
        tracked = int(gm.get_submodule("1").num_batches_tracked)
        gm(lib.tensor(x))
        found.append((ops.count("placeholder"), ops.count("get_attr") >= 7, shapes, tracked,
                      int(gm.get_submodule("1").num_batches_tracked)))
        np.testing.assert_allclose(out.detach().numpy(), gm(lib.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert found[1] == found[0]


def test_export_traces_through_custom_autograd_functions_like_torch():
    # nn.RNN (a custom autograd.Function inside) and a user's Function export as their forward ops;
    # both raised "data-dependent operation: autograd.Function ... apply".
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    results = []
    for lib in (torch, ember):
        class Twice(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(a)
                return a * 2 + 1

            @staticmethod
            def backward(ctx, g):
                return g * 2

        class Net(lib.nn.Module):
            def __init__(self, lib=lib):
                super().__init__()
                self.rnn = lib.nn.RNN(4, 5, batch_first=True)

            def forward(self, t):
                out, h = self.rnn(t)
                return Twice.apply(out).relu(), h

        lib.manual_seed(0)
        net = Net()
        with lib.no_grad():
            for i, p in enumerate(net.parameters()):
                p.copy_(lib.tensor(np.random.default_rng(i).standard_normal(tuple(p.shape)).astype(np.float32) * 0.5))
        ep = lib.export.export(net, (lib.tensor(x),))
        out, h = ep.module()(lib.tensor(x))
        ref, ref_h = net(lib.tensor(x))
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(h.detach().numpy(), ref_h.detach().numpy(), rtol=1e-5, atol=1e-6)
        assert lib.is_grad_enabled()
        results.append(out.detach().numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-5, atol=1e-6)


def test_onnx_export_of_rnn_runs_in_onnx_runtime():
    ort = pytest.importorskip("onnxruntime")
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    ember.manual_seed(0)
    rnn = ember.nn.RNN(4, 5, num_layers=2, nonlinearity="relu", bidirectional=True, batch_first=True)
    program = ember.onnx.export(rnn, (ember.tensor(x),))
    session = ort.InferenceSession(program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = session.run(None, {session.get_inputs()[0].name: x})
    for got, expected in zip(outs, rnn(ember.tensor(x))):
        np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_nested_inputs_are_named_by_their_path_like_torch():
    names = []
    for lib in (torch, ember):
        class Nested(lib.nn.Module):
            def forward(self, inputs, scale):
                return inputs["a"] * inputs["pair"][1] + inputs["pair"][0] * scale[0]

        x = {"a": lib.ones(2), "pair": (lib.ones(2), lib.ones(2))}
        ep = lib.export.export(Nested(), (x, [lib.ones(1)]))
        names.append([s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"])
        assert ep.module()(x, [lib.ones(1) * 2]).tolist() == [3.0, 3.0]
    assert names[1] == names[0] == ["inputs_a", "inputs_pair_0", "inputs_pair_1", "scale_0"]


def test_signature_name_lists_are_tuples_like_torch():
    found = []
    for lib in (torch, ember):
        class M(lib.nn.Module):
            def __init__(self, lib=lib):
                super().__init__()
                self.fc = lib.nn.Linear(2, 2)
                self.register_buffer("b", lib.ones(2), persistent=False)

            def forward(self, x):
                return self.fc(x) + self.b

        sig = lib.export.export(M(), (lib.ones(1, 2),)).graph_signature
        found.append((sig.parameters, sig.buffers, sig.non_persistent_buffers, sig.lifted_tensor_constants))
    assert found[1] == found[0] == (("fc.weight", "fc.bias"), ("b",), ("b",), ())


def test_tensor_attributes_are_constants_named_by_their_path_like_torch():
    found = []
    for lib in (torch, ember):
        class Sub(lib.nn.Module):
            def __init__(self, lib=lib):
                super().__init__()
                self.Scale = lib.arange(3.0)

            def forward(self, x):
                return x * self.Scale

        class M(lib.nn.Module):
            def __init__(self, lib=lib):
                super().__init__()
                self.c = lib.arange(3.0)
                self.sub = Sub()

            def forward(self, x, lib=lib):
                # an attribute read twice is one input; a tensor the program builds is lifted_tensor_0
                return self.sub(x + self.c) + lib.tensor([1.0, 2.0, 3.0]) + self.c

        m = M()
        ep = lib.export.export(m, (lib.ones(3),))
        specs = [(s.kind.name, s.arg.name, s.target) for s in ep.graph_signature.input_specs]
        found.append((specs, list(ep.constants), ep.graph_signature.lifted_tensor_constants))
        assert ep.module()(lib.ones(3) * 2).tolist() == m(lib.ones(3) * 2).tolist()
    assert found[1] == found[0]
    assert found[0][1] == ["c", "sub.Scale", "lifted_tensor_0"]


def test_exported_module_is_a_graph_module_like_torch():
    import copy

    found = []
    for lib in (torch, ember):
        model = lib.nn.Sequential(lib.nn.Linear(3, 2), lib.nn.ReLU())
        ep = lib.export.export(model, (lib.ones(2, 3),))
        mod, unflat = ep.module(), lib.export.unflatten(ep)
        twin = copy.deepcopy(mod)
        found.append((isinstance(mod, lib.fx.GraphModule), type(mod).__name__, repr(mod).splitlines()[0],
                      isinstance(unflat, lib.fx.GraphModule), type(unflat).__name__,
                      isinstance(twin, lib.fx.GraphModule), type(twin).__name__))
        np.testing.assert_allclose(twin(lib.ones(2, 3)).detach().numpy(), model(lib.ones(2, 3)).detach().numpy())
    assert found[1] == found[0] == (True, "GraphModule", "GraphModule(", False, "UnflattenedModule", True,
                                    "GraphModule")


def _aliases(lib):
    class Aliases(lib.nn.Module):
        def forward(self, x, y):
            a = lib.arctan(x).clip(0.1, 0.5) + lib.concat([x, y]).sum() + x.arccos() + lib.absolute(y)
            b = lib.ger(x[0], y[0]) + lib.moveaxis(x, 0, 1) + lib.negative(lib.true_divide(x, y))
            return lib.greater(a, b), lib.row_stack([a, b]), lib.swapaxes(lib.fix(a * 3), 0, 1)

    return Aliases()


def test_aliases_are_recorded_by_their_own_name_like_torch():
    # torch.arctan is aten.arctan in torch.export's graph (not aten.atan), as every ATen alias;
    # run_decompositions() turns each into the op it aliases.
    x = np.random.rand(3, 3).astype(np.float32) * 0.5 + 0.25
    y = np.random.rand(3, 3).astype(np.float32) * 0.5 + 0.25
    tx, ty, ex, ey = torch.tensor(x), torch.tensor(y), ember.tensor(x), ember.tensor(y)
    tep = torch.export.export(_aliases(torch), (tx, ty))
    eep = ember.export.export(_aliases(ember), (ex, ey))
    assert _ember_names(eep) == _torch_names(tep)
    decomposed = _ember_names(eep.run_decompositions())
    for alias, op in [("arctan", "atan"), ("clip", "clamp"), ("concat", "cat"), ("arccos", "acos"),
                      ("absolute", "abs"), ("negative", "neg"), ("true_divide", "div"), ("greater", "gt"),
                      ("fix", "trunc")]:
        assert alias not in decomposed and op in decomposed
    assert any(n.target == ember.ops.aten.arctan.default for n in eep.graph.nodes)
    expected = _aliases(torch)(tx, ty)
    for program in (eep, eep.run_decompositions()):
        for got, want in zip(program.module()(ex, ey), expected):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


def _structured(lib):
    class Structured(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(3, 4)

        def forward(self, x, n, d, *, z):
            y = self.lin(x)
            return {"a": y * n, "b": (y.relu(), [d["k"] * 2 + z])}

    return Structured()


def test_exported_module_code_and_interpreter_keep_the_pytree_structure_like_torch():
    # ep.module()'s graph flattens the call's structure in its code and rebuilds the outputs'
    # (pytree codegen), so fx.Interpreter, process_inputs/outputs and a Transformer see both.
    x = np.random.rand(2, 3).astype(np.float32)
    k, z = np.ones(2, np.float32), np.arange(2, dtype=np.float32)
    results = {}
    for lib in (torch, ember):
        model = _structured(lib)
        if lib is ember:
            copy_weights(results["torch_model"], model)
        else:
            results["torch_model"] = model
        args = (lib.tensor(x), 3, {"k": lib.tensor(k)})
        gm = lib.export.export(model, args, {"z": lib.tensor(z)}).module()
        code = gm.code
        results[lib.__name__] = {
            "flatten": next(line.strip() for line in code.splitlines() if "tree_flatten_spec" in line),
            "return": next(line.strip() for line in code.splitlines() if line.strip().startswith("return")),
            "placeholders": [n.name for n in gm.graph.nodes if n.op == "placeholder"],
            "flat": [type(v).__name__ for v in gm.graph.process_inputs(*args, lib.tensor(z))],
            "run": lib.fx.Interpreter(gm).run(*args, lib.tensor(z)),
            "call": gm(*args, z=lib.tensor(z)),
            "transformed": lib.fx.Transformer(gm).transform()(*args, lib.tensor(z)),
        }
    got, want = results["ember"], results["torch"]
    assert got["flatten"] == want["flatten"] == (
        "x, n, d_k, z, = fx_pytree.tree_flatten_spec(([x, n, d], {'z':z}), self._in_spec)")
    assert got["return"].startswith("return pytree.tree_unflatten((")
    assert got["return"].endswith("), self._out_spec)") and want["return"].endswith("), self._out_spec)")
    assert got["placeholders"] == want["placeholders"]
    assert got["flat"] == ["Tensor", "int", "Tensor", "Tensor"] == want["flat"]
    for key in ("run", "call", "transformed"):
        out, ref = got[key], want[key]
        assert set(out) == {"a", "b"} and isinstance(out["b"], tuple) and isinstance(out["b"][1], list)
        for o, r in ((out["a"], ref["a"]), (out["b"][0], ref["b"][0]), (out["b"][1][0], ref["b"][1][0])):
            np.testing.assert_allclose(o.detach().numpy(), r.detach().numpy(), rtol=1e-6, atol=1e-6)


def test_unflattened_module_and_flat_args_adapter_names_like_torch():
    for lib in (torch, ember):
        ep = lib.export.export(lib.nn.Sequential(lib.nn.Linear(3, 2)), (lib.ones(1, 3),))
        assert isinstance(lib.export.unflatten(ep), lib.export.UnflattenedModule)
        assert not isinstance(lib.export.unflatten(ep), lib.fx.GraphModule)
        with pytest.raises(TypeError):
            lib.export.FlatArgsAdapter()  # abstract: a subclass defines adapt()


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_saved_logsumexp_stays_out_of_the_graph(smoothing):
    """cross_entropy's op returns each row's log-sum-exp for its backward; the exported graph (and
    its run_decompositions) reads no such result, as torch.export's reads none of nll_loss_forward's
    extra outputs: no getitem of an unread result, outputs and values as PyTorch's."""
    def program(lib):
        class Net(lib.nn.Module):
            def forward(self, x, t):
                return lib.nn.functional.cross_entropy(x, t, label_smoothing=smoothing, ignore_index=1)
        return Net()

    x, t = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32), np.array([0, 1, 2, 3, 1])
    ep = ember.export.export(program(ember), (ember.tensor(x), ember.tensor(t)))
    ref = torch.export.export(program(torch), (torch.tensor(x), torch.tensor(t)))
    for prog in (ep, ep.run_decompositions()):
        calls = [n for n in prog.graph.nodes if n.op == "call_function"]
        items = [n for n in calls if n.target.__name__ == "getitem"]
        assert all(n.users for n in items), prog.graph_module.code
        assert sorted(n.args[1] for n in items) == ([0, 1, 2] if smoothing else [0, 2]), prog.graph_module.code
        assert len(prog.graph_signature.output_specs) == len(ref.graph_signature.output_specs) == 1
        got = prog.module()(ember.tensor(x), ember.tensor(t))
        want = ref.module()(torch.tensor(x), torch.tensor(t))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
