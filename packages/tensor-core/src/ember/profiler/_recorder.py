"""The recording side of the profiler: a dispatch mode that times every op call, and
``record_function`` ranges.

The recorder is a dispatch mode (docs/DESIGN.md, "Dispatch"), so while one is entered every
op takes the Python dispatcher. Unlike a tracer it stays on the mode stack while the op runs,
so the ops a composite kernel or an autograd formula calls are recorded as its children, as
PyTorch nests ``aten::mm`` under ``aten::matmul``. Ranges are per thread: the recorder sees
the ops of the thread that entered it (each thread has its own mode stack).
"""

from __future__ import annotations

import threading
import time

from ember._src import dispatch
from ember._src.tensor import Tensor

from ._events import EventList, FunctionEvent

_THREAD = threading.local()  # .recorder: the recorder of this thread, or absent


def _now_us() -> float:
    return time.perf_counter_ns() / 1e3


def current_recorder():
    return getattr(_THREAD, "recorder", None)


def _shape_of(value) -> list:
    if isinstance(value, Tensor):
        return list(value.shape)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, Tensor) for v in value):
        return [list(v.shape) for v in value]
    return []


def _output_bytes(out) -> int:
    if isinstance(out, Tensor):
        return out.numel() * out.element_size()
    if isinstance(out, (list, tuple)):
        return sum(_output_bytes(o) for o in out)
    return 0


def _flops(name: str, args, out) -> int:
    """Multiply-add count x2 of the ops PyTorch's profiler counts FLOPs for (matmuls and convs)."""
    shapes = [a.shape for a in args if isinstance(a, Tensor)]
    try:
        if name in ("mm", "matmul") and len(shapes) >= 2 and len(shapes[0]) == 2 == len(shapes[1]):
            (m, k), (_, n) = shapes[0], shapes[1]
            return 2 * m * k * n
        if name == "addmm" and len(shapes) >= 3:
            (m, k), (_, n) = shapes[1], shapes[2]
            return 2 * m * k * n
        if name == "bmm" and len(shapes) >= 2:
            (b, m, k), (_, _, n) = shapes[0], shapes[1]
            return 2 * b * m * k * n
        if name in ("conv1d", "conv2d", "conv3d", "convolution") and len(shapes) >= 2 and isinstance(out, Tensor):
            per_output = 1  # multiply-adds per output element: C_in / groups * kernel volume
            for s in shapes[1][1:]:
                per_output *= s
            return 2 * out.numel() * per_output
    except (TypeError, ValueError):
        return 0
    return 0


class Recorder(dispatch.DispatchMode):
    """Collects ``FunctionEvent``s for the ops and ranges of the thread that entered it."""

    wants_types = False

    def __init__(self, record_shapes: bool = False, profile_memory: bool = False, with_flops: bool = False):
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_flops = with_flops
        self.events: list[FunctionEvent] = []
        self._open: list[FunctionEvent] = []
        self._next_id = 0
        self._thread = threading.get_ident()
        self._outer = None

    # -- ranges --------------------------------------------------------------------------------

    def open(self, name: str, input_shapes=None, user: bool = False) -> FunctionEvent:
        self._next_id += 1
        event = FunctionEvent(self._next_id, name, self._thread, 0.0, input_shapes=input_shapes,
                              is_user_annotation=user)
        if self._open:
            parent = self._open[-1]
            event.cpu_parent = parent
            parent.cpu_children.append(event)
        self._open.append(event)
        self.events.append(event)
        event.time_range.start = _now_us()
        return event

    def close(self, event: FunctionEvent) -> None:
        event.time_range.end = _now_us()
        # Ranges closed out of order (a record_function exited inside an op) close everything above.
        while self._open:
            top = self._open.pop()
            if top is event:
                break
            top.time_range.end = event.time_range.end

    def result(self) -> EventList:
        now = _now_us()
        for event in self._open:  # still open when the profiler stopped: cut at the stop
            event.time_range.end = now
        return EventList(self.events, with_flops=self.with_flops, profile_memory=self.profile_memory)

    # -- ops -----------------------------------------------------------------------------------

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        shapes = [_shape_of(a) for a in args] if self.record_shapes else None
        event = self.open("aten::" + func.name, shapes)
        stack = dispatch._MODES.stack
        try:
            if stack:
                # Another mode sits below this one: it must see the call, so continue there;
                # the ops it runs are not recorded as children.
                out = func(*args, **kwargs)
            else:
                stack.append(self)
                try:
                    out = dispatch.dispatch_below_modes(func, args, kwargs)
                finally:
                    stack.pop()
        finally:
            self.close(event)
        if self.profile_memory:
            event.cpu_memory_usage = _output_bytes(out)
        if self.with_flops:
            event.flops = _flops(func.name, args, out)
        return out

    # -- activation ----------------------------------------------------------------------------

    def __enter__(self):
        self._outer = current_recorder()
        _THREAD.recorder = self
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            _THREAD.recorder = self._outer


class record_function:  # noqa: N801 - PyTorch's name
    """Marks a range of code with a name in the profiler's results (a context or a decorator).

    With no profiler recording on this thread it does nothing but two attribute reads.
    """

    def __init__(self, name: str, args: str | None = None):
        self.name = name
        self.args = args
        self._event = None
        self._recorder = None

    def __enter__(self):
        recorder = current_recorder()
        if recorder is not None:
            self._recorder = recorder
            self._event = recorder.open(self.name, user=True)
        return self

    def __exit__(self, *exc):
        if self._event is not None:
            self._recorder.close(self._event)
            self._event = self._recorder = None
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)

        return wrapper
