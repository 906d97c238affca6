"""``ember.profiler``: PyTorch's ``torch.profiler`` API over ember's op timer.

``profile`` records the CPU time of each op and ``record_function`` range (``ProfilerActivity.CPU``;
there is no device tracer), with an optional ``schedule`` that cycles through wait, warm-up and
active steps and calls ``on_trace_ready`` after each active span.
"""

from __future__ import annotations

import enum
import gzip
import json
import os
import socket
import time

from . import _events
from ._events import EventList
from ._recorder import profile as _base_profile
from ._recorder import record_function

__all__ = ["ProfilerAction", "ProfilerActivity", "profile", "record_function", "schedule", "supported_activities",
           "tensorboard_trace_handler", "kineto_available"]


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


def supported_activities() -> set:
    return {ProfilerActivity.CPU}


def kineto_available() -> bool:
    return False


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0):
    """A step -> ProfilerAction function: after ``skip_first`` steps, cycles of ``wait`` idle,
    ``warmup`` and ``active`` steps (the last active step saves), ``repeat`` times (0: forever)."""
    if not (wait >= 0 and warmup >= 0 and active > 0 and repeat >= 0 and skip_first >= 0):
        raise AssertionError("Invalid profiler schedule arguments")
    if warmup == 0:
        import warnings

        warnings.warn("Profiler won't be using warmup, this can skew profiler results", stacklevel=2)

    def schedule_fn(step: int) -> ProfilerAction:
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        # skip_first_wait: the first cycle starts at its warm-up (later cycles wait as usual).
        if skip_first_wait:
            step += wait
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        mod = step % cycle
        if mod < wait:
            return ProfilerAction.NONE
        if mod < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return schedule_fn


def _always_record(_step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None, use_gzip: bool = False):
    """An ``on_trace_ready`` that writes ``<worker>.<time>.pt.trace.json[.gz]`` under ``dir_name``."""

    def handler(prof):
        os.makedirs(dir_name, exist_ok=True)
        name = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        path = os.path.join(dir_name, f"{name}.{time.time_ns()}.pt.trace.json" + (".gz" if use_gzip else ""))
        prof.export_chrome_trace(path)
        return path

    return handler


class profile(_base_profile):  # noqa: N801
    """``torch.profiler.profile``: ``activities`` (CPU only is recorded), ``schedule`` and
    ``on_trace_ready`` driven by ``step()``; without a schedule it records the whole ``with`` block."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False, use_cuda=None,
                 custom_trace_id_callback=None):
        super().__init__(record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack,
                         with_flops=with_flops, with_modules=with_modules)
        self.activities = set(activities) if activities else supported_activities()
        self.schedule = schedule or _always_record
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.current_action = self.schedule(0)
        self._recording = False

    def start(self):
        self._transit(self.current_action)

    def stop(self):
        if self._recording:
            self._stop()
            self._recording = False
            if self.on_trace_ready is not None and self.current_action in (ProfilerAction.RECORD,
                                                                           ProfilerAction.RECORD_AND_SAVE):
                self.on_trace_ready(self)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def _transit(self, action):
        recording = action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if recording and not self._recording:
            self._start()
            self._recording = True

    def step(self):
        """Marks the end of a training step: follows the schedule to its next action."""
        prev = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        if prev == ProfilerAction.RECORD_AND_SAVE and self._recording:
            self._stop()
            self._recording = False
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        self._transit(self.current_action)

    def export_chrome_trace(self, path):
        self._check_finish()
        if str(path).endswith(".gz"):
            with gzip.open(path, "wt") as f:
                events = [e for e in self.function_events if isinstance(e, _events.FunctionEvent)]
                json.dump({"traceEvents": [{"name": e.name, "ph": "X", "ts": e.time_range.start,
                                            "dur": e.cpu_time_total, "pid": 0, "tid": e.thread} for e in events]}, f)
            return
        return super().export_chrome_trace(path)

