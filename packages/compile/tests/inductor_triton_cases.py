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
import contextlib
import json
import os
import sys
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from inductor_test_helpers import _flat, compile_program, make_input, to_torch, tolerances  # noqa: E402
from inductor_test_helpers import assert_close as _close  # noqa: E402
from inductor_triton_special_cases import SM90_GRAPHS, SPECIAL  # noqa: E402 - checks beyond one program

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
def pointwise_casts_round_and_wrap():
    # a cast to half rounds inside the chain; a float cast to a narrow integer wraps (-3.7 -> 253)
    return (lambda t, x: ((x * 100).to(t.float16).float() * 3, (x * 100).to(t.uint8), (x * 100).to(t.int8).float()),
            [make_input((9, 20), ember.float32, specials=False)], {"rtol": 0, "atol": 0})


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
    # gelu at +-inf differs between PyTorch's CPU builds (NaN with AVX-512): compared on finite inputs
    return (lambda t, x: (x.tanh(), t.erf(x), x.expm1(), x.abs().log1p(), x.sigmoid(),
                          t.nn.functional.gelu(x.clamp(-30, 30)), t.nn.functional.silu(x), t.exp2(x),
                          (x.abs() + 1).rsqrt(), x.floor(), x.trunc(), x.round(), x.sign(),
                          t.nn.functional.softplus(x), t.nn.functional.elu(x)),
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
def reduction_outer_columns():
    # reductions over leading dims (a bias gradient): rows contiguous, the reduced elements strided;
    # long columns loop in blocks of many rows, short ones stay persistent
    def program(t, x, g, s):
        return (x.sum(0), (x * x).mean(0), x.amax(0), g.sum((0, 1)), s.sum(0), (s + 1).prod(0))
    return (program, [make_input((600, 48), ember.float32, specials=False),
                      make_input((4, 150, 40), ember.float32, specials=False, seed=5),
                      make_input((100, 33), ember.float32, specials=False, seed=6, low=-1.0, high=1.0)],
            {"rtol": 1e-4, "atol": 1e-4})


@case
def reduction_outer_row_scaled():
    # LayerNorm's weight/bias gradients: column sums of the incoming gradient times the input
    # scaled by per-row statistics (vectors along the reduced dim, shared by every column)
    def program(t, g, x, mean, rstd):
        return (g * ((x - mean[:, None]) * rstd[:, None])).sum(0), g.sum(0)
    return (program, [make_input((600, 48), ember.float32, specials=False),
                      make_input((600, 48), ember.float32, specials=False, seed=5),
                      make_input((600,), ember.float32, specials=False, seed=6),
                      make_input((600,), ember.float32, specials=False, seed=7, low=0.5, high=2.0)],
            {"rtol": 1e-4, "atol": 1e-4})


@case
def reduction_split_full():
    # reductions of every element (a loss, a norm): split into rows reduced in parallel, then the
    # rows' results; with NaN in a max, keepdim, a fused producer and a fused consumer
    def program(t, x, m):
        return (x.sum(), (x * x).mean() * 2, x.amax(), x.sum((0, 1), keepdim=True), m.any(), (x - 1).abs().sum())
    return (program, [make_input((300, 400), ember.float32, specials=False),
                      make_input((300, 400), ember.bool, seed=3)], {"rtol": 1e-4, "atol": 1e-3})


@case
def reduction_split_columns():
    # few outputs over many elements (LayerNorm's weight gradient, a bias gradient, a per-channel
    # statistic): split into parts along the reduced elements, then the parts per output
    def program(t, g, x, m):
        return ((g * x).sum(0), g.sum((0, 1), keepdim=True), x.amax(0), (g + 1).mean((0, 2)), m.any(0))
    return (program, [make_input((512, 4, 700), ember.float32, specials=False),
                      make_input((512, 4, 700), ember.float32, specials=False, seed=5),
                      make_input((512, 4, 700), ember.bool, seed=6)], {"rtol": 1e-4, "atol": 1e-3})


@case
def reduction_split_many_columns():
    # a bias gradient over more columns than the plain split takes (GPT-2's qkv: 2304): 4 parts of
    # 256 rows in blocks of columns (100: the last block masked), then the parts; a GELU-style
    # gradient stored for a matmul and summed through a second view of it
    # (the split's thresholds lowered so that the interpreter runs it at a small size)
    def program(t, x, g, w):
        d = g * (1 + x.tanh())
        return x.sum(0), (x * 2).amax(0), d.view(1024, 100) @ w, d.view(1024, 100).sum(0)
    return (program, [make_input((1024, 100), ember.float32, specials=False),
                      make_input((1024, 100), ember.float32, specials=False, seed=5),
                      make_input((100, 3), ember.float32, specials=False, seed=6)],
            {"rtol": 1e-4, "atol": 1e-4, "externs": True, "split": {"SPLIT_MAX_KEPT": 64, "SPLIT_MIN_KEPT": 1 << 16}})


@case
def cat_pieces_into_slices():
    # cat as the pieces' own kernel storing into slices of one buffer (attention's q/k/v
    # gradients joined into the qkv gradient), bf16 pieces, a cat along dim 0
    def program(t, a, b, c):
        q = (a * 2).transpose(1, 2).reshape(2, 16, 32)
        k = b.transpose(1, 2).reshape(2, 16, 32)
        x = t.cat([q, k, c.transpose(1, 2).reshape(2, 16, 32)], 2)
        return x.float().sum(-1), x, t.cat([a, b.exp()], 0)
    return (program, [make_input((2, 4, 16, 8), ember.bfloat16, seed=i, specials=False) for i in range(3)],
            {"rtol": 1e-2, "atol": 1e-2, "externs": True})


@case
def reduction_split_full_nan():
    return (lambda t, x: (x.amax(), x.amin(), x.sum()), [make_input((256, 512), ember.float32)],
            {"rtol": 1e-4, "atol": 1e-3})


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
def welford_looped_rows():
    # rows longer than one block: mean and M2 in one read (Welford), then the output pass
    def program(t, x, w, b):
        return t.nn.functional.layer_norm(x, (9000,), w, b), x.var(-1), x.std(-1, correction=0), t.logsumexp(x, -1)
    return (program, [make_input((3, 9000), ember.float32, specials=False, low=5.0, high=9.0),
                      make_input((9000,), ember.float32, seed=11), make_input((9000,), ember.float32, seed=12)],
            {"rtol": 1e-4, "atol": 1e-5})


@case
def softmax_looped_specials():
    # online softmax on long rows with -inf entries, a row of -inf, an inf and a NaN
    def prepare(xs):
        x = xs[0].clone()
        x[0, ::3] = float("-inf")
        x[1] = float("-inf")
        x[2, 17] = float("inf")
        x[3, 4000] = float("nan")
        return [x]
    return (lambda t, x: (t.softmax(x, -1), t.log_softmax(x, -1), x.amax(-1)),
            [make_input((5, 8500), ember.float32, specials=False, low=-90.0, high=-80.0)],
            {"prepare": prepare, "rtol": 1e-5, "atol": 1e-6})


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
    # one persistent row kernel: max, sum of exponentials and the target's logit in one read
    return (lambda t, x, y: t.nn.functional.cross_entropy(x, y),
            [make_input((12, 33), ember.float32, specials=False), ember.tensor(np.arange(12) * 5 % 33)],
            {"rtol": 1e-5, "atol": 1e-6})


def _targets(rows, classes, ignore=-100):
    y = np.arange(rows) * 7 % classes
    y[::4] = ignore
    return ember.tensor(y)


@case
def cross_entropy_weighted_smoothed():
    def program(t, x, y, w):
        f = t.nn.functional
        return (f.cross_entropy(x, y, weight=w, ignore_index=5, label_smoothing=0.1),
                f.cross_entropy(x, y, weight=w, ignore_index=5, reduction="none"),
                f.nll_loss(t.log_softmax(x, 1), y, ignore_index=5, reduction="sum"))
    return (program, [make_input((13, 40), ember.float32, specials=False), _targets(13, 40, ignore=5),
                      make_input((40,), ember.float32, seed=3, low=0.2, high=2.0, specials=False)],
            {"rtol": 1e-5, "atol": 1e-5})


@case
def cross_entropy_looped_rows():
    # rows longer than one block (PERSISTENT_MAX)
    return (lambda t, x, y: t.nn.functional.cross_entropy(x, y, label_smoothing=0.05),
            [make_input((3, 9000), ember.float32, specials=False), _targets(3, 9000)], {"rtol": 1e-5, "atol": 1e-5})


def _class_nll_backward(t, x, y, w, g):
    """The input gradient of cross_entropy(reduction="none", label_smoothing=0.1) for output
    gradient ``g``: ember's backward op (what an AOT backward graph holds), torch's autograd."""
    smoothing, classes = 0.1, x.shape[1]
    if t is ember:
        return ember.ops._class_nll_backward(g * (1 - smoothing), g * (smoothing / classes), x, y, w, -100, False)
    x = x.detach().requires_grad_(True)
    loss = t.nn.functional.cross_entropy(x, y, weight=w, reduction="none", label_smoothing=smoothing)
    return t.autograd.grad(loss, x, g)[0]


@case
def cross_entropy_backward():
    return (_class_nll_backward, [make_input((11, 37), ember.float32, specials=False), _targets(11, 37),
                                  make_input((37,), ember.float32, seed=4, low=0.2, high=2.0, specials=False),
                                  make_input((11,), ember.float32, seed=5, specials=False)],
            {"rtol": 1e-5, "atol": 1e-6})


def _class_nll_backward_saved(t, x, y, w, g):
    """As ``_class_nll_backward`` with the forward's log-sum-exp handed over (``_class_nll``'s fourth
    output, what the AOT backward gets saved): exp(x - lse) with no row max or sum in the backward."""
    if t is not ember:
        return _class_nll_backward(t, x, y, w, g)
    smoothing, classes = 0.1, x.shape[1]
    lse = ember.ops._class_nll(x, y, w, -100, False, True)[3]
    return ember.ops._class_nll_backward(g * (1 - smoothing), g * (smoothing / classes), x, y, w, -100, False, lse)


@case
def cross_entropy_backward_saved_lse():
    return (_class_nll_backward_saved, [make_input((11, 37), ember.float32, specials=False), _targets(11, 37),
                                        make_input((37,), ember.float32, seed=4, low=0.2, high=2.0, specials=False),
                                        make_input((11,), ember.float32, seed=5, specials=False)],
            {"rtol": 1e-5, "atol": 1e-6})


@contextlib.contextmanager
def _split_limits(opts):
    """The split thresholds of ``_lowering_reduce`` a case sets (``"split"``), for its compile only."""
    from ember.compiler.inductor import _lowering_reduce

    saved = {k: getattr(_lowering_reduce, k) for k in opts.get("split", {})}
    for k, v in opts.get("split", {}).items():
        setattr(_lowering_reduce, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(_lowering_reduce, k, v)


def run_case(name: str, device: str) -> None:
    program, inputs, opts = CASES[name]()
    prepare = opts.get("prepare", lambda xs: xs)
    dev_inputs = prepare([x.to(device) for x in inputs])
    cpu_inputs = prepare(list(inputs))
    with _split_limits(opts):
        compiled, _ = compile_program(program, dev_inputs)
        art = compiled.artifact
    assert art is not None, "the graph fell back to eager"
    assert getattr(art, "triton_kernels", None) is not None, "not compiled by the Triton backend"
    if not opts.get("externs"):
        assert art.extern_count == 0, f"{art.extern_count} ops not lowered:\n{art.wrapper_source}"
    assert "@triton.jit" in art.cpp_source or art.kernel_count == 0
    if "split" in opts:
        # the column reductions split: partial sums over 4 parts of the 1024 rows, then the parts
        assert "rnumel = 256" in art.cpp_source and "rnumel = 4" in art.cpp_source, art.cpp_source
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


def compile_sm90(names) -> None:
    """Each case's kernels compiled for sm_90 by Triton without a GPU (PTX and a cubin)."""
    from ember.compiler import make_fx
    from ember.compiler.inductor._compile_fx import triton_kernels
    from ember.compiler.inductor._triton_runtime import compile_for_target, configs

    for name in names:
        if name in SM90_GRAPHS:
            gm, inputs = SM90_GRAPHS[name]()
        else:
            program, inputs, opts = CASES[name]()
            inputs = opts.get("prepare", lambda xs: xs)(list(inputs))
            gm = make_fx(lambda *xs, program=program: program(ember, *xs))(*inputs)
        with _split_limits({} if name in SM90_GRAPHS else opts):
            _, _, specs = triton_kernels(gm, inputs)
        if name in SM90_GRAPHS:  # a graph with float inputs: they are kernel arguments
            assert any(kind == "number" for s in specs for kind, _ in s.params), f"{name}: no number argument"
        for spec in specs:
            xnumel = int(spec.xnumel)
            cfg = configs(spec, xnumel, int(spec.rnumel), False)[0]
            compiled = compile_for_target(spec, cfg, 90)
            ptx = compiled.asm["ptx"]
            assert ".target sm_90" in ptx, f"{name}/{spec.name}: no sm_90 target in the PTX"
            assert len(compiled.asm["cubin"]) > 0, f"{name}/{spec.name}: no cubin"


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
