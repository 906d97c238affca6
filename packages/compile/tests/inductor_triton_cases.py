"""Programs for the inductor's Triton backend, each checked compiled vs eager ember vs PyTorch.

Run as a script (``python inductor_triton_cases.py --device cpu|cuda [names...]``) it prints one
JSON line per case: ``{"case": name, "ok": bool, "error": text}``. On ``cpu`` the kernels run
in Triton's interpreter, which needs ``TRITON_INTERPRET=1`` before Triton is first imported:
``test_inductor_triton.py`` starts this script in a process of its own for that reason. On
``cuda`` (the H200 run) the same programs launch the compiled kernels on the GPU.

Sizes are small: the interpreter runs every program instance in Python.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from inductor_test_helpers import _flat, compile_program, make_input, to_torch, tolerances  # noqa: E402
from inductor_test_helpers import assert_close as _close  # noqa: E402

import ember  # noqa: E402
import ember.nn.functional as F  # noqa: E402, F401 - programs reach it as t.nn.functional
from ember.compiler.inductor import config  # noqa: E402

CASES: dict = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


# Each case returns (program, inputs, options): program(framework, *inputs); options may hold
# "prepare" (a function giving the inputs the program gets, applied on both frameworks: views
# that make non-contiguous inputs), "rtol"/"atol", "externs" (extern calls allowed), "kernels".

@case
def pointwise_chain():
    return (lambda t, x, y: (x.sin() * 2 + y).relu() - x.exp() * 0.5,
            [make_input((33, 40), ember.float32), make_input((40,), ember.float32, seed=1)], {})


@case
def pointwise_noncontiguous_inputs():
    def prepare(xs):
        x, y = xs
        return [x.t(), y[:, ::2]]
    return (lambda t, x, y: x * 3 + y.cos(),
            [make_input((24, 16), ember.float32), make_input((16, 48), ember.float32, seed=2)],
            {"prepare": prepare})


@case
def pointwise_views_in_graph():
    # transposes, strided slices and reshapes of views: index arithmetic in the kernel
    return (lambda t, x: x.t()[2:, ::2] * 2 + x.reshape(10, 2, 12)[:, 1, :].t()[2:],
            [make_input((20, 12), ember.float32)], {})


@case
def pointwise_broadcast_3d():
    return (lambda t, x, y, z: t.where(x > y, x * z, y - z),
            [make_input((4, 1, 8), ember.float32), make_input((1, 5, 8), ember.float32, seed=3),
             make_input((5, 1), ember.float32, seed=4)], {})


@case
def pointwise_int():
    return (lambda t, a, b: (t.floor_divide(a, b) * 3 + t.remainder(a, b), a > b, (a & 7) ^ (b | 1), -a.abs()),
            [make_input((7, 9), ember.int64), make_input((7, 9), ember.int64, seed=5).clamp(1, 50) *
             ember.tensor([1, -1, 1, -1, 1, -1, 1, -1, 1])], {"externs": True})


@case
def pointwise_int32_bool():
    return (lambda t, a, m: (t.where(m, a, a * 2 + 1), m.logical_not() | (a < 3), (a + m.to(t.int32)).to(t.int64)),
            [make_input((64,), ember.int32), make_input((64,), ember.bool, seed=6)], {})


@case
def pointwise_float16():
    r, a = tolerances(ember.float16)
    return (lambda t, x, y: (x * y + x.sigmoid()).to(t.float16) - y,
            [make_input((16, 33), ember.float16), make_input((16, 33), ember.float16, seed=7)],
            {"rtol": r, "atol": a})


@case
def pointwise_bfloat16():
    r, a = tolerances(ember.bfloat16)
    return (lambda t, x, y: (x.tanh() + y * 2).relu(),
            [make_input((8, 50), ember.bfloat16), make_input((50,), ember.bfloat16, seed=8)],
            {"rtol": r, "atol": a})


@case
def pointwise_float64():
    return (lambda t, x: (x.exp() - 1).log1p() + x.atan2(x + 1) + x.pow(2),
            [make_input((10, 10), ember.float64)], {"rtol": 1e-12, "atol": 1e-12})


@case
def pointwise_nan_inf():
    return (lambda t, x, y: (t.maximum(x, y), t.minimum(x, y), x.clamp(-1, 1), x.isnan(), x.isinf(),
                             x.isfinite()),
            [make_input((26,), ember.float32), make_input((26,), ember.float32, seed=9)], {})


@case
def pointwise_math():
    return (lambda t, x: (x.tanh(), t.erf(x), x.expm1(), x.abs().log1p(), x.sigmoid(), t.nn.functional.gelu(x),
                          t.nn.functional.silu(x), t.exp2(x), (x.abs() + 1).rsqrt(), x.floor(), x.trunc(),
                          x.round(), x.sign(), t.nn.functional.softplus(x), t.nn.functional.elu(x)),
            [make_input((40,), ember.float32)], {"rtol": 2e-6, "atol": 2e-6})


@case
def pointwise_empty():
    return (lambda t, x, y: (x * 2 + y).relu(), [make_input((0, 8), ember.float32), make_input((8,), ember.float32)],
            {"kernels": None})


@case
def masked_fill_number():
    # masked_fill with a Python number: on CUDA the number reaches the graph as a 0-dim CPU
    # tensor input beside the device tensors, which the wrapper moves to the device
    return (lambda t, x, m: t.softmax(x.masked_fill(m, float("-inf")), -1) * 2,
            [make_input((6, 16), ember.float32, specials=False), make_input((16,), ember.bool, seed=4)],
            {"rtol": 1e-5, "atol": 1e-6})


@case
def reduction_sum_mean_keepdim():
    return (lambda t, x: (x.sum(-1), x.mean(1, keepdim=True), (x * x).sum(0), x.sum()),
            [make_input((12, 70), ember.float32, specials=False)], {"rtol": 1e-5, "atol": 1e-5})


@case
def reduction_max_min_nan():
    return (lambda t, x: (x.amax(-1), x.amin(0), x.max()),
            [make_input((6, 30), ember.float32)], {})


@case
def reduction_int_bool_prod():
    return (lambda t, a, m: (a.sum(-1), m.any(-1), m.all(0), (a % 3 + 1).prod(-1), a.amax(1)),
            [make_input((5, 11), ember.int64), make_input((5, 11), ember.bool, seed=10)], {"externs": True})


@case
def reduction_looped_rows():
    # rows longer than one block: looped reductions with an accumulator
    return (lambda t, x: (x.sum(-1), x.amax(-1), t.softmax(x, -1)),
            [make_input((2, 9000), ember.float32, specials=False)], {"rtol": 1e-4, "atol": 1e-6})


@case
def softmax_persistent():
    return (lambda t, x: (t.softmax(x, -1), t.log_softmax(x, -1)),
            [make_input((10, 77), ember.float32, specials=False)], {"rtol": 1e-5, "atol": 1e-6})


@case
def softmax_float16():
    r, a = tolerances(ember.float16)
    return (lambda t, x: t.softmax(x, -1), [make_input((6, 40), ember.float16, specials=False)],
            {"rtol": r, "atol": a})


@case
def layer_norm_persistent():
    return (lambda t, x, w, b: t.nn.functional.layer_norm(x, (64,), w, b),
            [make_input((9, 64), ember.float32, specials=False), make_input((64,), ember.float32, seed=11),
             make_input((64,), ember.float32, seed=12)], {"rtol": 1e-4, "atol": 1e-5})


@case
def variance_two_pass():
    return (lambda t, x: (x.var(-1), x.std(0), x.var(-1, correction=0)),
            [make_input((8, 50), ember.float32, specials=False)], {"rtol": 1e-4, "atol": 1e-5})


@case
def cross_entropy():
    return (lambda t, x, y: t.nn.functional.cross_entropy(x, y),
            [make_input((12, 33), ember.float32, specials=False), ember.tensor(np.arange(12) * 5 % 33)],
            {"rtol": 1e-5, "atol": 1e-6, "externs": True})


def run_case(name: str, device: str) -> None:
    program, inputs, opts = CASES[name]()
    prepare = opts.get("prepare", lambda xs: xs)
    dev_inputs = prepare([x.to(device) for x in inputs])
    cpu_inputs = prepare(list(inputs))
    compiled, _ = compile_program(program, dev_inputs)
    art = compiled.artifact
    assert art is not None, "the graph fell back to eager"
    assert getattr(art, "triton_kernels", None) is not None, "not compiled by the Triton backend"
    if not opts.get("externs"):
        assert art.extern_count == 0, f"{art.extern_count} ops not lowered:\n{art.wrapper_source}"
    assert "@triton.jit" in art.cpp_source or art.kernel_count == 0
    got = _flat(compiled(*dev_inputs))
    want = _flat(program(ember, *cpu_inputs))
    ref = _flat(program(torch, *[to_torch(x) for x in cpu_inputs]))
    rtol, atol = opts.get("rtol", 2e-6), opts.get("atol", 1e-6)
    assert len(got) == len(want) == len(ref)
    for i, (g, w, r) in enumerate(zip(got, want, ref)):
        g = g.cpu()
        _close(g, w, rtol, atol, f"{name} output {i} vs eager")
        r = r.float() if r.dtype == torch.bfloat16 else r
        r = (ember.tensor(r.item()) if r.dim() == 0 else ember.tensor(r.numpy())).to(w.dtype)
        _close(g, r, rtol, atol, f"{name} output {i} vs torch")


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


def compile_sm90(names) -> None:
    """Each case's kernels compiled for sm_90 by Triton without a GPU (PTX and a cubin)."""
    from ember.compiler import make_fx
    from ember.compiler.inductor._compile_fx import triton_kernels
    from ember.compiler.inductor._triton_runtime import compile_for_target, configs

    for name in names:
        program, inputs, opts = CASES[name]()
        inputs = opts.get("prepare", lambda xs: xs)(list(inputs))
        gm = make_fx(lambda *xs, program=program: program(ember, *xs))(*inputs)
        _, _, specs = triton_kernels(gm, inputs)
        for spec in specs:
            xnumel = int(spec.xnumel)
            cfg = configs(spec, xnumel, int(spec.rnumel), False)[0]
            compiled = compile_for_target(spec, cfg, 90)
            ptx = compiled.asm["ptx"]
            assert ".target sm_90" in ptx, f"{name}/{spec.name}: no sm_90 target in the PTX"
            assert len(compiled.asm["cubin"]) > 0, f"{name}/{spec.name}: no cubin"


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


SPECIAL = {"dynamic_batch": dynamic_batch, "symbolic_sizes": symbolic_sizes, "fuzz": fuzz,
           "training_step": training_step, "fallback_unsupported": fallback_unsupported,
           "output_code_log": output_code_log, "graph_cache": graph_cache,
           "persistent_rows_share_loads": persistent_rows_share_loads}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sm90", action="store_true", help="compile the kernels for sm_90 instead of running them")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
    if args.sm90:
        for name in args.names or list(CASES):
            try:
                compile_sm90([name])
                print(json.dumps({"case": name, "ok": True}), flush=True)
            except Exception as exc:
                print(json.dumps({"case": name, "ok": False, "error": f"{type(exc).__name__}: {exc}\n"
                                  + traceback.format_exc()[-3000:]}), flush=True)
        return 0
    if args.device == "cpu":
        config.cpu_backend = "triton"
    else:
        config.triton.autotune = False  # correctness runs: one compile per kernel (the benchmark tunes)
    names = args.names or [*CASES, *SPECIAL]
    failed = 0
    for name in names:
        try:
            if name in SPECIAL:
                SPECIAL[name](args.device)
            else:
                run_case(name, args.device)
            print(json.dumps({"case": name, "ok": True}), flush=True)
        except Exception as exc:
            failed += 1
            print(json.dumps({"case": name, "ok": False,
                              "error": f"{type(exc).__name__}: {exc}"[:3000] + "\n" + traceback.format_exc()[-3000:]}),
                  flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
