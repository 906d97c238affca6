"""Where a GPT-2 training step's host time goes (bench_cuda_gpt2.py's model): wall and CUDA-event
time per step, then cProfile of a few steps (top functions by own and cumulative time, and the
number of op calls per step). A step whose wall time far exceeds its device time is host-bound:
the profile says where the host time is spent.

    python benchmarks/prof_cuda_gpt2.py [--steps 3] [--layers 12] [--device cuda] [--out prof.txt]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

import ember

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cuda_gpt2 import build  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--timed", type=int, default=6)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--top", type=int, default=45)
    ap.add_argument("--out", default=None)
    ap.add_argument("--compile", default=None, metavar="MODE",
                    help="the model under ember.compile with this mode (default, reduce-overhead, ...)")
    args = ap.parse_args()
    fw, dev = ember, args.device
    fw.manual_seed(0)
    model = build(fw, args.layers, seq=args.seq).to(dev)
    if args.compile:
        model = fw.compile(model, mode=None if args.compile == "default" else args.compile)
    opt = fw.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
    idx = fw.randint(0, 50257, (args.batch, args.seq + 1)).to(dev)
    x, y = idx[:, :-1].contiguous(), idx[:, 1:].contiguous()
    cuda = dev == "cuda"

    def step():
        with fw.autocast(dev, dtype=fw.bfloat16):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    for _ in range(3):
        step().item()

    def sync():
        if cuda:
            fw.cuda.synchronize()

    # Per phase: host time to issue it (no wait) and wall time until the device finished it (a sync
    # before and after). wall >> host: that phase is device-bound; wall ~ host: host-bound.
    # The host's CPU time per phase too: issue time far above it means the host waited (a synchronizing
    # call, or a full launch queue) rather than computed.
    phases = {"forward": [], "backward": [], "optimizer": []}
    clock = time.thread_time
    for _ in range(args.timed):
        sync()
        t0, c0 = time.perf_counter(), clock()
        with fw.autocast(dev, dtype=fw.bfloat16):
            loss = model(x, y)
        t1, c1 = time.perf_counter(), clock()
        sync()
        t2 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        c2 = clock()
        loss.backward()
        t3, c3 = time.perf_counter(), clock()
        sync()
        t4, c4 = time.perf_counter(), clock()
        opt.step()
        t5, c5 = time.perf_counter(), clock()
        sync()
        t6 = time.perf_counter()
        phases["forward"].append((t1 - t0, t2 - t0, c1 - c0))
        phases["backward"].append((t3 - t2, t4 - t2, c3 - c2))
        phases["optimizer"].append((t5 - t4, t6 - t4, c5 - c4))
    for name, rows in phases.items():
        host = statistics.median(r[0] for r in rows) * 1e3
        wall = statistics.median(r[1] for r in rows) * 1e3
        cpu = statistics.median(r[2] for r in rows) * 1e3
        print(f"{name:10s} host issue {host:7.1f} ms (CPU {cpu:6.1f} ms)   wall (synced) {wall:7.1f} ms", flush=True)
    walls = []
    for _ in range(args.timed):
        sync()
        t0 = time.perf_counter()
        step().item()
        walls.append((time.perf_counter() - t0) * 1e3)
    print(f"whole step (one sync at the end): {statistics.median(walls):.1f} ms", flush=True)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.steps):
        step().item()
    prof.disable()
    text = io.StringIO()
    stats = pstats.Stats(prof, stream=text)
    for key, value in stats.stats.items():
        if key[2] == "_dispatch":
            print(f"Op._dispatch calls per step: {value[1] / args.steps:.0f}")
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)
    stats.print_callers("item")
    print(text.getvalue())
    if args.out:
        stats.dump_stats(args.out)


if __name__ == "__main__":
    main()
