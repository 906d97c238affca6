"""``ember.futures``: PyTorch's ``torch.futures`` - ``Future``, ``collect_all``, ``wait_all``.

A ``Future`` holds a value or an exception that arrives later. ``set_result``/``set_exception``
complete it once (a second completion raises ``RuntimeError``, as PyTorch's); ``wait()`` blocks
until it is complete and returns the value or raises the exception; ``value()`` does the same
without blocking; ``then(cb)`` returns a new future of ``cb(self)`` (an exception in ``cb`` is
wrapped in a ``RuntimeError`` naming it, as PyTorch does); ``add_done_callback(cb)`` runs ``cb``
and logs what it raises. Callbacks run in the thread that completes the future, inline when it
is already complete.

A future may stand for work that only makes progress when somebody asks (a collective whose
MPI request must be tested or waited on): such a subclass overrides ``_poll`` (a non-blocking
step, from ``done()``/``value()``) and ``_drive`` (block until it can complete itself, from
``wait()``). Futures made by ``then``/``collect_all`` drive the futures they came from, so
waiting on the end of a chain moves its start. Nothing here knows what the work is: this
module is the core's, and the distributed package's ``Work.get_future()`` builds on it.
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

__all__ = ["Future", "collect_all", "wait_all"]

T = TypeVar("T")
S = TypeVar("S")

_PENDING, _VALUE, _ERROR = 0, 1, 2


def _check_devices(devices) -> list:
    import ember

    checked = []
    for d in devices:
        device = ember.device(d)
        if device.index is None:
            raise ValueError(f"Expected devices to have indices, got {d}")
        if device.type == "cuda" and not ember.cuda.is_available():
            raise RuntimeError("ember has no CUDA device for a Future's devices (is ember-cuda installed?)")
        checked.append(device)
    return checked


def _callback_error(err: Exception) -> RuntimeError:
    """The error of a ``then`` future whose callback raised ``err`` (PyTorch's wording)."""
    import traceback  # on this error path only (import ember < 0.1 s)

    frames = traceback.extract_tb(err.__traceback__)
    at = "".join(f"  {f.filename}({f.lineno}): {f.name}\n" for f in reversed(frames))
    name = type(err).__name__
    wrapped = RuntimeError(f"Got the following error when running the callback: {name}: {err}\n\nAt:\n{at}")
    wrapped.__cause__ = err
    return wrapped


class Future(Generic[T]):
    """A value that arrives later (``torch.futures.Future``)."""

    def __init__(self, *, devices=None):
        self._devices = _check_devices(devices) if devices else []
        self._cond = threading.Condition(threading.Lock())
        self._state = _PENDING
        self._result = None
        self._callbacks: list = []
        self._sources: tuple = ()  # futures this one is derived from (driven by _poll/_drive)

    # -- progress hooks ---------------------------------------------------------------------

    def _poll(self) -> None:
        """One non-blocking step toward completion (here: of the futures this one came from)."""
        for source in self._sources:
            if source._state == _PENDING:
                source._poll()

    def _drive(self) -> None:
        """Blocks until this future can complete (here: until the futures it came from did)."""
        for source in self._sources:
            source._block()

    def _block(self) -> None:
        if self._state == _PENDING:
            self._drive()
        with self._cond:
            while self._state == _PENDING:
                self._cond.wait(0.1)  # slices: the waiting thread stays interruptible

    # -- the public API ---------------------------------------------------------------------

    def done(self) -> bool:
        """Whether the future holds a value or an exception."""
        if self._state == _PENDING:
            self._poll()
        return self._state != _PENDING

    def wait(self) -> T:
        """Blocks until the future is complete; its value, or raises its exception."""
        self._block()
        return self._get()

    def value(self) -> T:
        """The value of a completed future (raises its exception); ``RuntimeError`` if not complete."""
        if self._state == _PENDING:
            self._poll()
        if self._state == _PENDING:
            raise RuntimeError("Future.value() called on a Future that is not completed yet: "
                               "call wait() first, or read it inside a then() callback")
        return self._get()

    def _get(self):
        if self._state == _ERROR:
            raise self._result
        return self._result

    def then(self, callback) -> Future:
        """A future of ``callback(self)``, run once this one completes (at once if it has)."""
        child = Future()
        child._devices = list(self._devices)
        child._sources = (self,)

        def run(parent):
            try:
                result = callback(parent)
            except Exception as err:  # noqa: BLE001 - carried by the child future
                child.set_exception(_callback_error(err))
            else:
                child.set_result(result)

        self._add_callback(run)
        return child

    def add_done_callback(self, callback) -> None:
        """Runs ``callback(self)`` once this future completes; what it raises is logged, not raised."""

        def run(fut):
            try:
                callback(fut)
            except Exception as err:  # noqa: BLE001 - PyTorch logs and goes on too
                import logging  # on this error path only (import ember < 0.1 s)

                logging.getLogger(__name__).error("Got the following error when running the callback: %s: %s",
                           type(err).__name__, err)

        self._add_callback(run)

    def set_result(self, result: T) -> None:
        """Completes the future with ``result`` and runs its callbacks."""
        self._complete(_VALUE, result)

    def set_exception(self, result) -> None:
        """Completes the future with the exception ``result``: ``wait()``/``value()`` raise it."""
        if not isinstance(result, Exception):
            raise AssertionError(f"{result} is of type {type(result)}, not an Exception.")
        self._complete(_ERROR, result)

    # -- internals --------------------------------------------------------------------------

    def _complete(self, state: int, result) -> None:
        with self._cond:
            if self._state != _PENDING:
                raise RuntimeError("Attempting to mark a completed Future as complete again. "
                                   "Note that a Future can only be marked completed once.")
            self._state, self._result = state, result
            callbacks, self._callbacks = self._callbacks, []
            self._cond.notify_all()
        for callback in callbacks:
            callback(self)

    def _add_callback(self, callback) -> None:
        with self._cond:
            if self._state == _PENDING:
                self._callbacks.append(callback)
                return
        callback(self)


def collect_all(futures) -> Future:
    """A future of the list ``futures``, complete when all of them are; it holds the first error met
    if any of them failed."""
    futures = _future_list("collect_all", futures)
    combined = Future()
    combined._sources = tuple(futures)
    if not futures:
        combined.set_result([])
        return combined
    lock = threading.Lock()
    remaining = [len(futures)]
    errors: list = []

    def arrived(fut):
        with lock:
            remaining[0] -= 1
            if fut._state == _ERROR:
                errors.append(fut._result)
            if remaining[0]:
                return
        if errors:
            combined.set_exception(errors[0])
        else:
            combined.set_result(futures)

    for fut in futures:
        fut._add_callback(arrived)
    return combined


def wait_all(futures) -> list:
    """Waits for every future; their values, or raises the first error met."""
    return [fut.wait() for fut in collect_all(futures).wait()]


def _future_list(name: str, futures) -> list:
    if not isinstance(futures, (list, tuple)) or not all(isinstance(f, Future) for f in futures):
        got = type(futures).__name__ if not isinstance(futures, (list, tuple)) else \
            "[" + ", ".join(type(f).__name__ for f in futures) + "]"
        raise TypeError(f"{name}(): expected a list of ember.futures.Future, got {got}")
    return list(futures)
