"""Streams and events: ``ember.cuda.Stream``, ``Event``, ``current_stream``, ``stream()``.

As in PyTorch, each thread has a current stream per device, initially the device's default
(legacy NULL) stream; ops launch on the current stream of their tensors' device. Handles are
plain ints internally (what the ctypes hot path takes).
"""

from __future__ import annotations

import threading

from . import _driver
from ._driver import check


class _Local(threading.local):
    streams = None  # {device index: current Stream}; a class default makes the per-op read one lookup


_TLS = _Local()


def _device_index(device) -> int:
    if device is None:
        return _driver.current_index()
    if isinstance(device, int):
        return device
    from ember._src.device import device as _dev

    d = _dev(device)
    if d.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {d}")
    return d.index if d.index is not None else _driver.current_index()


class Stream:
    """A CUDA stream. ``Stream()`` creates a new non-blocking stream on the current device."""

    def __init__(self, device=None, priority: int = 0, *, _handle=None, **kwargs):
        self.device_index = _device_index(device)
        if _handle is not None:
            self.cuda_stream = int(_handle)
            self._owned = False
            return
        _driver.ensure_context(self.device_index)
        drv = _driver._driver()
        flags = int(drv.CUstream_flags.CU_STREAM_NON_BLOCKING)
        handle = check(drv.cuStreamCreateWithPriority(flags, int(priority)), "cuStreamCreateWithPriority")
        self.cuda_stream = int(handle)
        self._owned = True

    @property
    def device(self):
        from ember._src.device import device as _dev

        return _dev("cuda", self.device_index)

    def synchronize(self) -> None:
        from ._fastcall import stream_synchronize

        _driver.ensure_context(self.device_index)
        stream_synchronize(self.cuda_stream)

    def query(self) -> bool:
        drv = _driver._driver()
        err = drv.cuStreamQuery(self.cuda_stream)[0]
        if int(err) == 0:
            return True
        if err == drv.CUresult.CUDA_ERROR_NOT_READY:
            return False
        raise _driver.cuda_error(int(err), "cuStreamQuery")

    def wait_event(self, event) -> None:
        check(_driver._driver().cuStreamWaitEvent(self.cuda_stream, event._handle, 0), "cuStreamWaitEvent")

    def wait_stream(self, stream) -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and other.cuda_stream == self.cuda_stream and \
            other.device_index == self.device_index

    def __hash__(self):
        return hash((self.cuda_stream, self.device_index))

    def __repr__(self):
        return f"<ember.cuda.Stream device=cuda:{self.device_index} cuda_stream={hex(self.cuda_stream)}>"

    # Streams are never destroyed (as in PyTorch's stream pool): storages freed later may still record events
    # on a stream whose Python object is gone.

    # ``with ember.cuda.Stream() as s`` makes it current, as PyTorch's Stream context.
    def __enter__(self):
        self._prev = current_stream(self.device_index)
        set_stream(self)
        return self

    def __exit__(self, *exc):
        set_stream(self._prev)
        return False


class ExternalStream(Stream):
    """A stream created elsewhere (``ember.cuda.ExternalStream(ptr)``), not destroyed by ember."""

    def __init__(self, stream_ptr: int, device=None):
        super().__init__(device, _handle=stream_ptr)


def _current_map() -> dict:
    m = _TLS.streams
    if m is None:
        m = _TLS.streams = {}
    return m


def current_stream(device=None) -> Stream:
    index = _device_index(device)
    s = _current_map().get(index)
    if s is None:
        s = default_stream(index)
    return s


def current_handle(index: int) -> int:
    """The current stream's handle for device ``index`` (the per-op fast path)."""
    m = _TLS.streams
    if m:
        s = m.get(index)
        if s is not None:
            return s.cuda_stream
    return 0


_DEFAULT: dict = {}


def default_stream(device=None) -> Stream:
    index = _device_index(device)
    s = _DEFAULT.get(index)
    if s is None:
        s = _DEFAULT[index] = Stream(index, _handle=0)
    return s


def set_stream(stream: Stream) -> None:
    if stream is None:
        return
    _current_map()[stream.device_index] = stream


class StreamContext:
    """``with ember.cuda.stream(s):`` makes ``s`` current for its device (None: no-op)."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        if self.stream is None:
            return None
        self._prev = current_stream(self.stream.device_index)
        set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            set_stream(self._prev)
        return False


def stream(stream) -> StreamContext:
    return StreamContext(stream)


class Event:
    """A CUDA event; ``enable_timing=True`` allows ``elapsed_time``."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        drv = _driver._driver()
        _driver.ensure_context(_driver.current_index())
        flags = 0
        if not enable_timing:
            flags |= int(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        if blocking:
            flags |= int(drv.CUevent_flags.CU_EVENT_BLOCKING_SYNC)
        if interprocess:
            flags |= int(drv.CUevent_flags.CU_EVENT_INTERPROCESS)
        self._handle = int(check(drv.cuEventCreate(flags), "cuEventCreate"))
        self.enable_timing = enable_timing
        self._recorded = False

    @property
    def cuda_event(self) -> int:
        return self._handle

    def record(self, stream=None) -> None:
        stream = current_stream() if stream is None else stream
        check(_driver._driver().cuEventRecord(self._handle, stream.cuda_stream), "cuEventRecord")
        self._recorded = True

    def wait(self, stream=None) -> None:
        stream = current_stream() if stream is None else stream
        stream.wait_event(self)

    def query(self) -> bool:
        drv = _driver._driver()
        err = drv.cuEventQuery(self._handle)[0]
        if int(err) == 0:
            return True
        if err == drv.CUresult.CUDA_ERROR_NOT_READY:
            return False
        raise _driver.cuda_error(int(err), "cuEventQuery")

    def synchronize(self) -> None:
        check(_driver._driver().cuEventSynchronize(self._handle), "cuEventSynchronize")

    def elapsed_time(self, end_event) -> float:
        """Milliseconds between this event and ``end_event`` (both recorded, with timing)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if not (self._recorded and end_event._recorded):
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return float(check(_driver._driver().cuEventElapsedTime(self._handle, end_event._handle),
                           "cuEventElapsedTime"))

    def __del__(self):
        try:
            _driver._driver().cuEventDestroy(self._handle)
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown
            pass

    def __repr__(self):
        return f"<ember.cuda.Event {hex(self._handle)}>"


def synchronize(device=None) -> None:
    index = _device_index(device)
    _driver.ensure_context(index)
    check(_driver._driver().cuCtxSynchronize(), "cuCtxSynchronize")
    from ._ops_index import check_device_errors

    check_device_errors()
