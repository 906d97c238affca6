"""The profiler's records: ``FunctionEvent`` (one op or ``record_function`` range),
``FunctionEventAvg`` (events of one key summed) and ``EventList`` (tables, averages, Chrome
traces), with PyTorch's ``torch.autograd.profiler_util`` names and fields. Times are in us."""

from __future__ import annotations

import json
from collections import OrderedDict

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "Interval", "Kernel", "MemRecordsAcc"]


class Interval:
    def __init__(self, start, end):
        self.start, self.end = start, end

    def elapsed_us(self):
        return self.end - self.start


class Kernel:  # a device kernel of an event: ember's CPU profiler records none
    def __init__(self, name, device, duration):
        self.name, self.device, self.duration = name, device, duration


class MemRecordsAcc:
    """Memory records in a time window (``profile_memory``); ember records allocations per op."""

    def __init__(self, mem_records):
        self._mem_records = list(mem_records)

    def in_interval(self, start_us, end_us):
        return [r for r in self._mem_records if start_us <= r[0] <= end_us]


class FunctionEvent:
    """One profiled range: an op (``aten::add``) or a user range (``record_function``)."""

    def __init__(self, id, name, thread, start_us, end_us, input_shapes=None, stack=None, is_user_annotation=False,
                 cpu_memory_usage=0, sequence_nr=-1):
        self.id, self.name, self.thread = id, name, thread
        self.time_range = Interval(start_us, end_us)
        self.input_shapes = input_shapes or []
        self.stack = stack or []
        self.is_user_annotation = is_user_annotation
        self.cpu_memory_usage = cpu_memory_usage
        self.sequence_nr = sequence_nr
        self.cpu_children: list[FunctionEvent] = []
        self.cpu_parent: FunctionEvent | None = None
        self.count = 1
        self.device_type = "CPU"
        self.kernels: list[Kernel] = []
        self.flops = 0

    key = property(lambda self: self.name)
    cpu_time_total = property(lambda self: self.time_range.elapsed_us())
    self_cpu_time_total = property(lambda self: self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children))
    cpu_time = property(lambda self: self.cpu_time_total)
    device_time_total = property(lambda self: 0)
    self_device_time_total = property(lambda self: 0)
    self_cpu_memory_usage = property(
        lambda self: self.cpu_memory_usage - sum(c.cpu_memory_usage for c in self.cpu_children))

    def append_cpu_child(self, child: FunctionEvent) -> None:
        self.cpu_children.append(child)
        child.cpu_parent = self

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} cpu_time={self.cpu_time_total:.3f}us "
                f"self_cpu_time={self.self_cpu_time_total:.3f}us input_shapes={self.input_shapes}>")


class FunctionEventAvg:
    """The events sharing a key, summed (``key_averages``)."""

    def __init__(self):
        self.key = None
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.input_shapes = None
        self.stack = None
        self.is_user_annotation = False
        self.device_time_total = 0.0
        self.self_device_time_total = 0.0
        self.flops = 0

    def add(self, other):
        if self.key is None:
            self.key, self.input_shapes, self.stack = other.key, other.input_shapes, other.stack
            self.is_user_annotation = other.is_user_annotation
        self.count += other.count
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.cpu_memory_usage += other.cpu_memory_usage
        self.self_cpu_memory_usage += other.self_cpu_memory_usage
        return self

    def __iadd__(self, other):
        return self.add(other)

    @property
    def cpu_time(self):
        return self.cpu_time_total / max(self.count, 1)

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total:.3f}us "
                f"cpu_time={self.cpu_time:.3f}us input_shapes={self.input_shapes}>")


def _fmt_us(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


_SORT_KEYS = {"cpu_time", "cpu_time_total", "self_cpu_time_total", "count", "cpu_memory_usage",
              "self_cpu_memory_usage", "device_time", "device_time_total", "self_device_time_total",
              "cuda_time", "cuda_time_total", "self_cuda_time_total"}


class EventList(list):
    """A list of events with PyTorch's reporting helpers."""

    def __init__(self, *args, **kwargs):
        kwargs.pop("use_device", None)
        kwargs.pop("profile_memory", None)
        kwargs.pop("with_flops", None)
        super().__init__(*args)

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        stats: OrderedDict = OrderedDict()
        for e in self:
            key = (e.key,)
            if group_by_input_shape:
                key += (str(e.input_shapes),)
            if group_by_stack_n > 0:
                key += tuple(e.stack[:group_by_stack_n])
            stats.setdefault(key, FunctionEventAvg()).add(e)
        return EventList(stats.values())

    def total_average(self):
        total = FunctionEventAvg()
        for e in self:
            total.add(e)
        total.key = "Total"
        return total

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False, time_unit=None):
        events = list(self)
        if top_level_events_only:
            events = [e for e in events if getattr(e, "cpu_parent", None) is None]
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise AttributeError(f"'{type(events[0]).__name__ if events else 'FunctionEvent'}' object has no "
                                     f"attribute '{sort_by}'")
            attr = sort_by.replace("cuda", "device")
            events.sort(key=lambda e: getattr(e, attr), reverse=True)
        if row_limit is not None and row_limit > 0:
            events = events[:row_limit]
        total_self = sum(e.self_cpu_time_total for e in self) or 1.0
        show_shapes = any(e.input_shapes for e in events)
        cols = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]
        if show_shapes:
            cols.append("Input Shapes")
        rows = []
        for e in events:
            name = e.key if len(e.key) <= max_name_column_width else e.key[: max_name_column_width - 3] + "..."
            row = [name, f"{100 * e.self_cpu_time_total / total_self:.2f}%", _fmt_us(e.self_cpu_time_total),
                   f"{100 * e.cpu_time_total / total_self:.2f}%", _fmt_us(e.cpu_time_total), _fmt_us(e.cpu_time),
                   str(e.count)]
            if show_shapes:
                row.append(str(e.input_shapes)[:max_shapes_column_width])
            rows.append(row)
        widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(cols)]
        line = "-" * (sum(widths) + 2 * (len(widths) - 1))
        fmt = "  ".join(f"{{:>{w}}}" if i else f"{{:<{w}}}" for i, w in enumerate(widths))
        out = ([header] if header else []) + [line, fmt.format(*cols), line]
        out += [fmt.format(*r) for r in rows]
        out += [line, f"Self CPU time total: {_fmt_us(sum(e.self_cpu_time_total for e in self))}", ""]
        return "\n".join(out)

    def __str__(self):
        return self.table()

    def export_chrome_trace(self, path):
        """Writes the events in the Chrome trace-event format (chrome://tracing, Perfetto)."""
        trace = {"traceEvents": [
            {"name": e.name, "ph": "X", "ts": e.time_range.start, "dur": e.cpu_time_total, "pid": 0,
             "tid": e.thread, "cat": "user_annotation" if e.is_user_annotation else "cpu_op",
             "args": {"Input Dims": e.input_shapes} if e.input_shapes else {}}
            for e in self if isinstance(e, FunctionEvent)], "displayTimeUnit": "ms"}
        with open(path, "w") as f:
            json.dump(trace, f)
