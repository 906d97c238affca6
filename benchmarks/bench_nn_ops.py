"""Neural-network kernels benchmark: ember vs PyTorch in one process (ember_time / torch_time).

Run from the repository root:
    PYTHONPATH=packages/tensor-core/src python benchmarks/bench_nn_ops.py [--quick] [--batch N]

Cases (float32): batch_norm (training) and layer_norm over (batch, 64, 56, 56) activations
(batch 32 is the issue's shape; --batch 8 iterates faster), cross_entropy on (4096, 1000),
causal scaled_dot_product_attention (16, 8, 256, 64) and 1M embedding lookups into
(50000, 128). Timing: 2 warmup calls, then the minimum over repeats of an inner-loop mean;
1 thread on both sides (primary) and 2 threads beside it. Target: ratio <= 1.25.
With --cpu-time the 1-thread figures use process CPU time, which a loaded shared machine
(other processes taking the cores) distorts far less than wall-clock time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

# ruff: noqa: I001 - ember is imported before torch on purpose: both then share the libgomp
# that ember configures (GOMP_SPINCOUNT, see ember/_src/_native.py), so neither side's idle
# OpenMP workers starve the other's threads.
import ember
import torch
import torch.nn.functional as F

from ember._src.ops.nn import attention as nn_attention
from ember._src.ops.nn import loss as nn_loss
from ember._src.ops.nn import embedding_dropout as nn_misc
from ember._src.ops.nn import norm as nn_norm


def bench(fn, repeats: int, inner: int, clock=time.perf_counter) -> float:
    fn()
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        for _ in range(inner):
            fn()
        best = min(best, (clock() - start) / inner)
    return best


def pair(shape, low=-1.0, high=1.0, seed=0):
    arr = np.random.default_rng(seed).uniform(low, high, size=shape).astype(np.float32)
    return ember.from_numpy(arr.copy()), torch.from_numpy(arr.copy())


def cases(quick: bool, batch: int):
    out = []
    act = (2 if quick else batch, 64, 56, 56)
    ex, tx = pair(act)
    ew, tw = pair((64,), seed=1)
    eb, tb = pair((64,), seed=2)
    erm, trm = ember.zeros(64), torch.zeros(64)
    erv, trv = ember.ones(64), torch.ones(64)
    out.append((f"batch_norm_train{act}", lambda: nn_norm.batch_norm(ex, erm, erv, ew, eb, True),
                lambda: F.batch_norm(tx, trm, trv, tw, tb, True), 3))
    out.append((f"batch_norm_eval{act}", lambda: nn_norm.batch_norm(ex, erm, erv, ew, eb, False),
                lambda: F.batch_norm(tx, trm, trv, tw, tb, False), 3))
    lw, tlw = pair((56, 56), seed=1)
    lb, tlb = pair((56, 56), seed=2)
    out.append((f"layer_norm{act}[56,56]", lambda: nn_norm.layer_norm(ex, (56, 56), lw, lb),
                lambda: F.layer_norm(tx, (56, 56), tlw, tlb), 3))
    rows = 512 if quick else 4096
    el, tl = pair((rows, 1000), -5, 5)
    tgt = np.random.default_rng(3).integers(0, 1000, size=rows)
    et, tt = ember.tensor(tgt), torch.from_numpy(tgt.copy())
    out.append((f"cross_entropy({rows},1000)", lambda: nn_loss.cross_entropy(el, et),
                lambda: F.cross_entropy(tl, tt), 5))
    shape = (2 if quick else 16, 8, 256, 64)
    (eq, tq), (ek, tk), (ev, tv) = pair(shape), pair(shape, seed=1), pair(shape, seed=2)
    out.append((f"sdpa_causal{shape}", lambda: nn_attention.scaled_dot_product_attention(eq, ek, ev, is_causal=True),
                lambda: F.scaled_dot_product_attention(tq, tk, tv, is_causal=True), 3))
    n = 100_000 if quick else 1_000_000
    ewt, twt = pair((50000, 128))
    idx = np.random.default_rng(4).integers(0, 50000, size=n)
    ei, ti = ember.tensor(idx), torch.from_numpy(idx.copy())
    out.append((f"embedding({n} of 50000x128)", lambda: nn_misc.embedding(ei, ewt),
                lambda: F.embedding(ti, twt), 3))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", default="")
    parser.add_argument("--cpu-time", action="store_true")
    args = parser.parse_args()
    print(f"{'case':44} {'ember 1t':>10} {'torch 1t':>10} {'ratio 1t':>9} {'ratio 2t':>9}")
    for name, efn, tfn, inner in cases(args.quick, args.batch):
        if args.only and args.only not in name:
            continue
        res = {}
        for threads in (1, 2):
            torch.set_num_threads(threads)
            ember.set_num_threads(threads)
            clock = time.process_time if args.cpu_time and threads == 1 else time.perf_counter
            res[threads] = (bench(efn, args.repeats, inner, clock), bench(tfn, args.repeats, inner, clock))
        (e1, t1), (e2, t2) = res[1], res[2]
        print(f"{name:44} {e1 * 1e3:8.2f}ms {t1 * 1e3:8.2f}ms {e1 / t1:9.2f} {e2 / t2:9.2f}", flush=True)


if __name__ == "__main__":
    main()
