"""ember.onnx.export checked by onnx.checker and run by ONNX Runtime at three batch sizes."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
from export_models import cnn, encoder_layer, lstm, mini_gpt, mlp

import ember

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import ember.onnx  # noqa: E402 - after the importorskip guards

CASES = [
    ("mlp", mlp, (4, 6), [(1, 6), (9, 6)]),
    ("cnn", cnn, (4, 1, 8, 8), [(2, 1, 8, 8), (7, 1, 8, 8)]),
    ("encoder_layer", encoder_layer, (3, 6, 16), [(2, 6, 16), (5, 6, 16)]),
    ("lstm", lstm, (3, 7, 5), [(1, 7, 5), (6, 7, 5)]),
]


@pytest.mark.parametrize("name,build,shape,others", CASES, ids=[c[0] for c in CASES])
def test_onnx_runtime_matches_eager_at_three_batch_sizes(name, build, shape, others, tmp_path):
    ember.manual_seed(0)
    model = build(ember).train()  # exported in eval mode, as torch.onnx.export does by default
    program = ember.onnx.export(model, (ember.randn(*shape),), input_names=["x"], output_names=["y"],
                                dynamic_axes={"x": {0: "batch"}})
    assert model.training  # the module's mode is restored
    model.eval()
    proto = program.model_proto
    assert proto.opset_import[0].version == 18
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    # Weights are initializers under their names (a transposed weight as "<name>_t_<k>").
    inits = {i.name for i in proto.graph.initializer}
    for key in set(model.state_dict()) - {"1.num_batches_tracked"}:
        assert key in inits or any(i.startswith(key + "_t_") for i in inits), key
    onnx.checker.check_model(proto, full_check=True)
    path = tmp_path / f"{name}.onnx"
    program.save(path)
    reloaded = onnx.load(path)
    assert len(reloaded.graph.node) == len(proto.graph.node)
    with ember.no_grad():
        for s in [shape] + others:
            x = ember.randn(*s)
            (got,) = program(x)
            np.testing.assert_allclose(got.numpy(), model(x).numpy(), rtol=1e-4, atol=1e-5)


def test_mini_gpt_with_dynamic_batch_and_sequence():
    ember.manual_seed(0)
    model = mini_gpt(ember).eval()
    program = ember.onnx.export(model, (ember.randint(0, 50, (2, 8)),), input_names=["idx"],
                                output_names=["logits"], dynamic_axes={"idx": {0: "batch", 1: "seq"}})
    dims = [d.dim_param or d.dim_value for d in program.model_proto.graph.output[0].type.tensor_type.shape.dim]
    assert dims == ["batch", "seq", 50]
    with ember.no_grad():
        for b, t in [(2, 8), (1, 3), (4, 16)]:
            idx = ember.randint(0, 50, (b, t))
            np.testing.assert_allclose(program(idx)[0].numpy(), model(idx).numpy(), rtol=1e-4, atol=1e-5)


def test_dynamic_shapes_argument_and_file_output():
    model = mlp(ember).eval()
    buf = io.BytesIO()
    program = ember.onnx.export(model, (ember.randn(3, 6),), buf,
                                dynamic_shapes=({0: ember.export.Dim("rows", max=100)},))
    loaded = onnx.load_from_string(buf.getvalue())
    assert loaded.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "rows"
    x = ember.randn(11, 6)
    with ember.no_grad():
        np.testing.assert_allclose(program(x)[0].numpy(), model(x).numpy(), rtol=1e-4, atol=1e-5)


def test_unsupported_op_fails_at_export_naming_it(tmp_path):
    class Pooled(ember.nn.Module):
        def forward(self, x):
            return ember.nn.functional.adaptive_max_pool2d(x, 4) + 1

    path = tmp_path / "pooled.onnx"
    with pytest.raises(ember.onnx.UnsupportedOp, match=r"adaptive_max_pool2d to a size that does not divide"):
        ember.onnx.export(Pooled(), (ember.randn(1, 2, 6, 6),), path)
    assert not path.exists()  # never a broken file
    with pytest.raises(ember.onnx.UnsupportedOp, match="proj_size"):
        ember.onnx.export(ember.nn.LSTM(3, 4, proj_size=2), (ember.randn(5, 2, 3),))


@pytest.mark.parametrize("opset", [11, 13, 17])
def test_lower_opset_converted_or_kept_with_warning(opset, tmp_path):
    # As PyTorch's exporter: a lower opset_version is converted to where ONNX's converter can,
    # and otherwise kept at 18 with a warning; never an error, and ONNX Runtime runs the file.
    import onnxruntime as ort

    torch = pytest.importorskip("torch")
    ember.manual_seed(0)
    model = mlp(ember).eval()
    x = ember.randn(3, 6)
    path = tmp_path / "m.onnx"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ember.onnx.export(model, (x,), path, opset_version=opset)
    version = onnx.load(path).opset_import[0].version
    converted_warning = any("target version" in str(w.message) for w in caught)
    assert version == opset and not converted_warning or version == 18 and converted_warning
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    np.testing.assert_allclose(out, model(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    # PyTorch's legacy exporter writes the requested opset for the same model.
    tmodel = mlp(torch).eval()
    torch.onnx.export(tmodel, (torch.randn(3, 6),), str(tmp_path / "t.onnx"), opset_version=opset, dynamo=False)
    assert onnx.load(tmp_path / "t.onnx").opset_import[0].version == opset


def test_node_count_beside_torch_onnx(capsys):
    """Figure for the report: ember's ONNX graph sizes next to torch.onnx.export's (legacy exporter)."""
    torch = pytest.importorskip("torch")
    rows = []
    for name, build, shape in [("mlp", mlp, (4, 6)), ("cnn", cnn, (4, 1, 8, 8))]:
        e_model, t_model = build(ember).eval(), build(torch).eval()
        ours = len(ember.onnx.export(e_model, (ember.randn(*shape),)).model_proto.graph.node)
        buf = io.BytesIO()
        torch.onnx.export(t_model, (torch.randn(*shape),), buf, dynamo=False)
        theirs = len(onnx.load_from_string(buf.getvalue()).graph.node)
        rows.append((name, ours, theirs))
        assert ours > 0 and theirs > 0
    with capsys.disabled():
        print("\nONNX nodes (ember vs torch.onnx legacy):", rows)


class _PaddedEncoder(ember.nn.Module):
    """The nn tests' encoder classifier: a padding mask written in place (``mask[:, -1] = True``)."""

    def __init__(self):
        super().__init__()
        nn = ember.nn
        self.embed = nn.Linear(4, 16)
        layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        mask = ember.zeros(x.shape[0], x.shape[1], dtype=ember.bool)
        mask[:, -1] = True
        return self.head(self.encoder(self.embed(x), src_key_padding_mask=mask).mean(dim=1))


def test_in_place_writes_through_views_become_new_values():
    ember.manual_seed(0)
    model = _PaddedEncoder().eval()
    dims = ({0: ember.export.Dim("b"), 1: ember.export.Dim("t")},)
    program = ember.onnx.export(model, (ember.randn(3, 6, 4),), dynamic_shapes=dims)
    with ember.no_grad():
        for b, t in [(3, 6), (2, 4), (5, 9)]:
            x = ember.randn(b, t, 4)
            np.testing.assert_allclose(program(x)[0].numpy(), model(x).numpy(), rtol=1e-4, atol=1e-5)


def test_a_view_read_after_an_in_place_write_is_rejected():
    class Stale(ember.nn.Module):
        def forward(self, x):
            y = x * 1
            first = y[0]
            y.mul_(2)
            return first + 0  # reads the view after the write: sees the doubled values

    model = Stale()
    x = ember.randn(3, 2)
    ember.testing.assert_close(ember.export.export(model, (x,)).module()(x), x[0] * 2)
    with pytest.raises(ember.onnx.UnsupportedOp, match="read after"):
        ember.onnx.export(model, (x,))


def test_mixed_dtype_comparisons_promote_as_ember_does():
    class Compare(ember.nn.Module):
        def forward(self, x, i):
            return (i > 0.5).float() + (x < i).float() + (i == 2).float()

    x, i = ember.randn(5), ember.tensor([0, 1, 2, 3, 1])
    program = ember.onnx.export(Compare(), (x, i))
    ember.testing.assert_close(program(x, i)[0], Compare()(x, i))


@pytest.mark.parametrize("kwargs", [dict(num_layers=2), dict(bidirectional=True), dict(bias=False)],
                         ids=["two_layers", "bidirectional", "no_bias"])
def test_gru_as_onnx_gru(kwargs):
    ember.manual_seed(0)

    class Net(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = ember.nn.GRU(5, 8, batch_first=True, **kwargs)

        def forward(self, x):
            return self.rnn(x)

    model = Net().eval()
    program = ember.onnx.export(model, (ember.randn(3, 4, 5),), dynamic_shapes=({0: ember.export.Dim("b")},))
    with ember.no_grad():
        for b in (3, 1, 5):
            x = ember.randn(b, 4, 5)
            for got, want in zip(program(x), model(x)):
                np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)


def test_legacy_exporter_arguments_and_constant_outputs_like_torch(tmp_path):
    # Programs written for torch.onnx.export's TorchScript exporter: is_in_onnx_export inside
    # forward, operator_export_type, keep_initializers_as_inputs, a Python int among the outputs.
    import onnxruntime as ort

    torch = pytest.importorskip("torch")

    def build(lib):
        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = lib.nn.Linear(4, 3)

            def forward(self, x):
                y = self.fc(x)
                if lib.onnx.is_in_onnx_export():
                    y = y * 2
                return y.sum(), x.shape[0]

        lib.manual_seed(0)
        net = Net().eval()
        with lib.no_grad():
            net.fc.weight.copy_(lib.linspace(-1, 1, 12).reshape(3, 4))
            net.fc.bias.fill_(0.5)
        return net

    x = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)
    results = []
    for lib in (torch, ember):
        assert lib.onnx.is_in_onnx_export() is False
        path = str(tmp_path / f"{lib.__name__}.onnx")
        kwargs = {"dynamo": False} if lib is torch else {}
        lib.onnx.export(build(lib), (lib.tensor(x),), path, input_names=["x"], keep_initializers_as_inputs=True,
                        operator_export_type=lib.onnx.OperatorExportTypes.ONNX, **kwargs)
        model = onnx.load(path)
        inputs = {i.name for i in model.graph.input}
        assert {i.name for i in model.graph.initializer} <= inputs  # every initializer is also an input
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        total, batch = session.run(None, {"x": x})
        results.append((float(total), int(batch), batch.dtype.name))
        assert str(lib.onnx.OperatorExportTypes.ONNX) == "OperatorExportTypes.ONNX"
        assert str(lib.onnx.TrainingMode.EVAL) == "TrainingMode.EVAL"
    assert results[1][1:] == results[0][1:] == (2, "int64")
    assert results[1][0] == pytest.approx(results[0][0], rel=1e-5)


def test_legacy_keep_initializers_as_inputs_lists_the_weights_only_like_torch():
    # a caller feeding every graph input past the data from the state dict (to override weights)
    # must find exactly the module's parameters there, as torch's TorchScript exporter lists them
    import onnxruntime as ort

    torch = pytest.importorskip("torch")

    def build(lib):
        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = lib.nn.Linear(4, 8)
                self.fc2 = lib.nn.Linear(8, 3)

            def forward(self, x, y):
                return self.fc2(lib.tanh(self.fc1(x))) + y.sum(1, keepdim=True) * x.shape[0]

        net = Net().eval()
        with lib.no_grad():
            for p in net.parameters():
                p.copy_(lib.linspace(-1, 1, p.numel()).reshape(tuple(p.shape)))
        return net

    x = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)
    y = np.linspace(0, 1, 6, dtype=np.float32).reshape(2, 3)
    outs, weight_inputs = [], []
    for lib in (torch, ember):
        net = build(lib)
        f = io.BytesIO()
        lib.onnx.export(net, (lib.tensor(x), lib.tensor(y)), f, input_names=["x", "y"],
                        keep_initializers_as_inputs=True, dynamo=False)
        model = onnx.load_from_string(f.getvalue())
        names = [i.name for i in model.graph.input]
        assert names[:2] == ["x", "y"]
        weight_inputs.append(names[2:])
        state = {k: (v.detach().numpy() * 0.5).astype(np.float32) for k, v in net.state_dict().items()}
        session = ort.InferenceSession(f.getvalue(), providers=["CPUExecutionProvider"])
        outs.append(session.run(None, {"x": x, "y": y, **{n: state[n] for n in names[2:]}})[0])
    assert weight_inputs[1] == weight_inputs[0] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-6)


def test_onnx_program_methods_from_pytorch_tutorials(tmp_path):
    # onnx_program.optimize(); .apply_weights(state_dict); .rename_axes(); .call_reference();
    # .compute_values(): as torch.onnx.ONNXProgram offers them.
    ember.manual_seed(0)
    model = mlp(ember).eval()
    x = ember.randn(5, 6)
    program = ember.onnx.export(model, (x,), dynamo=True, dynamic_shapes=({0: ember.export.Dim("b")},))
    program.optimize()
    np.testing.assert_allclose(program(x)[0].numpy(), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    ember.manual_seed(1)
    other = mlp(ember).eval()
    program.apply_weights(other.state_dict())  # transposed (folded) weights follow their source
    np.testing.assert_allclose(program(x)[0].numpy(), other(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(program.call_reference(x)[0].numpy(), other(x).detach().numpy(), rtol=1e-4,
                               atol=1e-5)
    program.rename_axes({"b": "batch"})
    assert program.model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    first = program.model.graph.node[0].output[0]
    (value,) = program.compute_values([first], (x,))
    assert value.shape[0] == 5
    path = tmp_path / "m.onnx"
    program.save(path)
    onnx.checker.check_model(onnx.load(path), full_check=True)


_RESAMPLE_CASES = {
    "bilinear": (lambda F, x: F.interpolate(x, scale_factor=2, mode="bilinear"), (1, 2, 3, 4)),
    "bilinear_align": (lambda F, x: F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=True), (1, 1, 3, 4)),
    "bicubic": (lambda F, x: F.interpolate(x, scale_factor=2, mode="bicubic"), (1, 1, 4, 4)),
    "nearest": (lambda F, x: F.interpolate(x, size=(5, 7), mode="nearest"), (1, 2, 3, 4)),
    "nearest_exact": (lambda F, x: F.interpolate(x, size=(5, 7), mode="nearest-exact"), (1, 2, 3, 4)),
    "linear_1d": (lambda F, x: F.interpolate(x, scale_factor=1.5, mode="linear"), (1, 2, 6)),
    "trilinear": (lambda F, x: F.interpolate(x, scale_factor=2, mode="trilinear"), (1, 1, 2, 3, 3)),
    "pad_reflect": (lambda F, x: F.pad(x, (1, 2, 0, 1), mode="reflect"), (1, 1, 4, 4)),
    "pad_replicate": (lambda F, x: F.pad(x, (2, 1, 1, 0), mode="replicate"), (1, 2, 3, 4)),
    "pad_circular": (lambda F, x: F.pad(x, (2, 1, 1, 2), mode="circular"), (1, 2, 3, 4)),
    "std_keepdim": (lambda F, x: x.std(-1, keepdim=True) + x.var(0).sum(), (3, 8)),
    "remainder_float": (lambda F, x: x.mul(3).remainder(1.5) + x.mul(3).fmod(1.5), (2, 6)),
    "floor_divide": (lambda F, x: (x * 10).long() // 3 + (x * 3).div(0.7, rounding_mode="floor").long(), (2, 6)),
    "div_trunc": (lambda F, x: (x * 3).div(0.7, rounding_mode="trunc") + (x * 10).long().div(3, rounding_mode="trunc"),
                  (2, 6)),
    "cumsum": (lambda F, x: x.cumsum(1) + (x * 10).long().cumsum(0), (3, 4)),
    "topk": (lambda F, x: x.topk(2, 0, largest=False)[0] * 2, (5, 3)),
    "sort": (lambda F, x: x.sort(1, descending=True)[0], (3, 6)),
    "index_list": (lambda F, x: x[:, [0, 2, 3]] * 2 + x[:, [1]], (2, 8)),
    "adaptive_max": (lambda F, x: F.adaptive_max_pool2d(x, 2) + F.adaptive_max_pool2d(x, 1), (1, 2, 6, 6)),
}


@pytest.mark.parametrize("case", sorted(_RESAMPLE_CASES))
def test_resample_pad_and_sorting_ops_match_torch_in_onnx_runtime(case):
    # interpolate (Resize with PyTorch's coordinate rules), reflect/replicate/circular padding,
    # cumsum, topk, sort, integer floor division, float remainder and std(keepdim=True).
    import onnxruntime as ort

    torch = pytest.importorskip("torch")
    fn, shape = _RESAMPLE_CASES[case]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)

    class Wrap(ember.nn.Module):
        def forward(self, t):
            return fn(ember.nn.functional, t)

    program = ember.onnx.export(Wrap(), (ember.tensor(x),))
    session = ort.InferenceSession(program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {session.get_inputs()[0].name: x})
    expected = fn(torch.nn.functional, torch.tensor(x)).numpy()
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected.astype(got.dtype), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["instance2d_affine", "instance1d", "batchnorm_no_running_stats"])
def test_batch_statistics_norms_match_torch_in_onnx_runtime(kind):
    # InstanceNorm and BatchNorm(track_running_stats=False) normalize by the batch's own statistics
    # (a training-mode batch norm without running stats, which had no translation).
    import onnxruntime as ort

    torch = pytest.importorskip("torch")
    build, shape = {
        "instance2d_affine": (lambda lib: lib.nn.InstanceNorm2d(4, affine=True), (2, 4, 3, 3)),
        "instance1d": (lambda lib: lib.nn.InstanceNorm1d(3), (2, 3, 5)),
        "batchnorm_no_running_stats": (lambda lib: lib.nn.BatchNorm2d(4, track_running_stats=False), (2, 4, 3, 3)),
    }[kind]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    wider = rng.standard_normal((3, *shape[1:])).astype(np.float32)
    module = build(ember).eval()
    program = ember.onnx.export(module, (ember.tensor(x),), input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    session = ort.InferenceSession(program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    reference = build(torch).eval()
    for data in (x, wider):
        (got,) = session.run(None, {"x": data})
        np.testing.assert_allclose(got, reference(torch.tensor(data)).detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("equation", ["bhqd,bhkd->bhqk", "bi,bj->bij", "bij,bjk->bik", "bnd,bd->bn"])
def test_einsum_runs_in_onnx_runtime_at_other_sizes(equation):
    # einsum's operands are as_strided views that only permute and add size-1 dims.
    import onnxruntime as ort

    torch = pytest.importorskip("torch")
    shapes = {"bhqd,bhkd->bhqk": ((2, 2, 3, 4), (2, 2, 5, 4)), "bi,bj->bij": ((3, 4), (3, 5)),
              "bij,bjk->bik": ((2, 3, 4), (2, 4, 5)), "bnd,bd->bn": ((2, 3, 4), (2, 4))}[equation]
    rng = np.random.default_rng(0)
    a, c = (rng.standard_normal(s).astype(np.float32) for s in shapes)

    class Contract(ember.nn.Module):
        def forward(self, x, y):
            return ember.einsum(equation, x, y)

    program = ember.onnx.export(Contract(), (ember.tensor(a), ember.tensor(c)), input_names=["x", "y"],
                                dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    session = ort.InferenceSession(program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    a5, c5 = (rng.standard_normal((5, *s[1:])).astype(np.float32) for s in shapes)
    (got,) = session.run(None, {"x": a5, "y": c5})
    np.testing.assert_allclose(got, torch.einsum(equation, torch.tensor(a5), torch.tensor(c5)).numpy(), rtol=1e-5,
                               atol=1e-5)


def _conv_bn_linear(lib):
    nn = lib.nn
    lib.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(), nn.Linear(12, 5)).eval()
    with lib.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(lib.linspace(-1, 1, p.numel()).reshape(p.shape) * (i + 1) / 4)
    return model


def test_export_params_false_makes_the_weights_graph_inputs(tmp_path):
    # PyTorch's legacy exporter (and the dynamo one with keep_initializers_as_inputs) lists the
    # weights as inputs named by their state-dict key and embeds none of their data; ONNX Runtime
    # fed the state dict gives the eager result. ember's folded transposes must not embed them either.
    import torch

    x = np.linspace(-2, 2, 64, dtype=np.float32).reshape(2, 2, 4, 4)
    results = {}
    for lib in (torch, ember):
        model = _conv_bn_linear(lib)
        path = str(tmp_path / f"{lib.__name__}.onnx")
        lib.onnx.export(model, (lib.tensor(x),), path, export_params=False, input_names=["x"],
                        keep_initializers_as_inputs=True, do_constant_folding=False, dynamo=False)
        proto = onnx.load(path)
        state = {k: v.numpy() for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
        assert not [i.name for i in proto.graph.initializer if i.name in state or i.name.split("_t_")[0] in state]
        inputs = [i.name for i in proto.graph.input]
        assert inputs[0] == "x" and set(state) <= set(inputs)
        import onnxruntime as ort

        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        feeds = {"x": x, **{name: state[name] for name in inputs[1:] if name in state}}
        results[lib.__name__] = session.run(None, feeds)[0]
    np.testing.assert_allclose(results["ember"], results["torch"], rtol=1e-5, atol=1e-6)


def test_export_params_false_on_the_dynamo_path_leaves_the_weights_out():
    # torch.onnx.export(dynamo=True, export_params=False) saves with include_initializers=False:
    # no weight initializer and no weight input (the caller attaches them later).
    program = ember.onnx.export(_conv_bn_linear(ember), (ember.randn(2, 2, 4, 4),), export_params=False)
    graph = program.model_proto.graph
    assert [i.name for i in graph.input] == ["input"]  # the program's placeholder name, as PyTorch's
    state = set(_conv_bn_linear(ember).state_dict())
    assert not [i.name for i in graph.initializer if i.name in state or i.name.split("_t_")[0] in state]


_TRANSLATED_PROGRAMS = {
    "normalize": lambda lib, x: lib.nn.functional.normalize(x, dim=-1),
    "normalize_p1": lambda lib, x: lib.nn.functional.normalize(x, p=1, dim=1),
    "norm_fro": lambda lib, x: x.norm() + x,
    "norm_inf": lambda lib, x: x.norm(float("inf"), dim=2) - x.norm(float("-inf"), dim=2),
    "norm_3": lambda lib, x: x.norm(3, dim=(1, 2)),
    "norm_0": lambda lib, x: (x * (x > 0)).norm(0, dim=2),
    "vector_norm": lambda lib, x: lib.linalg.vector_norm(x, dim=-1),
    "logsumexp": lambda lib, x: lib.logsumexp(x * 100, dim=(1, 2), keepdim=True) + x.logsumexp(-1).sum(),
    "any_all": lambda lib, x: (x > 0).any(-1, keepdim=True).float() + (x > -1).all(1, keepdim=True).float(),
    "any_everything": lambda lib, x: (x > 0).any().float() + x.all(-1).float().sum(),
    "scatter_scalar": lambda lib, x: lib.zeros_like(x).scatter(2, x.argmax(-1, keepdim=True), 1.0),
    "scatter_tensor": lambda lib, x: lib.zeros_like(x).scatter(1, x.argsort(1), x * 2),
    "scatter_add": lambda lib, x: lib.zeros(x.shape[0], 5, x.shape[2]).scatter_add(
        1, (x.abs() * 2).long().clamp(max=4), x),
    "one_hot": lambda lib, x: lib.nn.functional.one_hot(x.argmax(-1), 3).float(),
    "relu6_hardsigmoid": lambda lib, x: lib.nn.functional.relu6(x * 4) + lib.nn.functional.hardsigmoid(x * 3),
    "celu_threshold": lambda lib, x: lib.nn.functional.celu(x, 0.5) + lib.nn.functional.threshold(x, 0.1, 20.0),
    "log1p_expm1": lambda lib, x: lib.log1p(x.abs()) + lib.expm1(x),
    "xlogy_logaddexp": lambda lib, x: lib.xlogy(x.relu(), x.abs() + 0.5) + lib.logaddexp(x * 30, x * -20),
    "hypot_lerp": lambda lib, x: lib.hypot(x, x + 1) + lib.lerp(x, x * 2, 0.3),
    "addcmul_addcdiv": lambda lib, x: lib.addcmul(x, x, x, value=0.5) + lib.addcdiv(x, x, x.abs() + 1, value=0.3),
    "nan_to_num": lambda lib, x: lib.nan_to_num(lib.log(x), nan=1.0) + lib.nan_to_num(x / (x * 0)).clamp(-1, 1),
    "atan2": lambda lib, x: lib.atan2(x, x.flip(0)) + lib.atan2(x * (x > 0), lib.zeros_like(x)),
    "kl_batchmean": lambda lib, x: lib.nn.functional.kl_div(x.log_softmax(-1), x.softmax(-1), reduction="batchmean"),
}


@pytest.mark.parametrize("name", sorted(_TRANSLATED_PROGRAMS))
def test_reductions_and_pointwise_ops_translate(name):
    # F.normalize, norm(p), logsumexp, any/all, scatter/scatter_add, one_hot, relu6, hardsigmoid,
    # celu, threshold, log1p, xlogy, logaddexp, hypot, lerp, addcmul/addcdiv and nan_to_num had no
    # ONNX translation (one_hot even failed to trace; kl_div's batchmean divided by an int64 size);
    # ONNX Runtime at three batch/time sizes vs torch.
    import onnxruntime as ort
    import torch

    program = _TRANSLATED_PROGRAMS[name]

    class Net(ember.nn.Module):
        def forward(self, x):
            return program(ember, x)

    exported = ember.onnx.export(Net(), (ember.randn(2, 4, 3),), input_names=["x"],
                                 dynamic_axes={"x": {0: "b", 1: "t"}})
    session = ort.InferenceSession(exported.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for shape in ((2, 4, 3), (3, 5, 3), (1, 7, 3)):
        x = rng.standard_normal(shape).astype(np.float32)
        expect = program(torch, torch.tensor(x)).numpy()
        np.testing.assert_allclose(session.run(None, {"x": x})[0], expect, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["ce", "ce_weight_ignore", "ce_none", "nll_sum", "ce_spatial"])
def test_class_losses_translate_like_torch(name):
    # cross_entropy / nll_loss (ember's _class_nll) had no ONNX translation.
    import onnxruntime as ort
    import torch

    def program(lib):
        F = lib.nn.functional
        w = lib.tensor([0.5, 1.0, 2.0, 1.5])
        return {
            "ce": lambda x, t: F.cross_entropy(x, t),
            "ce_weight_ignore": lambda x, t: F.cross_entropy(x, t, weight=w, ignore_index=2),
            "ce_none": lambda x, t: F.cross_entropy(x, t, reduction="none", ignore_index=1),
            "nll_sum": lambda x, t: F.nll_loss(x.log_softmax(1), t, reduction="sum", weight=w),
            "ce_spatial": lambda x, t: F.cross_entropy(x.unsqueeze(-1).expand(-1, -1, 3),
                                                       t.unsqueeze(-1).expand(-1, 3)),
        }[name]

    fn = program(ember)

    class Net(ember.nn.Module):
        def forward(self, x, t):
            return fn(x, t)

    exported = ember.onnx.export(Net(), (ember.randn(5, 4), ember.tensor([0, 1, 2, 3, 1])), input_names=["x", "t"],
                                 dynamic_axes={"x": {0: "b"}, "t": {0: "b"}})
    session = ort.InferenceSession(exported.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    for n in (5, 7):
        x, t = rng.standard_normal((n, 4)).astype(np.float32), rng.integers(0, 4, n).astype(np.int64)
        expect = program(torch)(torch.tensor(x), torch.tensor(t)).numpy()
        np.testing.assert_allclose(session.run(None, {"x": x, "t": t})[0], expect, rtol=1e-5, atol=1e-6)


def test_class_nll_logsumexp_output_translates_when_read():
    """The op's fourth result (each row's log-sum-exp, saved for the backward) is pruned from the
    ONNX graph when unread (the cross_entropy models above); a graph that reads it gets
    ReduceLogSumExp: PyTorch's logsumexp (ignored rows too), NaN where the row max is infinite."""
    import onnxruntime as ort
    import torch

    class Net(ember.nn.Module):
        def forward(self, x, t):
            return ember.ops._class_nll(x, t, None, 2, False, False)[3]

    exported = ember.onnx.export(Net(), (ember.randn(5, 4), ember.tensor([0, 1, 2, 3, 1])), input_names=["x", "t"])
    session = ort.InferenceSession(exported.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32) * 4
    x[3, 1] = np.inf
    t = np.array([0, 1, 2, 3, 1])
    want = torch.logsumexp(torch.tensor(x), 1).numpy()
    want[3] = np.nan
    np.testing.assert_allclose(session.run(None, {"x": x, "t": t})[0], want, rtol=1e-5, atol=1e-6)
    ops = {n.op_type for n in exported.model_proto.graph.node}
    assert "ReduceLogSumExp" in ops
    plain = ember.onnx.export(ember.nn.CrossEntropyLoss(), (ember.randn(5, 4), ember.tensor([0, 1, 2, 3, 1])))
    assert "ReduceLogSumExp" not in {n.op_type for n in plain.model_proto.graph.node}


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_dynamic_sequence_axis_of_recurrent_layers_like_torch_legacy_exporter(kind, tmp_path):
    """dynamic_axes on the time axis of an LSTM/GRU: torch's legacy exporter keeps it dynamic (one
    ONNX LSTM/GRU node); ember's export does too (the layer op takes no per-step sizes)."""
    torch = pytest.importorskip("torch")
    from export_models import copy_weights

    def build(lib):
        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = lib.nn.Embedding(10, 6)
                self.rnn = getattr(lib.nn, kind)(6, 8, num_layers=2, batch_first=True, bidirectional=True)
                self.head = lib.nn.Linear(16, 3)

            def forward(self, ids):
                out = self.rnn(self.emb(ids))[0]
                return self.head(out[:, -1])

        return Net().eval()

    e_model, t_model = build(ember), build(torch)
    copy_weights(t_model, e_model)
    axes = {"ids": {0: "batch", 1: "seq"}, "out": {0: "batch"}}
    paths = {}
    for name, lib, model in (("ember", ember, e_model), ("torch", torch, t_model)):
        paths[name] = str(tmp_path / f"{name}.onnx")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.onnx.export(model, (lib.randint(0, 10, (2, 5)),), paths[name], input_names=["ids"],
                            output_names=["out"], dynamic_axes=axes, dynamo=False)
    for name, path in paths.items():
        dims = onnx.load(path).graph.input[0].type.tensor_type.shape.dim
        assert [d.dim_param for d in dims] == ["batch", "seq"], name
    import onnxruntime as ort

    sessions = {name: ort.InferenceSession(path) for name, path in paths.items()}
    for shape in [(2, 5), (4, 9), (1, 2)]:
        ids = np.random.randint(0, 10, shape).astype(np.int64)
        want = t_model(torch.from_numpy(ids)).detach().numpy()
        for name, s in sessions.items():
            np.testing.assert_allclose(s.run(None, {"ids": ids})[0], want, rtol=1e-4, atol=1e-5, err_msg=name)


def test_onnx_traced_recurrent_program_runs_and_differentiates_at_other_lengths():
    # the program ember.onnx traced gives the GRU op no per-step sizes: its kernels and backward
    # derive the steps from the rows
    model = ember.nn.GRU(4, 5, batch_first=True, bidirectional=True).eval()
    dims = ({0: ember.export.Dim("b"), 1: ember.export.Dim("s")},)
    program = ember.onnx.export(model, (ember.randn(2, 3, 4),), dynamic_shapes=dims).exported_program
    assert any(n.args[4] == [] for n in program.graph.nodes if "_gru_layer" in str(n.target))
    x = ember.randn(3, 7, 4, requires_grad=True)
    got = program.module()(x)[0]
    want = model(x)[0]
    ember.testing.assert_close(got, want)
    (g_got,) = ember.autograd.grad(got.sum(), x)
    (g_want,) = ember.autograd.grad(want.sum(), x)
    ember.testing.assert_close(g_got, g_want)


def test_symbolic_float_of_a_size_is_computed_in_the_model():
    # x / n ** 0.5 and x * (n / 4) with n dynamic: the graph computes the floats from the size
    # (torch.onnx.export(dynamo=True) exports the same program); checked at other sizes in ORT
    import onnxruntime as ort

    class Scaled(ember.nn.Module):
        def forward(self, x):
            return x / x.shape[0] ** 0.5 + x * (x.shape[0] / 4)

    buf = io.BytesIO()
    ember.onnx.export(Scaled(), (ember.randn(16, 3),), buf, input_names=["x"], dynamo=True,
                      dynamic_shapes={"x": {0: ember.export.Dim.AUTO}})
    session = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    for n in (9, 25):
        x = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
        (got,) = session.run(None, {"x": x})
        np.testing.assert_allclose(got, x / n ** 0.5 + x * (n / 4), rtol=1e-5, atol=1e-6)


def _item_programs(lib):
    class Stop(lib.nn.Module):  # a new unbacked size: clamp_slice_index
        def forward(self, x, k):
            return x[:k.item()] * 2

    class StopChecked(lib.nn.Module):  # Min(6, u0)
        def forward(self, x, k):
            n = k.item()
            lib._check(n >= 0)
            return x[:n] * 2

    class Start(lib.nn.Module):
        def forward(self, x, k):
            return x[k.item():] + 1

    class Sized(lib.nn.Module):  # an .item() used as a size
        def forward(self, x, k):
            n = k.item()
            lib._check(n >= 0)
            return lib.ones(n) * x.sum()

    return {"stop": Stop(), "stop_checked": StopChecked(), "start": Start(), "sized": Sized()}


@pytest.mark.parametrize("name", ["stop", "stop_checked", "start", "sized"])
def test_unbacked_item_sizes_run_in_onnx_runtime_like_torch(name):
    # .item() sizes (u0) had no ONNX translation ("cannot read a size from item"); torch 2.13's
    # dynamo exporter writes them, without the range checks. Both models run in ONNX Runtime.
    import contextlib

    import onnxruntime as ort
    import torch

    pytest.importorskip("onnxscript")
    x = np.arange(6, dtype=np.float32)
    results = []
    for lib in (ember, torch):
        buf = io.BytesIO()
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = lib.onnx.export(_item_programs(lib)[name], (lib.tensor(x), lib.tensor(3)), dynamo=True,
                                      input_names=["x", "k"])
        program.save(buf) if lib is ember else buf.write(program.model_proto.SerializeToString())
        sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
        results.append([sess.run(None, {"x": x, "k": np.array(k, dtype=np.int64)})[0].tolist()
                        for k in ((3, 0, 6, 9) if name == "sized" else (3, 0, 6, 9, -2))])
    assert results[0] == results[1]
