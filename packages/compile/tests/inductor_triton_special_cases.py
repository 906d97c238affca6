"""Checks of the inductor's Triton backend that are more than one program compiled vs eager:
dynamic and symbolic sizes, the fuzzer, a training step, fallbacks, the output_code log, the
graph cache across processes and persistent blocks of several rows. ``inductor_triton_cases``
runs them (``SPECIAL``) beside its ``CASES``, on CPU (Triton's interpreter) or CUDA.
"""

from __future__ import annotations

import os

import numpy as np
from inductor_test_helpers import _flat, compile_program, make_input
from inductor_test_helpers import assert_close as _close

import ember


def dynamic_batch(device: str) -> None:
    """A new batch size re-lowers the graph but reuses the kernel source (no new compile)."""
    from ember.compiler.inductor import _triton_runtime

    fn = ember.compile(lambda x: ember.softmax(x * 2, -1) + 1, dynamic=True)
    outs = []
    sources = []
    for rows in (3, 5, 7):
        x = make_input((rows, 48), ember.float32, specials=False, seed=rows).to(device)
        outs.append((fn(x).cpu(), ember.softmax(x.cpu() * 2, -1) + 1))
        sources.append(frozenset(k[0] for k in _triton_runtime._MODULES))
    for got, want in outs:
        _close(got, want, 1e-5, 1e-6, "dynamic batch")
    if device == "cpu":  # (on a GPU the plugin imports the sources: its own cache counts them)
        assert sources[0] == sources[1] == sources[2], "a new batch size produced new kernel sources"


def symbolic_sizes(device: str) -> None:
    """A graph whose batch dim is a symbol: the size is a kernel argument (one kernel source for
    every batch size), here also the length of the reduced dim (a looped reduction)."""
    import sympy

    from ember.compiler import make_fx
    from ember.compiler.inductor import compile_fx

    class Val:  # a placeholder's meta value with a symbolic first dim
        shape = (sympy.Symbol("s0", integer=True, positive=True), 24)

        def stride(self):
            return (24, 1)

    program = lambda t, x: ((x * 2).sum(0), t.softmax(x, -1) + 1)  # noqa: E731
    x = make_input((5, 24), ember.float32, specials=False).to(device)
    gm = make_fx(lambda x: program(ember, x))(x)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            node.meta["val"] = Val()
    compiled = compile_fx(gm, [x])
    art = compiled.artifact
    assert art is not None and getattr(art, "triton_kernels", None), "not compiled by the Triton backend"
    params = [p for k in art.triton_kernels.values() for p in k.spec.params if p[0] == "size"]
    assert params, f"no symbolic size argument:\n{art.cpp_source}"
    for rows in (5, 9, 2):
        x = make_input((rows, 24), ember.float32, specials=False, seed=rows).to(device)
        got = compiled(x)
        want = program(ember, x.cpu())
        for g, w in zip(got, want):
            _close(g.cpu(), w, 1e-5, 1e-5, f"symbolic sizes, {rows} rows")
    assert len(compiled.variants) == 1, "a new batch size lowered the graph again"


def fuzz(device: str) -> None:
    """The C++ backend's fuzzer graphs (random pointwise/reduction/view chains, some inputs
    transposed) through the Triton backend, compiled vs eager; ``EMBER_TRITON_FUZZ`` graphs."""
    import random

    from test_inductor_fuzz import draw_program

    for seed in range(int(os.environ.get("EMBER_TRITON_FUZZ", "10"))):
        program, inputs, want = draw_program(random.Random(5000 + seed), seed)
        dev_inputs = [x.to(device) for x in inputs]
        compiled, _ = compile_program(program, dev_inputs)
        assert compiled.artifact is not None and getattr(compiled.artifact, "triton_kernels", None) is not None
        got = _flat(compiled(*dev_inputs))
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            _close(g.cpu(), w, 1e-4, 1e-5, f"fuzz seed {seed} output {i}")


def training_step(device: str) -> None:
    """A module compiled for training: forward and AOT backward graphs through the Triton
    backend (the layer_norm/GELU/cross-entropy backward reductions among them), gradients vs
    eager."""
    def build():
        ember.manual_seed(0)
        return ember.nn.Sequential(ember.nn.Linear(16, 32), ember.nn.LayerNorm(32), ember.nn.GELU(),
                                   ember.nn.Linear(32, 10)).to(device)

    from ember.compiler.inductor import _compile_fx

    x = make_input((6, 16), ember.float32, specials=False).to(device)
    y = ember.tensor(np.arange(6) % 10).to(device)
    grads, built = [], []
    original = _compile_fx.CompiledGraph._build

    def build_graph(self, inputs):
        built.append(original(self, inputs))
        return built[-1]

    _compile_fx.CompiledGraph._build = build_graph
    try:
        for compiled in (False, True):
            model = build()

            def step(x, y, model=model):
                return ember.nn.functional.cross_entropy(model(x), y)

            # the loss inside the compiled region: its backward (where(ne, target, 0) with a
            # 0-dim number tensor) is part of the compiled backward graph
            loss = (ember.compile(step) if compiled else step)(x, y)
            loss.backward()
            grads.append([loss.detach()] + [p.grad for p in model.parameters()])
    finally:
        _compile_fx.CompiledGraph._build = original
    assert built and all(a is not None for a in built), "a forward or backward graph ran eagerly"
    for i, (g, w) in enumerate(zip(*grads)):
        _close(g.cpu(), w.cpu(), 1e-4, 1e-5, f"training step: loss/grad {i}")


def fallback_unsupported(device: str) -> None:
    """A kernel the Triton backend cannot write: the graph runs eagerly, with the right answer."""
    from ember.compiler.inductor import _triton_ops

    original = _triton_ops.op_text

    def refuse(op, *args, **kwargs):
        if op == "sin":
            raise KeyError(op)
        return original(op, *args, **kwargs)

    _triton_ops.op_text = refuse
    try:
        x = make_input((5, 6), ember.float32).to(device)
        compiled, _ = compile_program(lambda t, x: x.sin() * 2, [x])
        assert compiled.artifact is None, "expected the graph to run eagerly"
        _close(compiled(x).cpu(), (x.sin() * 2).cpu(), 0, 0, "fallback")  # eager on the same device
    finally:
        _triton_ops.op_text = original


def output_code_log(device: str) -> None:
    """EMBER_LOGS=output_code shows the wrapper and the kernels, with the graph's op names."""
    import io
    import logging

    import ember._logging

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = ember._logging._logger("output_code")
    logger.addHandler(handler)
    ember._logging.set_logs(output_code=True)
    try:
        x = make_input((4, 24), ember.float32, specials=False).to(device)
        compile_program(lambda t, x: t.softmax(x.relu(), -1), [x])
    finally:
        ember._logging.set_logs(output_code=False)
        logger.removeHandler(handler)
    text = stream.getvalue()
    for needle in ("@triton.jit", "persistent reduction", "relu", "softmax", "tl.store", "kernel0("):
        assert needle in text, f"{needle!r} missing from the output_code log:\n{text}"


def graph_cache(device: str) -> None:
    """The Triton graph cache across processes: with ``EMBER_EXPECT_HIT=1`` (a second process
    on the same cache directory) the graph must come from the cache, and still be right."""
    x = make_input((6, 40), ember.float32, specials=False).to(device)
    w = make_input((40,), ember.float32, seed=3).to(device)
    program = lambda t, x, w: (t.nn.functional.layer_norm(x.relu(), (40,), w), t.softmax(x * 2, -1))  # noqa: E731
    compiled, _ = compile_program(program, [x, w])
    art = compiled.artifact
    assert art is not None and getattr(art, "triton_kernels", None), "not compiled by the Triton backend"
    hit = getattr(art, "cache_hit", False)
    expect = os.environ.get("EMBER_EXPECT_HIT") == "1"
    assert hit == expect, f"cache hit {hit}, expected {expect}"
    for i, (g, w_) in enumerate(zip(_flat(compiled(x, w)), _flat(program(ember, x.cpu(), w.cpu())))):
        _close(g.cpu(), w_, 1e-4, 1e-5, f"graph cache output {i}")


def persistent_rows_share_loads(device: str) -> None:
    """Persistent reductions with several rows a block (the layer_norm weight and bias loaded
    once as a [1, RBLOCK] block the rows share; a row length that is a power of two, unmasked,
    and one that is not), forced to the widest candidate, vs eager."""
    from ember.compiler.inductor import _triton_runtime

    original = _triton_runtime.configs

    def widest(spec, xnumel, rnumel, max_autotune):
        found = original(spec, xnumel, rnumel, max_autotune)
        return sorted(found, key=lambda c: -c[0])

    _triton_runtime.configs = widest
    try:
        for cols in (64, 48):
            x = make_input((11, cols), ember.float32, specials=False, seed=cols).to(device)
            w = make_input((cols,), ember.float32, seed=1).to(device)
            b = make_input((cols,), ember.float32, seed=2).to(device)
            program = lambda t, x, w, b, c=cols: (t.nn.functional.layer_norm(x, (c,), w, b),  # noqa: E731
                                                  (x * w).sum(-1), (w + 0 * x).amax(-1))
            compiled, _ = compile_program(program, [x, w, b])
            runners = getattr(compiled.artifact, "triton_kernels", None)
            assert runners, "not compiled by the Triton backend"
            for i, (g, w_) in enumerate(zip(_flat(compiled(x, w, b)), _flat(program(ember, x.cpu(), w.cpu(),
                                                                                         b.cpu())))):
                _close(g.cpu(), w_, 1e-4, 1e-5, f"{cols} columns, output {i}")
            assert any(cfg[0] > 1 for r in runners.values() for cfg in r.best.values()), "one row a block"
    finally:
        _triton_runtime.configs = original


def repeated_layers_share_kernels(device: str) -> None:
    """Kernels equal up to buffer names (each layer of a model) share one launcher: compiled and
    tuned once. Values checked against eager."""

    def program(t, x, ws):
        for w in ws:  # an extern matmul between layers keeps each layer's kernels apart
            x = x + t.nn.functional.layer_norm(x, (x.shape[-1],)) @ w
        return x

    x = make_input((5, 16), ember.float32, specials=False).to(device)
    ws = [(make_input((16, 16), ember.float32, seed=i, specials=False) * 0.2).to(device) for i in range(1, 5)]
    compiled, _ = compile_program(lambda t, x, *ws: program(t, x, ws), [x, *ws])
    runners = compiled.artifact.triton_kernels
    assert len({id(r) for r in runners.values()}) < len(runners), "no kernel was shared"
    want = program(ember, x.cpu(), [w.cpu() for w in ws])
    _close(compiled(x, *ws).cpu(), want, 1e-4, 1e-5, "layers sharing kernels")
    # equal kernels over different sizes share a launcher, each launched over its own size
    sizes = [make_input((n, 7), ember.float32, seed=n, specials=False).to(device) for n in (3, 40, 5)]
    compiled, _ = compile_program(lambda t, *xs: [v.exp() * 2 + v for v in xs], sizes)
    runners = compiled.artifact.triton_kernels
    assert len({id(r) for r in runners.values()}) == 1 < len(runners), "the kernels were not shared"
    for got, v in zip(compiled(*sizes), sizes):
        _close(got.cpu(), v.cpu().exp() * 2 + v.cpu(), 1e-5, 1e-6, "shared kernel, own size")


def number_arguments(device: str) -> None:
    """Float arguments of a compiled function (a learning rate, a scale) are float64 kernel
    arguments: once the number is dynamic (its second value), a new value re-lowers the graph but
    compiles no Triton kernel. Counted as distinct kernel sources: loaded by the interpreter on
    CPU, handed to the plugin's compiler on a GPU."""
    from ember.compiler.inductor import _triton_runtime

    sources: set = set()
    backend = _triton_runtime.backend_for(ember.device(device))
    if device != "cpu":
        original = backend.compile_triton

        def counting(source, *args, **kwargs):
            sources.add(source)
            return original(source, *args, **kwargs)

        backend.compile_triton = counting

    def compiled_sources() -> int:
        return len(sources) if device != "cpu" else len({k[0] for k in _triton_runtime._MODULES})

    def step(x, w, lr, scale):
        # a pointwise kernel and a reduction, each reading both numbers; float64 keeps them exact
        return (w - lr * (x * scale).tanh(), ((x - lr) * scale).softmax(-1).sum(-1) * lr)

    x = make_input((5, 24), ember.float32, specials=False).to(device)
    w = make_input((5, 24), ember.float64, specials=False, seed=1).to(device)
    compiled = ember.compile(step)
    counts = []
    try:
        for lr, scale in ((0.1, 2.0), (0.01, 0.5), (3e-4, -1.25), (0.7, 1e-3)):
            got = _flat(compiled(x, w, lr, scale))
            want = _flat(step(x.cpu(), w.cpu(), lr, scale))
            for i, (g, w_) in enumerate(zip(got, want)):
                _close(g.cpu(), w_, 1e-5, 1e-6, f"lr {lr}, scale {scale}, output {i}")
            counts.append(compiled_sources())
    finally:
        if device != "cpu":
            backend.compile_triton = original
    assert counts[1] == counts[2] == counts[3], f"new floats compiled new Triton kernels: {counts}"


def number_arguments_graph():
    """(graph module, example inputs) of a graph with a float input, for the sm_90 compile: the
    float is an ``fp64`` argument of the kernel."""
    import ember.fx

    g = ember.fx.Graph()
    x, lr = g.placeholder("x"), g.placeholder("lr")
    scaled = g.call_function(ember.ops.mul, (x, lr))
    g.output((g.call_function(ember.ops.sub, (g.call_function(ember.ops.exp, (scaled,)), lr)),
              g.call_function(ember.ops.sum, (scaled, [1]))))
    return ember.fx.GraphModule({}, g), [make_input((6, 16), ember.float32, specials=False), 0.25]


SPECIAL = {"dynamic_batch": dynamic_batch, "symbolic_sizes": symbolic_sizes, "fuzz": fuzz,
           "training_step": training_step, "fallback_unsupported": fallback_unsupported,
           "output_code_log": output_code_log, "graph_cache": graph_cache,
           "persistent_rows_share_loads": persistent_rows_share_loads,
           "repeated_layers_share_kernels": repeated_layers_share_kernels, "number_arguments": number_arguments}
# graphs (not CASES programs) compiled for sm_90 by name
SM90_GRAPHS = {"number_arguments_graph": number_arguments_graph}
