"""``ember.utils.benchmark``: ``Timer``, ``Measurement`` and ``Compare``, as ``torch.utils.benchmark``.

The tutorials time a statement against a dict of globals (``Timer(stmt="f(x)",
globals=globals()).timeit(100)``) and print the ``Measurement``; this module keeps that
interface and its report layout: the title (``label: sub_label``, then the description or the
statement), the setup when there is one, the time (the median of several measurements, with
their interquartile range from four on), then the count of measurements, runs and threads.
Statements run through the standard library's ``timeit``; an accelerator is synchronized
around each block so that its queued work is counted.
"""

from __future__ import annotations

import statistics
import timeit as _timeit
from collections.abc import Callable

import ember

__all__ = ["Timer", "Measurement", "Compare", "select_unit", "trim_sigfig"]

_UNITS = ((1e-9, "ns"), (1e-6, "us"), (1e-3, "ms"), (1.0, "s"))
_UNIT_NAMES = {"ns": "nanoseconds", "us": "microseconds", "ms": "milliseconds", "s": "seconds"}


def select_unit(t: float) -> tuple[str, float]:
    """The unit to print ``t`` seconds in, and that unit's size in seconds."""
    unit, scale = "ns", 1e-9
    for size, name in _UNITS:
        if t >= size:
            unit, scale = name, size
    return unit, scale


def trim_sigfig(x: float, n: int) -> float:
    """``x`` rounded to ``n`` significant figures."""
    if x == 0:
        return 0.0
    return float(f"{x:.{n}g}")


def _format_time(t: float) -> str:
    unit, scale = select_unit(t)
    return f"{t / scale:.2f} {unit}"


def _synchronized_timer() -> float:
    if ember.cuda.is_available():
        ember.cuda.synchronize()
    return _timeit.default_timer()


class Measurement:
    """The times of ``len(raw_times)`` blocks of ``number_per_run`` runs of one statement."""

    def __init__(self, number_per_run: int, raw_times: list, task_spec: dict | None = None,
                 metadata: dict | None = None) -> None:
        self.number_per_run = number_per_run
        self.raw_times = list(raw_times)
        spec = dict(task_spec or {})
        self.stmt = spec.get("stmt", "")
        self.setup = spec.get("setup", "pass")
        self.label = spec.get("label")
        self.sub_label = spec.get("sub_label")
        self.description = spec.get("description")
        self.env = spec.get("env")
        self.num_threads = spec.get("num_threads", 1)
        self.metadata = metadata

    @property
    def times(self) -> list:
        return [t / self.number_per_run for t in self.raw_times]

    def _quantile(self, q: float) -> float:
        times = sorted(self.times)
        pos = q * (len(times) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(times) - 1)
        return times[lo] + (times[hi] - times[lo]) * (pos - lo)

    @property
    def median(self) -> float:
        return self._quantile(0.5)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.times)

    @property
    def iqr(self) -> float:
        return self._quantile(0.75) - self._quantile(0.25)

    @property
    def significant_figures(self) -> int:
        """How many figures of the median the spread of the measurements supports (1 to 4)."""
        if len(self.times) < 2 or self.median == 0:
            return 4
        spread = statistics.stdev(self.times) / self.median / len(self.times) ** 0.5
        figures = 4
        while figures > 1 and spread > 10 ** -figures * 5:
            figures -= 1
        return figures

    @property
    def has_warnings(self) -> bool:
        return len(self.times) >= 4 and self.median > 0 and self.iqr / self.median > 0.1

    @property
    def title(self) -> str:
        if self.label is not None:
            return f"{self.label}: {self.sub_label}" if self.sub_label else self.label
        return self.description or self.stmt

    def __repr__(self) -> str:
        lines = [object.__repr__(self)]
        if self.label is not None:
            lines.append(self.title)
            lines.append(self.description or self.stmt)
        else:
            lines.append(self.title)
        if self.setup and self.setup != "pass":
            setup = self.setup.strip().splitlines()
            lines.append(f"setup: {setup[0]}" if len(setup) == 1 else "setup:")
            if len(setup) > 1:
                lines.extend("  " + s for s in setup)
        n = len(self.times)
        if n > 1:
            lines.append(f"  Median: {_format_time(self.median)}")
        else:
            lines.append(f"  {_format_time(self.median)}")
        if n >= 4:
            lines.append(f"  IQR:    {_format_time(self.iqr)} "
                         f"({_format_time(self._quantile(0.25)).split()[0]} to "
                         f"{_format_time(self._quantile(0.75)).split()[0]})")
        threads = f"{self.num_threads} thread{'s' if self.num_threads > 1 else ''}"
        per = "per measurement" if n > 1 else ""
        lines.append(f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs {per}, {threads}")
        if self.has_warnings:
            lines.append(f"  WARNING: Interquartile range is {self.iqr / self.median * 100:.1f}% of the median "
                         "measurement.")
            lines.append("           This suggests significant environmental influence.")
        return "\n".join(lines)


class Timer:
    """Times ``stmt`` (source text or a callable) run in a copy of ``globals`` after ``setup``."""

    def __init__(self, stmt: str | Callable = "pass", setup: str | Callable = "pass", global_setup: str = "",
                 timer: Callable[[], float] = _synchronized_timer, globals: dict | None = None,
                 label: str | None = None, sub_label: str | None = None, description: str | None = None,
                 env: str | None = None, num_threads: int = 1, language: str = "python") -> None:
        if language not in ("python", "py"):
            raise ValueError(f"ember.utils.benchmark.Timer times Python statements only, not {language!r}")
        if not isinstance(num_threads, int) or num_threads < 1:
            raise ValueError(f"num_threads must be a positive int, got {num_threads!r}")
        self._globals = dict(globals or {})
        self._num_threads = num_threads
        self._task_spec = {
            "stmt": stmt if isinstance(stmt, str) else getattr(stmt, "__name__", repr(stmt)),
            "setup": setup if isinstance(setup, str) else getattr(setup, "__name__", repr(setup)),
            "label": label, "sub_label": sub_label, "description": description, "env": env,
            "num_threads": num_threads,
        }
        if global_setup:
            exec(global_setup, self._globals)
        self._timer = _timeit.Timer(stmt=stmt, setup=setup, timer=timer, globals=self._globals)

    def _run(self, number: int) -> float:
        previous = ember.get_num_threads()
        ember.set_num_threads(self._num_threads)
        try:
            return self._timer.timeit(number)
        finally:
            ember.set_num_threads(previous)

    def _measurement(self, number: int, times: list) -> Measurement:
        return Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)

    def timeit(self, number: int = 1000000) -> Measurement:
        self._run(max(number // 100, 2))  # warm-up
        return self._measurement(number, [self._run(number)])

    def _block_size(self, min_block_time: float) -> int:
        number = 1
        while True:
            if self._run(number) >= min_block_time or number >= 10 ** 9:
                return number
            number *= 10

    def blocked_autorange(self, callback: Callable | None = None, min_run_time: float = 0.2) -> Measurement:
        number = self._block_size(min_run_time / 1000 if min_run_time > 0 else 1e-4)
        times: list = []
        total = 0.0
        while total < min_run_time or not times:
            t = self._run(number)
            total += t
            times.append(t)
            if callback is not None:
                callback(number, t)
        return self._measurement(number, times)

    def adaptive_autorange(self, threshold: float = 0.1, *, min_run_time: float = 0.01, max_run_time: float = 10.0,
                           callback: Callable | None = None) -> Measurement:
        number = self._block_size(0.05 * min_run_time if min_run_time > 0 else 1e-4)
        times: list = []
        total = 0.0
        while True:
            t = self._run(number)
            total += t
            times.append(t)
            if callback is not None:
                callback(number, t)
            if total >= max_run_time:
                break
            if total >= min_run_time and len(times) >= 3:
                m = self._measurement(number, times)
                if m.median > 0 and m.iqr / m.median < threshold:
                    break
        return self._measurement(number, times)


class Compare:
    """A table of measurements: one per ``label``, a row per ``sub_label``, a column per
    ``description``, times in the unit of the smallest median."""

    def __init__(self, results: list) -> None:
        self._results = [r for r in results if r is not None]
        self._trim = False
        self._colorize = False

    def trim_significant_figures(self) -> None:
        self._trim = True

    def colorize(self, rowwise: bool = False) -> None:
        self._colorize = True  # accepted; the table is printed without colour

    def extend_results(self, results: list) -> None:
        self._results.extend(r for r in results if r is not None)

    def _table(self, label, results) -> str:
        columns = list(dict.fromkeys(r.description or "" for r in results))
        rows = list(dict.fromkeys((r.num_threads, r.sub_label or r.stmt) for r in results))
        unit, scale = select_unit(min(r.median for r in results))
        cells = {}
        for r in results:
            value = r.median / scale
            if self._trim:
                value = trim_sigfig(value, r.significant_figures)
            cells[(r.num_threads, r.sub_label or r.stmt, r.description or "")] = f"{value:.1f}"
        name_width = max(len(str(row[1])) for row in rows) + 4
        widths = [max(len(c), *(len(cells.get((n, s, c), "")) for n, s in rows)) + 2 for c in columns]
        header = " " * name_width + "|" + "|".join(c.center(w) for c, w in zip(columns, widths))
        width = len(header)
        title = f" {label} " if label else ""
        lines = ["[" + title.center(width - 2, "-") + "]", header]
        last_threads = None
        for threads, name in rows:
            if threads != last_threads:
                text = f"{threads} threads: "
                lines.append(text + "-" * max(width - len(text), 0))
                last_threads = threads
            values = [cells.get((threads, name, c), "").center(w) for c, w in zip(columns, widths)]
            lines.append(str(name).rjust(name_width - 2).ljust(name_width) + "|" + "|".join(values))
        lines.append("")
        lines.append(f"Times are in {_UNIT_NAMES[unit]} ({unit}).")
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        labels = list(dict.fromkeys(r.label for r in self._results))
        return "\n".join(self._table(label, [r for r in self._results if r.label == label]) for label in labels)

    def print(self) -> None:
        print(str(self))
