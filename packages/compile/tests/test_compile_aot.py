"""AOT autograd, make_fx, fake tensors, explain, logging and the _dynamo aliases."""

import operator

import numpy as np
import pytest
import torch

import ember
from ember.compiler import make_fx
from ember.compiler.aot_autograd import aot_function, aot_module_simplified


def _np(t):
    return t.detach().numpy()


def _grads(fn, *arrays, lib, compiled=None):
    xs = [lib.tensor(a, requires_grad=True) for a in arrays]
    out = (compiled or fn)(*xs)
    out.sum().backward()
    return _np(out), [_np(x.grad) for x in xs]


def test_aot_eager_forward_and_backward_match_eager_and_torch():
    def program(lib):
        def f(x, w):
            h = (x @ w).tanh() * x.sum(1, keepdim=True)
            return (h.exp() / (1 + h.abs())).mean(0)
        return f

    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))
    graphs = {}

    def fw(gm, ex):
        graphs["fw"] = gm
        return gm.forward

    def bw(gm, ex):
        graphs["bw"] = gm
        return gm.forward

    def backend(gm, example_inputs):
        return aot_module_simplified(gm, example_inputs, fw_compiler=fw, bw_compiler=bw)

    f = program(ember)
    e_out, e_grads = _grads(f, x, w, lib=ember)
    c_out, c_grads = _grads(f, x, w, lib=ember, compiled=ember.compile(f, backend=backend))
    t_out, t_grads = _grads(program(torch), x, w, lib=torch)
    np.testing.assert_allclose(c_out, e_out, rtol=1e-12)
    for c, e, t in zip(c_grads, e_grads, t_grads):
        np.testing.assert_allclose(c, e, rtol=1e-10)
        np.testing.assert_allclose(c, t, rtol=1e-8)
    # The backward really is a separate compiled graph fed by the forward's saved values.
    assert "bw" in graphs and "fw" in graphs
    bw_inputs = [n for n in graphs["bw"].graph.nodes if n.op == "placeholder"]
    assert any(n.name.startswith("tangents") for n in bw_inputs)
    fw_out = [n for n in graphs["fw"].graph.nodes if n.op == "output"][0]
    assert len(fw_out.args[0]) > 1  # the output plus saved tensors


def test_aot_double_backward_is_a_clear_error():
    def f(x):
        return (x * x).sum()

    x = ember.tensor([1.0, 2.0], requires_grad=True)
    out = ember.compile(f, backend="aot_eager")(x)
    (g,) = ember.autograd.grad(out, x, create_graph=False)
    assert g.tolist() == [2.0, 4.0]
    out = ember.compile(f, backend="aot_eager")(x)
    with pytest.raises(RuntimeError, match="double backward"):
        ember.autograd.grad(out, x, create_graph=True)
    # backend="eager" keeps eager autograd, so double backward works there
    out = ember.compile(f, backend="eager")(x)
    (g,) = ember.autograd.grad(out, x, create_graph=True)
    (gg,) = ember.autograd.grad(g.sum(), x)
    assert gg.tolist() == [2.0, 2.0]


def test_aot_inference_when_no_grad_and_function_api():
    f = ember.compile(lambda x: x.sin() * 2, backend="aot_eager")
    x = ember.ones(3, requires_grad=True)
    with ember.no_grad():
        out = f(x)
    assert not out.requires_grad
    compiled = aot_function(lambda a, b: (a * b).sum(), fw_compiler=lambda gm, ex: gm.forward)
    a = ember.tensor([1.0, 2.0], requires_grad=True)
    b = ember.tensor([3.0, 4.0])
    compiled(a, b).backward()
    assert a.grad.tolist() == [3.0, 4.0]


def test_make_fx_graph_shape_and_values():
    def f(x, y):
        z = x.sin() * y
        return z.sum(0), x + 1

    x, y = ember.randn(3, 4), ember.randn(4)
    gm = make_fx(f)(x, y)
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    assert placeholders == ["x_1", "y_1"]  # named after the parameters, as torch.fx make_fx does
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets[0] is ember.ops.sin
    for n in gm.graph.nodes:
        if n.op == "call_function":
            val = n.meta["val"]
            assert isinstance(val, ember.compiler.FakeTensor) and val.device.type == "cpu"
    a, b = gm(x, y)
    ea, eb = f(x, y)
    np.testing.assert_allclose(_np(a), _np(ea), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(_np(b), _np(eb))
    from ember.fx.experimental.proxy_tensor import make_fx as reexported

    assert reexported is make_fx


def test_make_fx_constants_decompositions_and_data_dependence():
    w = ember.ones(3)

    def f(x):
        return x * w

    gm = make_fx(f, tracing_mode="fake")(ember.ones(3))
    assert [n.op for n in gm.graph.nodes] == ["placeholder", "get_attr", "call_function", "output"]

    def decompose_mul(a, b):
        return ember.ops.div(a, ember.ops.reciprocal(b))

    gm = make_fx(f, decomposition_table={"mul": decompose_mul})(ember.ones(3))
    names = [n.target.name for n in gm.graph.nodes if n.op == "call_function"]
    assert names == ["reciprocal", "div"]

    def g(x):
        return x * 2 if x.sum() > 0 else x

    with pytest.raises(ember._dynamo.exc.Unsupported, match="data-dependent"):
        make_fx(g)(ember.ones(2))
    with pytest.raises(AssertionError):
        make_fx(f, tracing_mode="bogus")


def test_fake_tensor_mode():
    from ember.compiler.fake_tensor import DataDependentOutputException, FakeTensor, FakeTensorMode

    mode = FakeTensorMode()
    x = mode.from_tensor(ember.ones(2, 3))
    with mode:
        y = (x @ x.t()).relu()
        assert isinstance(y, FakeTensor) and tuple(y.shape) == (2, 2) and y.device.type == "cpu"
        z = ember.empty(4, 5, dtype=ember.float64)
        assert isinstance(z, FakeTensor) and z.dtype is ember.float64
    with pytest.raises(DataDependentOutputException):
        y.item()
    assert "FakeTensor" in repr(y)


def test_explain_reports_graphs_breaks_and_guards():
    def f(x):
        a = x * 2
        b = a.sum().item()
        return a + b

    ex = ember._dynamo.explain(f)(ember.ones(3))
    assert ex.graph_count == 2 and ex.graph_break_count == 1 and len(ex.graphs) == 2
    torch._dynamo.reset()
    expected = torch._dynamo.explain(f)(torch.ones(3)).break_reasons[0].reason
    assert ex.break_reasons[0].reason.splitlines()[:2] == expected.splitlines()[:2]
    assert ex.ops_per_graph[0] == [ember.ops.mul, ember.ops.sum]
    assert ex.op_count == 3
    assert any("TENSOR_MATCH" in g for g in ex.out_guards)
    text = str(ex)
    assert "Graph Count: 2" in text and "Graph Break Count: 1" in text
    t = torch._dynamo.explain(lambda x: (x * 2) + (x * 2).sum().item())(torch.ones(3))
    assert t.graph_count == ex.graph_count and t.graph_break_count == ex.graph_break_count


def test_logging_artifacts(capsys):
    ember._logging.set_logs(graph_code=True, graph_breaks=True, recompiles=True, guards=True, output_code=True)
    try:
        def f(x):
            y = x + 1
            print(y.sum())
            return y * 2

        cf = ember.compile(f, backend="eager")
        cf(ember.ones(2))
        cf(ember.ones(3))
    finally:
        ember._logging.set_logs()
    err = capsys.readouterr().err
    assert "TRACED GRAPH" in err and "ember.ops.add" in err
    assert "Graph break in user code" in err and "printing a tensor" in err
    assert "Recompiling function" in err
    assert "TENSOR_MATCH" in err
    assert "Output code" in err


def test_logging_env_variable_parses(monkeypatch):
    import ember._logging as logs

    monkeypatch.setenv("EMBER_LOGS", "+graph_breaks,recompiles")
    logs._ON.clear()
    logs._from_env()
    assert logs._enabled("graph_breaks") and logs._enabled("recompiles")
    logs.set_logs()
    monkeypatch.setenv("EMBER_LOGS", "nonsense")
    with pytest.raises(ValueError):
        logs._from_env()


def test_dynamo_aliases_and_backend_registry():
    d = ember._dynamo
    for name in ("reset", "config", "explain", "mark_dynamic", "mark_static", "allow_in_graph", "disable",
                 "optimize", "list_backends"):
        assert hasattr(d, name), name
    assert d.config.cache_size_limit == 8
    seen = []

    @ember.compiler.register_backend(name="my_counter")
    def my_counter(gm, example_inputs):
        seen.append(len(example_inputs))
        return gm.forward

    assert "my_counter" in ember.compiler.list_backends()
    f = d.optimize("my_counter")(lambda x, y: x * y + 1)
    assert f(ember.ones(2), ember.ones(2)).tolist() == [2.0, 2.0]
    assert seen == [2]
    assert d.allow_in_graph(operator.add) is operator.add
    x = ember.ones(4, 3)
    d.mark_dynamic(x, 0, min=2, max=16)
    assert x._dynamo_dynamic_indices == {0}
    d.mark_static(x, 0)
    assert x._dynamo_dynamic_indices == set()
    assert not ember.compiler.is_compiling()
    inside = []
    ember.compile(lambda t: inside.append(ember.compiler.is_compiling()) or t, backend="eager")(x)
    assert inside == [True]


def test_inductor_name_runs():
    f = ember.compile(lambda x: (x * 3).relu())
    assert f(ember.tensor([-1.0, 2.0])).tolist() == [0.0, 6.0]


class _Count:
    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


def _sized_program(lib):
    def f(x):
        b = x.shape[0]
        return x.sum(1) * 2 + lib.ones(b)
    return f


def test_automatic_dynamic_recompiles_once_like_torch():
    counter = _Count()
    cf = ember.compile(_sized_program(ember), backend=counter)
    for n in (4, 5, 6, 9):
        assert cf(ember.ones(n, 3)).tolist() == [7.0] * n
    torch._dynamo.reset()
    tcount = _Count()
    tf = torch.compile(_sized_program(torch), backend=tcount)
    for n in (4, 5, 6, 9):
        tf(torch.ones(n, 3))
    assert len(counter.graphs) == len(tcount.graphs) == 2
    placeholders = [n.name for n in counter.graphs[1].graph.nodes if n.op == "placeholder"]
    assert placeholders == ["s0", "l_x_"]  # Dynamo: s77, l_x_ (its size symbol is an input first)


def _two_sized(lib):
    def f(a, b):
        return lib.cat([b, a]) * a.sum() + b.shape[0]
    return f


def _kinds(graph_inputs):
    return [(n.name if n.name.startswith("l_") else "s", type(v).__name__ == "Tensor")
            for n, v in graph_inputs]


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_dynamic_size_placeholders_come_before_their_tensor_like_dynamo(backend):
    seen = {}

    def spy(lib, key):
        def be(gm, example_inputs):
            nodes = [n for n in gm.graph.nodes if n.op == "placeholder"]
            seen[key] = _kinds(zip(nodes, example_inputs))
            if lib is ember and backend != "eager":
                return ember.compiler.backends.registry.lookup_backend(backend)(gm, example_inputs)
            return gm.forward
        return be

    torch._dynamo.reset()
    tf = torch.compile(_two_sized(torch), backend=spy(torch, "t"), dynamic=True)
    ef = ember.compile(_two_sized(ember), backend=spy(ember, "e"), dynamic=True)
    for n, m in ((3, 4), (5, 2), (7, 6)):
        a, b = np.arange(n, dtype=np.float32), np.arange(m, dtype=np.float32) * 2
        want = tf(torch.from_numpy(a), torch.from_numpy(b)).numpy()
        np.testing.assert_allclose(ef(ember.from_numpy(a), ember.from_numpy(b)).numpy(), want)
    # each size symbol is lifted just before the first tensor carrying it: s, l_b_, s, l_a_
    assert seen["e"] == seen["t"] == [("s", False), ("l_b_", True), ("s", False), ("l_a_", True)]


def test_dynamic_true_and_mark_dynamic_and_static():
    counter = _Count()
    cf = ember.compile(_sized_program(ember), backend=counter, dynamic=True)
    for n in (5, 7, 11):
        assert cf(ember.ones(n, 3)).tolist() == [7.0] * n
    assert len(counter.graphs) == 1
    counter = _Count()
    cf = ember.compile(_sized_program(ember), backend=counter, dynamic=False)
    for n in (3, 7):
        x = ember.ones(n, 3)
        ember._dynamo.mark_dynamic(x, 0)
        assert cf(x).tolist() == [7.0] * n
    assert len(counter.graphs) == 1
    for n in (3, 7):
        cf(ember.ones(n, 3))  # unmarked, dynamic=False: static graphs
    assert len(counter.graphs) == 3


def test_dynamic_graph_with_coincident_sizes_stays_correct():
    # 0/1 are never symbols; a constant equal to a size is that size only in calls that match.
    cf = ember.compile(lambda x, k: x.reshape(x.shape[0], -1) * k, backend="eager", dynamic=True)
    for n, k in ((2, 2), (3, 2), (2, 3), (4, 4), (5, 4)):
        x = ember.arange(float(n * 4)).reshape(n, 2, 2)
        np.testing.assert_array_equal(_np(cf(x, k)), _np(x.reshape(n, -1) * k))


def test_dynamic_training_falls_back_to_eager_autograd_correctly():
    model = ember.nn.Linear(3, 2)
    cf = ember.compile(model, backend="aot_eager", dynamic=True)
    for n in (2, 5):
        x = ember.ones(n, 3)
        model.zero_grad()
        cf(x).sum().backward()
        assert model.weight.grad.tolist() == [[float(n)] * 3] * 2


def test_dynamic_derived_sizes_are_expressions_in_the_graph():
    graphs = _Count()

    def f(x):
        b, t, c = x.shape
        return x.reshape(b * t, c).sum(0), x.view(b, t // 2, 2 * c)

    cf = ember.compile(f, backend=graphs, dynamic=True)
    for b, t in ((5, 8), (7, 10), (9, 22)):  # no size coincides with another or with c = 3
        x = ember.randn(b, t, 3)
        a, v = cf(x)
        ea, ev = f(x)
        np.testing.assert_allclose(_np(a), _np(ea), rtol=1e-5)
        np.testing.assert_array_equal(_np(v), _np(ev))
    assert len(graphs.graphs) == 1
    code = graphs.graphs[0].code
    assert "s0 * s1" in code and "s1 // 2" in code


def test_explicit_graph_break_counts_like_torch():
    def program(lib):
        def f(x):
            y = x * 2
            lib._dynamo.graph_break()
            return y + 1
        return f

    ex = ember._dynamo.explain(program(ember))(ember.ones(2))
    torch._dynamo.reset()
    tx = torch._dynamo.explain(program(torch))(torch.ones(2))
    assert (ex.graph_count, ex.graph_break_count) == (tx.graph_count, tx.graph_break_count) == (2, 1)


def test_set_stance():
    counter = _Count()
    cf = ember.compile(lambda x: x * 2, backend=counter)
    with ember.compiler.set_stance("force_eager"):
        assert cf(ember.ones(2)).tolist() == [2.0, 2.0]
    assert len(counter.graphs) == 0
    cf(ember.ones(2))
    with ember.compiler.set_stance("eager_on_recompile"):
        assert cf(ember.ones(3)).tolist() == [2.0, 2.0, 2.0]
    assert len(counter.graphs) == 1
    with ember.compiler.set_stance("fail_on_recompile"), pytest.raises(RuntimeError, match="recompile"):
        cf(ember.ones(4, dtype=ember.float64))
    with pytest.raises(RuntimeError):
        ember.compiler.set_stance("sometimes")


def test_graph_break_before_any_op_refused_by_fullgraph_like_torch():
    # No op is pending at the break, but fullgraph=True refuses it all the same.
    def program(lib):
        def f(x):
            lib._dynamo.graph_break()
            return x + 1
        return f

    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported, match="graph_break"):
        torch.compile(program(torch), fullgraph=True)(torch.ones(2))
    with pytest.raises(ember._dynamo.exc.Unsupported, match="graph_break"):
        ember.compile(program(ember), fullgraph=True)(ember.ones(2))
    assert ember.compile(program(ember))(ember.ones(2)).tolist() == [2.0, 2.0]


def test_dynamo_backends_common_aot_autograd_like_torch():
    # A custom backend built the way PyTorch's tutorials build one: each compiler runs once.
    def run(lib):
        calls = []

        def compiler(kind):
            def compile_graph(gm, example_inputs):
                calls.append(kind)
                return gm.forward
            return compile_graph

        backend = lib._dynamo.backends.common.aot_autograd(fw_compiler=compiler("fw"), bw_compiler=compiler("bw"))
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(4, 3), lib.nn.Tanh())
        with lib.no_grad():
            for i, p in enumerate(model.parameters()):
                p.copy_(lib.linspace(-1, 1, p.numel()).reshape(p.shape) * (i + 1))
        x = lib.linspace(-2, 2, 8).reshape(2, 4)
        out = lib.compile(model, backend=backend)(x)
        out.sum().backward()
        return calls, _np(out), [_np(p.grad) for p in model.parameters()]

    torch._dynamo.reset()
    t_calls, t_out, t_grads = run(torch)
    e_calls, e_out, e_grads = run(ember)
    assert e_calls == t_calls == ["fw", "bw"]
    np.testing.assert_allclose(e_out, t_out, rtol=1e-5)
    for e, t in zip(e_grads, t_grads):
        np.testing.assert_allclose(e, t, rtol=1e-5)
    assert ember._dynamo.backends.registry.lookup_backend("eager") is not None


def test_dynamo_config_patch_like_torch():
    for lib in (torch, ember):
        cfg = lib._dynamo.config
        before = cfg.cache_size_limit
        with cfg.patch(cache_size_limit=3):
            assert cfg.cache_size_limit == 3
        with cfg.patch({"cache_size_limit": 4}), cfg.patch("suppress_errors", True):
            assert cfg.cache_size_limit == 4 and cfg.suppress_errors is True
        assert cfg.cache_size_limit == before and cfg.suppress_errors is False

        @cfg.patch(cache_size_limit=5)
        def read(cfg=cfg):
            return cfg.cache_size_limit

        assert read() == 5 and cfg.cache_size_limit == before
        with pytest.raises(AttributeError, match="no_such_setting does not exist"):
            with cfg.patch(no_such_setting=1):
                pass


def test_inductor_config_patch_like_torch():
    pytest.importorskip("ember._inductor", reason="ember._inductor comes with ember-export")
    from ember.compiler.inductor import config as inductor_config

    assert ember._inductor.config is inductor_config
    with ember._inductor.config.patch(max_autotune=True):
        assert inductor_config.max_autotune is True
    with ember._inductor.config.patch("cpp.language", "c++"):
        assert inductor_config.cpp.language == "c++"
    assert inductor_config.max_autotune is False and inductor_config.cpp.language == "c"


def test_dynamo_counters_count_breaks_once_and_graphs_like_torch():
    def program(lib):
        def f(x):
            y = x.sin()
            lib._dynamo.graph_break()
            return y.cos() + 1
        return f

    results = []
    for lib in (torch, ember):
        counters = lib._dynamo.utils.counters
        counters.clear()
        lib._dynamo.reset()
        compiled = lib.compile(program(lib), backend="eager")
        for _ in range(3):
            compiled(lib.ones(3))
        results.append((sum(counters["graph_break"].values()), counters["stats"]["unique_graphs"]))
        assert any("graph_break()" in reason for reason in counters["graph_break"])
        counters.clear()
    assert results[1] == results[0] == (1, 2)


def test_compile_of_a_non_callable_raises_like_torch():
    with pytest.raises(AssertionError, match="A callable function is expected"):
        torch.compile(3)
    with pytest.raises(AssertionError, match="A callable function is expected"):
        ember.compile(3)


def test_subclasses_fake_tensor_mode_like_torch():
    # Shapes of a model's output without running it, as with torch._subclasses.FakeTensorMode.
    results = []
    for lib in (torch, ember):
        with lib._subclasses.FakeTensorMode() as mode:
            layer = lib.nn.Linear(1000, 300)
            x = mode.from_tensor(lib.ones(64, 1000))
            out = layer(lib.empty(64, 1000)) + layer(x)
            results.append((type(out).__name__, tuple(out.shape), str(out.dtype).split(".")[-1]))
        assert isinstance(out, lib._subclasses.fake_tensor.FakeTensor)
    assert results[0] == results[1] == ("FakeTensor", (64, 300), "float32")


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_vmap_inside_a_compiled_function_matches_torch(backend):
    # vmap's BatchedTensor ops were recorded as plain ops and run after the vmap had returned
    # (the inductor read a batched tensor's storage: a segfault).
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)

    def program(lib):
        def f(t):
            return lib.func.vmap(lambda row: (row.sin() * 2).sum())(t) + 1
        return f

    torch._dynamo.reset()
    expected = torch.compile(program(torch), backend=backend)(torch.tensor(x)).numpy()
    got = ember.compile(program(ember), backend=backend)(ember.tensor(x))
    np.testing.assert_allclose(_np(got), expected, rtol=1e-5)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_gradient_penalty_with_create_graph_inside_compiled_function(backend):
    # autograd.grad(create_graph=True) differentiates the compiled forward twice: that segment
    # runs under eager autograd (it raised "double backward ... not supported"). Eager torch is
    # the oracle (torch.compile's AOT backends refuse this double backward).
    x = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)

    def run(lib, compiled):
        lib.manual_seed(0)
        net = lib.nn.Sequential(lib.nn.Linear(3, 8), lib.nn.Tanh(), lib.nn.Linear(8, 1))
        with lib.no_grad():
            for i, p in enumerate(net.parameters()):
                p.copy_(lib.tensor(np.random.default_rng(i).standard_normal(tuple(p.shape)).astype(np.float32)))

        def penalty(t):
            t = t.detach().requires_grad_()
            (g,) = lib.autograd.grad(net(t).sum(), t, create_graph=True)
            return (g.norm(dim=1) - 1).pow(2).mean()

        fn = ember.compile(penalty, backend=backend) if compiled else penalty
        loss = fn(lib.tensor(x))
        loss.backward()
        return float(loss), [_np(p.grad) for p in list(net.parameters())[:3]]

    t_loss, t_grads = run(torch, False)
    e_loss, e_grads = run(ember, True)
    assert e_loss == pytest.approx(t_loss, rel=1e-5)
    for e, t in zip(e_grads, t_grads):
        np.testing.assert_allclose(e, t, rtol=1e-4, atol=1e-6)


def test_dynamo_and_compiler_helpers_like_torch():
    # isinstance checks on compiled modules, is_exporting()/is_compiling() branches in forward.
    for lib in (torch, ember):
        lib._dynamo.reset()
        linear = lib.nn.Linear(2, 2)
        compiled = lib.compile(linear)
        assert isinstance(compiled, lib._dynamo.eval_frame.OptimizedModule)
        assert not isinstance(linear, lib._dynamo.eval_frame.OptimizedModule)
        assert lib._dynamo.is_dynamo_supported() and lib._dynamo.is_inductor_supported()
        assert lib._dynamo.mark_static_address(lib.ones(2)) is None
        assert lib.compiler.is_exporting() is False


def test_mark_dynamic_graph_serves_later_unmarked_sizes_like_torch():
    counts = []
    for lib in (torch, ember):
        lib._dynamo.reset()
        compiles = []

        def backend(gm, example_inputs, compiles=compiles):
            compiles.append(len(example_inputs))
            return gm.forward

        f = lib.compile(lambda x: x.sum(0) * 2, backend=backend)
        first = lib.ones(3, 4)
        lib._dynamo.mark_dynamic(first, 0)
        outs = [f(first).tolist()] + [f(lib.ones(n, 4)).tolist() for n in (5, 7, 9)]
        assert outs == [[2.0 * n] * 4 for n in (3, 5, 7, 9)]
        counts.append(len(compiles))
    assert counts[1] == counts[0] == 1


def test_backend_errors_are_wrapped_in_backend_compiler_failed_like_torch():
    def broken(gm, example_inputs):
        raise ValueError("no such kernel")

    for lib in (torch, ember):
        lib._dynamo.reset()
        with pytest.raises(lib._dynamo.exc.BackendCompilerFailed, match="backend='broken' raised") as info:
            lib.compile(lambda x: x * 2 + 1, backend=broken)(lib.ones(2))
        assert isinstance(info.value, RuntimeError)
        assert isinstance(info.value.__cause__ or info.value.inner_exception, ValueError)


def test_legacy_dynamo_export_like_torch():
    def program(lib):
        def f(x, y):
            return (x + y).relu(), x.sum()
        return f

    results = []
    for lib in (torch, ember):
        lib._dynamo.reset()
        result = lib._dynamo.export(program(lib))(lib.ones(3), lib.ones(3))
        assert type(result).__name__ == "ExportResult" and result._fields == ("graph_module", "guards")
        gm, _guards = result
        relu, total = gm(lib.tensor([1.0, -2.0, 0.5]), lib.tensor([-2.0, 1.0, 1.0]))
        results.append((relu.tolist(), float(total)))
        gm2, _ = lib._dynamo.export(program(lib), lib.ones(2), lib.ones(2))
        assert gm2(lib.ones(2), lib.ones(2))[1].item() == 2.0
    assert results[1] == results[0]


def _bn_training_losses(lib, backend=None):
    lib.manual_seed(0)
    nn = lib.nn
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.GELU(), nn.Linear(8, 1))
    with lib.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(lib.linspace(-1, 1, p.numel()).reshape(p.shape) * (0.3 + 0.1 * i))
    opt = lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x = lib.tensor(np.linspace(-2, 2, 64, dtype=np.float32).reshape(16, 4))
    y = lib.tensor(np.cos(np.arange(16, dtype=np.float32)).reshape(16, 1))

    def step():
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if backend is not None:
        step = lib.compile(step, backend=backend)
    losses = [float(step().item()) for _ in range(4)]
    return losses, _np(model[1].running_mean)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_training_step_with_batchnorm_matches_torch(backend):
    # loss.backward() inside the compiled step runs the AOT backward while the step is being
    # captured: its compiled kernels once read lazy tensors ("tensor has no data").
    expect_losses, expect_mean = _bn_training_losses(torch)
    losses, mean = _bn_training_losses(ember, backend)
    np.testing.assert_allclose(losses, expect_losses, rtol=1e-5)
    np.testing.assert_allclose(mean, expect_mean, rtol=1e-5, atol=1e-6)


def _number_programs(lib):
    return {
        "slice": lambda x, n: x[:n] * 2.5,  # (a constant 2 would be keyed as n when n == 2)
        "narrow": lambda x, n: x.narrow(0, 1, n).sum(0),
        "zeros": lambda x, n: lib.zeros(n) + x.sum(),
        "arange": lambda x, n: lib.arange(n) * x[0, 0],
        "float_mul": lambda x, a: (x * a).sin(),
        "float_clamp": lambda x, a: x.clamp(min=-a, max=a),
        "float_full": lambda x, a: lib.full((3,), a) + x[0, 0],
    }


_NUMBER_VALUES = {
    "slice": [2, 3, 4, 5, 7, 10, 1],
    "narrow": [2, 3, 4, 5],
    "zeros": [2, 3, 4, 1, 0],
    "arange": [3, 4, 5, 6],
    "float_mul": [0.5, 0.7, 0.0, 1.0, -1.0, 2.0, 3],
    "float_clamp": [0.5, 0.6, 0.7],
    "float_full": [0.25, 0.5, 0.75],
}


@pytest.mark.parametrize("dynamic", [None, False, True])
@pytest.mark.parametrize("name", sorted(_NUMBER_VALUES))
def test_number_arguments_become_symbolic_like_torch(name, dynamic):
    # PyTorch specializes a number argument on the first call and makes it symbolic when it
    # changes (automatic dynamic; floats too: specialize_float is off), so a compiled function
    # called with a new int or float each time compiles twice, not once per value.
    x_np = np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32)
    counts = []
    for lib in (ember, torch):
        lib._dynamo.reset()
        counter = _Count()
        fn = _number_programs(lib)[name]
        cf = lib.compile(fn, backend=counter, dynamic=dynamic)
        x = lib.from_numpy(x_np.copy())
        for v in _NUMBER_VALUES[name]:
            np.testing.assert_allclose(_np(cf(x, v)), _np(fn(x, v)), rtol=1e-6, atol=1e-6)
        counts.append(len(counter.graphs))
    assert counts[0] == counts[1]


def test_number_argument_graph_takes_the_number_as_input():
    counter = _Count()
    cf = ember.compile(lambda x, n, a: x[:n] * a, backend=counter)
    x = ember.arange(12.0).reshape(6, 2)
    for n, a in ((2, 0.5), (3, 0.25), (4, 1.5), (5, 2.5)):
        np.testing.assert_array_equal(_np(cf(x, n, a)), _np(x[:n] * a))
    assert len(counter.graphs) == 2
    placeholders = [n.name for n in counter.graphs[1].graph.nodes if n.op == "placeholder"]
    assert placeholders == ["l_x_", "s0", "s1"]  # the tensor named by its source, as Dynamo names it


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_number_arguments_with_real_backends_and_training(backend):
    ember.manual_seed(0)
    lin = ember.nn.Linear(4, 3)

    def step(x, scale, n):
        return (lin(x[:n]) * scale).sum()

    cf = ember.compile(step, backend=backend)
    for scale, n in ((0.5, 3), (0.25, 4), (0.125, 5), (2.0, 6), (0.25, 4)):
        x = ember.randn(8, 4)
        lin.zero_grad()
        cf(x, scale, n).backward()
        got = _np(lin.weight.grad).copy()
        lin.zero_grad()
        step(x, scale, n).backward()
        np.testing.assert_allclose(got, _np(lin.weight.grad), rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        cf = ember.compile(lambda x, a, n: (x[-n:] * a).exp(), backend=backend)
        x = ember.randn(8, 4)
        for a, n in ((0.5, 2), (0.75, 3), (1.25, 5)):
            np.testing.assert_allclose(_np(cf(x, a, n)), _np((x[-n:] * a).exp()), rtol=1e-5)


def test_specialize_float_keeps_floats_constant_like_torch():
    counts = []
    for lib in (ember, torch):
        lib._dynamo.reset()
        counter = _Count()
        with lib._dynamo.config.patch(specialize_float=True):
            cf = lib.compile(lambda x, a: x * a, backend=counter)
            for a in (0.5, 0.25, 0.125):
                cf(lib.ones(3), a)
        counts.append(len(counter.graphs))
    assert counts == [3, 3]


def test_numbers_inside_list_and_dict_arguments_become_symbolic_like_torch():
    programs = {"list": (lambda x, s: x * s[0] + s[1], [[0.5, 0.1], [0.25, 0.2], [0.125, 0.3]]),
                "dict": (lambda x, c: x[: c["n"]] * c["lr"], [{"lr": 0.5, "n": 2}, {"lr": 0.25, "n": 3},
                                                                {"lr": 0.125, "n": 4}])}
    for name, (fn, values) in programs.items():
        counts = []
        for lib in (ember, torch):
            lib._dynamo.reset()
            counter = _Count()
            cf = lib.compile(fn, backend=counter)
            x = lib.arange(12.0).reshape(6, 2)
            for v in values:
                np.testing.assert_allclose(_np(cf(x, v)), _np(fn(x, v)), rtol=1e-6, atol=1e-6)
            counts.append(len(counter.graphs))
        assert counts[0] == counts[1] == 2, name


def test_views_the_backward_reads_are_taken_again_there_not_saved():
    """A weight's transpose the backward needs is recomputed from the saved weight: saving the
    view itself would make the compiled forward copy every weight each step."""
    graphs = {}

    def keep(name):
        def compiler(gm, example_inputs):
            graphs[name] = gm
            return gm.forward
        return compiler

    w1, w2 = ember.randn(8, 4, requires_grad=True), ember.randn(3, 8, requires_grad=True)

    def mlp(x, w1, w2):
        return ember.nn.functional.linear(ember.nn.functional.linear(x, w1).relu(), w2).sum()

    x = ember.randn(5, 4)
    aot_function(mlp, fw_compiler=keep("fw"), bw_compiler=keep("bw"))(x, w1, w2).backward()
    saved = graphs["fw"].graph.output_node().args[0][1:]
    assert not any("view" in getattr(n.target, "tags", ()) for n in saved if hasattr(n, "target"))
    assert any(n.op == "placeholder" for n in saved)  # a weight, saved as itself
    got = [w1.grad.clone(), w2.grad.clone()]
    w1.grad = w2.grad = None
    mlp(x, w1, w2).backward()
    for g, want in zip(got, (w1.grad, w2.grad)):
        assert ember.allclose(g, want, rtol=1e-6, atol=1e-6)


def test_a_widening_cast_the_backward_reads_is_taken_again_there_not_saved():
    """bf16 logits cast to float32 for the loss (GPT-2 under autocast): the backward casts the saved
    bf16 matmul output again; saving the float32 copy doubled the largest tensor of the step."""
    graphs = {}

    def keep(name):
        def compiler(gm, example_inputs):
            graphs[name] = gm
            return gm.forward
        return compiler

    def loss(h, w, y):
        return ember.nn.functional.cross_entropy((h.bfloat16() @ w.bfloat16()).float(), y)

    h, w = ember.randn(8, 16, requires_grad=True), ember.randn(16, 40, requires_grad=True)
    y = ember.randint(0, 40, (8,))
    aot_function(loss, fw_compiler=keep("fw"), bw_compiler=keep("bw"))(h, w, y).backward()
    saved = graphs["fw"].graph.output_node().args[0][1:]
    assert all(n.meta["val"].dtype is not ember.float32 or n.meta["val"].dim() < 2 for n in saved), saved
    assert any(getattr(n.target, "name", None) == "mm" for n in saved)  # the bf16 logits
    got = [h.grad.clone(), w.grad.clone()]
    h.grad = w.grad = None
    loss(h, w, y).backward()
    for g, want in zip(got, (h.grad, w.grad)):
        assert ember.equal(g, want)


def test_make_fx_placeholders_and_non_tensor_arguments_like_torch():
    from torch.fx.experimental.proxy_tensor import make_fx as torch_make_fx

    def k(x, n, y=None):
        return x * n

    def star(*args):
        return args[0] * 2

    def nested(d):
        return d["a"] + d["b"][0]

    def placeholders(gm):
        return [(n.name, n.args) for n in gm.graph.nodes if n.op == "placeholder"]

    cases = [(k, lambda lib: (lib.ones(2), 3, None)), (star, lambda lib: (lib.ones(2), lib.ones(2))),
             (lambda x: x.relu(), lambda lib: (lib.ones(2),))]
    for fn, make_args in cases:
        t_gm, e_gm = torch_make_fx(fn)(*make_args(torch)), make_fx(fn)(*make_args(ember))
        assert placeholders(e_gm) == placeholders(t_gm)
        # the graph module takes the arguments the function was traced with
        np.testing.assert_allclose(_np(e_gm(*make_args(ember))), t_gm(*make_args(torch)).numpy())
    gm = make_fx(nested)({"a": ember.ones(2), "b": [ember.ones(2)]})
    assert [n for n, _ in placeholders(gm)] == ["d_1", "d_2"]  # torch's leaf names (it keeps `d` whole)
