"""ember.compile on CUDA tensors (the inductor's Triton backend) beside torch.compile, one GPU, one run.

- ``chain``: the 4-op pointwise chain ``(x * 2 + 1).relu() - 0.5`` on 4M float32;
- ``softmax`` / ``layer_norm``: 16384 x 8192 float32 rows (one read and one write per element),
  achieved TB/s against a device-to-device copy measured in the same run;
- ``gpt_fwd``: the mini-GPT forward of ``bench_compile_codegen`` (L4, d256, T128, B16), compiled.

Device times are CUDA-event medians (each framework on its own current stream); ``host_us`` is
wall time per call of the compiled function over many asynchronous calls. Compile times are
the first call's wall time (cold kernel caches: this run's own). Prints a table; ``--json PATH``.

    python benchmarks/bench_compile_triton.py [--quick] [--no-gpt] [--json out.json]

Measured on the H200 (2026-12-02, two runs; PyTorch 2.11+cu130, Triton 3.6): copy 3.87-4.01
TB/s; softmax compiled 0.330-0.373 ms = 2.88-3.26 TB/s (72-84% of copy; torch.compile
0.433-0.522 ms: 1.31-1.40x), max-autotune 0.308-0.323 ms (83-90%; 1.41-1.61x); layer_norm
0.334-0.381 ms = 2.82-3.21 TB/s (70-83%; torch.compile 0.318-0.321 ms: 0.84-0.96x); the 4M
chain is bound by the host (ember.compile's per-call front end: 106-121 us a call against
torch.compile's 47-59 us; its 33.5 MB of traffic take ~9 us at copy bandwidth). The mini-GPT
row failed in those runs (ember's CUDA triu had no bool kernel; the mask is now made from a
float triu).
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


def gpt_row(torch, quick):
    from bench_compile_codegen import GPT

    ns: dict = {}
    # the causal mask made from a float triu: ember's CUDA triu has no bool kernel (found on the
    # H200: "a Python number operand of a boolean CUDA kernel"); the same mask on both sides
    source = GPT.replace("m.ones(T_, T_, dtype=m.bool).triu(1)", "m.ones(T_, T_).triu(1).bool()")
    assert source != GPT
    exec(source, ns)
    torch.manual_seed(0)
    tmodel = ns["make_gpt"](torch.nn, torch).eval().cuda()
    emodel = ns["make_gpt"](ember.nn, ember).eval()
    emodel.load_state_dict({k: ember.tensor(v.cpu().numpy()) for k, v in tmodel.state_dict().items()})
    emodel = emodel.to("cuda")
    idx = np.random.default_rng(0).integers(0, 512, (16, 128))
    eidx, tidx = ember.tensor(idx).to("cuda"), torch.from_numpy(idx).cuda()
    out = {"name": "gpt_fwd"}
    # the model makes its mask and positions with factories: on the GPU too
    torch.set_default_device("cuda")
    ember.set_default_device("cuda")
    try:
        _gpt_times(torch, out, emodel, tmodel, eidx, tidx, quick)
    finally:
        torch.set_default_device("cpu")
        ember.set_default_device("cpu")
    out["compiled_ratio"] = round(out["torch_compiled_ms"] / out["ember_compiled_ms"], 3)
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
    parser.add_argument("--json")
    args = parser.parse_args()
    import torch

    rows_n, cols_n = (4096, 8192) if args.quick else (16384, 8192)
    copy_tbs = copy_bandwidth(torch, rows_n * cols_n)
    rows = []

    def add(r):  # printed as measured: a run cut short still shows what it got
        rows.append(r)
        print(json.dumps(r), flush=True)

    add({"name": "copy", "torch_tbs": round(copy_tbs, 3)})
    x = torch.randn(4 * 1024 * 1024, device="cuda")
    add(row(torch, "chain_4M", chain, chain, (to_ember(x),), (x,), 2 * x.numel() * 4, copy_tbs))
    x = torch.randn(rows_n, cols_n, device="cuda")
    w, b = torch.randn(cols_n, device="cuda"), torch.randn(cols_n, device="cuda")
    ex, ew, eb = to_ember(x), to_ember(w), to_ember(b)
    nbytes = 2 * x.numel() * 4
    base = {"softmax": row(torch, "softmax", softmax, softmax, (ex,), (x,), nbytes, copy_tbs, 1e-5, 1e-7)}
    add(base["softmax"])
    base["layer_norm"] = row(torch, "layer_norm", layer_norm, layer_norm, (ex, ew, eb), (x, w, b), nbytes, copy_tbs,
                             1e-4, 1e-4)
    add(base["layer_norm"])
    if not args.no_gpt:
        try:
            add(gpt_row(torch, args.quick))
        except Exception as exc:  # report, keep the other figures
            add({"name": "gpt_fwd", "error": f"{type(exc).__name__}: {exc}"[:500]})
    for name, fn, ea, ta in (("softmax", softmax, (ex,), (x,)), ("layer_norm", layer_norm, (ex, ew, eb), (x, w, b))):
        add(row(torch, name + "_max_autotune", fn, fn, ea, ta, nbytes, copy_tbs, 1e-4, 1e-4,
                mode="max-autotune-no-cudagraphs", base=base[name]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
