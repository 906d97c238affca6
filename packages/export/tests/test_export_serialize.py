"""ember.export.save/load: round trips, a golden file of schema 1.0, and loading that runs nothing."""

from __future__ import annotations

import dataclasses
import io
import json
import zipfile
from pathlib import Path

import pytest
from export_models import cnn, mini_gpt

import ember
from ember._src.device import META
from ember._src.dispatch import OPS, define
from ember._src.tensor import new_empty_tensor
from ember.export import Dim, SerializationError, export, load, register_dataclass, save
from ember.serialization import safetensors

GOLDEN = Path(__file__).parent / "golden"


def _roundtrip(ep):
    buf = io.BytesIO()
    save(ep, buf)
    buf.seek(0)
    return load(buf), buf.getvalue()


def test_mini_gpt_round_trip_runs_at_three_sizes(tmp_path):
    ember.manual_seed(0)
    model = mini_gpt(ember).eval()
    ep = export(model, (ember.randint(0, 50, (2, 8)),),
                dynamic_shapes={"idx": {0: Dim("batch", max=32), 1: Dim("seq", max=16)}})
    path = tmp_path / "gpt.ember_export"
    save(ep, path)
    loaded = load(path)
    assert [str(k) for k in loaded.range_constraints] == ["s0", "s1"]
    assert loaded.graph_signature == ep.graph_signature
    assert [n.op for n in loaded.graph.nodes] == [n.op for n in ep.graph.nodes]
    module = loaded.module()
    with ember.no_grad():
        for b, t in [(2, 8), (1, 3), (5, 16)]:
            idx = ember.randint(0, 50, (b, t))
            ember.testing.assert_close(module(idx), model(idx), rtol=1e-6, atol=1e-6)
        with pytest.raises(AssertionError, match="<= 32"):
            module(ember.randint(0, 50, (33, 4)))
    # The archive: a version, JSON and safetensors, no pickle anywhere.
    with zipfile.ZipFile(path) as z:
        assert sorted(z.namelist()) == ["ember_export/example_inputs.safetensors", "ember_export/program.json",
                                        "ember_export/version", "ember_export/weights.safetensors"]
        assert z.read("ember_export/version") == b"1.1"
        program = json.loads(z.read("ember_export/program.json"))
        weights = safetensors.load(z.read("ember_export/weights.safetensors"))
    assert program["schema"] == "ember.export" and program["schema_version"] == [1, 1]
    # Tied weights are stored once; the other name is an alias.
    assert program["tensor_aliases"] == {"head.weight": "tok.weight"}
    assert set(weights) | set(program["tensor_aliases"]) == set(ep.state_dict)


def test_train_mode_batchnorm_round_trip_keeps_buffer_mutation():
    model = cnn(ember).train()
    ep = export(model, (ember.randn(4, 1, 8, 8),), dynamic_shapes=({0: Dim("batch", min=2, max=16)},))
    loaded, _ = _roundtrip(ep)
    assert loaded.graph_signature.buffers_to_mutate == ep.graph_signature.buffers_to_mutate
    a, b = ep.module(), loaded.module()
    x = ember.randn(6, 1, 8, 8)
    ember.testing.assert_close(a(x), b(x))
    ember.testing.assert_close(a.get_submodule("1").running_var, b.get_submodule("1").running_var)


def test_identical_programs_give_identical_files():
    model = cnn(ember).eval()
    ep = export(model, (ember.randn(2, 1, 8, 8),))
    assert _roundtrip(ep)[1] == _roundtrip(ep)[1]


def _golden_model():
    model = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.ReLU(), ember.nn.Linear(4, 2))
    with ember.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(ember.arange(p.numel(), dtype=ember.float32).reshape(p.shape) / (7 + i) - 0.5)
    return model


def test_golden_file_of_schema_1_0_still_loads_and_runs():
    """golden/mlp_v1_0.ember_export was written by schema 1.0 (regenerate: python test_export_serialize.py)."""
    loaded = load(GOLDEN / "mlp_v1_0.ember_export")
    expected = safetensors.load((GOLDEN / "mlp_v1_0_expected.safetensors").read_bytes())
    module = loaded.module()
    ember.testing.assert_close(module(expected["input"]), expected["output"])
    assert repr(list(loaded.range_constraints.values())) == "[VR[1, 8]]"
    ember.testing.assert_close(_golden_model()(expected["input"]), expected["output"])


def _rewrite(data: bytes, edit) -> io.BytesIO:
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name in src.namelist():
            content = src.read(name)
            if name.endswith("program.json"):
                program = json.loads(content)
                edit(program)
                content = json.dumps(program).encode()
            z.writestr(name, content)
    out.seek(0)
    return out


def test_loading_resolves_only_ember_ops_and_the_allow_list():
    ep = export(_golden_model(), (ember.randn(2, 3),))
    _, data = _roundtrip(ep)

    def target(name):
        def edit(program):
            node = next(n for n in program["graph"]["nodes"] if n["op"] == "call_function")
            node["target"] = name
        return edit

    for bad in ("builtins.eval", "os.system", "ember.ops.no_such_op", "subprocess.run"):
        with pytest.raises(SerializationError, match="allow-list|not an op"):
            load(_rewrite(data, target(bad)))

    def sym(program):
        program["range_constraints"] = {"__import__('os').system('true')": {"min": 0, "max": 1}}

    with pytest.raises(SerializationError, match="unsupported construct"):
        load(_rewrite(data, sym))

    with pytest.raises(SerializationError, match="not an ember exported program"):
        load(io.BytesIO(b"PK\x05\x06" + b"\x00" * 18))
    newer = io.BytesIO()
    with zipfile.ZipFile(newer, "w") as z:
        z.writestr("ember_export/version", "2.0")
        z.writestr("ember_export/program.json", "{}")
    with pytest.raises(SerializationError, match="schema 2.0"):
        load(newer)


@dataclasses.dataclass
class _Pair:
    first: object
    second: object


register_dataclass(_Pair, serialized_type_name="test_export_serialize._Pair")


def test_registered_dataclass_inputs_and_outputs_round_trip():
    class Net(ember.nn.Module):
        def forward(self, pair):
            return _Pair(pair.first + pair.second, pair.first * 2)

    pair = _Pair(ember.randn(3, 2), ember.randn(3, 2))
    ep = export(Net(), (pair,))
    loaded, _ = _roundtrip(ep)
    got = loaded.module()(pair)
    assert isinstance(got, _Pair)
    ember.testing.assert_close(got.first, pair.first + pair.second)


def _define_custom_op():
    if "export_test_scale" in OPS:
        return OPS["export_test_scale"]
    op = define("export_test_scale(Tensor self, float factor) -> Tensor", ("pointwise",))
    op.kernel("cpu")(lambda x, factor: x * factor)

    def meta(x, factor):
        return new_empty_tensor(x._shape, x.dtype, META)

    op.kernels["meta"] = op.meta = meta
    return op


def test_custom_op_exports_as_one_node_and_round_trips():
    op = _define_custom_op()

    class Net(ember.nn.Module):
        def forward(self, x):
            return op(x, 2.5).relu()

    ep = export(Net(), (ember.randn(3, 4),), dynamic_shapes=({0: Dim("b")},))
    assert [n.target for n in ep.graph.nodes if n.op == "call_function"][0] is op
    loaded, _ = _roundtrip(ep)
    x = ember.randn(6, 4)
    ember.testing.assert_close(loaded.module()(x), (x * 2.5).relu())


def _write_golden() -> None:
    model = _golden_model()
    ep = export(model, (ember.randn(2, 3),), dynamic_shapes=({0: Dim("batch", min=1, max=8)},))
    save(ep, GOLDEN / "mlp_v1_0.ember_export")
    x = ember.arange(15, dtype=ember.float32).reshape(5, 3) / 4 - 1
    with ember.no_grad():
        data = safetensors.save({"input": x, "output": model(x)})
    (GOLDEN / "mlp_v1_0_expected.safetensors").write_bytes(data)


if __name__ == "__main__":
    _write_golden()


def test_weights_read_with_the_reference_safetensors_library():
    st = pytest.importorskip("safetensors.numpy")
    ep = export(cnn(ember).eval(), (ember.randn(2, 1, 8, 8),))
    _, data = _roundtrip(ep)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        weights = st.load(z.read("ember_export/weights.safetensors"))
    for name, tensor in ep.state_dict.items():
        assert (weights[name] == tensor.detach().numpy()).all()


def test_one_tensor_given_twice_as_example_inputs_round_trips_like_torch():
    # export(m, (x, x)): the example inputs hold one tensor twice. Saving wrote it once and loading
    # then found one leaf for two (a ValueError from tree_unflatten); torch 2.13 loads it with the
    # two example inputs still one tensor.
    import torch

    results = []
    for lib in (ember, torch):
        class Sum(lib.nn.Module):
            def forward(self, x, y):
                return x + y * 2

        x = lib.arange(4.0)
        ep = lib.export.export(Sum(), (x, x))
        buf = io.BytesIO()
        lib.export.save(ep, buf)
        buf.seek(0)
        loaded = lib.export.load(buf)
        (a, b), _ = loaded.example_inputs
        assert a is b
        results.append((a.tolist(), loaded.module()(x, x).tolist()))
    assert results[0] == results[1]


# ------------------------------------------------------------------ hostile files (session 18)


class _Evil:
    """A pickle that, if ever unpickled, runs a shell command creating ``_Evil.marker``."""

    marker = None

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


def _derived_program_bytes() -> bytes:
    class M(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = ember.nn.Linear(3, 3)
            self.register_buffer("b", ember.ones(3))

        def forward(self, x, y):
            return self.fc(ember.cat([x, y[1:]], 0)) + self.b

    b = Dim("b", max=30)
    ep = export(M(), (ember.randn(4, 3), ember.randn(5, 3)), dynamic_shapes=({0: b}, {0: b + 1}))
    return _roundtrip(ep)[1]


def _zip(members: dict) -> io.BytesIO:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, content in members.items():
            z.writestr(name, content)
    out.seek(0)
    return out


def test_truncated_and_corrupted_files_raise_serialization_error():
    import random

    data = _derived_program_bytes()
    assert load(io.BytesIO(data)) is not None
    for cut in list(range(0, len(data), max(1, len(data) // 40))) + [len(data) - 1]:
        with pytest.raises(SerializationError):
            load(io.BytesIO(data[:cut]))
    rng = random.Random(0)
    outcomes = set()
    for _ in range(60):  # random bytes changed: a CRC, a header or the JSON/safetensors break
        d = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            d[rng.randrange(len(d))] = rng.randrange(256)
        try:
            load(io.BytesIO(bytes(d)))
            outcomes.add("loaded")  # a byte the reader never checks (zip comment, padding)
        except SerializationError:
            outcomes.add("SerializationError")
    assert "SerializationError" in outcomes and outcomes <= {"SerializationError", "loaded"}


def test_a_zip_needing_an_unknown_extract_version_is_a_serialization_error():
    # zipfile raises NotImplementedError for it ("zip file version 14.7"): one damaged byte of a
    # central directory header
    data = bytearray(_derived_program_bytes())
    at = data.index(b"PK\x01\x02")
    data[at + 6] = 147  # "version needed to extract"
    with pytest.raises(SerializationError):
        load(io.BytesIO(bytes(data)))


@pytest.mark.parametrize("edit,match", [
    (lambda p: p.__setitem__("range_constraints", {"9**9**9**9": {"min": 0, "max": 1}}), "unsupported power"),
    (lambda p: p.__setitem__("range_constraints", {"10**100000000": {"min": 0, "max": 1}}), "unsupported power"),
    (lambda p: p.__setitem__("symbols", ["s0" + "+s0" * 5000]), "at most 4096"),
    (lambda p: p.__setitem__("runtime_guards", [["Equality", "(" * 300 + "s0" + ")" * 300, "1"]]), "does not parse"),
    (lambda p: p["state_dict_keys"].remove("fc.weight"), "PARAMETER 'fc.weight'"),
    (lambda p: p.__setitem__("module_call_graph", []), "no root entry"),
    (lambda p: p.__setitem__("signature", 7), "damaged"),
    (lambda p: p["graph"]["nodes"].pop(3), "damaged"),
])
def test_edited_program_json_raises_serialization_error_quickly(edit, match):
    """A well-formed zip whose program.json was edited: each a SerializationError naming the
    cause, none hangs (9**9**9**9 is refused, not computed) or leaks a KeyError/RecursionError."""
    with pytest.raises(SerializationError, match=match):
        load(_rewrite(_derived_program_bytes(), edit))


def test_pickle_payloads_are_never_unpickled(tmp_path):
    import pickle

    _Evil.marker = str(tmp_path / "pwned")
    payload = pickle.dumps(_Evil())
    with zipfile.ZipFile(io.BytesIO(_derived_program_bytes())) as z:
        members = {n: z.read(n) for n in z.namelist()}
    cases = [
        {"ember_export/version": b"1.0", "ember_export/program.json": payload},
        {**members, "ember_export/weights.safetensors": payload},
        {"archive/data.pkl": payload, "archive/version": b"3"},
    ]
    for case in cases:
        with pytest.raises(SerializationError):
            load(_zip(case))
        with pytest.raises(SerializationError):
            ember.jit.load(_zip(case))
    with pytest.raises(SerializationError, match="not a zip"):
        load(io.BytesIO(payload))
    with pytest.raises(SerializationError, match="never unpickles"):
        load(_zip({"archive/data.pkl": payload}))
    assert not (tmp_path / "pwned").exists()


def test_pytorch_archives_are_refused_with_a_clear_error(tmp_path):
    import warnings

    import torch

    m = torch.nn.Linear(2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.export.save(torch.export.export(m, (torch.randn(1, 2),)), tmp_path / "t.pt2")
        torch.jit.save(torch.jit.script(m), tmp_path / "t.jit")
    with pytest.raises(SerializationError, match="PyTorch .pt2 archive"):
        load(tmp_path / "t.pt2")
    with pytest.raises(SerializationError, match="never unpickles"):
        ember.jit.load(tmp_path / "t.jit")
    (tmp_path / "t.onnx").write_bytes(b"\x08\x07\x12\x07pytorch")  # an ONNX protobuf's first bytes
    with pytest.raises(SerializationError, match="not a zip"):
        load(tmp_path / "t.onnx")
    # not a zip at all: also the zipfile.BadZipFile torch.export.load raises there
    for lib_load in (load, torch.export.load):
        with pytest.raises(zipfile.BadZipFile):
            lib_load(io.BytesIO(b"not a zip archive at all"))
