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


def cuda_median_ms(fw, fn, iters: int = 30, warm: int = 3, hide_host: bool = False) -> float:
    """Median device time of ``fn()`` in milliseconds, by ``fw``'s CUDA events (``fw``: ember or torch,
    each timed on its own current stream) around each call, after ``warm`` untimed calls.

    With ``hide_host`` each timed call is queued behind device work (``fw``'s own matrix products) that
    lasts about twice the host's time to issue ``fn()``: the device then reaches the start event only
    once ``fn``'s kernels are queued, so the events time the kernels alone. Without it the host's latency
    to the first launch is counted too (the device idles from the start event until then), which for a
    kernel of tens of microseconds can be most of the figure, and which depends on the host's speed."""
    for _ in range(warm):
        fn()
    fw.cuda.synchronize()
    busy = _busy_work(fw, fn) if hide_host else None
    times = []
    for _ in range(iters):
        start, end = fw.cuda.Event(enable_timing=True), fw.cuda.Event(enable_timing=True)
        if busy is not None:
            busy()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _busy_work(fw, fn, size: int = 4096):
    """A callable queueing device work that outlasts the host's issue time of ``fn()`` about twice."""
    a = fw.randn(size, size, device="cuda", dtype=fw.bfloat16)
    out = fw.empty(size, size, device="cuda", dtype=fw.bfloat16)
    fw.matmul(a, a, out=out)
    fw.cuda.synchronize()
    start, end = fw.cuda.Event(enable_timing=True), fw.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        fw.matmul(a, a, out=out)
    end.record()
    end.synchronize()
    unit = max(start.elapsed_time(end) / 20, 1e-3)  # ms of device time per product
    issue = []
    for _ in range(5):  # the host's time to issue fn(), the device kept busy meanwhile
        for _ in range(int(2.0 / unit) + 1):
            fw.matmul(a, a, out=out)
        t0 = time.perf_counter()
        fn()
        issue.append((time.perf_counter() - t0) * 1e3)
        fw.cuda.synchronize()
    # Capped at ~50 ms: an fn() that waits for the device (a read-back) is not hidden by any amount.
    repeats = min(int(2 * statistics.median(issue) / unit) + 1, int(50 / unit) + 1)

    def busy():
        for _ in range(repeats):
            fw.matmul(a, a, out=out)
    busy.repeats, busy.unit_ms, busy.issue_ms = repeats, unit, statistics.median(issue)
    return busy


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


def cpu_speed_ms(n: int = 400000) -> float:
    """CPU ms of this thread for a fixed pure-Python loop (lower is faster): the interpreter's speed here."""
    t0 = time.thread_time()
    s = 0
    for i in range(n):
        s += i
    return (time.thread_time() - t0) * 1e3


def current_cpu() -> int:
    try:
        with open("/proc/thread-self/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return -1
