"""The timing helper the benchmarks share: warm up, then the median of ``repeat`` runs."""

from __future__ import annotations

import statistics
import time


def median_time(fn, repeat: int, warmup: int = 2) -> float:
    """Median wall time of ``fn()`` in seconds, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
