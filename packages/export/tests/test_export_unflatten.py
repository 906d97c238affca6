"""``unflatten(ep)`` against torch.export.unflatten 2.13: the same module tree of
InterpreterModules, each submodule callable alone with its eager module's result, a submodule
swapped for another module changes the root's result as it would the eager module's, and
buffer updates happen in the submodule that computes them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from export_models import copy_weights, mini_gpt

import ember
from ember.export import Dim, export, unflatten


def _np(t):
    return t.detach().numpy()


def _two_blocks(lib):
    class Block(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(4, 4)
            self.register_buffer("scale", lib.ones(4) * 2)

        def forward(self, x, y=None):
            h = lib.relu(self.fc(x)) * self.scale
            return h if y is None else h + y

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer1, self.layer2, self.head = Block(), Block(), lib.nn.Linear(4, 2)

        def forward(self, x):
            return self.head(self.layer2(self.layer1(x), x))

    return Net()


def _shared(lib):
    class Shared(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.out = lib.nn.Linear(4, 4), lib.nn.Linear(4, 1)

        def forward(self, x):
            return self.out(self.fc(self.fc(x)))

    return Shared()


def _seq_bn(lib):
    return lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.BatchNorm1d(8), lib.nn.ReLU(), lib.nn.Linear(8, 2))


def _pair(build):
    t_model = build(torch)
    e_model = build(ember)
    copy_weights(t_model, e_model)
    return e_model, t_model


def _tree(module):
    return [(name, type(m).__name__) for name, m in module.named_modules() if name]


@pytest.mark.parametrize("build", [_two_blocks, _shared, _seq_bn])
def test_tree_and_submodule_calls_match_torch(build):
    e_model, t_model = _pair(build)
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    dyn = ({0: Dim("b")},)
    eu = unflatten(export(e_model, (ember.tensor(x),), dynamic_shapes=dyn))
    tu = torch.export.unflatten(torch.export.export(t_model, (torch.tensor(x),),
                                                    dynamic_shapes=({0: torch.export.Dim("b")},)))
    assert _tree(eu) == _tree(tu)
    x7 = np.random.default_rng(1).standard_normal((7, 4)).astype(np.float32)
    np.testing.assert_allclose(_np(eu(ember.tensor(x7))), _np(tu(torch.tensor(x7))), rtol=1e-5, atol=1e-6)
    for name, sub in tu.named_children():
        if name == "layer2":  # two inputs: test_submodule_with_two_inputs_and_nested_child
            continue
        width = next(p for p in sub.parameters()).shape[-1] if list(sub.parameters()) else 8
        arg = np.random.default_rng(2).standard_normal((6, width)).astype(np.float32)
        want = sub(torch.tensor(arg))
        got = getattr(eu, name)(ember.tensor(arg))
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-5, atol=1e-6, err_msg=name)


def test_submodule_with_two_inputs_and_nested_child():
    e_model, t_model = _pair(_two_blocks)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    eu = unflatten(export(e_model, (ember.tensor(x),)))
    tu = torch.export.unflatten(torch.export.export(t_model, (torch.tensor(x),)))
    a, b = ember.tensor(x), ember.tensor(x[::-1].copy())
    np.testing.assert_allclose(_np(eu.layer2(a, b)), _np(tu.layer2(torch.tensor(x), torch.tensor(x[::-1].copy()))),
                               rtol=1e-6, atol=1e-6)
    # without a preserved signature the inputs come in the order the program defined them (x, then
    # layer1's output), as PyTorch's InterpreterModule takes them
    np.testing.assert_allclose(_np(eu.layer2(a, b)), _np(e_model.layer2(b, a)), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(_np(eu.layer1.fc(a)), _np(e_model.layer1.fc(a)), rtol=1e-6, atol=1e-6)
    assert "call_module" in {n.op for n in eu.graph.nodes}


def test_swapping_a_submodule_in():
    e_model, t_model = _pair(_two_blocks)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    eu = unflatten(export(e_model, (ember.tensor(x),)))
    tu = torch.export.unflatten(torch.export.export(t_model, (torch.tensor(x),)))

    def ones_block(lib):
        class Ones(lib.nn.Module):
            def forward(self, x):
                return x * 0 + 1

        return Ones()

    eu.layer1, tu.layer1 = ones_block(ember), ones_block(torch)
    np.testing.assert_allclose(_np(eu(ember.tensor(x))), _np(tu(torch.tensor(x))), rtol=1e-6, atol=1e-6)
    e_model.layer1 = ones_block(ember)
    np.testing.assert_allclose(_np(eu(ember.tensor(x))), _np(e_model(ember.tensor(x))), rtol=1e-6, atol=1e-6)


def test_batch_norm_called_alone_updates_its_running_stats():
    e_model, t_model = _pair(_seq_bn)
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    eu = unflatten(export(e_model, (ember.tensor(x),)))
    tu = torch.export.unflatten(torch.export.export(t_model, (torch.tensor(x),)))
    h = np.random.default_rng(3).standard_normal((5, 8)).astype(np.float32)
    getattr(eu, "1")(ember.tensor(h))
    getattr(tu, "1")(torch.tensor(h))
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(_np(getattr(getattr(eu, "1"), name)), _np(getattr(getattr(tu, "1"), name)),
                                   rtol=1e-6, err_msg=name)


def test_mini_gpt_blocks_callable_alone():
    # PyTorch's blocks.1 takes the sequence length as a second input here (its graph reads it from
    # idx); ember's reads it from the block's own input, so the block runs alone
    ember.manual_seed(0)
    model = mini_gpt(ember).eval()
    idx = ember.randint(0, 50, (2, 8))
    eu = unflatten(export(model, (idx,), dynamic_shapes={"idx": {0: Dim("batch"), 1: Dim("seq", max=16)}}))
    idx2 = ember.randint(0, 50, (3, 5))
    with ember.no_grad():
        ember.testing.assert_close(eu(idx2), model(idx2))
        h = ember.randn(3, 5, 32)
        ember.testing.assert_close(eu.blocks[1](h) if hasattr(eu.blocks, "__getitem__") else
                                   getattr(eu.blocks, "1")(h), model.blocks[1](h))
        ember.testing.assert_close(eu.ln(h), model.ln(h))


def _cond_inside(lib):
    class Inner(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(4, 4)

        def forward(self, x):
            return lib.cond(x.sum() > 0, lambda x: self.fc(x).sin(), lambda x: x.cos(), (x,))

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner, self.out = Inner(), lib.nn.Linear(4, 2)

        def forward(self, x):
            return self.out(self.inner(x))

    return Net()


@pytest.mark.parametrize("decompose", [False, True])
def test_cond_inside_a_submodule_runs_alone(decompose):
    e_model, t_model = _pair(_cond_inside)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    ep = export(e_model, (ember.tensor(x),), dynamic_shapes=({0: Dim("b")},))
    tp = torch.export.export(t_model, (torch.tensor(x),), dynamic_shapes=({0: torch.export.Dim("b")},))
    eu = unflatten(ep.run_decompositions() if decompose else ep)
    tu = torch.export.unflatten(tp.run_decompositions() if decompose else tp)
    # (the branch graphs are children of the submodule, as PyTorch's: their class names and, without
    # run_decompositions, their order differ)
    assert sorted(n for n, _ in _tree(eu)) == sorted(n for n, _ in _tree(tu))
    assert [t for n, t in _tree(eu) if "_graph_" not in n] == [t for n, t in _tree(tu) if "_graph_" not in n]
    for v in (x, -np.abs(x), np.abs(x[:2])):
        np.testing.assert_allclose(_np(eu.inner(ember.tensor(v))), _np(tu.inner(torch.tensor(v))), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(_np(eu(ember.tensor(v))), _np(tu(torch.tensor(v))), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ preserve_module_call_signature


def _preserved(lib):
    class Sub(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = lib.nn.Parameter(lib.ones(4) * 1.5)

        def forward(self, x, k, unused, *, scale=None):
            return {"a": x * self.w * k + scale, "b": (x.sum(), x)}

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.sub = lib.nn.Linear(4, 4), Sub()

        def forward(self, x, y):
            out = self.sub(self.lin(x), 3, y, scale=y * 2)
            return out["a"] + out["b"][1], out["b"][0]

    return Net()


def _other_sub(lib):
    class Sub2(lib.nn.Module):
        def forward(self, x, k, unused, *, scale=None):
            return {"a": x - unused * k, "b": (x.mean(), scale)}

    return Sub2()


def _sig_text(entry):
    sig = entry.signature
    if sig is None:
        return None
    return ([repr(a) for a in sig.inputs], [repr(a) for a in sig.outputs], repr(sig.in_spec), repr(sig.out_spec))


def test_preserved_signature_recorded_as_torch():
    e_model, t_model = _pair(_preserved)
    x, y = np.random.default_rng(3).standard_normal((2, 2, 4)).astype(np.float32)
    t_ep = torch.export.export(t_model, (torch.tensor(x), torch.tensor(y)), preserve_module_call_signature=("sub",))
    e_ep = export(e_model, (ember.tensor(x), ember.tensor(y)), preserve_module_call_signature=("sub",))
    t_sigs = {e.fqn: _sig_text(e) for e in t_ep.module_call_graph if e.fqn}
    e_sigs = {e.fqn: _sig_text(e) for e in e_ep.module_call_graph if e.fqn}
    assert t_sigs["sub"] is not None and "ConstantArgument(name='', value=3)" in t_sigs["sub"][0]
    assert e_sigs == t_sigs
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        export(e_model, (ember.tensor(x), ember.tensor(y)), preserve_module_call_signature=("nope",))


# ember's own calls read the specs through the API that does not warn (children_specs is deprecated)
@pytest.mark.filterwarnings("error:.*children_specs.*:FutureWarning")
def test_preserved_submodule_keeps_its_calling_convention_and_swaps_as_torch(tmp_path):
    e_model, t_model = _pair(_preserved)
    x, y = np.random.default_rng(4).standard_normal((2, 2, 4)).astype(np.float32)
    tx, ty, ex, ey = torch.tensor(x), torch.tensor(y), ember.tensor(x), ember.tensor(y)
    t_ep = torch.export.export(t_model, (tx, ty), preserve_module_call_signature=("sub",))
    e_ep = export(e_model, (ex, ey), preserve_module_call_signature=("sub",))
    ember.export.save(e_ep, tmp_path / "p.pt2")  # the signature survives save/load
    for e_u in (unflatten(e_ep), unflatten(ember.export.load(tmp_path / "p.pt2"))):
        t_u = torch.export.unflatten(t_ep)
        assert type(e_u.sub).__name__ == type(t_u.sub).__name__ == "InterpreterModule"
        # called alone with the original arguments (keyword, constant and unused one included)
        t_alone = t_u.sub(tx, 3, ty, scale=ty)
        e_alone = e_u.sub(ex, 3, ey, scale=ey)
        np.testing.assert_allclose(_np(e_alone["a"]), _np(t_alone["a"]), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(_np(e_alone["b"][0]), _np(t_alone["b"][0]), rtol=1e-5)
        np.testing.assert_allclose(_np(e_u(ex, ey)[0]), _np(t_u(tx, ty)[0]), rtol=1e-5)
        # another module with the same signature takes its place, as in torch
        t_u.set_submodule("sub", _other_sub(torch))
        e_u.set_submodule("sub", _other_sub(ember))
        t_swapped = t_u(tx, ty)
        for e_out, t_out in zip(e_u(ex, ey), t_swapped):
            np.testing.assert_allclose(_np(e_out), _np(t_out), rtol=1e-5, atol=1e-6)
        assert not np.allclose(_np(t_swapped[0]), _np(t_ep.module()(tx, ty)[0]))  # the swap shows
    with pytest.raises(TypeError, match="preserved signature"):
        unflatten(e_ep).sub(ex, 3)


def test_preserved_signature_survives_run_decompositions_as_torch():
    e_model, t_model = _pair(_preserved)
    x, y = np.random.default_rng(5).standard_normal((2, 2, 4)).astype(np.float32)
    tx, ty, ex, ey = torch.tensor(x), torch.tensor(y), ember.tensor(x), ember.tensor(y)
    t_ep = torch.export.export(t_model, (tx, ty), preserve_module_call_signature=("sub",)).run_decompositions()
    e_ep = export(e_model, (ex, ey), preserve_module_call_signature=("sub",)).run_decompositions()
    assert [e.fqn for e in e_ep.module_call_graph] == [e.fqn for e in t_ep.module_call_graph]
    (e_sig,) = [e.signature for e in e_ep.module_call_graph if e.fqn == "sub"]
    (t_sig,) = [e.signature for e in t_ep.module_call_graph if e.fqn == "sub"]
    assert [type(a).__name__ for a in e_sig.inputs + e_sig.outputs] == \
        [type(a).__name__ for a in t_sig.inputs + t_sig.outputs]
    names = {n.name for n in e_ep.graph.nodes}
    assert all(a.name in names for a in e_sig.inputs + e_sig.outputs if hasattr(a, "name") and a.name)
    t_u, e_u = torch.export.unflatten(t_ep), unflatten(e_ep)
    t_u.set_submodule("sub", _other_sub(torch))
    e_u.set_submodule("sub", _other_sub(ember))
    for e_out, t_out in zip(e_u(ex, ey), t_u(tx, ty)):
        np.testing.assert_allclose(_np(e_out), _np(t_out), rtol=1e-5, atol=1e-6)


def _offset_pair(lib):
    class Pair(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = lib.nn.Linear(3, 3)

        def forward(self, x, y):
            return self.a(x)[1:] + y

    return Pair()


def test_unflattened_module_checks_inputs_with_torchs_texts():
    # torch's unflatten checks a call with _check_input_constraints_for_graph (RuntimeError
    # "Expected input at *args[0].shape[0] ..."), not ep.module()'s "Guard failed" AssertionError.
    # The program also has a slice by a size (x[1:] of an s0 + 1 dim): unflatten crashed on the
    # int argument of its size arithmetic.
    import re

    calls = [lambda L: (L.ones(5, 3), L.ones(5, 3)), lambda L: (L.ones(12, 3), L.ones(11, 3)),
             lambda L: (L.ones(3, 3), L.ones(2, 3)), lambda L: (L.ones(5, 3, 1), L.ones(4, 3)),
             lambda L: (L.ones(5, 3), 3), lambda L: (L.ones(5, 4), L.ones(4, 3)),
             lambda L: (L.ones(7, 3), L.ones(6, 3))]
    found = []
    for lib in (ember, torch):
        n = lib.export.Dim("n", min=3, max=10)
        ep = lib.export.export(_offset_pair(lib), (lib.ones(5, 3), lib.ones(4, 3)), dynamic_shapes=({0: n + 1}, {0: n}))
        u = lib.export.unflatten(ep)
        got = []
        for call in calls:
            try:
                got.append(list(u(*call(lib)).shape))
            except RuntimeError as exc:  # symbol names and the module's name differ
                got.append(re.sub(r"s\d+", "s", str(exc)).replace("torch.Size", "ember.Size"))
        found.append(got)
    assert found[0] == found[1]


def test_torch_submodule_import_paths_exist():
    """``from torch.export.graph_signature import InputKind`` and the like, as programs write them;
    ``ember.export.unflatten`` stays the function (as ``torch.export.unflatten``)."""
    import importlib

    for name, names in [("export.dynamic_shapes", ["Dim", "dims", "AdditionalInputs"]),
                        ("export.graph_signature", ["InputKind", "OutputKind", "InputSpec", "TensorArgument",
                                                    "ExportGraphSignature"]),
                        ("export.exported_program", ["ExportedProgram", "ModuleCallSignature"]),
                        ("export.unflatten", ["UnflattenedModule", "InterpreterModule", "FlatArgsAdapter"])]:
        ours, theirs = importlib.import_module("ember." + name), importlib.import_module("torch." + name)
        for n in names:
            assert hasattr(theirs, n) and getattr(ours, n) is getattr(ember.export, n, getattr(ours, n)), (name, n)
    assert callable(ember.export.unflatten) and callable(torch.export.unflatten)
    errors = importlib.import_module("ember.onnx.errors")
    assert issubclass(errors.OnnxExporterError, RuntimeError)
    assert errors.OnnxExporterError is ember.onnx.OnnxExporterError
