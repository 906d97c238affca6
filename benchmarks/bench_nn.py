"""ember vs PyTorch on the nn kernels of issue 3: conv2d forward, conv2d forward + backward kernels,
max_pool2d. Prints median times and the ember/torch ratio, single-threaded first (the primary
figure on shared machines), then with 2 threads.

    PYTHONPATH=packages/tensor-core/src python benchmarks/bench_nn.py [--batch 32] [--repeat 5]

Where conv time goes (single thread, 2026-11-30): nearly all of it is OpenBLAS sgemm on the
per-image 64x576x3136 product, which ran at ~60 GFLOP/s against ~85-100 for PyTorch's MKL mm on
the same shape (8 products: 31-33 ms vs 18-22 ms); im2col, done in 512 KiB chunks of output
rows, adds ~6% (conv 35 ms vs 33 ms of bare gemms). Other orientations (B^T A^T), chunk sizes
and OpenBLAS's small-matrix path were no faster.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

# ruff: noqa: I001 - ember is imported before torch on purpose: both then share the libgomp
# that ember configures (GOMP_SPINCOUNT, see ember/_src/_native.py), so neither side's idle
# OpenMP workers starve the other's threads.
import ember
import torch
import torch.nn.functional as F

from ember._src.ops.nn import conv as nn_conv
from ember._src.ops.nn import pool as nn_pool


def _times(fn, repeat: int) -> tuple:
    """(median, min) seconds; the min is the steadier figure on a loaded machine."""
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def _cases(batch: int):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 64, 56, 56), dtype=np.float32)
    w = rng.standard_normal((64, 64, 3, 3), dtype=np.float32) * 0.05
    b = rng.standard_normal(64, dtype=np.float32)
    tx, tw, tb = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)
    ex, ew, eb = ember.from_numpy(x), ember.from_numpy(w), ember.from_numpy(b)
    tg = torch.from_numpy(rng.standard_normal((batch, 64, 56, 56), dtype=np.float32))
    eg = ember.from_numpy(tg.numpy())
    args = ([1, 1], [1, 1], [1, 1], False, [0, 0], 1)

    def torch_fwd_bwd():
        F.conv2d(tx, tw, tb, padding=1)
        torch.ops.aten.convolution_backward(tg, tx, tw, [64], *args, [True, True, True])

    def ember_fwd_bwd():
        ember.conv2d(ex, ew, eb, padding=1)
        nn_conv.convolution_backward_op(eg, ex, ew, [64], *args, [True, True, True])

    return [
        ("conv2d fwd 3x3 p1", lambda: F.conv2d(tx, tw, tb, padding=1), lambda: ember.conv2d(ex, ew, eb, padding=1)),
        ("conv2d fwd+bwd kernels", torch_fwd_bwd, ember_fwd_bwd),
        ("max_pool2d k3 s2 p1", lambda: F.max_pool2d(tx, 3, 2, 1), lambda: nn_pool.max_pool2d(ex, 3, 2, 1)),
        ("max_pool2d k2 s2", lambda: F.max_pool2d(tx, 2), lambda: nn_pool.max_pool2d(ex, 2)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--only", default="")
    opts = parser.parse_args()
    cases = [c for c in _cases(opts.batch) if opts.only in c[0]]
    print(f"activations ({opts.batch}, 64, 56, 56) float32, 64 3x3 filters")
    for threads in opts.threads:
        torch.set_num_threads(threads)
        ember.set_num_threads(threads)
        for name, tfn, efn in cases:
            tt, tmin = _times(tfn, opts.repeat)
            et, emin = _times(efn, opts.repeat)
            print(f"threads={threads} {name:24s} median: torch {tt * 1e3:8.2f} ms ember {et * 1e3:8.2f} ms ratio "
                  f"{et / tt:5.2f} | min: ratio {emin / tmin:5.2f}")


if __name__ == "__main__":
    main()
