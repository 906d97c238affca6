"""``Work`` of the NCCL engine (a CUDA event) and the watchdog that turns hangs into errors.

An NCCL operation runs on the communicator's side stream; its ``Work`` holds the event recorded
after it. ``wait()`` makes the caller's current stream wait on that event (the host goes on, as
in PyTorch); ``wait(timeout)`` (or ``TORCH_NCCL_BLOCKING_WAIT=1``) also blocks the host until the
event completes or the timeout passes. ``is_completed()`` queries the event.

A GPU stuck in a collective whose peer never comes cannot be interrupted from the stream: the
watchdog thread (one per communicator) polls every pending operation's event, NCCL's
asynchronous error (``ncclCommGetAsyncError``) and the process group's liveness watch, and past
the group's timeout, on an NCCL error or when a peer exited, it aborts the communicator
(``ncclCommAbort``: the stuck kernels return) and marks the group broken. Every later call on it
and every wait on its pending work raises ``DistBackendError`` with the reason.
"""

from __future__ import annotations

import os
import threading
import time

from ._errors import DistBackendError
from ._work import Work

_POLL = 0.005
_WATCH_EVERY = 0.05


def blocking_wait_requested() -> bool:
    """``TORCH_NCCL_BLOCKING_WAIT=1``: every wait also blocks the host (read once per group)."""
    return os.environ.get("TORCH_NCCL_BLOCKING_WAIT", os.environ.get("NCCL_BLOCKING_WAIT", "0")) == "1"


def _seconds(timeout) -> float:
    return timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)


class NCCLWork(Work):
    """One NCCL operation: ``event`` is recorded on the side stream right after it."""

    def __init__(self, engine, event, what: str, outputs, keep=(), finish=None, source=None):
        self._group = engine
        self._requests = []
        self._what = what
        self._finish = finish
        self._outputs = outputs
        self._done = False
        self._error: BaseException | None = None
        self._deadline = time.monotonic() + engine.timeout_seconds
        self._statuses = None
        self._event = event
        self._keep = list(keep)  # staging buffers and scalars the kernels still read
        self._source = source
        self._gpu_done = False

    def __del__(self):
        # Nobody can ask about this event any more: it serves the next operation (recording an
        # event again replaces what it captured; waits already issued on it are unaffected).
        try:
            comm = self._group._comm
            if comm is not None and len(comm.events) < 64:
                comm.events.append(self._event)
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown
            pass

    def _event_done(self) -> bool:
        if not self._gpu_done and self._event.query():
            self._gpu_done = True
            self._keep = []
        return self._gpu_done

    def _raise_if_failed(self) -> None:
        if self._error is None and self._group.error is not None and not self._gpu_done:
            self._error = DistBackendError(self._group.error)
        if self._error is not None:
            raise self._error

    def result(self) -> list:
        """The output tensors, ordered after the collective on the current stream (as PyTorch's
        NCCL work: no completion check)."""
        self.wait()
        return self._outputs

    def wait(self, timeout=None) -> bool:
        self._raise_if_failed()
        if timeout is not None or self._group.blocking_wait:
            limit = self._deadline if timeout is None else min(self._deadline, time.monotonic() + _seconds(timeout))
            while not self._event_done():
                self._raise_if_failed()
                if time.monotonic() > limit:
                    problem = (f"{self._what} timed out on rank {self._group.global_rank}: it did not complete within "
                               f"the wait's timeout; the NCCL communicator was aborted")
                    self._group.abort(problem)
                    self._error = DistBackendError(problem)
                    raise self._error
                time.sleep(_POLL)
        self._group._current_stream(self._group.device_index).wait_event(self._event)
        self._complete()
        return True

    def synchronize(self) -> None:
        self.wait()

    def is_completed(self) -> bool:
        if self._error is not None or (self._group.error is not None and not self._gpu_done):
            return True
        if self._event_done():
            if not self._done:
                self.wait()
            return True
        return False

    def is_success(self) -> bool:
        return self.is_completed() and self._error is None and not (self._group.error and not self._gpu_done)

    def exception(self):
        if self._error is None and self._group.error is not None and not self._gpu_done:
            return DistBackendError(self._group.error)
        return self._error

    def source_rank(self) -> int:
        """The sender's global rank; waits first (``recv`` returns once the data is ordered in)."""
        if self._source is None:
            raise RuntimeError("source_rank() is only defined for receives")
        self.wait()
        return self._source


class Watchdog:
    """Polls one communicator's pending work; aborts it on timeout, NCCL error or a dead peer."""

    def __init__(self, engine, device_index: int):
        self._engine = engine
        self._device_index = device_index
        self._pending: list = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ember-nccl-watchdog", daemon=True)
        self._thread.start()

    def add(self, work) -> None:
        with self._lock:
            self._pending.append(work)

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        engine = self._engine
        try:
            import ember

            ember.cuda.set_device(self._device_index)  # event queries need the device's context here
        except Exception:  # noqa: BLE001 - the engine reports the device error to the caller
            return
        while not self._stop.wait(_WATCH_EVERY):
            if engine.error is not None:
                continue
            with self._lock:
                pending = self._pending
                self._pending = []
            still = []
            now = time.monotonic()
            problem = engine.async_error()
            if problem is not None:  # NCCL reported a failure: nothing on this communicator completes now
                engine.abort(problem)
                continue
            for work in pending:
                try:
                    if work._event_done():
                        continue
                except Exception as err:  # noqa: BLE001 - a CUDA error on the device
                    problem = problem or f"{work._what} failed on the GPU: {err}"
                still.append(work)
                if problem is None:
                    problem = engine.peer_problem(now, work._deadline, work._what)
            if problem is not None and still:
                engine.abort(problem)
            with self._lock:
                self._pending = still + self._pending
