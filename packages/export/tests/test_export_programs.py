"""ember.export.export on whole models: outputs equal eager at the example size and two others,
sizes outside the range are rejected, training-mode buffer updates are lifted to outputs."""

from __future__ import annotations

import copy

import pytest
from export_models import cnn, encoder_layer, lstm, mini_gpt, mlp

import ember
from ember.export import Dim, ExportedProgram, InputKind, OutputKind, export

CASES = [
    # name, builder, example shape, dynamic dims {dim: (name, max)}, other shapes
    ("mlp", mlp, (4, 6), {0: ("batch", 64)}, [(1, 6), (9, 6)]),
    ("cnn", cnn, (4, 1, 8, 8), {0: ("batch", 64)}, [(2, 1, 8, 8), (7, 1, 8, 8)]),
    ("lstm", lstm, (3, 7, 5), {0: ("batch", 64)}, [(2, 7, 5), (6, 7, 5)]),
    ("encoder_layer", encoder_layer, (3, 6, 16), {0: ("batch", 64), 1: ("seq", 32)}, [(2, 4, 16), (5, 9, 16)]),
]


def _dims(spec):
    return {d: Dim(name, max=hi) for d, (name, hi) in spec.items()}


@pytest.mark.parametrize("name,build,shape,dyn,others", CASES, ids=[c[0] for c in CASES])
def test_exported_module_matches_eager(name, build, shape, dyn, others):
    ember.manual_seed(0)
    model = build(ember).eval()
    x = ember.randn(*shape)
    ep = export(model, (x,), dynamic_shapes=(_dims(dyn),))
    assert isinstance(ep, ExportedProgram)
    module = ep.module()
    with ember.no_grad():
        for s in [shape] + others:
            xs = ember.randn(*s)
            ember.testing.assert_close(module(xs), model(xs), rtol=1e-6, atol=1e-6)
        too_big = list(shape)
        too_big[0] = 65
        with pytest.raises(AssertionError, match=r"size\(\)\[0\] <= 64"):
            module(ember.randn(*too_big))


def test_mini_gpt_dynamic_batch_and_sequence():
    ember.manual_seed(0)
    model = mini_gpt(ember).eval()
    batch, seq = Dim("batch", max=32), Dim("seq", max=16)
    ep = export(model, (ember.randint(0, 50, (2, 8)),), dynamic_shapes={"idx": {0: batch, 1: seq}})
    assert sorted(str(k) for k in ep.range_constraints) == ["s0", "s1"]
    assert [(v.lower, v.upper) for v in ep.range_constraints.values()] == [(0, 32), (0, 16)]
    # Tied weights: one input per name (as torch.export), one tensor.
    assert ep.state_dict["head.weight"] is ep.state_dict["tok.weight"]
    module = ep.module()
    with ember.no_grad():
        for b, t in [(2, 8), (3, 5), (4, 16)]:
            idx = ember.randint(0, 50, (b, t))
            ember.testing.assert_close(module(idx), model(idx), rtol=1e-6, atol=1e-6)
        with pytest.raises(AssertionError, match=r"idx.size\(\)\[1\] <= 16"):
            module(ember.randint(0, 50, (2, 17)))


def test_batchnorm_training_mode_lifts_buffer_mutations():
    ember.manual_seed(0)
    model = cnn(ember).train()
    reference = copy.deepcopy(model)
    x = ember.randn(4, 1, 8, 8)
    ep = export(model, (x,), dynamic_shapes=({0: Dim("batch", min=2, max=64)},))
    sig = ep.graph_signature
    assert sorted(sig.buffers_to_mutate.values()) == ["1.num_batches_tracked", "1.running_mean", "1.running_var"]
    assert [s.kind for s in sig.output_specs][-1] is OutputKind.USER_OUTPUT
    assert sig.buffers == ("1.running_mean", "1.running_var", "1.num_batches_tracked")
    # Exporting ran nothing: the module's statistics are untouched.
    ember.testing.assert_close(model[1].running_mean, ember.zeros(4))
    module = ep.module()
    for b in (4, 3, 6):
        xs = ember.randn(b, 1, 8, 8)
        ember.testing.assert_close(module(xs), reference(xs), rtol=1e-5, atol=1e-6)
        for buf in ("running_mean", "running_var", "num_batches_tracked"):
            ember.testing.assert_close(getattr(module.get_submodule("1"), buf), getattr(reference[1], buf))
    # No input of the graph is written: mutated buffers are cloned first.
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            assert all(getattr(u.target, "name", "") != "add_" for u in node.users)


def test_eval_mode_has_no_mutations_and_the_signature_is_complete():
    model = cnn(ember).eval()
    ep = export(model, (ember.randn(2, 1, 8, 8),))
    sig = ep.graph_signature
    assert sig.buffers_to_mutate == {}
    assert [s.kind for s in sig.input_specs].count(InputKind.USER_INPUT) == 1
    assert len(sig.parameters) == 8 and len(sig.user_outputs) == 1
    assert set(ep.state_dict) == set(model.state_dict())
    assert ep.module_call_graph[0].fqn == "" and ep.module_call_graph[0].signature.forward_arg_names == ["input"]
    assert {e.fqn for e in ep.module_call_graph[1:]} == {str(i) for i in range(9)}
    assert ep.example_inputs[0][0].shape == (2, 1, 8, 8)
    with pytest.raises(RuntimeError, match="Unable to call ExportedProgram directly"):
        ep(ember.randn(2, 1, 8, 8))
    # Static shapes: another batch size is rejected.
    with pytest.raises(AssertionError, match=r"size\(\)\[0\] == 2"):
        ep.module()(ember.randn(3, 1, 8, 8))


def test_input_checks_rank_dtype_and_structure():
    ep = export(mlp(ember), (ember.randn(4, 6),), dynamic_shapes=({0: Dim("batch")},))
    module = ep.module()
    # PyTorch 2.13's guards read x.size()[d] per exported dim: fewer dims is an IndexError, more
    # dims pass the guards and the graph's ops decide (Linear refuses a (4, 6, 1) input)
    with pytest.raises(IndexError, match="tuple index out of range"):
        module(ember.randn(6))
    with pytest.raises(RuntimeError):
        module(ember.randn(4, 6, 1))
    # no dtype guard (PyTorch's ep.module() has none): the first op refuses the mix, as torch's does
    with pytest.raises(RuntimeError, match="dtype"):
        module(ember.randn(4, 6, dtype=ember.float64))
    with pytest.raises(AssertionError, match=r"size\(\)\[1\] == 6"):
        module(ember.randn(4, 7))
    with pytest.raises(ValueError, match="tree spec"):
        module(ember.randn(4, 6), ember.randn(4, 6))


def test_kwargs_constants_lifted_tensors_and_nested_outputs():
    class Net(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = ember.nn.Linear(3, 3)
            self.scale = ember.tensor([1.0, 2.0, 3.0])  # a plain tensor attribute: a lifted constant

        def forward(self, x, *, y, flag=True):
            out = self.fc(x) * self.scale + y
            return {"out": out, "pair": (out.sum(dim=1), x)} if flag else out

    net = Net()
    x, y = ember.randn(2, 3), ember.randn(2, 3)
    ep = export(net, (x,), {"y": y}, dynamic_shapes={"x": {0: Dim("b")}, "y": {0: Dim("b")}})
    kinds = [s.kind for s in ep.graph_signature.input_specs]
    assert kinds.count(InputKind.CONSTANT_TENSOR) == 1
    assert len(ep.constants) == 1
    got = ep.module()(ember.randn(5, 3), y=ember.randn(5, 3))
    assert set(got) == {"out", "pair"} and got["pair"][0].shape == (5,)
    xs, ys = ember.randn(4, 3), ember.randn(4, 3)
    ember.testing.assert_close(ep.module()(xs, y=ys)["out"], net(xs, y=ys)["out"])


def test_data_dependent_control_flow_is_an_error_naming_the_line():
    class Net(ember.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x + 1
            return x - 1

    with pytest.raises(Exception, match="data-dependent|item|bool"):
        export(Net(), (ember.randn(3),))


def test_bad_arguments():
    with pytest.raises(ValueError, match="Expected `mod` to be an instance of `torch.nn.Module`"):
        export(lambda x: x, (ember.randn(2),))
    with pytest.raises(RuntimeError, match="Expecting `args` to be a tuple"):
        export(mlp(ember), [ember.randn(2, 6)])


def test_import_ember_export_does_not_import_onnx():
    import subprocess
    import sys

    code = "import sys, ember.export, ember.jit; assert 'onnx' not in sys.modules and 'onnxruntime' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_non_tensor_inputs_are_constants_checked_per_call():
    class Repeat(ember.nn.Module):
        def forward(self, x, n: int, scale=1.5):
            return x.repeat(1, n) * scale

    ep = export(Repeat(), (ember.randn(2, 3), 2), {"scale": 3.0},
                dynamic_shapes={"x": {0: Dim("b")}, "n": None, "scale": None})
    ep.validate()
    assert ep.graph_signature.user_inputs == ("x", 2, 3.0)
    module = ep.module()
    ember.testing.assert_close(module(ember.ones(4, 3), 2, scale=3.0), ember.full((4, 6), 3.0))
    with pytest.raises(AssertionError, match="n == 2"):
        module(ember.ones(4, 3), 3, scale=3.0)
