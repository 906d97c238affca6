"""What the profiler recorded: one ``FunctionEvent`` per op call or ``record_function`` range,
their averages by name (``FunctionEventAvg``), and ``EventList`` with PyTorch's table and
Chrome-trace export.

Times are microseconds (floats), as in ``torch.autograd.profiler_util``. An event's self time
is its total minus the totals of its direct children, so nested ranges add up.
"""

from __future__ import annotations

import os

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "Interval"]


class Interval:
    __slots__ = ("start", "end")

    def __init__(self, start: float, end: float):
        self.start, self.end = start, end

    def elapsed_us(self) -> float:
        return self.end - self.start

    def __repr__(self) -> str:
        return f"Interval(start={self.start:.3f}, end={self.end:.3f})"


class FunctionEvent:
    """One recorded call: an op (``aten::<name>``) or a ``record_function`` range."""

    def __init__(self, id: int, name: str, thread: int, start_us: float, end_us: float = 0.0,
                 input_shapes=None, is_user_annotation: bool = False):
        self.id = id
        self.name = name
        self.thread = thread
        self.time_range = Interval(start_us, end_us)
        self.input_shapes = input_shapes if input_shapes is not None else []
        self.cpu_children: list[FunctionEvent] = []
        self.cpu_parent: FunctionEvent | None = None
        self.cpu_memory_usage = 0
        self.flops = 0
        self.count = 1
        self.is_user_annotation = is_user_annotation
        self.device_type = "CPU"

    @property
    def key(self) -> str:
        return self.name

    @property
    def cpu_time_total(self) -> float:
        return self.time_range.elapsed_us()

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total

    @property
    def self_cpu_memory_usage(self) -> int:
        return self.cpu_memory_usage - sum(c.cpu_memory_usage for c in self.cpu_children)

    # Device columns: this profiler times the CPU side only (docs/deviations.md).
    device_time_total = self_device_time_total = cuda_time_total = self_cuda_time_total = 0.0
    device_memory_usage = self_device_memory_usage = 0

    def __repr__(self) -> str:
        return (f"<FunctionEvent id={self.id} name={self.name} cpu_time={_format_time(self.cpu_time_total)} "
                f"start_us={self.time_range.start:.3f} end_us={self.time_range.end:.3f} "
                f"input_shapes={self.input_shapes} cpu_memory_usage={self.cpu_memory_usage}>")


class FunctionEventAvg:
    """The events of one key (a name, and the input shapes when grouped by them), summed."""

    def __init__(self):
        self.key: str | None = None
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.flops = 0
        self.input_shapes = None
        self.is_user_annotation = False

    device_time_total = self_device_time_total = cuda_time_total = self_cuda_time_total = 0.0
    device_memory_usage = self_device_memory_usage = 0

    def add(self, other) -> FunctionEventAvg:
        if self.key is None:
            self.key = other.key
            self.input_shapes = other.input_shapes
            self.is_user_annotation = other.is_user_annotation
        self.count += other.count
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.cpu_memory_usage += other.cpu_memory_usage
        self.self_cpu_memory_usage += other.self_cpu_memory_usage
        self.flops += other.flops
        return self

    def __iadd__(self, other) -> FunctionEventAvg:
        return self.add(other)

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={_format_time(self.self_cpu_time_total)} "
                f"cpu_time={_format_time(self.cpu_time)} input_shapes={self.input_shapes} "
                f"cpu_memory_usage={self.cpu_memory_usage}>")


# The sort keys PyTorch's table accepts; the device ones sort by zeros here.
_SORT_KEYS = ("cpu_time", "cpu_time_total", "self_cpu_time_total", "count", "cpu_memory_usage",
              "self_cpu_memory_usage", "flops", "cuda_time", "cuda_time_total", "self_cuda_time_total",
              "device_time", "device_time_total", "self_device_time_total", "device_memory_usage",
              "self_device_memory_usage", "cuda_memory_usage", "self_cuda_memory_usage")


class EventList(list):
    """A list of events with PyTorch's summaries (``table``, ``key_averages``, ``export_chrome_trace``)."""

    def __init__(self, *args, with_flops: bool = False, profile_memory: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self._with_flops = with_flops
        self._profile_memory = profile_memory

    @property
    def self_cpu_time_total(self) -> float:
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shapes: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        groups: dict = {}
        for e in self:
            key = (e.key, str(e.input_shapes)) if group_by_input_shapes else e.key
            groups.setdefault(key, FunctionEventAvg()).add(e)
        return EventList(groups.values(), with_flops=self._with_flops, profile_memory=self._profile_memory)

    def total_average(self) -> FunctionEventAvg:
        total = FunctionEventAvg()
        for e in self:
            total.add(e)
        total.key = "Total"
        return total

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_src_column_width: int = 75,
              max_name_column_width: int = 55, max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False, time_unit: str | None = None) -> str:
        rows = list(self)
        if top_level_events_only:
            rows = [e for e in rows if getattr(e, "cpu_parent", None) is None]
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise AttributeError(f"'FunctionEventAvg' object has no attribute '{sort_by}'")
            rows.sort(key=lambda e: getattr(e, sort_by), reverse=True)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        return _table(self, rows, header, max_name_column_width, max_shapes_column_width, time_unit)

    def export_chrome_trace(self, path: str) -> None:
        """Writes the events as a Chrome trace (``chrome://tracing``, Perfetto), atomically."""
        import json

        pid = os.getpid()
        trace = []
        for e in self:
            if not isinstance(e, FunctionEvent):
                continue
            args = {"Input Dims": e.input_shapes} if e.input_shapes else {}
            if e.cpu_memory_usage:
                args["Memory (bytes)"] = e.cpu_memory_usage
            trace.append({"ph": "X", "cat": "user_annotation" if e.is_user_annotation else "cpu_op",
                          "name": e.name, "pid": pid, "tid": e.thread, "ts": e.time_range.start,
                          "dur": e.cpu_time_total, "args": args})
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump({"traceEvents": trace, "displayTimeUnit": "ms"}, f)
        os.replace(tmp, path)


def _format_time(us: float, unit: str | None = None) -> str:
    if unit == "s" or (unit is None and us >= 1e6):
        return f"{us / 1e6:.3f}s"
    if unit == "ms" or (unit is None and us >= 1e3):
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _format_memory(nbytes: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} B"


def _table(events: EventList, rows, header, name_width, shapes_width, time_unit) -> str:
    total_self = sum(e.self_cpu_time_total for e in events) or 1.0
    with_shapes = any(e.input_shapes for e in rows)
    columns = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if events._profile_memory:
        columns += ["CPU Mem", "Self CPU Mem"]
    columns.append("# of Calls")
    if with_shapes:
        columns.append("Input Shapes")
    if events._with_flops:
        columns.append("Total KFLOPs")
    name_w = min(max([len(c) for c in ["Name"]] + [len(str(e.key)) for e in rows]) + 2, name_width)
    widths = [name_w] + [12] * (len(columns) - 1)
    if with_shapes:
        widths[columns.index("Input Shapes")] = min(max(len(str(e.input_shapes)) for e in rows) + 2, shapes_width)

    def line(cells):
        return "  ".join(str(c)[:w].rjust(w) for c, w in zip(cells, widths)) + "  "

    sep = "  ".join("-" * w for w in widths) + "  "
    out = [header] if header else []
    out += [sep, line(columns), sep]
    for e in rows:
        cells = [e.key, f"{100 * e.self_cpu_time_total / total_self:.2f}%",
                 _format_time(e.self_cpu_time_total, time_unit),
                 f"{100 * e.cpu_time_total / total_self:.2f}%", _format_time(e.cpu_time_total, time_unit),
                 _format_time(e.cpu_time, time_unit)]
        if events._profile_memory:
            cells += [_format_memory(e.cpu_memory_usage), _format_memory(e.self_cpu_memory_usage)]
        cells.append(e.count)
        if with_shapes:
            cells.append(str(e.input_shapes))
        if events._with_flops:
            cells.append(f"{e.flops / 1e3:.3f}" if e.flops else "--")
        out.append(line(cells))
    out.append(sep)
    out.append(f"Self CPU time total: {_format_time(total_self, time_unit)}")
    return "\n".join(out) + "\n"
