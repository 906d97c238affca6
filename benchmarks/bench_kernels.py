"""Kernel benchmark (issue 18, item 4): ember beside PyTorch, one thread, with achieved GB/s and GFLOP/s.

Memory-bound kernels (softmax, norms, reductions, cross-entropy, optimizer updates) are
reported against the machine's copy bandwidth, measured here as a large ``clone`` (read +
write) on both sides; compute-bound ones (matmul, conv2d) in GFLOP/s against the FMA peak
estimated from /proc/cpuinfo (AVX-512: 32 float FMA lanes per cycle per core, AVX2: 16 on two
FMA pipes; the clock is the reported MHz, so the peak is indicative only).

    python benchmarks/bench_kernels.py [--quick] [--only softmax,sum] [--threads 1]

Columns: ember and torch time, ratio ember/torch (<= 1.0 is the target), the bytes the op
must move at least (inputs read once, outputs written once) divided by ember's time, and that
as a percentage of the copy bandwidth. For matmul/conv the GFLOP/s and % of FMA peak.

The copy bandwidth of a memory-bound row ("%copy", "copy GB/s") is measured for that row, in
rounds alternating with its ember and torch timings: ``copy_`` of half the row's bytes into a
buffer of the same size, so the copy moves the same bytes over the same footprint and finds them
where the op finds its operands (a 16 MiB softmax input stays mostly in the 32 MiB L3 between
calls, and so does a 16 MiB copy's source; the 64 MiB copy of the header line comes from DRAM).
"%dram" is the same figure against the header's 64 MiB copy (the reference before session 17).
"""

from __future__ import annotations

import argparse
import re
import time

import numpy as np

# ruff: noqa: I001 - ember first: both libraries then share ember's libgomp settings (bench_core.py).
import ember
import ember.nn.functional as EF
import torch
import torch.nn.functional as TF


# The clock: process CPU time, not wall time. The benchmark machines are shared (load 10 on 2
# cores is common) and wall time then measures the scheduler; with one thread the process's CPU
# time is the op's own time. --wall switches back to wall time on a quiet machine.
CLOCK = [time.process_time]


def bench(fn, min_time: float = 0.15, repeats: int = 5) -> float:
    """Minimum over ``repeats`` of the mean time of an inner loop sized to run ``min_time``."""
    clock = CLOCK[0]
    fn()
    start = clock()
    fn()
    once = max(clock() - start, 1e-6)
    inner = max(1, int(min_time / once / repeats))
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        for _ in range(inner):
            fn()
        best = min(best, (clock() - start) / inner)
    return best


def bench_alternating(fns, min_time: float = 0.15, repeats: int = 5) -> list[float]:
    """bench() for several functions at once, their timed loops alternating round by round (so a
    change in the machine's load reaches all of them): per function the minimum over ``repeats``
    of the mean time of an inner loop sized to run ``min_time``."""
    clock = CLOCK[0]
    inners = []
    for fn in fns:
        fn()
        start = clock()
        fn()
        inners.append(max(1, int(min_time / max(clock() - start, 1e-6) / repeats)))
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, (fn, inner) in enumerate(zip(fns, inners)):
            start = clock()
            for _ in range(inner):
                fn()
            best[i] = min(best[i], (clock() - start) / inner)
    return best


def copy_reference(moved: int):
    """ember and torch ``copy_`` of moved / 2 bytes into a buffer of the same size: the same bytes
    moved as the op, over the same footprint (so the same residency in the caches)."""
    n = max(16, moved // 8)
    src = np.random.default_rng(99).uniform(-1.0, 1.0, n).astype(np.float32)
    e, t = ember.from_numpy(src.copy()), torch.from_numpy(src.copy())
    e_dst, t_dst = ember.empty(n), torch.empty(n)
    return (lambda: e_dst.copy_(e)), (lambda: t_dst.copy_(t))


def fma_peak_gflops() -> float:
    """Indicative single-core float32 FMA peak: lanes x 2 flops x 2 pipes x clock.

    AMD Zen 4 (family 25 with AVX-512) runs a 512-bit FMA as two halves on its two 256-bit
    pipes: 16 lanes on one pipe's worth, half of what the AVX-512 flag alone suggests."""
    text = open("/proc/cpuinfo").read()
    flags = re.search(r"^flags\s*:(.*)$", text, re.M).group(1).split()
    mhz = float(re.search(r"^cpu MHz\s*:\s*([\d.]+)", text, re.M).group(1))
    lanes = 16 if "avx512f" in flags else 8 if "avx2" in flags else 4
    pipes = 2
    vendor = re.search(r"^vendor_id\s*:\s*(\S+)", text, re.M)
    family = re.search(r"^cpu family\s*:\s*(\d+)", text, re.M)
    if lanes == 16 and vendor and vendor.group(1) == "AuthenticAMD" and family and int(family.group(1)) == 25:
        pipes = 1
    return lanes * 2 * pipes * mhz / 1e3


def pair(shape, dtype=np.float32, seed=0, low=-2.0, high=2.0):
    a = np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)
    return ember.from_numpy(a.copy()), torch.from_numpy(a.copy())


def grad_pair(shape, seed=0):
    e, t = pair(shape, seed=seed)
    return e.requires_grad_(), t.requires_grad_()


def memory_cases(quick: bool):
    """(name, ember fn, torch fn, bytes moved at least)."""
    rows, cols = (1024, 1024) if quick else (4096, 1024)
    f = 4
    nbytes = rows * cols * f
    e, t = pair((rows, cols))
    out = [
        ("softmax last", lambda: EF.softmax(e, -1), lambda: TF.softmax(t, -1), 2 * nbytes),
        ("softmax dim0", lambda: EF.softmax(e, 0), lambda: TF.softmax(t, 0), 2 * nbytes),
        ("log_softmax last", lambda: EF.log_softmax(e, -1), lambda: TF.log_softmax(t, -1), 2 * nbytes),
        ("log_softmax dim0", lambda: EF.log_softmax(e, 0), lambda: TF.log_softmax(t, 0), 2 * nbytes),
        ("gelu fwd", lambda: EF.gelu(e), lambda: TF.gelu(t), 2 * nbytes),
        ("gelu tanh fwd", lambda: EF.gelu(e, approximate="tanh"), lambda: TF.gelu(t, approximate="tanh"),
         2 * nbytes),
    ]
    w, tw = pair((cols,), seed=1)
    b, tb = pair((cols,), seed=2)
    out += [
        ("layer_norm", lambda: EF.layer_norm(e, (cols,), w, b), lambda: TF.layer_norm(t, (cols,), tw, tb), 2 * nbytes),
        ("rms_norm", lambda: EF.rms_norm(e, (cols,), w), lambda: TF.rms_norm(t, (cols,), tw), 2 * nbytes),
        ("sum last", lambda: e.sum(-1), lambda: t.sum(-1), nbytes),
        ("sum dim0", lambda: e.sum(0), lambda: t.sum(0), nbytes),
        ("sum all", lambda: e.sum(), lambda: t.sum(), nbytes),
        ("mean last", lambda: e.mean(-1), lambda: t.mean(-1), nbytes),
        ("var last", lambda: e.var(-1), lambda: t.var(-1), nbytes),
        ("var dim0", lambda: e.var(0), lambda: t.var(0), nbytes),
        ("std dim0", lambda: e.std(0), lambda: t.std(0), nbytes),
    ]
    # Cross-entropy: logits (N, C), forward reads the logits once; backward writes a grad of
    # the same size (and reads the logits again).
    n, c = (1024, 1000) if quick else (4096, 1000)
    el, tl = grad_pair((n, c), seed=3)
    yi = np.random.default_rng(4).integers(0, c, n)
    ey, ty = ember.from_numpy(yi.copy()), torch.from_numpy(yi.copy())
    out.append(("cross_entropy fwd", lambda: EF.cross_entropy(el.detach(), ey),
                lambda: TF.cross_entropy(tl.detach(), ty), n * c * 4))

    def ce_step(F, logits, y):
        def run():
            logits.grad = None
            F.cross_entropy(logits, y).backward()
        return run

    out.append(("cross_entropy f+b", ce_step(EF, el, ey), ce_step(TF, tl, ty), 3 * n * c * 4))
    # Classes along a non-last dim: (N, C, positions), as segmentation losses see them.
    n2, c2, hw = (8, 100, 1024) if quick else (32, 100, 1024)
    es, ts = pair((n2, c2, hw), seed=13)
    ys = np.random.default_rng(14).integers(0, c2, (n2, hw))
    eys, tys = ember.from_numpy(ys.copy()), torch.from_numpy(ys.copy())
    out.append(("cross_entropy dim1 fwd", lambda: EF.cross_entropy(es, eys), lambda: TF.cross_entropy(ts, tys),
                n2 * c2 * hw * 4))
    esg, tsg = es.detach().clone().requires_grad_(), ts.detach().clone().requires_grad_()
    out.append(("cross_entropy dim1 f+b", ce_step(EF, esg, eys), ce_step(TF, tsg, tys), 3 * n2 * c2 * hw * 4))

    # Backward kernels (forward + backward, the backward native in ember): softmax over the last
    # dim and dim 0 (output, grad read, grad written: 5 passes of the tensor with the forward's 2),
    # gelu (x read twice, y and grad written, grad read: 5 passes).
    ex, tx = grad_pair((rows, cols), seed=11)
    g = np.random.default_rng(12).standard_normal((rows, cols)).astype(np.float32)
    eg, tg = ember.from_numpy(g), torch.from_numpy(g)

    def fb_step(fn, x, grad):
        def run():
            x.grad = None
            fn(x).backward(grad)
        return run

    for name, dim in (("softmax f+b last", -1), ("softmax f+b dim0", 0)):
        out.append((name, fb_step(lambda x, d=dim: EF.softmax(x, d), ex, eg),
                    fb_step(lambda x, d=dim: TF.softmax(x, d), tx, tg), 5 * nbytes))
    out.append(("gelu f+b", fb_step(EF.gelu, ex, eg), fb_step(TF.gelu, tx, tg), 5 * nbytes))
    out.append(("gelu tanh f+b", fb_step(lambda x: EF.gelu(x, approximate="tanh"), ex, eg),
                fb_step(lambda x: TF.gelu(x, approximate="tanh"), tx, tg), 5 * nbytes))
    return out


def optimizer_cases(quick: bool):
    """One optimizer step over a GPT-like parameter list (many tensors), foreach and fused."""
    shapes = [(256, 256)] * 16 + [(1024, 256)] * 8 + [(256,)] * 32 + [(1000, 256)]
    if quick:
        shapes = shapes[:12]
    numel = sum(int(np.prod(s)) for s in shapes)
    out = []
    for name, kwargs, state in [
        ("SGD momentum", dict(lr=0.01, momentum=0.9), 1),
        ("Adam", dict(lr=1e-3), 2),
        ("AdamW", dict(lr=1e-3, weight_decay=0.01), 2),
    ]:
        for flag in ("foreach", "fused"):
            built = []
            for lib in (ember, torch):
                params = []
                for i, s in enumerate(shapes):
                    p = lib.from_numpy(np.random.default_rng(i).uniform(-1, 1, s).astype(np.float32))
                    p.requires_grad_()
                    p.grad = lib.from_numpy(np.random.default_rng(i + 100).uniform(-1, 1, s).astype(np.float32))
                    params.append(p)
                cls = getattr(lib.optim, name.split()[0])
                opt = cls(params, **kwargs, **{flag: True})
                built.append(opt.step)
            # Reads param + grad + state, writes param + state.
            moved = numel * 4 * (2 + 2 * state + 1)
            out.append((f"{name} {flag}", built[0], built[1], moved))
    return out


def compute_cases(quick: bool):
    """(name, ember fn, torch fn, flops)."""
    out = []
    for n in (64, 128, 256):
        a, ta = pair((n, n), seed=5)
        b, tb = pair((n, n), seed=6)
        out.append((f"matmul {n}", lambda a=a, b=b: a @ b, lambda ta=ta, tb=tb: ta @ tb, 2 * n ** 3))
    a, ta = pair((64, 512), seed=7)
    w, tw = pair((512, 512), seed=8)
    out.append(("linear 64x512x512", lambda: EF.linear(a, w), lambda: TF.linear(ta, tw), 2 * 64 * 512 * 512))
    # LeNet's two layers, an MNIST-style CNN's (1->32->64, 3x3), ResNet's 64-channel 56x56 stage
    # (3x3 stride 1 and 2, 1x1) and a 32x32 3x3 layer: (batch, in, size, out, kernel, stride).
    conv_shapes = [(64, 1, 28, 6, 5, 1), (64, 6, 14, 16, 5, 1), (64, 1, 28, 32, 3, 1), (64, 32, 28, 64, 3, 1),
                   (8, 64, 56, 64, 3, 1), (8, 64, 56, 64, 3, 2), (8, 64, 56, 64, 1, 1), (32, 64, 32, 64, 3, 1)]
    if quick:
        conv_shapes = conv_shapes[:2]
    for (nb, ci, h, co, k, st) in conv_shapes:
        x, tx = grad_pair((nb, ci, h, h), seed=9)
        wt, twt = grad_pair((co, ci, k, k), seed=10)
        pad = k // 2
        ho = (h + 2 * pad - k) // st + 1
        flops = 2 * nb * co * ho * ho * ci * k * k

        def fwd(F, x, wt, pad=pad, st=st):
            return lambda: F.conv2d(x.detach(), wt.detach(), padding=pad, stride=st)

        def fb(F, x, wt, pad=pad, st=st):
            def run():
                x.grad = None
                wt.grad = None
                F.conv2d(x, wt, padding=pad, stride=st).sum().backward()
            return run

        tag = f"conv {nb}x{ci}x{h}->{co} k{k}" + (f" s{st}" if st > 1 else "")
        out.append((tag + " fwd", fwd(EF, x, wt), fwd(TF, tx, twt), flops))
        out.append((tag + " f+b", fb(EF, x, wt), fb(TF, tx, twt), 3 * flops))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", default="", help="comma-separated substrings of case names")
    parser.add_argument("--wall", action="store_true", help="time wall clock instead of process CPU time")
    args = parser.parse_args()
    if args.wall:
        CLOCK[0] = time.perf_counter
    torch.set_num_threads(args.threads)
    ember.set_num_threads(args.threads)
    keep = [s for s in args.only.split(",") if s]

    def wanted(name):
        return not keep or any(k in name for k in keep)

    # Copy bandwidth: copy_ into an existing buffer (read + write, no allocation), the faster side.
    big = (1 << 24) if not args.quick else (1 << 22)
    e, t = pair((big,))
    e_dst, t_dst = ember.empty(big), torch.empty(big)
    te = bench(lambda: e_dst.copy_(e))
    tt = bench(lambda: t_dst.copy_(t))
    copy_bw = 2 * big * 4 / min(te, tt) / 1e9
    peak = fma_peak_gflops()
    print(f"threads={args.threads}  copy bandwidth (copy_ of {big * 4 >> 20} MiB, read+write): "
          f"ember {2 * big * 4 / te / 1e9:.1f} GB/s, torch {2 * big * 4 / tt / 1e9:.1f} GB/s; "
          f"indicative FMA peak {peak:.0f} GFLOP/s per core")
    print(f"{'case':<28}{'ember':>11}{'torch':>11}{'ratio':>8}{'GB/s':>8}{'copy GB/s':>11}{'%copy':>7}"
          f"{'%dram':>7}")
    for name, efn, tfn, moved in memory_cases(args.quick) + optimizer_cases(args.quick):
        if not wanted(name):
            continue
        ecopy, tcopy = copy_reference(moved)
        te, tt, tce, tct = bench_alternating([efn, tfn, ecopy, tcopy])
        del ecopy, tcopy
        gbs = moved / te / 1e9
        row_bw = moved / min(tce, tct) / 1e9
        print(f"{name:<28}{_fmt(te):>11}{_fmt(tt):>11}{te / tt:>8.2f}{gbs:>8.1f}{row_bw:>11.1f}"
              f"{100 * gbs / row_bw:>6.0f}%{100 * gbs / copy_bw:>6.0f}%")
    print(f"{'case':<28}{'ember':>11}{'torch':>11}{'ratio':>8}{'GFLOP/s':>9}{'%peak':>7}")
    for name, efn, tfn, flops in compute_cases(args.quick):
        if not wanted(name):
            continue
        te, tt = bench(efn), bench(tfn)
        gf = flops / te / 1e9
        print(f"{name:<28}{_fmt(te):>11}{_fmt(tt):>11}{te / tt:>8.2f}{gf:>9.1f}{100 * gf / peak:>6.0f}%")


def _fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f}us"
    return f"{seconds * 1e3:.2f}ms"


if __name__ == "__main__":
    main()
