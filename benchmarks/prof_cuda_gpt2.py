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
    args = ap.parse_args()
    fw, dev = ember, args.device
    fw.manual_seed(0)
    model = build(fw, args.layers, seq=args.seq).to(dev)
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
    walls, devs = [], []
    for _ in range(args.timed):
        if cuda:
            fw.cuda.synchronize()
            s, e = fw.cuda.Event(enable_timing=True), fw.cuda.Event(enable_timing=True)
            s.record()
        t0 = time.perf_counter()
        loss = step()
        host = time.perf_counter() - t0  # host time to issue the step (no sync)
        if cuda:
            e.record()
            e.synchronize()
            devs.append(s.elapsed_time(e))
        loss.item()
        walls.append(host * 1e3)
    print(f"host issue ms/step {statistics.median(walls):.1f}  device-event ms/step "
          f"{statistics.median(devs) if devs else float('nan'):.1f}", flush=True)
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
