"""Host cost of the eager GPT-2 step on the fake CUDA host (host_cuda_fake.py), two checkouts side by side:
Python function calls per step (cProfile, deterministic) and the step's thread CPU ms (forward, backward,
optimizer), with the runs of the two checkouts interleaved (one process per run, alternating A, B, A, B...)
so that a loaded machine slows both alike. Each checkout runs with its own ``ci/dev_env.py`` path (its own
``_C`` when it has one).

    python benchmarks/host_cuda_fake_ab.py BASE_CHECKOUT [NEW_CHECKOUT] [--layers 2 12] [--pairs 3] [--steps 20]

Prints per checkout and layer count: Python calls per step, then for each run the median and the fastest
step (ms), and the medians of both over the runs; then the GC-tracked objects one forward leaves alive (by
type) and its net count of tracked allocations (the young generation's counter).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import cProfile, json, os, pstats, statistics, sys, time
sys.path.insert(0, os.path.join(sys.argv[1], "benchmarks"))
import host_cuda_fake
host_cuda_fake.install()
import ember
from bench_cuda_gpt2 import build
layers, steps, count = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
ember.manual_seed(0)
model = build(ember, layers).to("cuda")
opt = ember.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
idx = ember.randint(0, 50257, (8, 1025)).to("cuda")
x, y = idx[:, :-1].contiguous(), idx[:, 1:].contiguous()
parts = {"fwd": [], "bwd": [], "opt": [], "step": []}

def step():
    c0 = time.thread_time()
    with ember.autocast("cuda", dtype=ember.bfloat16):
        loss = model(x, y)
    c1 = time.thread_time()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    c2 = time.thread_time()
    opt.step()
    c3 = time.thread_time()
    return c1 - c0, c2 - c1, c3 - c2, c3 - c0

for _ in range(3):
    step()
for _ in range(steps):
    for k, v in zip(parts, step()):
        parts[k].append(v * 1e3)
out = {k: [round(statistics.median(v), 3), round(min(v), 3)] for k, v in parts.items()}
if count:
    prof = cProfile.Profile()
    prof.enable()
    step()
    prof.disable()
    out["calls"] = pstats.Stats(prof).total_calls
    # GC-tracked objects a forward leaves alive (the graph's nodes, saved tensors, their tuples and dicts:
    # what the young collections then traverse), by type, and how many tracked allocations it made
    import collections, gc
    gc.collect()
    gc.disable()
    seen = {id(o) for o in gc.get_objects()}
    c0 = gc.get_count()[0]
    with ember.autocast("cuda", dtype=ember.bfloat16):
        loss = model(x, y)
    made = gc.get_count()[0] - c0
    new = [o for o in gc.get_objects() if id(o) not in seen]
    kinds = collections.Counter(type(o).__name__ for o in new if o is not seen)
    out["gc"] = {"alive": len(new) - 1, "net_tracked": made, "top": kinds.most_common(8)}
    del new
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    gc.enable()
print(json.dumps(out))
"""


def _run(root: Path, layers: int, steps: int, count: bool) -> dict:
    env = dict(os.environ)
    path = subprocess.run([sys.executable, str(root / "ci" / "dev_env.py")], capture_output=True, text=True,
                          check=True).stdout.strip()
    env["PYTHONPATH"] = path
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", _CHILD, str(root), str(layers), str(steps),
                        "1" if count else "0"], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{root}: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("new", nargs="?", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--layers", type=int, nargs="*", default=[2, 12])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    sides = {"base": Path(args.base).resolve(), "new": Path(args.new).resolve()}
    print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for layers in args.layers:
        runs = {name: [] for name in sides}
        for i in range(args.pairs):
            for name, root in sides.items():
                runs[name].append(_run(root, layers, args.steps, i == 0))
        for name, rs in runs.items():
            med = {k: round(statistics.median(r[k][0] for r in rs), 2) for k in ("fwd", "bwd", "opt", "step")}
            print(f"GPT-2 {layers}L {name:4s}: {rs[0]['calls']} Python calls/step; step ms median/min per run "
                  f"{[tuple(r['step']) for r in rs]}; medians over runs {med}", flush=True)
            print(f"GPT-2 {layers}L {name:4s}: forward leaves {rs[0]['gc']['alive']} GC-tracked objects alive "
                  f"(net {rs[0]['gc']['net_tracked']} tracked allocations): {rs[0]['gc']['top']}", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
