"""``Work``, ``Future``, and the waits that turn a hung or dead peer into an error.

MPI has no timeouts: a blocking ``MPI_Allreduce`` with a dead peer waits forever. So no caller
ever blocks inside MPI:

- a synchronous collective (the caller waits at once) starts the nonblocking form of its MPI
  call in the caller's thread and polls it (``wait_requests``), as MPI's blocking calls do;
- an ``async_op`` collective runs as the blocking MPI call on the group's ``Worker`` thread (in C
  without the GIL, at MPI's own speed, driving progress while the caller computes, e.g. DDP's
  backward); the caller later waits on an event in short slices. A synchronous call made while
  the worker still has work queued goes the same way, so every rank issues the group's
  collectives in program order;
- point-to-point requests (which must all be posted at once, or paired sends deadlock) are
  polled with ``MPI_Testall`` (``wait_requests``).

Why not always the worker: each hand-over to it and back is a thread sleep and wake-up; on a
loaded machine (more runnable threads than cores) each wake-up waits for a time slice, which
measured as a 1.4-1.8x slower all_reduce than MPI alone, up to 20x for small messages. Polling
keeps the caller on its core; it yields the core between bursts of tests so that a peer sharing
it (more ranks than cores) is not starved.

Either wait gives up with ``DistBackendError`` when the group's timeout passes, or when the
liveness watch (``_control.Watch``) reports that a rank of the group exited and the operation has
still not completed a short grace period later (a peer that finished its part and exited
cleanly lets it complete within that). After such an error the group is marked broken: MPI's
state for it is unknown (a worker may stay stuck on the dead peer), so later calls on it raise
at once instead of hanging.
"""

from __future__ import annotations

import os
import queue
import threading
import time

from ._errors import DistBackendError

# Seconds a request may still take after a member of its group exited.
EXIT_GRACE = 1.0
# MPICH moves large messages through shared memory only while someone calls into it (as its
# blocking calls do, spinning): napping between Testall calls would stall a transfer in
# flight, so the loop spins (point-to-point) or, for collectives, spins long enough to cover
# the largest transfers before it starts to sleep.
_SPIN_SECONDS = 0.1
_COLLECTIVE_SPIN_SECONDS = 2.0
_MAX_NAP = 1e-3
_CHECK_EVERY = 0.01
# Synchronous collectives in the caller's thread (nonblocking MPI call + polling) are opt-in: with
# FSDP's asynchronous prefetch beside them, a 4-rank run on 2 loaded cores timed out in a
# reduce-scatter that every rank had entered (test_dist_checkpoint, 3 of 6 runs under load);
# until that is understood every collective goes through the group's worker, as before.
_CALLER_THREAD = os.environ.get("EMBER_MPI_CALLER_THREAD", "0") == "1"
_TESTS_PER_CHECK = 32
_yield = getattr(os, "sched_yield", lambda: time.sleep(0))
_YIELD_AFTER = 5e-4  # seconds of plain spinning before the loop starts yielding


class Health:
    """Per-world fault state, written by the watch thread, read by every wait."""

    def __init__(self):
        self.exited: dict[int, tuple[float, bool]] = {}  # global rank -> (when, clean)
        self.broken: str | None = None
        self.lock = threading.Lock()

    def on_exit(self, rank: int, clean: bool) -> None:
        with self.lock:
            self.exited.setdefault(rank, (time.monotonic(), clean))

    def first_exit_among(self, ranks) -> tuple[int, float, bool] | None:
        hits = [(r, *self.exited[r]) for r in ranks if r in self.exited]
        return min(hits, key=lambda hit: hit[1]) if hits else None


def wait_requests(requests, group, deadline: float, what: str, statuses=None,
                  spin_seconds: float = _SPIN_SECONDS) -> None:
    """Waits until every MPI request completes, or raises ``DistBackendError`` (see the module doc)."""
    if not requests:
        return
    test_all = group.MPI.Request.Testall
    start = last_check = time.monotonic()
    nap = 0.0
    while True:
        # A tight burst of tests between clock reads: most operations end inside the first one.
        for _ in range(_TESTS_PER_CHECK):
            if test_all(requests, statuses):
                return
        now = time.monotonic()
        if now - start > _YIELD_AFTER:
            # Not a quick exchange: between bursts the core goes to whoever else wants it (a
            # peer rank, when ranks outnumber cores); with nobody waiting this returns at once.
            # Yielding from the start would give a loaded machine's core away for a whole time
            # slice on every small message.
            _yield()
        if now - last_check > _CHECK_EVERY:
            last_check = now
            problem = group.health_problem(now, deadline, what)
            if problem is not None:
                group.mark_broken(problem)
                raise DistBackendError(problem)
        if now - start > spin_seconds:
            # A long wait means a peer is late, not a transfer in flight: leave the CPU to others.
            nap = min(_MAX_NAP, nap * 2 if nap else 1e-5)
            time.sleep(nap)


class Future:
    """``torch.futures.Future`` of a ``Work``: ``wait``/``value``/``then``/``done``."""

    def __init__(self, work=None, value=None):
        self._work = work
        self._value = value
        self._callbacks = []

    def done(self) -> bool:
        return self._work is None or self._work.is_completed()

    def wait(self):
        if self._work is not None:
            self._work.wait()
            self._value = self._work.result()
            self._work = None
        return self._value

    def value(self):
        return self.wait()

    def set_result(self, value) -> None:
        self._value = value
        self._work = None

    def then(self, callback):
        """A Future of ``callback(self)``, run when this one is waited on."""
        parent = self

        class _Chained(Future):
            def done(self):
                return parent.done()

            def wait(self):
                if not self._computed:
                    parent.wait()
                    self._value = callback(parent)
                    self._computed = True
                return self._value

        chained = _Chained()
        chained._computed = False
        return chained


class Work:
    """One started operation: ``wait(timeout)``, ``is_completed()``, ``get_future()``, ``result()``.

    ``finish`` runs once after the requests complete (copying results back into the caller's
    tensors); ``outputs`` is what ``result()`` and the future return.
    """

    def __init__(self, group, requests, what: str, finish=None, outputs=None):
        self._group = group
        self._requests = list(requests)
        self._what = what
        self._finish = finish
        self._outputs = outputs if outputs is not None else []
        self._done = False
        self._error: BaseException | None = None
        self._deadline = time.monotonic() + group.timeout_seconds
        self._statuses = None  # MPI statuses to fill (receives read their source from them)

    def _complete(self) -> None:
        if not self._done:
            self._done = True
            if self._finish is not None:
                self._finish()

    def wait(self, timeout=None) -> bool:
        if self._error is not None:
            raise self._error
        if self._done:
            return True
        deadline = self._deadline
        if timeout is not None:
            seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
            deadline = min(deadline, time.monotonic() + seconds)
        try:
            wait_requests(self._requests, self._group, deadline, self._what, self._statuses)
        except DistBackendError as err:
            self._error = err
            raise
        self._complete()
        return True

    def is_completed(self) -> bool:
        if self._done:
            return True
        if self._error is None and self._group.MPI.Request.Testall(self._requests, self._statuses):
            self._complete()
        return self._done

    def is_success(self) -> bool:
        return self.is_completed() and self._error is None

    def exception(self):
        return self._error

    def result(self) -> list:
        self.wait()
        return self._outputs

    def get_future(self) -> Future:
        return Future(self)

    def synchronize(self) -> None:
        self.wait()


class CompletedWork(Work):
    """A ``Work`` with nothing left to do (world size 1, empty tensors)."""

    def __init__(self, group, outputs=None, finish=None):
        super().__init__(group, [], "", finish, outputs)
        self._complete()


class _Job:
    __slots__ = ("start", "done", "error")

    def __init__(self, start):
        self.start = start
        self.done = threading.Event()
        self.error: BaseException | None = None


class Worker:
    """One thread per process group that runs its ``async_op`` collectives in submission order.

    Each job is a blocking MPI call, which drives MPICH's progress engine in C without the GIL:
    large transfers stream at MPI's speed, backward keeps running beside a DDP bucket's
    all-reduce, and the caller's thread waits on an event with a timeout (where it notices dead
    peers and gives up; a job stuck on a dead peer is abandoned with its group). Every rank
    submits a group's collectives in program order, so the MPI calls match across ranks.
    """

    def __init__(self, name: str):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        # Written by the submitting thread and by the worker respectively; equal when idle.
        self.submitted = 0
        self.finished = 0
        threading.Thread(target=self._loop, name=name, daemon=True).start()

    def idle(self) -> bool:
        return self.submitted == self.finished

    def submit(self, start) -> _Job:
        job = _Job(start)
        self.submitted += 1
        self._queue.put(job)
        return job

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            try:
                request = job.start()
                if request is not None:  # a nonblocking call: finish it here
                    request.Wait()
            except BaseException as err:  # noqa: BLE001 - handed to the waiting thread
                job.error = err
            finally:
                self.finished += 1
                job.done.set()


class CollectiveWork(Work):
    """A collective that has not started yet when it is returned, holding both forms of its MPI
    call. ``launch()`` (``async_op``: the caller goes on computing) hands the blocking form to
    the group's worker; ``wait()`` on a work never launched (a synchronous call) runs the
    nonblocking form in this thread and polls it, unless the worker still has jobs queued (then
    the worker takes it, behind them, keeping the program order of the group's collectives)."""

    def __init__(self, group, blocking, nonblocking, what: str, finish=None, outputs=None):
        super().__init__(group, [], what, finish, outputs)
        self._blocking = blocking
        self._nonblocking = nonblocking
        self._job: _Job | None = None
        self._started = False

    def launch(self) -> None:
        if not self._started:
            self._started = True
            self._job = self._group.worker().submit(self._blocking)

    def _run_here(self) -> bool:
        """Starts the nonblocking form in this thread if nothing is queued before it."""
        worker = self._group._worker
        if not _CALLER_THREAD or self._started or (worker is not None and not worker.idle()):
            return False
        self._started = True
        try:
            self._requests = [self._nonblocking()]
        except Exception as err:  # noqa: BLE001 - an MPI error: reported as the worker would
            self._error = DistBackendError(f"{self._what} failed in MPI: {err}")
            raise self._error from None
        return True

    def wait(self, timeout=None) -> bool:
        if self._error is not None:
            raise self._error
        if self._done:
            return True
        if self._job is None and (self._requests or self._run_here()):
            deadline = self._deadline
            if timeout is not None:
                seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
                deadline = min(deadline, time.monotonic() + seconds)
            try:
                wait_requests(self._requests, self._group, deadline, self._what, None, _COLLECTIVE_SPIN_SECONDS)
            except DistBackendError as err:
                self._error = err
                raise
            self._complete()
            return True
        self.launch()
        return self._wait_job(timeout)

    def _wait_job(self, timeout) -> bool:
        deadline = self._deadline
        if timeout is not None:
            seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
            deadline = min(deadline, time.monotonic() + seconds)
        job, group = self._job, self._group
        while not job.done.wait(_CHECK_EVERY * 5):
            problem = group.health_problem(time.monotonic(), deadline, self._what)
            if problem is not None:
                group.mark_broken(problem)
                self._error = DistBackendError(problem)
                raise self._error
        if job.error is not None:
            self._error = DistBackendError(f"{self._what} failed in MPI: {job.error}")
            raise self._error
        self._complete()
        return True

    def is_completed(self) -> bool:
        if self._done or self._error is not None:
            return self._done
        if self._requests:
            return super().is_completed()
        self.launch()
        job = self._job
        if job.done.is_set() and job.error is None:
            self._complete()
        return self._done or (job.done.is_set() and job.error is not None)
