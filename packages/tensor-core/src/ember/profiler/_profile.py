"""``ember.profiler.profile`` and its schedule (PyTorch's ``torch.profiler`` API), and the legacy
``ember.autograd.profiler.profile``.

A profile owns a ``Recorder`` (``_recorder.py``) while its schedule says RECORD; a schedule
cycles NONE (wait) -> WARMUP -> RECORD ... RECORD_AND_SAVE, and the end of a RECORD_AND_SAVE
step hands the profile to ``on_trace_ready``. Warm-up records nothing here: PyTorch warms up
its tracer (Kineto), and this one has nothing to warm.
"""

from __future__ import annotations

import enum
import os
import time
import warnings
from collections.abc import Callable

from ._events import EventList
from ._recorder import Recorder, record_function


class ProfilerActivity(enum.Enum):
    CPU = 0
    XPU = 1
    MTIA = 2
    CUDA = 3
    HPU = 4
    PrivateUse1 = 5


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3
    DEVICE_STOPPED = 4


def supported_activities() -> set:
    """The activities this profiler times: the CPU side of every op (device kernels are not timed)."""
    return {ProfilerActivity.CPU}


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0) -> Callable[[int], ProfilerAction]:
    """PyTorch's step schedule: skip ``skip_first`` steps, then cycles of ``wait`` idle steps,
    ``warmup`` steps and ``active`` recorded steps, ``repeat`` times (0: forever). With
    ``skip_first_wait`` the first cycle has no wait phase."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError("Invalid profiler schedule arguments")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results", stacklevel=2)

    def schedule_fn(step: int) -> ProfilerAction:
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait  # the first cycle starts at its warm-up
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        position = step % cycle
        if position < wait:
            return ProfilerAction.NONE
        if position < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if position < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return schedule_fn


def _always_record(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None, use_gzip: bool = False,
                              use_python_export: bool = False) -> Callable:
    """An ``on_trace_ready`` that writes each trace to ``dir_name`` as
    ``<worker>.<ms since epoch>.pt.trace.json[.gz]`` (TensorBoard's profiler plugin reads it)."""

    def handler(prof) -> None:
        import socket  # when a trace is written (import ember < 0.1 s)

        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker}.{time.time_ns() // 1_000_000}.pt.trace.json"
        path = os.path.join(dir_name, name)
        prof.export_chrome_trace(path)
        if use_gzip:
            import gzip
            import shutil

            with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.remove(path)

    return handler


class _ProfileBase:
    """What both profile classes share: the recorder's lifetime and the result accessors."""

    def __init__(self, record_shapes, profile_memory, with_flops):
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_flops = with_flops
        self._recorder: Recorder | None = None
        self._events: EventList | None = None

    def _start_recording(self) -> None:
        self._recorder = Recorder(self.record_shapes, self.profile_memory, self.with_flops)
        self._recorder.__enter__()

    def _stop_recording(self) -> None:
        if self._recorder is not None:
            recorder, self._recorder = self._recorder, None
            self._events = recorder.result()
            recorder.__exit__(None, None, None)

    def events(self) -> EventList:
        if self._events is None:
            raise RuntimeError("Profiler didn't finish running")
        return self._events

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        return self.events().key_averages(group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path: str) -> None:
        self.events().export_chrome_trace(path)


class profile(_ProfileBase):  # noqa: N801 - PyTorch's name
    """Profiles the ops run inside ``with profile(...) as prof:`` (or between ``start``/``stop``).

    ``prof.step()`` marks the end of a training step for ``schedule``; results come from
    ``prof.key_averages().table(...)``, ``prof.events()`` and ``prof.export_chrome_trace(path)``.
    """

    def __init__(self, *, activities=None, schedule: Callable | None = None, on_trace_ready: Callable | None = None,
                 record_shapes: bool = False, profile_memory: bool = False, with_stack: bool = False,
                 with_flops: bool = False, with_modules: bool = False, experimental_config=None,
                 execution_trace_observer=None, acc_events: bool = False, use_cuda: bool | None = None,
                 custom_trace_id_callback=None, post_processing_timeout_s: float | None = None):
        super().__init__(record_shapes, profile_memory, with_flops)
        if activities is not None:
            for activity in activities:
                key = next(iter(activity)) if isinstance(activity, dict) else activity
                if not isinstance(key, ProfilerActivity):
                    raise TypeError(f"activities must hold ProfilerActivity values, got {key!r}")
        self.activities = set(activities) if activities is not None else supported_activities()
        self.schedule = schedule if schedule is not None else _always_record
        # "ProfilerStep#<n>" ranges mark the steps, as in PyTorch, only when a schedule drives them.
        self.record_steps = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.with_stack = with_stack
        self.with_modules = with_modules
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self._step_range: record_function | None = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self) -> None:
        self.step_num = 0
        self.current_action = self.schedule(self.step_num)
        self._enter_action(ProfilerAction.NONE, self.current_action)

    def stop(self) -> None:
        self._close_step_range()
        if self.current_action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._stop_recording()
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        self.current_action = ProfilerAction.NONE

    def step(self) -> None:
        """Ends a step: the schedule's next action takes over (and may hand a trace over)."""
        self._close_step_range()
        previous = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._enter_action(previous, self.current_action)

    def _enter_action(self, previous: ProfilerAction, current: ProfilerAction) -> None:
        recording = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if previous == ProfilerAction.RECORD_AND_SAVE or (previous in recording and current not in recording):
            if previous == ProfilerAction.RECORD:
                warnings.warn("Incorrect schedule: RECORD followed by NONE or WARMUP", stacklevel=3)
            self._stop_recording()
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        if current in recording and self._recorder is None:
            self._start_recording()
        if self._recorder is not None and self.record_steps:
            self._step_range = record_function("ProfilerStep*")  # PyTorch reports every step under this key
            self._step_range.__enter__()

    def _close_step_range(self) -> None:
        if self._step_range is not None:
            self._step_range.__exit__(None, None, None)
            self._step_range = None


class LegacyProfile(_ProfileBase):
    """``ember.autograd.profiler.profile``: records everything inside its ``with`` block."""

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False, use_device=None, record_shapes: bool = False,
                 with_flops: bool = False, profile_memory: bool = False, with_stack: bool = False,
                 with_modules: bool = False, use_kineto: bool = False, use_cpu: bool = True,
                 experimental_config=None, acc_events: bool = False, custom_trace_id_callback=None,
                 post_processing_timeout_s: float | None = None, activity_filters=None):
        super().__init__(record_shapes, profile_memory, with_flops)
        self.enabled = enabled
        self._entered = False

    def __enter__(self):
        if self._entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        self._entered = True
        if self.enabled:
            self._start_recording()
        return self

    def __exit__(self, *exc):
        if self.enabled:
            self._stop_recording()
        return False

    @property
    def function_events(self) -> EventList:
        return self.events()

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_src_column_width: int = 75,
              max_name_column_width: int = 55, max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False) -> str:
        return self.events().table(sort_by=sort_by, row_limit=row_limit, header=header,
                                   max_name_column_width=max_name_column_width,
                                   max_shapes_column_width=max_shapes_column_width,
                                   top_level_events_only=top_level_events_only)

    def total_average(self):
        return self.events().total_average()

    @property
    def self_cpu_time_total(self) -> float:
        return self.events().self_cpu_time_total

    def __str__(self) -> str:
        return self.table() if self._events is not None else "<unfinished ember.autograd.profile>"
