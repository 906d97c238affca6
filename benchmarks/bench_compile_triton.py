"""ember.compile on CUDA tensors (the inductor's Triton backend) beside torch.compile, one GPU, one run.

- ``chain``: the 4-op pointwise chain ``(x * 2 + 1).relu() - 0.5`` on 4M float32;
- ``softmax`` / ``layer_norm``: 16384 x 8192 float32 rows (one read and one write per element),
  achieved TB/s against a device-to-device copy measured in the same run;
- ``gpt_fwd``: the mini-GPT forward of ``bench_compile_codegen`` (L4, d256, T128, B16), compiled.

Device times are CUDA-event medians (each framework on its own current stream); ``host_us`` is
wall time per call of the compiled function over many asynchronous calls. Compile times are
the first call's wall time (cold kernel caches: this run's own). Prints a table; ``--json PATH``.

    python benchmarks/bench_compile_triton.py [--quick] [--no-gpt] [--json out.json]

Measured on the H200 (2026-12-02 session 4, one full-size run; PyTorch 2.11+cu130, Triton 3.6;
copy 4.07 TB/s): softmax compiled 0.368 ms = 2.92 TB/s (72% of copy; torch.compile 0.429 ms:
1.17x), max-autotune 0.308 ms = 3.48 TB/s (86%; 1.39x); layer_norm 0.340 ms = 3.16 TB/s (78%;
torch.compile 0.377 ms: 1.11x; rows of a block share the weight/bias loads, no per-element mask
for power-of-two rows); cross_entropy (reads the logits once) 0.397 ms = 1.35 TB/s (33%;
torch.compile 0.275 ms: 0.69x; the graph calls ember's ``_class_nll`` CUDA op, which is slower
than eager ember's fused cross-entropy, 0.239 ms). In that run the mini-GPT rows ran the forward
uncompiled (masked_fill's number reached the graph as a 0-dim CPU input, which sent it to eager:
fixed after the run, not re-measured): forward 15.7 ms against torch.compile's 1.68; the
training step 20.6 ms (backward compiled, gradients within 3.6e-7 of eager) against 8.5, and
its first backward spent 63 s compiling every block-size candidate of every kernel (small
launches are no longer tuned: ``TUNE_MIN_ELEMENTS``).

Session 5 (2026-12-02, H200, copy 3.99 TB/s; one run): cross_entropy is lowered (one persistent
row kernel: max, sum of exponentials and the target's logit in one read of the logits): forward
0.2115 ms = 2.54 TB/s (64% of copy; torch.compile 0.3205 ms: 1.52x; eager ember 0.278 ms);
forward + backward (``ce_train``: the backward reads the logits and writes their gradient, one
kernel) 0.571 ms = 2.82 TB/s (71%; torch.compile 0.893 ms: 1.56x). mini-GPT forward 2.92 ms
against torch.compile's 1.86 (0.64x; 3.37 ms before the per-call host-to-device copy of the
masked_fill number, which synchronized the stream four times a call, was replaced by a cached
device scalar). GPT-2 124M training step (B8 T1024, bf16 autocast, fused AdamW): torch.compile
22.33 ms; ember.compile's first step (capture, AOT backward, Triton compiles and block-size
tuning of ~100 kernels, one by one) did not finish in the ~60 s left of the run, so it has no
figure yet.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

import ember

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


from _timing import cuda_median_ms as median_ms  # noqa: E402


def host_us(fw, fn, n=2000):
    for _ in range(50):
        fn()
    fw.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    fw.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def first_call_s(fw, fn):
    t0 = time.perf_counter()
    fn()
    fw.cuda.synchronize()
    return time.perf_counter() - t0


def to_ember(t):
    return ember.tensor(t.detach().cpu().numpy()).to("cuda")


def compare(got, want, rtol, atol, what):
    np.testing.assert_allclose(got.cpu().numpy(), want.detach().cpu().numpy(), rtol=rtol, atol=atol, err_msg=what)


def row(torch, name, efn, tfn, eargs, targs, nbytes, copy_tbs, rtol=1e-5, atol=1e-5, mode=None, base=None):
    """Eager and compiled, ember and torch, on one program; bandwidth figures when ``nbytes``.

    With ``base`` (an earlier row of the same program) only ember compiled in ``mode`` is
    measured, beside that row's torch.compile figure (torch's max-autotune takes minutes)."""
    out = {"name": name}
    ec = ember.compile(lambda *a: efn(ember, *a), mode=mode)
    out["ember_compile_s"] = round(first_call_s(ember, lambda: ec(*eargs)), 2)
    compare(ec(*eargs), tfn(torch, *targs), rtol, atol, f"{name}: ember compiled vs torch")
    runs = [("ember_compiled", ember, lambda: ec(*eargs))]
    if base is None:
        tc = torch.compile(lambda *a: tfn(torch, *a))
        out["torch_compile_s"] = round(first_call_s(torch, lambda: tc(*targs)), 2)
        runs += [("ember_eager", ember, lambda: efn(ember, *eargs)), ("torch_eager", torch, lambda: tfn(torch, *targs)),
                 ("torch_compiled", torch, lambda: tc(*targs))]
    for label, fw, fn in runs:
        ms = median_ms(fw, fn)
        out[label + "_ms"] = round(ms, 4)
        if nbytes:
            tbs = nbytes / (ms * 1e-3) / 1e12
            out[label + "_tbs"] = round(tbs, 3)
            out[label + "_of_copy"] = round(tbs / copy_tbs, 3)
    out["ember_compiled_host_us"] = round(host_us(ember, lambda: ec(*eargs)), 1)
    if base is None:
        out["torch_compiled_host_us"] = round(host_us(torch, lambda: tc(*targs)), 1)
    torch_ms = (base or out)["torch_compiled_ms"]
    out["compiled_ratio"] = round(torch_ms / out["ember_compiled_ms"], 3)  # > 1: ember faster
    return out


def copy_bandwidth(torch, n) -> float:
    """TB/s of a device-to-device float32 copy of ``n`` elements (read + write)."""
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(torch, lambda: dst.copy_(src))
    return 2 * n * 4 / (ms * 1e-3) / 1e12


def chain(m, x):
    return (x * 2 + 1).relu() - 0.5


def softmax(m, x):
    return m.softmax(x, -1)


def layer_norm(m, x, w, b):
    return m.nn.functional.layer_norm(x, (x.shape[-1],), w, b)


def gpt_source() -> str:
    """``bench_compile_codegen``'s mini-GPT with its mask and positions made on the input's device
    (torch.compile does not follow ``set_default_device`` into them: "found two different
    devices", seen on the H200) and the causal mask from a float triu (ember's CUDA triu has no
    bool kernel on main); the same program on both sides."""
    from bench_compile_codegen import GPT

    source = GPT.replace("m.ones(T_, T_, dtype=m.bool).triu(1)", "m.ones(T_, T_, device=idx.device).triu(1).bool()")
    source = source.replace("self.pos(m.arange(T_))", "self.pos(m.arange(T_, device=idx.device))")
    assert source.count("idx.device") == 2
    return source


def gpt_row(torch, quick):
    ns: dict = {}
    exec(gpt_source(), ns)
    torch.manual_seed(0)
    tmodel = ns["make_gpt"](torch.nn, torch).eval().cuda()
    emodel = ns["make_gpt"](ember.nn, ember).eval()
    emodel.load_state_dict({k: ember.tensor(v.cpu().numpy()) for k, v in tmodel.state_dict().items()})
    emodel = emodel.to("cuda")
    idx = np.random.default_rng(0).integers(0, 512, (16, 128))
    eidx, tidx = ember.tensor(idx).to("cuda"), torch.from_numpy(idx).cuda()
    out = {"name": "gpt_fwd"}
    # the model makes its mask and positions with factories: on the GPU too
    try:
        _gpt_times(torch, out, emodel, tmodel, eidx, tidx, quick)
    finally:
        torch.set_default_device("cpu")
        ember.set_default_device("cpu")
    out["compiled_ratio"] = round(out["torch_compiled_ms"] / out["ember_compiled_ms"], 3)
    return out


def gpt_train_row(torch, quick):
    """The mini-GPT training step (forward, cross-entropy, backward, SGD update), the model
    compiled: ember.compile (AOT forward + backward graphs on the Triton backend) beside
    torch.compile; one step's loss and gradients checked against eager first."""
    ns: dict = {}
    exec(gpt_source(), ns)
    torch.manual_seed(0)
    tmodel = ns["make_gpt"](torch.nn, torch).cuda()
    state = {k: v.cpu().numpy() for k, v in tmodel.state_dict().items()}
    rng = np.random.default_rng(0)
    idx, tgt = rng.integers(0, 512, (16, 128)), rng.integers(0, 512, (16 * 128,))
    eidx, etgt = ember.tensor(idx).to("cuda"), ember.tensor(tgt).to("cuda")
    tidx, ttgt = torch.from_numpy(idx).cuda(), torch.from_numpy(tgt).cuda()

    def ember_model():
        m = ns["make_gpt"](ember.nn, ember)
        m.load_state_dict({k: ember.tensor(v) for k, v in state.items()})
        return m.to("cuda")

    def step_fn(fw, model, fn, x, y):
        opt = fw.optim.SGD(model.parameters(), lr=1e-3)

        def step():
            loss = fw.nn.functional.cross_entropy(fn(x).view(-1, 512), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=False)
            return loss
        return step

    out = {"name": "gpt_train"}
    try:
        # one step's loss and gradients: compiled vs eager ember, and vs torch
        grads = []
        for compiled in (False, True):
            m = ember_model()
            fn = ember.compile(m) if compiled else m
            loss = ember.nn.functional.cross_entropy(fn(eidx).view(-1, 512), etgt)
            t0 = time.perf_counter()
            loss.backward()
            ember.cuda.synchronize()
            if compiled:
                out["ember_backward_first_s"] = round(time.perf_counter() - t0, 2)
            grads.append([loss.detach()] + [p.grad for p in m.parameters()])
        tloss = torch.nn.functional.cross_entropy(tmodel(tidx).view(-1, 512), ttgt)
        tloss.backward()
        tgrads = [tloss.detach()] + [p.grad for p in tmodel.parameters()]
        # per tensor: max |difference| over max |torch's value| (loss and every gradient)
        worst_eager = worst_torch = 0.0
        for e, c, t in zip(grads[0], grads[1], tgrads):
            c, e, t = c.cpu().numpy(), e.cpu().numpy(), t.detach().cpu().numpy()
            scale = float(np.abs(t).max()) + 1e-12
            worst_eager = max(worst_eager, float(np.abs(c - e).max()) / scale)
            worst_torch = max(worst_torch, float(np.abs(c - t).max()) / scale)
        out["max_rel_diff_vs_eager"] = float(f"{worst_eager:.2e}")
        out["max_rel_diff_vs_torch"] = float(f"{worst_torch:.2e}")
        if not worst_eager < 1e-2:
            raise AssertionError(f"compiled gradients differ from eager: {worst_eager:.3g}")
        tmodel.zero_grad(set_to_none=False)
        em, em2, em3 = ember_model(), ember_model(), ember_model()
        ce, ct = ember.compile(em2), torch.compile(tmodel)
        cro = ember.compile(em3, mode="reduce-overhead")  # forward and backward replayed as CUDA graphs
        steps = {"ember_eager": (ember, step_fn(ember, em, em, eidx, etgt)),
                 "ember_compiled": (ember, step_fn(ember, em2, ce, eidx, etgt)),
                 "ember_reduce_overhead": (ember, step_fn(ember, em3, cro, eidx, etgt)),
                 "torch_eager": (torch, step_fn(torch, tmodel, tmodel, tidx, ttgt)),
                 "torch_compiled": (torch, step_fn(torch, tmodel, ct, tidx, ttgt))}
        out["ember_compile_s"] = round(first_call_s(ember, steps["ember_compiled"][1]), 2)
        first_call_s(ember, steps["ember_reduce_overhead"][1])
        out["torch_compile_s"] = round(first_call_s(torch, steps["torch_compiled"][1]), 2)
        for label, (fw, fn) in steps.items():
            out[label + "_ms"] = round(median_ms(fw, fn, iters=10 if quick else 30), 4)
    finally:
        torch.set_default_device("cpu")
        ember.set_default_device("cpu")
    out["compiled_ratio"] = round(out["torch_compiled_ms"] / out["ember_compiled_ms"], 3)
    from ember.compiler.inductor._cudagraphs import COUNTERS

    out["cudagraphs"] = {k: COUNTERS[k] for k in ("captures", "replays", "failures")}
    out["cudagraph_failures"] = COUNTERS["reasons"][:2]
    return out


def gpt_compile_row(torch, quick):
    """ember.compile's first call of the mini-GPT forward in this process (run it in a second
    process to see the warm caches: graphs, tuned configurations and cubins on disk)."""
    from ember.compiler.inductor import _compile_fx

    ns: dict = {}
    exec(gpt_source(), ns)
    ember.manual_seed(0)
    model = ns["make_gpt"](ember.nn, ember).eval().to("cuda")
    idx = ember.tensor(np.random.default_rng(0).integers(0, 512, (16, 128))).to("cuda")
    try:
        built = []
        original = _compile_fx.lower_and_build

        def spy(gm, inputs):
            built.append(original(gm, inputs))
            return built[-1]

        _compile_fx.lower_and_build = spy
        try:
            with ember.no_grad():
                ce = ember.compile(model)
                out = {"name": "gpt_fwd_compile",
                       "ember_compile_s": round(first_call_s(ember, lambda: ce(idx)), 3)}
        finally:
            _compile_fx.lower_and_build = original
        out["graphs"] = [{"triton_kernels": len(getattr(a, "triton_kernels", ()) or ()), "externs": a.extern_count,
                          "cache_hit": getattr(a, "cache_hit", False)} for a in built]
        with ember.no_grad():
            got, want = ce(idx).cpu().numpy(), model(idx).cpu().numpy()
            out["max_abs_diff_vs_eager"] = float(f"{np.abs(got - want).max():.2e}")
    finally:
        ember.set_default_device("cpu")
    return out


def cross_entropy(m, x, y):
    return m.nn.functional.cross_entropy(x, y)


def ce_train_row(torch, x, y, copy_tbs, name="cross_entropy_train"):
    """cross_entropy forward and backward (the logits' gradient): the forward reads the logits
    once, the backward reads them and writes their gradient (3 x 4 bytes an element)."""
    ex, ey = to_ember(x).requires_grad_(True), to_ember(y)
    tx = x.detach().clone().requires_grad_(True)
    ec = ember.compile(lambda a, b: ember.nn.functional.cross_entropy(a, b))
    tc = torch.compile(lambda a, b: torch.nn.functional.cross_entropy(a, b))

    def estep():
        ex.grad = None
        ec(ex, ey).backward()

    def tstep():
        tx.grad = None
        tc(tx, y).backward()

    out = {"name": name, "shape": list(x.shape)}
    out["ember_compile_s"] = round(first_call_s(ember, estep), 2)
    out["torch_compile_s"] = round(first_call_s(torch, tstep), 2)
    compare(ex.grad, tx.grad, 1e-4, 1e-7, f"{name}: logits' gradient")
    nbytes = 3 * x.numel() * 4
    for label, fw, fn in (("ember_compiled", ember, estep), ("torch_compiled", torch, tstep)):
        ms = median_ms(fw, fn)
        out[label + "_ms"] = round(ms, 4)
        out[label + "_tbs"] = round(nbytes / (ms * 1e-3) / 1e12, 3)
        out[label + "_of_copy"] = round(nbytes / (ms * 1e-3) / 1e12 / copy_tbs, 3)
    out["compiled_ratio"] = round(out["torch_compiled_ms"] / out["ember_compiled_ms"], 3)
    return out


def gpt2_row(torch, quick):
    """GPT-2 small (124M, ``bench_cuda_gpt2.build``: 12 layers, d768, vocab 50304, tied head) training
    step: bf16 autocast forward with cross-entropy, backward, fused AdamW; the model compiled by
    ember.compile (default and mode="reduce-overhead") beside torch.compile (default)."""
    from bench_cuda_gpt2 import build

    batch, seq = (4, 256) if quick else (8, 1024)
    rng = np.random.default_rng(1)
    idx = rng.integers(0, 50257, (batch, seq + 1))
    out = {"name": "gpt2_124m_train", "batch": batch, "seq": seq}

    def make(fw, compile_fn):
        fw.manual_seed(0)
        model = build(fw, 12, seq=seq).to("cuda")
        opt = fw.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
        data = (fw.tensor(idx[:, :-1].copy()).to("cuda"), fw.tensor(idx[:, 1:].copy()).to("cuda"))
        run = compile_fn(model)
        losses = []

        def step():
            with fw.autocast("cuda", dtype=fw.bfloat16):
                loss = run(*data)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss)
        return step, losses

    cases = {"torch_compiled": (torch, lambda m: torch.compile(m)),
             "ember_compiled": (ember, lambda m: ember.compile(m)),
             "ember_reduce_overhead": (ember, lambda m: ember.compile(m, mode="reduce-overhead"))}
    for label, (fw, compile_fn) in cases.items():
        step, losses = make(fw, compile_fn)
        out[label + "_first_s"] = round(first_call_s(fw, step), 2)
        out[label + "_ms"] = round(median_ms(fw, step, iters=5 if quick else 10, warm=2), 2)
        out[label + "_tokens_per_s"] = round(batch * seq / (out[label + "_ms"] * 1e-3))
        out[label + "_first_loss"] = round(float(losses[0].item()), 4)
        print(json.dumps({label: out[label + "_ms"]}), flush=True)
        del step, losses
    out["compiled_ratio"] = round(out["torch_compiled_ms"] / out["ember_compiled_ms"], 3)
    out["reduce_overhead_ratio"] = round(out["torch_compiled_ms"] / out["ember_reduce_overhead_ms"], 3)
    return out


def _gpt_times(torch, out, emodel, tmodel, eidx, tidx, quick):
    with ember.no_grad(), torch.no_grad():
        ce, ct = ember.compile(emodel), torch.compile(tmodel)
        out["ember_compile_s"] = round(first_call_s(ember, lambda: ce(eidx)), 2)
        out["torch_compile_s"] = round(first_call_s(torch, lambda: ct(tidx)), 2)
        compare(ce(eidx), tmodel(tidx), 2e-3, 2e-3, "gpt_fwd")
        for label, fw, fn in (("ember_eager", ember, lambda: emodel(eidx)),
                              ("ember_compiled", ember, lambda: ce(eidx)),
                              ("torch_eager", torch, lambda: tmodel(tidx)),
                              ("torch_compiled", torch, lambda: ct(tidx))):
            out[label + "_ms"] = round(median_ms(fw, fn, iters=10 if quick else 30), 4)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-gpt", action="store_true")
    parser.add_argument("--only", default="", help="comma-separated rows: chain,softmax,layer_norm,ce,ce_train,long,"
                        "gpt,train,autotune,gptc,gpt2 (default: all but gptc and gpt2)")
    parser.add_argument("--json")
    args = parser.parse_args()
    import torch

    only = set(args.only.split(",")) if args.only else {"chain", "softmax", "layer_norm", "ce", "ce_train", "long",
                                                         "gpt", "train", "autotune"}
    if args.no_gpt:
        only -= {"gpt", "train"}
    rows_n, cols_n = (4096, 8192) if args.quick else (16384, 8192)
    copy_tbs = copy_bandwidth(torch, rows_n * cols_n)
    rows = []

    def add(r):  # printed as measured: a run cut short still shows what it got
        rows.append(r)
        print(json.dumps(r), flush=True)

    add({"name": "copy", "torch_tbs": round(copy_tbs, 3)})
    if "chain" in only:
        x = torch.randn(4 * 1024 * 1024, device="cuda")
        add(row(torch, "chain_4M", chain, chain, (to_ember(x),), (x,), 2 * x.numel() * 4, copy_tbs))
    x = torch.randn(rows_n, cols_n, device="cuda")
    w, b = torch.randn(cols_n, device="cuda"), torch.randn(cols_n, device="cuda")
    ex, ew, eb = to_ember(x), to_ember(w), to_ember(b)
    nbytes = 2 * x.numel() * 4
    base = {}
    if "softmax" in only:
        base["softmax"] = row(torch, "softmax", softmax, softmax, (ex,), (x,), nbytes, copy_tbs, 1e-5, 1e-7)
        add(base["softmax"])
    if "layer_norm" in only:
        base["layer_norm"] = row(torch, "layer_norm", layer_norm, layer_norm, (ex, ew, eb), (x, w, b), nbytes,
                                 copy_tbs, 1e-4, 1e-4)
        add(base["layer_norm"])
    if "ce" in only:  # reads the logits once; the per-row losses and the mean are small
        y = torch.randint(0, cols_n, (rows_n,), device="cuda")
        add(row(torch, "cross_entropy", cross_entropy, cross_entropy, (ex, to_ember(y)), (x, y), x.numel() * 4,
                copy_tbs, 1e-5, 1e-5))
    if "ce_train" in only:
        y = torch.randint(0, cols_n, (rows_n,), device="cuda")
        add(ce_train_row(torch, x, y, copy_tbs))
    if "long" in only:  # rows past one block (looped: online softmax, Welford; GPT-2's vocabulary)
        xl = torch.randn(rows_n // 8, 65536, device="cuda")
        wl, bl = torch.randn(65536, device="cuda"), torch.randn(65536, device="cuda")
        exl = to_ember(xl)
        nb = 2 * xl.numel() * 4
        add(row(torch, "softmax_65536", softmax, softmax, (exl,), (xl,), nb, copy_tbs, 1e-5, 1e-8))
        add(row(torch, "layer_norm_65536", layer_norm, layer_norm, (exl, to_ember(wl), to_ember(bl)), (xl, wl, bl),
                nb, copy_tbs, 1e-4, 1e-4))
        xv = torch.randn(rows_n // 4, 50304, device="cuda")
        yv = torch.randint(0, 50304, (rows_n // 4,), device="cuda")
        add(row(torch, "cross_entropy_50304", cross_entropy, cross_entropy, (to_ember(xv), to_ember(yv)), (xv, yv),
                xv.numel() * 4, copy_tbs, 1e-5, 1e-5))
        add(ce_train_row(torch, xv, yv, copy_tbs, "cross_entropy_50304_train"))
    for name, fn in (("gpt", gpt_row), ("train", gpt_train_row), ("gptc", gpt_compile_row), ("gpt2", gpt2_row)):
        if name in only:
            try:
                add(fn(torch, args.quick))
            except Exception as exc:  # report, keep the other figures
                add({"name": f"gpt_{name}", "error": f"{type(exc).__name__}: {exc}"[:500]})
    for name, fn, ea, ta in (("softmax", softmax, (ex,), (x,)), ("layer_norm", layer_norm, (ex, ew, eb), (x, w, b))):
        if "autotune" in only and name in base:
            add(row(torch, name + "_max_autotune", fn, fn, ea, ta, nbytes, copy_tbs, 1e-4, 1e-4,
                    mode="max-autotune-no-cudagraphs", base=base[name]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
