"""ember's CUDA device beside PyTorch CUDA, in one process on one GPU.

Bandwidth (copy, add, sum, softmax, layer_norm, cross-entropy), matmul TFLOP/s (bf16, fp16,
tf32, fp32) and the host cost of a small op. Device times are CUDA-event medians (each
framework timed with its own events on its own current stream); host cost is wall time per
call over many asynchronous 1-element adds. Prints a table and writes JSON (``--json PATH``).

    python benchmarks/bench_cuda.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json

from _timing import cuda_host_us as _host_us
from _timing import cuda_median_ms as _median_ms

import ember
import ember.nn.functional as EF

_ONLY: list = []  # --only: substrings of the case names to run (all when empty)


def _wanted(name: str) -> bool:
    return not _ONLY or any(part in name for part in _ONLY)


def _pair(torch, name, make, iters, work, unit, latency=False):
    """make(fw) -> a thunk; work: bytes or flops per call; returns the row (None when --only skips it).

    The kernels are timed with the host's issue time hidden (each call queued behind device work:
    ``_timing.cuda_median_ms(hide_host=True)``); with ``latency`` also from an idle device, the host's
    latency to the first launch included (``*_lat_ms``: the figure this benchmark gave before)."""
    if not _wanted(name):
        return None
    row = {"name": name}
    for label, fw in (("ember", ember), ("torch", torch)):
        fn = make(fw)
        ms = _median_ms(fw, fn, iters, hide_host=True)
        if latency:
            row[label + "_lat_ms"] = round(_median_ms(fw, fn, iters), 4)
        row[label + "_ms"] = round(ms, 4)
        row[label] = round(work / (ms * 1e-3) / 1e12, 3)
        del fn
    row["ratio"] = round(row["ember"] / row["torch"], 3) if row["torch"] else None
    row["unit"] = unit
    return row


def _tune(torch, data, n, iters):
    """ember's add and sum under several block configurations (the defaults are chosen from this)."""
    from ember._cuda import _reduce

    rows = []
    x = data(ember, (n,))
    saved = dict(_reduce.ROW_CONFIG)
    for bn, warps, chunk, stages, unroll in ((4096, 8, 65536, 2, 1), (4096, 8, 65536, 1, 2), (4096, 8, 65536, 1, 4),
                                             (2048, 4, 65536, 1, 4), (2048, 8, 32768, 1, 4), (1024, 4, 32768, 1, 8),
                                             (4096, 16, 131072, 1, 4), (8192, 16, 131072, 1, 2)):
        _reduce.ROW_CONFIG.update(bn=bn, warps=warps, chunk=chunk, stages=stages, unroll=unroll)
        ms = _median_ms(ember, lambda: x.sum(), iters, hide_host=True)
        rows.append({"name": f"tune sum BN={bn} w={warps} chunk={chunk} st={stages} u={unroll}",
                     "ember": round(4 * n / ms / 1e9, 3), "torch": "", "ratio": "", "unit": "TB/s"})
    _reduce.ROW_CONFIG.update(saved)
    saved = dict(_reduce.STRIDE_CONFIG)
    for ppsm, bn, warps, stages, unroll, evict in (
            (4, 4096, 8, 1, 2, False), (4, 4096, 8, 1, 2, True), (8, 2048, 4, 1, 2, False), (8, 2048, 4, 1, 4, True),
            (2, 4096, 8, 1, 4, False), (4, 2048, 4, 1, 4, False), (6, 4096, 8, 1, 2, True), (8, 1024, 4, 1, 8, True),
            (16, 1024, 4, 1, 4, False), (3, 8192, 16, 1, 2, True)):
        _reduce.STRIDE_CONFIG.update(ppsm=ppsm, bn=bn, warps=warps, stages=stages, unroll=unroll, evict=evict)
        ms = _median_ms(ember, lambda: x.sum(), iters, hide_host=True)
        rows.append({"name": f"tune sum stride ppsm={ppsm} BN={bn} w={warps} st={stages} u={unroll} ev={evict:d}",
                     "ember": round(4 * n / ms / 1e9, 3), "torch": "", "ratio": "", "unit": "TB/s"})
    _reduce.STRIDE_CONFIG.update(saved)
    return rows


def _training(torch, iters):
    """One training step (forward, cross-entropy, backward, AdamW) of an MLP, both frameworks on CUDA."""
    rows = []
    for width, batch in ((1024, 256), (4096, 1024)):
        row = {"name": f"MLP train step {width}x4 layers, batch {batch}"}
        for label, fw in (("ember", ember), ("torch", torch)):
            fw.manual_seed(0)
            nn = fw.nn
            model = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Linear(width, width), nn.GELU(),
                                  nn.Linear(width, width), nn.GELU(), nn.Linear(width, 10)).to("cuda")
            opt = fw.optim.AdamW(model.parameters(), lr=1e-4)
            x = fw.randn(batch, width).to("cuda")
            y = fw.randint(0, 10, (batch,)).to("cuda")
            F = fw.nn.functional

            def step(model=model, opt=opt, x=x, y=y, F=F):
                loss = F.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            row[label] = round(_median_ms(fw, step, iters), 3)
        row["ratio"] = round(row["torch"] / row["ember"], 3)
        row["unit"] = "ms/step (ratio: torch/ember)"
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--tune", action="store_true", help="also sweep ember's kernel configurations")
    ap.add_argument("--only", default="", help="substrings of the cases to run, joined by ',' or '+' (sum+host)")
    args = ap.parse_args()
    _ONLY[:] = [part for part in args.only.replace("+", ",").split(",") if part]
    import torch
    import torch.nn.functional as TF

    rows = []
    iters = 10 if args.quick else 30
    n = 1 << (26 if args.quick else 28)

    def data(fw, shape, dtype="float32", seed=0):
        g = torch.Generator(device="cuda").manual_seed(seed)
        t = torch.randn(*shape, device="cuda", generator=g, dtype=getattr(torch, dtype))
        if fw is torch:
            return t
        out = ember.empty(*shape, device="cuda", dtype=getattr(ember, dtype))
        out.copy_(ember.from_numpy(t.cpu().numpy()) if dtype != "bfloat16" else
                  ember.tensor(t.float().cpu().numpy()).to(ember.bfloat16))
        return out

    def copy_case(fw):
        x, y = data(fw, (n,)), data(fw, (n,), seed=1)
        return lambda: y.copy_(x)
    rows.append(_pair(torch, f"copy {n} f32", copy_case, iters, 8 * n, "TB/s"))

    def add_case(fw):
        x, y = data(fw, (n,)), data(fw, (n,), seed=1)
        return lambda: fw.add(x, y)
    rows.append(_pair(torch, f"add {n} f32", add_case, iters, 12 * n, "TB/s"))

    def sum_case(fw):
        x = data(fw, (n,))
        return lambda: x.sum()
    rows.append(_pair(torch, f"sum {n} f32", sum_case, iters, 4 * n, "TB/s", latency=True))

    def mean_case(fw):
        x = data(fw, (n,))
        return lambda: x.mean()
    rows.append(_pair(torch, f"mean {n} f32", mean_case, iters, 4 * n, "TB/s", latency=True))

    def queued_sum_case(fw):
        # Ten sums queued between the events: the device's throughput without the host's latency to the
        # first launch (a single call is timed from the host's start of the call).
        x = data(fw, (n,))

        def run():
            for _ in range(10):
                x.sum()
        return run
    rows.append(_pair(torch, f"sum {n} f32, 10 queued", queued_sum_case, iters, 40 * n, "TB/s"))

    r, c = (4096, 8192) if args.quick else (16384, 8192)
    for dtype in ("float32", "bfloat16"):
        size = 4 if dtype == "float32" else 2

        def softmax_case(fw, dtype=dtype):
            x = data(fw, (r, c), dtype)
            return lambda: fw.softmax(x, -1)
        rows.append(_pair(torch, f"softmax {r}x{c} {dtype}", softmax_case, iters, 2 * r * c * size, "TB/s"))

        def ln_case(fw, dtype=dtype):
            x, w, b = data(fw, (r, c), dtype), data(fw, (c,), dtype, 1), data(fw, (c,), dtype, 2)
            F = EF if fw is ember else TF
            return lambda: F.layer_norm(x, (c,), w, b)
        rows.append(_pair(torch, f"layer_norm {r}x{c} {dtype}", ln_case, iters, 2 * r * c * size, "TB/s"))

    v = 50304
    rows_ce = 4096 if args.quick else 8192

    def ce_case(fw):
        x = data(fw, (rows_ce, v))
        t = fw.randint(0, v, (rows_ce,), device="cuda") if fw is torch else ember.randint(0, v, (rows_ce,)).cuda()
        F = EF if fw is ember else TF
        return lambda: F.cross_entropy(x, t)
    rows.append(_pair(torch, f"cross_entropy {rows_ce}x{v} f32 (fwd)", ce_case, iters, 4 * rows_ce * v, "TB/s"))

    def ce_bwd_case(fw):
        x = data(fw, (rows_ce, v)).requires_grad_()
        t = fw.randint(0, v, (rows_ce,), device="cuda") if fw is torch else ember.randint(0, v, (rows_ce,)).cuda()
        F = EF if fw is ember else TF

        def run():
            x.grad = None
            F.cross_entropy(x, t).backward()
        return run
    # fwd + bwd: the logits read by the forward and by the backward, the gradient written (3 passes at least)
    rows.append(_pair(torch, f"cross_entropy {rows_ce}x{v} f32 (fwd+bwd)", ce_bwd_case, iters, 12 * rows_ce * v,
                      "TB/s"))

    # a MobileNetV2 depthwise 3x3 layer (144 channels at 56x56, stride 1, padding 1: groups == channels);
    # work counted as the passes over the activations: fwd reads x and writes y (2), fwd+bwd adds the
    # backward's reads of g (twice: input and weight gradients) and x and its write of the input gradient (6)
    nb, ch, hw = (32 if args.quick else 64), 144, 56
    for dtype in ("float32", "bfloat16"):
        size = 4 if dtype == "float32" else 2
        act = nb * ch * hw * hw * size

        def dw_case(fw, dtype=dtype):
            x, w = data(fw, (nb, ch, hw, hw), dtype), data(fw, (ch, 1, 3, 3), dtype, 1)
            F = EF if fw is ember else TF
            return lambda: F.conv2d(x, w, None, 1, 1, 1, ch)
        rows.append(_pair(torch, f"depthwise conv2d {nb}x{ch}x{hw}x{hw} 3x3 {dtype} (fwd)", dw_case, iters, 2 * act,
                          "TB/s"))

        def dw_bwd_case(fw, dtype=dtype):
            x = data(fw, (nb, ch, hw, hw), dtype).requires_grad_()
            w = data(fw, (ch, 1, 3, 3), dtype, 1).requires_grad_()
            g = data(fw, (nb, ch, hw, hw), dtype, 2)
            F = EF if fw is ember else TF

            def run():
                x.grad = w.grad = None
                F.conv2d(x, w, None, 1, 1, 1, ch).backward(g)
            return run
        rows.append(_pair(torch, f"depthwise conv2d {nb}x{ch}x{hw}x{hw} 3x3 {dtype} (fwd+bwd)", dw_bwd_case, iters,
                          6 * act, "TB/s"))

    mm = 4096 if args.quick else 8192
    for dtype, tf32 in (("bfloat16", False), ("float16", False), ("float32", True), ("float32", False)):
        def mm_case(fw, dtype=dtype, tf32=tf32):
            a, b = data(fw, (mm, mm), dtype), data(fw, (mm, mm), dtype, 1)
            fw.backends.cuda.matmul.allow_tf32 = tf32
            return lambda: fw.mm(a, b)
        rows.append(_pair(torch, f"matmul {mm}^3 {dtype}{' tf32' if tf32 else ''}", mm_case, 10 if dtype == "float32"
                          else 20, 2 * mm ** 3, "TFLOP/s"))
        torch.backends.cuda.matmul.allow_tf32 = ember.backends.cuda.matmul.allow_tf32 = False

    if args.tune:
        rows += _tune(torch, data, n, iters)

    if _wanted("MLP train step"):
        rows += _training(torch, 10 if args.quick else 20)
    rows = [row for row in rows if row is not None]
    if not _wanted("1-element add, host"):
        _report(rows, args.json, torch)
        return
    host = {"name": "1-element add, host us/call"}
    for label, fw in (("ember", ember), ("torch", torch)):
        one = fw.ones(1, device="cuda")
        host[label] = round(_host_us(fw, lambda one=one: one + one), 2)
        out = fw.empty(1, device="cuda")
        host[label + "_out"] = round(_host_us(fw, lambda one=one, out=out, fw=fw: fw.add(one, one, out=out)), 2)
    host["ratio"] = round(host["torch"] / host["ember"], 3)
    host["unit"] = "us"
    rows.append(host)
    _report(rows, args.json, torch)


def _report(rows, path, torch):
    print(f"{'case':44s} {'ember':>10s} {'torch':>10s} {'ratio':>7s}")
    for row in rows:
        lat = ""
        if "ember_lat_ms" in row:
            lat = f"  (host latency included, ms: {row['ember_lat_ms']} / {row['torch_lat_ms']})"
        print(f"{row['name']:44s} {row['ember']:>10} {row['torch']:>10} {row['ratio']!s:>7} {row['unit']}{lat}")
    if path:
        with open(path, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
