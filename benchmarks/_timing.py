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
