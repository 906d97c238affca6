"""symbolic_trace/Tracer on ember modules and functions, against torch.fx on the same program.

Each program is written once as a function of the framework (``lib`` is ``torch`` or
``ember``), the way a PyTorch program runs after ``import ember as torch``.
"""

from __future__ import annotations

import math
from math import sqrt as fx_sqrt

import numpy as np
import pytest
import torch
import torch.fx
from fx_test_helpers import assert_close, copy_weights, full_structure, structure, to_ember, to_torch

import ember
import ember.fx
from ember._src import torch_function
from ember.fx.proxy import TraceError


def fx_helper_scale(x, factor):
    # Called with a Proxy this would be traced through; wrap() keeps it one node.
    return x * factor


torch.fx.wrap("fx_helper_scale")
ember.fx.wrap("fx_helper_scale")

FRAMEWORKS = ((torch, torch.fx, to_torch), (ember, ember.fx, to_ember))


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def run_both(make_model, *inputs, concrete_args=None, tracer_cls=None):
    """Traces the same program with torch.fx and ember.fx; returns the two GraphModules and outputs."""
    results = []
    torch_model = None
    for lib, fx, convert in FRAMEWORKS:
        model = make_model(lib)
        if isinstance(model, lib.nn.Module):
            if torch_model is None:
                torch_model = model
            else:
                copy_weights(torch_model, model)
        if tracer_cls is None:
            gm = fx.symbolic_trace(model, concrete_args=concrete_args)
        else:
            tracer = tracer_cls(fx, lib)()
            graph = tracer.trace(model, concrete_args)
            gm = fx.GraphModule(tracer.root, graph)
        args = [convert(a) if isinstance(a, np.ndarray) else a for a in inputs]
        results.append((gm, gm(*args), model(*args)))
    return results


def test_sequential_of_linear_and_relu():
    def make(lib):
        return lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.ReLU(), lib.nn.Linear(8, 2))

    (tgm, tout, _), (egm, eout, eager) = run_both(make, _rand(5, 4))
    assert full_structure(egm) == full_structure(tgm)
    assert [n.op for n in egm.graph.nodes] == ["placeholder", "call_module", "call_module", "call_module", "output"]
    assert egm.code == tgm.code  # no framework names in this one
    assert_close(eout, tout)
    assert_close(eout, eager)
    assert sorted(egm.state_dict()) == sorted(tgm.state_dict())


def _custom_module(lib):
    F = lib.nn.functional

    class Block(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(6, 6)
            self.scale = lib.nn.Parameter(lib.ones(6) * 0.5)
            self.register_buffer("shift", lib.arange(6.0) / 10)

        def forward(self, x, y):
            h = F.relu(self.lin(x)) * self.scale + self.shift
            h = h.transpose(0, 1).contiguous().view(-1)
            z = lib.cat([h, y.flatten()], dim=0)
            n = x.shape[0]
            return lib.tanh(z[: n * 6]).sum(dim=0, keepdim=True), x.size(1)

    return Block()


def test_custom_module_with_functions_methods_parameters_and_buffers():
    (tgm, tout, _), (egm, eout, eager) = run_both(_custom_module, _rand(3, 6), _rand(2, 2, seed=1))
    assert full_structure(egm, kwargs=False) == full_structure(tgm, kwargs=False)
    assert "relu = ember.relu(lin)" in egm.code  # F.relu is ember.relu
    assert_close(eout[0], tout[0])
    assert eout[1] == tout[1] == 6
    assert_close(eout[0], eager[0])


def _branchy(lib):
    class Branchy(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(3, 3)

        def forward(self, x, mode="relu", bias=None):
            y = self.lin(x)
            if mode == "relu":
                y = lib.relu(y)
            else:
                y = lib.sigmoid(y)
            if bias is not None:
                y = y + bias
            return y

    return Branchy()


@pytest.mark.parametrize("mode", ["relu", "sigmoid"])
def test_control_flow_through_concrete_args(mode):
    concrete = {"mode": mode, "bias": None}
    (tgm, tout, _), (egm, eout, _) = run_both(_branchy, _rand(2, 3), mode, None, concrete_args=concrete)
    assert_close(eout, tout)

    def computing(gm):
        # torch.fx guards with eq + torch._assert, ember.fx with one _assert_equal call.
        return [key for key in structure(gm)
                if "assert" not in key[1] and key[0] != "placeholder" and key[1] != "operator.eq"]

    assert computing(egm) == computing(tgm)
    assert ("call_function", mode) in structure(egm)
    # The specialised arguments stay in the signature and are checked.
    x = to_ember(_rand(2, 3))
    assert_close(egm(x, mode, None), eout)
    with pytest.raises(AssertionError, match="has been specialized"):
        egm(x, "other", None)


def test_control_flow_on_a_proxy_raises_trace_error():
    def make(lib):
        def fn(x):
            if x.sum() > 0:
                return x
            return -x

        return fn

    for lib, fx, _ in FRAMEWORKS:
        with pytest.raises(fx.proxy.TraceError, match="cannot be used as inputs to control flow"):
            fx.symbolic_trace(make(lib))
    assert issubclass(TraceError, ValueError)


def test_iterating_and_len_of_a_proxy_raise_like_torch():
    def loop(x):
        total = 0
        for row in x:
            total = total + row
        return total

    def length(x):
        return len(x)

    for _, fx, _ in FRAMEWORKS:
        with pytest.raises(fx.proxy.TraceError, match="cannot be iterated"):
            fx.symbolic_trace(loop)
        with pytest.raises(RuntimeError, match="'len' is not supported in symbolic tracing"):
            fx.symbolic_trace(length)


def test_unpacking_a_proxy_is_allowed():
    def unpack(x):
        a, b = x
        return a - b

    outs = []
    for _, fx, convert in FRAMEWORKS:
        gm = fx.symbolic_trace(unpack)
        outs.append((gm, gm(convert(_rand(2, 3)))))
    assert full_structure(outs[1][0]) == full_structure(outs[0][0])
    assert_close(outs[1][1], outs[0][1])


def _leafy(lib):
    class Gate(lib.nn.Module):
        def forward(self, x):
            return x * lib.sigmoid(x)

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = Gate()
            self.norm = lib.nn.LayerNorm(4)

        def forward(self, x):
            return self.norm(self.gate(x) + 1)

    return Net()


def _gate_leaf_tracer(fx, lib):
    class GateIsLeaf(fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return type(m).__name__ == "Gate" or super().is_leaf_module(m, qualname)

    return GateIsLeaf


def test_default_leaves_and_custom_leaf_modules():
    (tgm, tout, _), (egm, eout, _) = run_both(_leafy, _rand(3, 4))
    assert full_structure(egm) == full_structure(tgm)
    assert ("call_module", "norm") in structure(egm) and ("call_function", "sigmoid") in structure(egm)
    assert_close(eout, tout, atol=1e-5)
    (tgm, tout, _), (egm, eout, _) = run_both(_leafy, _rand(3, 4), tracer_cls=_gate_leaf_tracer)
    assert full_structure(egm) == full_structure(tgm)
    assert ("call_module", "gate") in structure(egm)
    assert_close(eout, tout, atol=1e-5)


def test_wrap_and_autowrapped_math():
    def make(lib):
        def fn(x):
            y = fx_helper_scale(x, 3.0)
            return y + fx_sqrt(x.shape[0]) + math.pi

        return fn

    (tgm, tout, _), (egm, eout, _) = run_both(make, _rand(4, 2))
    assert full_structure(egm) == full_structure(tgm)
    assert ("call_function", "fx_helper_scale") in structure(egm)
    assert ("call_function", "sqrt") in structure(egm)
    assert_close(eout, tout)
    wrapped = next(n for n in egm.graph.nodes if n.target is fx_helper_scale)
    assert wrapped.meta.get("is_wrapped") is True


def test_wrap_must_be_called_at_module_scope():
    with pytest.raises(NotImplementedError, match="top level of a module"):
        ember.fx.wrap("fx_helper_scale")


def test_tensor_constants_become_attributes():
    def make(lib):
        def fn(x):
            return lib.ones(3) + x

        return fn

    (tgm, tout, _), (egm, eout, _) = run_both(make, _rand(2, 3))
    assert_close(eout, tout)
    if torch_function.is_enabled():
        # Tensor.__add__ of the constant reaches Proxy.__torch_function__ as Tensor.add: a
        # call_method, as in torch.fx.
        assert full_structure(egm) == full_structure(tgm)
        assert "_tensor_constant0.add(x)" in egm.code
    else:
        # The protocol is off (no Proxy was made outside a trace yet): the op it dispatched to.
        assert [n.op for n in egm.graph.nodes] == ["placeholder", "get_attr", "call_function", "output"]
        assert "ember.ops.add(_tensor_constant0, x)" in egm.code
    assert hasattr(egm, "_tensor_constant0") and "_tensor_constant0" in egm.state_dict()


def test_varargs_and_kwargs_placeholders():
    def fn(*args, **kw):
        return args[0] + kw["a"]

    gms = [fx.symbolic_trace(fn) for _, fx, _ in FRAMEWORKS]
    assert full_structure(gms[1]) == full_structure(gms[0])
    assert gms[1].code == gms[0].code
    t = ember.ones(2)
    assert gms[1](t, a=t).tolist() == [2.0, 2.0]


def test_record_stack_traces():
    tracer = ember.fx.Tracer()
    tracer.record_stack_traces = True

    def fn(x):
        return ember.relu(x) + 1

    graph = tracer.trace(fn)
    relu = next(n for n in graph.nodes if n.target is ember.relu)
    assert "test_fx_symbolic_trace.py" in relu.stack_trace and "in fn" in relu.stack_trace
    gm = ember.fx.GraphModule(tracer.root, graph)
    assert "test_fx_symbolic_trace.py" in gm.print_readable(print_output=False)


def test_trace_restores_patched_functions():
    relu, linear, call = ember.relu, ember.nn.functional.linear, ember.nn.Module.__call__
    with pytest.raises(TraceError):
        ember.fx.symbolic_trace(lambda x: ember.relu(x) if x else x)
    assert ember.relu is relu and ember.nn.functional.linear is linear and ember.nn.Module.__call__ is call
    assert not ember.fx.is_fx_tracing()


def test_traced_graph_module_trains_like_the_original():
    torch_model = _custom_module(torch)
    model = _custom_module(ember)
    copy_weights(torch_model, model)
    gm = ember.fx.symbolic_trace(model)
    x, y = to_ember(_rand(3, 6)), to_ember(_rand(2, 2, seed=1))
    out, _ = gm(x, y)
    out.sum().backward()
    tout, _ = torch.fx.symbolic_trace(torch_model)(to_torch(_rand(3, 6)), to_torch(_rand(2, 2, seed=1)))
    tout.sum().backward()
    assert_close(gm.lin.weight.grad, torch_model.lin.weight.grad, atol=1e-5)
    assert gm.lin.weight is model.lin.weight  # parameters are shared, not copied


def _nested(lib):
    class Inner(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = lib.nn.Parameter(lib.ones(4) * 2)
            self.lin = lib.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x) * self.scale

    class Outer(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = lib.nn.ModuleList([Inner(), Inner()])
            self.head = lib.nn.Linear(4, 1)

        def forward(self, x):
            for block in self.blocks:
                x = lib.relu(block(x)) + x
            return self.head(x).squeeze(-1)

    return Outer()


def test_nested_custom_modules_and_module_list():
    (tgm, tout, _), (egm, eout, eager) = run_both(_nested, _rand(3, 4))
    assert full_structure(egm) == full_structure(tgm)
    assert ("get_attr", "blocks.0.scale") in structure(egm) and ("call_module", "blocks.1.lin") in structure(egm)
    assert sorted(egm.state_dict()) == sorted(tgm.state_dict())
    assert egm.code.replace("ember.", "torch.") == tgm.code
    assert_close(eout, tout, atol=1e-5)
    assert_close(eout, eager, atol=1e-5)


def test_buffers_and_tensor_attributes_are_get_attr():
    def make(lib):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("b", lib.ones(3))
                self.c = lib.zeros(3) + 0.5

            def forward(self, x):
                return x * self.b + self.c + self.b.shape[0]

        return M()

    (tgm, tout, _), (egm, eout, _) = run_both(make, _rand(2, 3))
    assert full_structure(egm) == full_structure(tgm)
    assert sorted(dict(egm.named_buffers())) == sorted(dict(tgm.named_buffers())) == ["b", "c"]
    assert_close(eout, tout)


def test_trace_errors_match_torch():
    def attempts(lib, fx):
        class MakesModuleInForward(lib.nn.Module):
            def forward(self, x):
                return lib.nn.ReLU()(x)

        return [
            lambda: fx.symbolic_trace(MakesModuleInForward()),
            lambda: fx.symbolic_trace(42),
            lambda: fx.symbolic_trace(lambda x: x + 1, concrete_args={"not_a_parameter": 1}),
        ]

    def outcome(fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - the type is what is compared
            return type(e).__name__
        return "ok"

    expected = [outcome(f) for f in attempts(torch, torch.fx)]
    assert [outcome(f) for f in attempts(ember, ember.fx)] == expected == ["NameError", "AssertionError", "ok"]


@pytest.mark.parametrize("constant", [False, True])
def test_param_shapes_constant(constant):
    def make(lib):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = lib.nn.Linear(4, 6)

            def forward(self, x):
                w = self.lin.weight
                return x.view(-1, w.shape[1]) @ w.t() + w.size()[0] + w.dim()

        return M()

    results = []
    for lib, fx, convert in FRAMEWORKS:
        tracer = fx.Tracer(param_shapes_constant=constant)
        model = make(lib)
        if lib is ember:
            copy_weights(results[0][2], model)
        graph = tracer.trace(model)
        gm = fx.GraphModule(tracer.root, graph)
        results.append((gm, gm(convert(_rand(2, 2, 4))), model))
    (tgm, tout, _), (egm, eout, _) = results
    assert full_structure(egm) == full_structure(tgm)
    assert_close(eout, tout, atol=1e-5)
    assert any(n.target == "dim" for n in egm.graph.nodes) is (not constant)


@ember.fx.wrap
def _decorated_leaf(x, y):
    return x * 2 + y


@torch.fx.wrap
def _decorated_leaf_torch(x, y):
    return x * 2 + y


def test_wrap_as_a_decorator_records_one_call_like_torch():
    # The decorated name is bound only after wrap() returns: wrap must not require it.
    gm = ember.fx.symbolic_trace(lambda x: _decorated_leaf(x, x))
    tgm = torch.fx.symbolic_trace(lambda x: _decorated_leaf_torch(x, x))
    assert [n.op for n in gm.graph.nodes] == [n.op for n in tgm.graph.nodes]
    assert gm(ember.ones(2)).tolist() == tgm(torch.ones(2)).tolist()


def test_math_module_functions_on_proxies_are_recorded_like_torch():
    # math.sqrt(x.shape[-1]) through the module attribute (not a global `sqrt`): torch.fx
    # autowraps the math module's own functions.
    import math

    def build(lib):
        class Scaled(lib.nn.Module):
            def forward(self, x):
                return x * math.sqrt(x.shape[-1]) + math.pi

        return Scaled()

    codes = []
    for lib in (torch, ember):
        gm = lib.fx.symbolic_trace(build(lib))
        assert gm(lib.ones(4)).tolist() == pytest.approx([2.0 + math.pi] * 4)
        assert gm(lib.ones(9)).tolist() == pytest.approx([3.0 + math.pi] * 9)  # recorded, not baked in
        codes.append([line.strip() for line in gm.code.splitlines() if "sqrt" in line and "wrap(" not in line])
    assert codes[1] == codes[0]
    assert math.sqrt(4.0) == 2.0  # the patch is undone


def fx_helper_leaf_sigmoid(x):
    # traced through, this would record a sigmoid; wrapped, it must stay one call, also on a retrace
    return x.sigmoid() * 2


torch.fx.wrap("fx_helper_leaf_sigmoid")
ember.fx.wrap("fx_helper_leaf_sigmoid")


def test_wrapped_function_stays_a_leaf_when_the_graph_module_is_traced_again():
    # pytorch/examples fx/primitive_library.py: the GraphModule's code registers the wrapped
    # global (torch.fx._symbolic_trace.wrap("..._name")) so a second trace keeps it a leaf
    seen = []
    for lib, fx, convert in FRAMEWORKS:
        gm = fx.symbolic_trace(lambda x: fx_helper_leaf_sigmoid(x) + 1)
        assert f'{lib.__name__}.fx._symbolic_trace.wrap("' in gm.code
        again = fx.symbolic_trace(gm)
        seen.append([(n.op, getattr(n.target, "__name__", str(n.target))) for n in again.graph.nodes])
        x = convert(_rand(2, 3))
        assert_close(again(x), gm(x))
    assert seen[0] == seen[1] and ("call_function", "fx_helper_leaf_sigmoid") in seen[1]
