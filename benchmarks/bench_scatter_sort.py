"""Gather/scatter and sorting benchmark: ember vs PyTorch in one process, as ember_time / torch_time.

Run from the repository root:
    PYTHONPATH=packages/tensor-core/src python benchmarks/bench_scatter_sort.py [--quick]

Every case works on 1M float32 elements (random values, random int64 indices), with 1 thread
on both sides (the primary figure) and 2 threads beside it. Timing: the minimum over several
repeats of the mean of an inner loop, after two warmup calls.
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


TARGET = 1.25


def bench(fn, repeats: int, inner: int) -> float:
    fn()
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - start) / inner)
    return best


def cases(n: int):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    idx = rng.integers(0, n, n).astype(np.int64)
    ex, tx = ember.from_numpy(x.copy()), torch.from_numpy(x.copy())
    ei, ti = ember.from_numpy(idx.copy()), torch.from_numpy(idx.copy())
    ez, tz = ember.zeros(n), torch.zeros(n)
    # A 2-d layout too: 1000 rows of 1000, gathered/scattered along the last dim (parallel over rows).
    ex2, tx2 = ex.view(1000, -1), tx.view(1000, -1)
    i2 = rng.integers(0, n // 1000, (1000, n // 1000)).astype(np.int64)
    ei2, ti2 = ember.from_numpy(i2.copy()), torch.from_numpy(i2.copy())
    return [
        ("gather_1M", lambda: ember.gather(ex, 0, ei), lambda: torch.gather(tx, 0, ti), 5),
        ("gather_1000x1000", lambda: ember.gather(ex2, 1, ei2), lambda: torch.gather(tx2, 1, ti2), 5),
        ("scatter_add_1M", lambda: ez.scatter_add(0, ei, ex), lambda: tz.scatter_add(0, ti, tx), 5),
        ("scatter_add_1000x1000", lambda: ex2.scatter_add(1, ei2, ex2), lambda: tx2.scatter_add(1, ti2, tx2), 5),
        ("sort_1M", lambda: ember.sort(ex), lambda: torch.sort(tx), 2),
        ("sort_1000x1000", lambda: ember.sort(ex2, 1), lambda: torch.sort(tx2, 1), 2),
        ("topk100_1M", lambda: ember.topk(ex, 100), lambda: torch.topk(tx, 100), 5),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    repeats = 3 if args.quick else 7
    print(f"{'case':<24}{'ember 1t':>12}{'torch 1t':>12}{'ratio 1t':>10}{'ratio 2t':>10}{'target':>10}")
    for name, efn, tfn, inner in cases(1_000_000):
        ratios, times = {}, {}
        for threads in (1, 2):
            torch.set_num_threads(threads)
            ember.set_num_threads(threads)
            te, tt = bench(efn, repeats, inner), bench(tfn, repeats, inner)
            ratios[threads], times[threads] = te / tt, (te, tt)
        te, tt = times[1]
        mark = f"<{TARGET:g}" + (" ok" if ratios[1] <= TARGET else " MISS")
        print(f"{name:<24}{te * 1e3:>9.2f} ms{tt * 1e3:>9.2f} ms{ratios[1]:>10.2f}{ratios[2]:>10.2f}{mark:>10}")


if __name__ == "__main__":
    main()
