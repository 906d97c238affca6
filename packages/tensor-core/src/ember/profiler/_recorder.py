"""``profile`` and ``record_function`` (``torch.autograd.profiler``): a dispatch mode timing every
op call, nested under the ``record_function`` ranges open at the time. Ops that a composite op
calls nest under it, so an op's self time excludes its callees, as in PyTorch's tables."""

from __future__ import annotations

import functools
import itertools
import threading
import time
import traceback

from .._src.dispatch import DispatchMode
from .._src.tensor import Tensor
from ._events import EventList, FunctionEvent

__all__ = ["profile", "record_function"]

_ACTIVE: list = []  # the profilers recording now (outermost first)
_IDS = itertools.count()


def _now_us() -> float:
    return time.perf_counter_ns() / 1000.0


def _shapes(args) -> list:
    out = []
    for a in args:
        if isinstance(a, Tensor):
            out.append(list(a.shape))
        elif isinstance(a, (list, tuple)) and a and all(isinstance(t, Tensor) for t in a):
            out.append([list(t.shape) for t in a])
        else:
            out.append([])
    return out


class _Session:
    """The open ranges of one profiler, per thread, and the finished events."""

    def __init__(self, record_shapes: bool, with_stack: bool):
        self.record_shapes, self.with_stack = record_shapes, with_stack
        self.events: list[FunctionEvent] = []
        self.local = threading.local()

    def stack(self) -> list:
        if not hasattr(self.local, "open"):
            self.local.open = []
        return self.local.open

    def begin(self, name: str, args=(), user=False) -> FunctionEvent:
        shapes = _shapes(args) if self.record_shapes else []
        stack = [f"{f.filename}({f.lineno}): {f.name}" for f in traceback.extract_stack()[-12:-3]] \
            if self.with_stack else []
        ev = FunctionEvent(next(_IDS), name, threading.get_ident(), _now_us(), 0.0, shapes, stack,
                           is_user_annotation=user)
        opened = self.stack()
        if opened:
            opened[-1].append_cpu_child(ev)
        opened.append(ev)
        return ev

    def end(self, ev: FunctionEvent) -> None:
        ev.time_range.end = _now_us()
        opened = self.stack()
        if opened and opened[-1] is ev:
            opened.pop()
        self.events.append(ev)


class _OpTimer(DispatchMode):
    wants_types = False

    def __init__(self, session: _Session):
        self.session = session

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        ev = self.session.begin("aten::" + func.name.split(".")[0], args)
        try:
            return func(*args, **(kwargs or {}))
        finally:
            self.session.end(ev)


class profile:  # noqa: N801 - PyTorch's name
    """Records the time of every op (and ``record_function`` range) run inside ``with``.

    ``record_shapes`` keeps the input shapes, ``with_stack`` the Python stack of each call.
    ``use_cuda``/``use_device``/``profile_memory``/``with_flops``/``with_modules`` are accepted;
    ember's profiler measures CPU wall time only (device kernels, memory and flops read 0).
    """

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False, with_flops=False,
                 profile_memory=False, with_stack=False, with_modules=False, use_kineto=False, use_cpu=True,
                 experimental_config=None, acc_events=False, custom_trace_id_callback=None):
        self.enabled = enabled
        self.record_shapes, self.with_stack = record_shapes, with_stack
        self.use_device = "cuda" if use_cuda else use_device
        self.profile_memory, self.with_flops = profile_memory, with_flops
        self.entered = False
        self.function_events: EventList | None = None
        self._session: _Session | None = None
        self._mode: _OpTimer | None = None

    def __enter__(self):
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        self.entered = True
        self._start()
        return self

    def _start(self):
        self._session = _Session(self.record_shapes, self.with_stack)
        self._mode = _OpTimer(self._session)
        self._mode.__enter__()
        _ACTIVE.append(self._session)

    def _stop(self):
        self._mode.__exit__(None, None, None)
        _ACTIVE.remove(self._session)
        self.function_events = EventList(sorted(self._session.events, key=lambda e: e.time_range.start))

    def __exit__(self, *exc):
        if not self.enabled:
            return False
        self._stop()
        return False

    def _check_finish(self):
        if self.function_events is None:
            raise RuntimeError("Profiler didn't finish running")

    def events(self) -> EventList:
        self._check_finish()
        return self.function_events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        self._check_finish()
        if group_by_input_shape and not self.record_shapes:
            raise AssertionError("record_shapes=True must be set to group by input shape")
        return self.function_events.key_averages(group_by_input_shape, group_by_stack_n)

    def total_average(self):
        self._check_finish()
        return self.function_events.total_average()

    def table(self, **kwargs) -> str:
        self._check_finish()
        return self.function_events.table(**kwargs)

    def export_chrome_trace(self, path):
        self._check_finish()
        return self.function_events.export_chrome_trace(path)

    @property
    def self_cpu_time_total(self):
        self._check_finish()
        return self.function_events.self_cpu_time_total

    def __str__(self):
        return self.table() if self.function_events is not None else "<unfinished profiler>"


class record_function:  # noqa: N801 - PyTorch's name
    """A named range in the profile (a context manager or a decorator); nothing when no profiler runs."""

    def __init__(self, name: str, args: str | None = None):
        self.name, self.args = name, args
        self._open: list = []

    def __enter__(self):
        self._open = [(s, s.begin(self.name, user=True)) for s in _ACTIVE]
        return self

    def __exit__(self, *exc):
        for session, ev in reversed(self._open):
            session.end(ev)
        self._open = []
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)

        return wrapper
