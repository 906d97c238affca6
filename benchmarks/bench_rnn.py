"""ember vs PyTorch on a recurrent training step: a 2-layer LSTM (input 64, hidden 256,
sequence 50, batch 32), forward + backward + SGD step, with identical weights. Prints median
and min times and the ember/torch ratio with 1 and then 2 threads.

    PYTHONPATH=$(python ci/dev_env.py) python benchmarks/bench_rnn.py [--repeat 11] [--mode LSTM]

Figures (2026-11-30 ~11:25 UTC, 2-core dev machine at load 8-13, so noisy; median of 11
alternating runs): LSTM ember/torch 1.16-1.26 with 1 thread, 0.6-0.8 with 2 threads; GRU
(--mode GRU) 0.94 / 0.51. With 1 thread what is left for the LSTM is mostly BLAS: the per-step
(32, 256) x (256, 1024) product takes ~2x as long in OpenBLAS as in PyTorch's MKL (min 250-280 us
vs 130 us); the large products are at parity. Framework overhead is gone: with hidden 8, batch 2
ember and torch both take ~2 ms a step. LSTM and GRU time loops run in C++ (the _lstm_layer /
_gru_layer ops); per-step products run BLAS on one thread, which is what keeps 2 threads fast on
a loaded machine (a threaded BLAS call waits for a scheduler slice to wake its workers).
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


def _times(fns, repeat: int) -> list:
    """Per function, (median, min) seconds. The functions take turns, so that load changes on
    a shared machine hit both sides alike; the min is the steadier figure."""
    for fn in fns:
        fn()  # warm-up
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, ts in zip(fns, times, strict=True):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    return [(statistics.median(ts), min(ts)) for ts in times]


def _step_fns(mode: str, input_size: int, hidden: int, layers: int, seq: int, batch: int):
    torch.manual_seed(0)
    tmod = getattr(torch.nn, mode)(input_size, hidden, layers)
    emod = getattr(ember.nn, mode)(input_size, hidden, layers)
    with ember.no_grad():
        for name, p in tmod.named_parameters():
            getattr(emod, name).copy_(ember.from_numpy(p.detach().numpy().copy()))
    x = np.random.default_rng(0).standard_normal((seq, batch, input_size), dtype=np.float32)
    tx, ex = torch.from_numpy(x), ember.from_numpy(x)
    topt = torch.optim.SGD(tmod.parameters(), lr=0.01)
    eparams = list(emod.parameters())

    def torch_step():
        out, _ = tmod(tx)
        out.sum().backward()
        topt.step()
        topt.zero_grad()

    def ember_step():
        # ember.optim is written in parallel with this benchmark: a plain SGD update here.
        out, _ = emod(ex)
        out.sum().backward()
        with ember.no_grad():
            for p in eparams:
                p.add_(p.grad, alpha=-0.01)
                p.grad = None

    return torch_step, ember_step


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="LSTM", choices=["LSTM", "GRU", "RNN"])
    parser.add_argument("--input", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seq", type=int, default=50)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    opts = parser.parse_args()
    torch_step, ember_step = _step_fns(opts.mode, opts.input, opts.hidden, opts.layers, opts.seq, opts.batch)
    print(f"{opts.layers}-layer {opts.mode} input {opts.input} hidden {opts.hidden}, seq {opts.seq} batch "
          f"{opts.batch}: forward + backward + SGD step")
    for threads in opts.threads:
        torch.set_num_threads(threads)
        ember.set_num_threads(threads)
        (tt, tmin), (et, emin) = _times([torch_step, ember_step], opts.repeat)
        print(f"threads={threads} median: torch {tt * 1e3:8.2f} ms ember {et * 1e3:8.2f} ms ratio {et / tt:5.2f} "
              f"| min: torch {tmin * 1e3:8.2f} ms ember {emin * 1e3:8.2f} ms ratio {emin / tmin:5.2f}")


if __name__ == "__main__":
    main()
