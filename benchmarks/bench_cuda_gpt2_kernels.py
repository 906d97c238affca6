"""The kernels of a GPT-2 124M training step (B8, T1024, bf16 autocast) one by one, ember beside
PyTorch CUDA in one process: the GEMMs of its linears, the column sums of its bias and LayerNorm-weight
gradients, its dtype casts and layout copies, and the fused AdamW update. ``--tune`` also sweeps ember's
column-sum configuration. Device times: CUDA events around 20 calls queued behind a long matmul (so the
host's launch cost does not show), median of 15; ratio = PyTorch time / ember time (above 1: ember
is faster). (Giving cuBLAS a 32 MiB workspace changed none of the GEMM times: measured on the H200.)

    python benchmarks/bench_cuda_gpt2_kernels.py [--tune] [--parts gemm,sum,copy,adam] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from _timing import cuda_median_ms as _median_ms

import ember

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROWS: list = []


def _row(name, ember_ms, torch_ms, nbytes=None, flops=None):
    row = {"name": name, "ember_ms": round(ember_ms, 4), "torch_ms": round(torch_ms, 4) if torch_ms else None,
           "ratio": round(torch_ms / ember_ms, 3) if torch_ms else None}
    if nbytes:
        row["ember_TBps"] = round(nbytes / ember_ms / 1e9, 3)
        if torch_ms:
            row["torch_TBps"] = round(nbytes / torch_ms / 1e9, 3)
    if flops:
        row["ember_TFLOPs"] = round(flops / ember_ms / 1e9, 1)
        if torch_ms:
            row["torch_TFLOPs"] = round(flops / torch_ms / 1e9, 1)
    ROWS.append(row)
    print(json.dumps(row), flush=True)


def _thunk(x, fn):
    return lambda: fn(x)


def _device_ms(fw, fn, iters, calls=20):
    """Device milliseconds per call of ``fn``: events around ``calls`` calls queued behind a ~1 ms matmul,
    so the host's launch cost does not show (median of ``iters`` such groups)."""
    blocker = fw.ones(8192, 8192, device="cuda", dtype=fw.bfloat16)
    for _ in range(3):
        fn()
    times = []
    for _ in range(iters):
        fw.cuda.synchronize()
        blocker @ blocker
        start, end = fw.cuda.Event(enable_timing=True), fw.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def _both(torch, make, iters=15, queued=True):
    """make(fw) -> thunk; (ember ms, torch ms)."""
    out = []
    for fw in (ember, torch):
        fn = make(fw)
        out.append(_device_ms(fw, fn, iters) if queued else _median_ms(fw, fn, iters))
        del fn
    return out


def _rand(fw, shape, dtype, seed=0):
    fw.manual_seed(seed)
    return fw.randn(*shape, device="cuda").to(getattr(fw, dtype))


def libraries():
    maps = Path("/proc/self/maps").read_text().splitlines()
    libs = sorted({line.split()[-1] for line in maps if "cublas" in line})
    print("cuBLAS libraries mapped:", libs, flush=True)


def gemms(torch):
    m = 8192
    for k, n in ((768, 2304), (768, 768), (768, 3072), (3072, 768), (768, 50304)):
        def fwd(fw, k=k, n=n):
            x, w, b = _rand(fw, (m, k), "bfloat16"), _rand(fw, (n, k), "bfloat16", 1), _rand(fw, (n,), "bfloat16", 2)
            return lambda: fw.nn.functional.linear(x, w, b)

        e, t = _both(torch, fwd)
        _row(f"linear fwd {m}x{k} @ ({n}x{k})^T +bias bf16", e, t, flops=2 * m * k * n)

        def dgrad(fw, k=k, n=n):
            g, w = _rand(fw, (m, n), "bfloat16"), _rand(fw, (n, k), "bfloat16", 1)
            return lambda: fw.mm(g, w)

        e, t = _both(torch, dgrad)
        _row(f"grad input {m}x{n} @ {n}x{k} bf16", e, t, flops=2 * m * k * n)

        def wgrad(fw, k=k, n=n):
            g, x = _rand(fw, (m, n), "bfloat16"), _rand(fw, (m, k), "bfloat16", 1)
            return lambda: fw.mm(g.t(), x)

        e, t = _both(torch, wgrad)
        _row(f"grad weight ({m}x{n})^T @ {m}x{k} bf16", e, t, flops=2 * m * k * n)


def col_sums(torch, label=""):
    for n in (768, 2304, 3072):
        for dtype, size in (("bfloat16", 2), ("float32", 4)):
            e, t = _both(torch, lambda fw, n=n, dtype=dtype: _thunk(_rand(fw, (8192, n), dtype), lambda x: x.sum(0)))
            _row(f"sum(0) 8192x{n} {dtype}{label}", e, t, nbytes=8192 * n * size)


def tune_col_sums(torch):
    from ember._cuda import _reduce

    saved = dict(_reduce.COL_CONFIG)
    for bn, bk, warps, stages, ppsm, min_rows in ((32, 64, 4, 2, 2, 256), (64, 64, 4, 2, 8, 64),
                                                  (64, 128, 4, 2, 8, 64), (32, 128, 4, 3, 8, 64),
                                                  (64, 128, 8, 2, 8, 128), (128, 64, 8, 2, 8, 128),
                                                  (32, 256, 8, 2, 8, 64), (64, 256, 8, 2, 4, 64),
                                                  (16, 256, 4, 3, 8, 32), (64, 128, 4, 3, 16, 32)):
        _reduce.COL_CONFIG.update(bn=bn, bk=bk, warps=warps, stages=stages, ppsm=ppsm, min_rows=min_rows)
        col_sums(torch, f" [bn={bn} bk={bk} w={warps} st={stages} ppsm={ppsm} min={min_rows}]")
    _reduce.COL_CONFIG.update(saved)


def casts_and_copies(torch):
    for shape in ((8192, 50304), (8192, 768)):
        n = shape[0] * shape[1]
        for src, dst in (("float32", "bfloat16"), ("bfloat16", "float32")):
            e, t = _both(torch, lambda fw, shape=shape, src=src, dst=dst:
                         _thunk(_rand(fw, shape, src), lambda x: x.to(getattr(fw, dst))))
            _row(f"cast {src}->{dst} {shape}", e, t, nbytes=n * 6)
    e, t = _both(torch, lambda fw: _thunk(_rand(fw, (8, 12, 1024, 64), "bfloat16"),
                                          lambda x: x.transpose(1, 2).contiguous()))
    _row("transpose(1,2).contiguous() 8x12x1024x64 bf16", e, t, nbytes=8 * 12 * 1024 * 64 * 4)

    def sdpa_layout(fw):
        q = _rand(fw, (8, 1024, 12, 64), "bfloat16").transpose(1, 2)
        y = fw.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        print(f"{fw.__name__}: sdpa output stride {tuple(y.stride())}", flush=True)
        return lambda: y.transpose(1, 2).contiguous()

    e, t = _both(torch, sdpa_layout)
    _row("sdpa output .transpose(1,2).contiguous()", e, t)


def adamw(torch, tune=False):
    from bench_cuda_gpt2 import build

    from ember._cuda import _ops_optim as O

    def make(fw):
        fw.manual_seed(0)
        model = build(fw, 12).to("cuda")
        for p in model.parameters():
            p.grad = fw.randn_like(p) * 1e-3
        opt = fw.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
        return opt.step

    nbytes = 124_000_000 * 4 * 7
    e, t = _both(torch, make, iters=10, queued=False)
    _row("fused AdamW step, GPT-2 124M params", e, t, nbytes=nbytes)
    # Device time alone (each step queued behind device work outlasting its issue: the host's ~0.5 ms to
    # reach the launch is not counted, for either framework).
    steps = {fw: make(fw) for fw in (ember, torch)}
    t = _median_ms(torch, steps[torch], 10, hide_host=True)
    e = _median_ms(ember, steps[ember], 10, hide_host=True)
    _row(f"fused AdamW step, device only (CHUNK, BLOCK, warps) {O.CHUNK, O._CHUNK_BLOCK, O._CHUNK_WARPS}", e, t,
         nbytes=nbytes)
    if not tune:
        return
    saved = O.CHUNK, O._CHUNK_BLOCK, O._CHUNK_WARPS
    for cfg in ((65536, 2048, 8), (16384, 2048, 8), (8192, 2048, 8), (8192, 1024, 4), (16384, 4096, 8),
                (4096, 1024, 4), (32768, 4096, 8), (16384, 1024, 4), (8192, 4096, 16), (4096, 2048, 8)):
        O.CHUNK, O._CHUNK_BLOCK, O._CHUNK_WARPS = cfg
        e = _median_ms(ember, steps[ember], 10, hide_host=True)
        _row(f"tune fused AdamW (CHUNK, BLOCK, warps) {cfg}", e, t, nbytes=nbytes)
    O.CHUNK, O._CHUNK_BLOCK, O._CHUNK_WARPS = saved


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tune", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--parts", default="gemm,sum,copy,adam")
    args = ap.parse_args()
    import torch

    parts = args.parts.split(",")
    if "gemm" in parts:
        gemms(torch)
        libraries()
    if "sum" in parts:
        col_sums(torch)
        if args.tune:
            tune_col_sums(torch)
    if "copy" in parts:
        casts_and_copies(torch)
    if "adam" in parts:
        adamw(torch, args.tune)
    if args.json:
        Path(args.json).write_text(json.dumps(ROWS, indent=1))


if __name__ == "__main__":
    main()
