"""Interpreter and Transformer subclasses from PyTorch's documentation, run on torch.fx (oracle)
and ember.fx."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.fx
from fx_test_helpers import assert_close, copy_weights, full_structure, to_ember, to_torch

import ember
import ember.fx

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


def _relu_plus_sigmoid(lib):
    def f(v):
        return lib.relu(v) + lib.sigmoid(v)
    return f


def test_transformer_override_finds_targets_by_identity_like_torch():
    # ``target is torch.relu`` inside a Transformer override (ember's functions are recording
    # stand-ins while transform() runs: the override must see the one the name holds then)
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    results = []
    for lib, fx, convert in FRAMEWORKS:
        class NegRelu(fx.Transformer):
            def call_function(self, target, args, kwargs, lib=lib):
                if target is lib.relu:
                    return lib.neg(super().call_function(target, args, kwargs))
                return super().call_function(target, args, kwargs)

        gm = fx.symbolic_trace(_relu_plus_sigmoid(lib))
        transformed = NegRelu(gm).transform()
        results.append((transformed, transformed(convert(x))))
    (tgm, tout), (egm, eout) = results
    assert full_structure(egm) == full_structure(tgm)
    assert "neg" in egm.code
    assert_close(eout, tout)


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


def test_transformer_carries_source_meta_to_new_nodes():
    tracer = ember.fx.Tracer()
    tracer.record_stack_traces = True

    def fn(x):
        return ember.sigmoid(x) * 2

    graph = tracer.trace(fn)
    gm = ember.fx.GraphModule(tracer.root, graph)
    sigmoid = next(n for n in gm.graph.nodes if n.target is ember.sigmoid)
    sigmoid.meta["custom"] = {"tag": 1}
    sigmoid.meta["val"] = "not carried: it describes the old value"

    class SigmoidToTanh(ember.fx.Transformer):
        def call_function(self, target, args, kwargs):
            if target == ember.sigmoid:
                return ember.tanh(*args) + 0  # two new nodes from one old node
            return super().call_function(target, args, kwargs)

    new = SigmoidToTanh(gm).transform()
    tanh, add = [n for n in new.graph.nodes if n.op == "call_function"][:2]
    assert tanh.target is ember.tanh and "fn" in tanh.stack_trace
    for node in (tanh, add):
        assert node.meta["stack_trace"] == sigmoid.meta["stack_trace"]
        assert node.meta["custom"] == {"tag": 1} and "val" not in node.meta
        assert node.meta["from_node"] == [("sigmoid", "")]
    x = ember.tensor([0.5])
    assert_close(new(x), ember.tanh(x) * 2)
    assert not ember.fx.traceback.has_preserved_node_meta()


def test_interpreter_run_inside_compile_passes_list_arguments():
    # An Interpreter hands call_function its list arguments as fx's immutable_list; the
    # compiled trace must read them as lists (cat's tensors), as torch.compile does.
    def make(lib):
        def fn(x):
            return lib.cat([x.sin(), x.cos()], 0) * 2

        return fn

    results = []
    for lib, fx, _ in FRAMEWORKS:
        gm = fx.symbolic_trace(make(lib))
        compiled = lib.compile(lambda x, gm=gm, fx=fx: fx.Interpreter(gm).run(x), backend="eager")
        results.append(compiled(lib.tensor(_rand(2, 3))).numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6, atol=1e-6)
