"""Why one process's eager GPT-2 step is slower than another's (bench_cuda_gpt2.py's model and step):
per step the wall time, the host's issue time (forward, backward, optimizer) and the stepping thread's
CPU time, involuntary switches, minor faults, GC collections and the processor it ran on; every
thread's CPU ticks over the timed steps (are other threads busy?); a fixed pure-Python loop timed on
the stepping thread before and after (how fast is this processor now?), and with ``--cpuscan`` that
loop pinned to each allowed processor in turn. Prints one ``PROBE {json}`` line (medians).

Session 11 found with it that the lent H200 machines' virtual processors run the loop in ~12-13 ms or
~21-23 ms, changing from second to second, and that ember's host-bound step follows (NOTES.md).

    python benchmarks/prof_cuda_host_speed.py [--steps 10] [--layers 12] [--torch] [--cpuscan] [--fake]
    (--fake: benchmarks/host_cuda_fake.py's no-op driver, no GPU needed)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import cpu_speed_ms as loop_ms  # noqa: E402
from _timing import current_cpu  # noqa: E402


def thread_ticks() -> dict:
    """tid -> (name, utime + stime in clock ticks, last processor)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                st = f.read()
        except OSError:
            continue
        fields = st.rsplit(")", 1)[1].split()
        out[tid] = (st[st.index("(") + 1:st.rindex(")")], int(fields[11]) + int(fields[12]), int(fields[36]))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--torch", action="store_true", help="import torch first (as bench_cuda_gpt2.py does)")
    ap.add_argument("--cpuscan", action="store_true")
    ap.add_argument("--fake", action="store_true")
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if args.torch:
        import torch  # noqa: F401

    import ember

    if args.fake:
        import host_cuda_fake

        host_cuda_fake.install()
    from bench_cuda_gpt2 import build

    real = not args.fake
    ember.manual_seed(0)
    model = build(ember, args.layers).to("cuda")
    opt = ember.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
    idx = ember.randint(0, 50257, (8, 1025)).to("cuda")
    x, y = idx[:, :-1].contiguous(), idx[:, 1:].contiguous()
    marks = {}

    def step():
        w, c = time.perf_counter(), time.thread_time()
        with ember.autocast("cuda", dtype=ember.bfloat16):
            loss = model(x, y)
        marks["fwd"] = (time.perf_counter() - w, time.thread_time() - c)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        marks["bwd"] = (time.perf_counter() - w, time.thread_time() - c)
        opt.step()
        marks["issue"] = (time.perf_counter() - w, time.thread_time() - c)
        if real:
            loss.item()

    for _ in range(3):
        step()
    before = loop_ms()
    rows = []
    ticks0 = thread_ticks()
    for _ in range(args.steps):
        if real:
            ember.cuda.synchronize()
        r0, g0 = resource.getrusage(resource.RUSAGE_SELF), [s["collections"] for s in gc.get_stats()]
        w0, c0 = time.perf_counter(), time.thread_time()
        step()
        w1, c1 = time.perf_counter(), time.thread_time()
        r1, g1 = resource.getrusage(resource.RUSAGE_SELF), [s["collections"] for s in gc.get_stats()]
        rows.append({"wall": (w1 - w0) * 1e3, "cpu": (c1 - c0) * 1e3, "fwd_ms": marks["fwd"][0] * 1e3,
                     "bwd_ms": marks["bwd"][0] * 1e3, "issue_ms": marks["issue"][0] * 1e3,
                     "issue_cpu_ms": marks["issue"][1] * 1e3, "ivcs": r1.ru_nivcsw - r0.ru_nivcsw,
                     "minflt": r1.ru_minflt - r0.ru_minflt, "gc": [b - a for a, b in zip(g0, g1)],
                     "processor": current_cpu()})
    ticks1 = thread_ticks()
    after = loop_ms()

    def med(key):
        return round(statistics.median(r[key] for r in rows), 2)

    busy = sorted(((ticks1[t][1] - ticks0[t][1], ticks1[t][0], ticks1[t][2]) for t in ticks1 if t in ticks0),
                  reverse=True)[:6]
    out = {"tag": args.tag, "wall_ms": med("wall"), "thread_cpu_ms": med("cpu"), "fwd_ms": med("fwd_ms"),
           "bwd_ms": med("bwd_ms"), "issue_ms": med("issue_ms"), "issue_cpu_ms": med("issue_cpu_ms"),
           "ivcs": med("ivcs"), "minflt": med("minflt"), "gc": [sum(r["gc"][g] for r in rows) for g in range(3)],
           "processors": sorted({r["processor"] for r in rows}), "loop_ms": [round(before, 1), round(after, 1)],
           "threads": len(ticks1), "busiest_threads_ticks": busy}
    print("PROBE", json.dumps(out), flush=True)
    print("  wall per step", [round(r["wall"], 1) for r in rows], flush=True)
    if args.cpuscan:
        scan = {}
        for c in sorted(os.sched_getaffinity(0)):
            os.sched_setaffinity(0, {c})
            scan[c] = round(min(loop_ms() for _ in range(2)), 1)
        print("CPUSCAN", scan, flush=True)


if __name__ == "__main__":
    main()
