"""The timing helper the benchmarks share: warm up, then the median of ``repeat`` runs."""

from __future__ import annotations

import statistics
import time


def median_time(fn, repeat: int, warmup: int = 2, clock=time.perf_counter) -> float:
    """Median time of ``fn()`` in seconds on ``clock`` (wall time unless told), after ``warmup``
    untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


def cuda_median_ms(fw, fn, iters: int = 30, warm: int = 3) -> float:
    """Median device time of ``fn()`` in milliseconds, by ``fw``'s CUDA events (``fw``: ember or torch,
    each timed on its own current stream) around each call, after ``warm`` untimed calls."""
    for _ in range(warm):
        fn()
    fw.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = fw.cuda.Event(enable_timing=True), fw.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def cuda_host_us(fw, fn, n: int = 20000, warm: int = 500) -> float:
    """Host wall time per call of ``fn()`` in microseconds over ``n`` asynchronous calls (the device
    synchronized before and after, so queued work is counted once)."""
    for _ in range(warm):
        fn()
    fw.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    fw.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6
