"""``Work``, ``Future``, and the waits that turn a hung or dead peer into an error.

MPI has no timeouts: a blocking ``MPI_Allreduce`` with a dead peer waits forever. So no caller
ever blocks inside MPI. Every collective is started as the NONBLOCKING MPI call
(``MPI_Iallreduce``, ...) by the thread that calls it, at the call, and only then waited on:

- a synchronous collective (the caller waits at once) polls its request in the caller's thread
  (``wait_requests``), as MPI's blocking calls do;
- an ``async_op`` collective hands its request to the group's ``Worker`` thread, which waits on
  it in C without the GIL (driving MPICH's progress engine while the caller computes, e.g.
  DDP's backward); the caller later waits on an event in short slices;
- point-to-point requests (which must all be posted at once, or paired sends deadlock) are
  polled with ``MPI_Testall`` (``wait_requests``).

Why always the nonblocking call, issued at once: MPI matches a communicator's collectives by the
order each rank starts them, and a blocking collective never matches a nonblocking one. Ranks
choosing between the blocking call (on a worker) and the nonblocking one (polled) by local state
- "is my worker still busy?" - started ``MPI_Reduce_scatter_block`` on some ranks and
``MPI_Ireduce_scatter_block`` on others beside FSDP's prefetch: a hang that only showed under
load, when one rank's prefetch had finished and the others' had not. Issuing every collective
in the same form, in program order, from the calling thread makes the match independent of
timing; only the waiting moves between threads.

Why poll in the caller instead of always waiting on the worker: each hand-over to a thread and
back is a sleep and a wake-up; on a loaded machine (more runnable threads than cores) each
wake-up waits for a time slice, measured as a 1.4-1.8x slower all_reduce than MPI alone, up to
20x for small messages. Polling keeps the caller on its core; only when the node runs more ranks
than it has cores does it sleep between bursts of tests, so that a peer sharing the core is not
starved (``set_oversubscribed``).

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

from ember.futures import Future

from ._errors import DistBackendError
from ._matching import all_synchronous
from ._matching import problem as mismatch_problem

# Seconds a request may still take after a member of its group exited: one that left cleanly
# may have done its part of the operation and gone (the rest completes within this); one that
# was killed or crashed mid-operation rarely has, and the survivors should raise about as soon
# as gloo's closed sockets make PyTorch's raise (~0.1 s), before a launcher that saw the death
# (torchrun, ember-run) stops them. A request whose data arrived completes at the wait loop's
# next test, before the next health check: the short grace only matters when it has not.
EXIT_GRACE = 1.0
KILLED_GRACE = 0.2
# MPICH moves large messages through shared memory only while someone calls into it (as its
# blocking calls do, spinning): napping between Testall calls would stall a transfer in
# flight, so the loop spins (point-to-point) or, for collectives, spins long enough to cover
# the largest transfers before it starts to sleep.
_SPIN_SECONDS = 0.1
COLLECTIVE_SPIN_SECONDS = 2.0
_MAX_NAP = 1e-3
_CHECK_EVERY = 0.01
_TESTS_PER_CHECK = 32
# Whether this node runs more ranks than it has cores (set by ``init_process_group``).
# - Not oversubscribed: every peer has a core of its own, so the wait spins (as MPI's blocking
#   calls do). Giving the core up only hands it to an unrelated process for a time slice
#   (measured at 2 ranks on a loaded 2-core machine: 1 MB all_reduce 4.2 ms when yielding
#   between bursts, 0.6 ms spinning; 4 KB 25 us -> 8-15 us).
# - Oversubscribed: the peer this rank waits for may be waiting for this very core, so the wait
#   gives the core up between bursts: it sleeps, from 10 us doubling to 200 us. Whether a
#   ``sched_yield`` would do better depends on the kernel's autogroups (one per session): ranks
#   in sessions of their own (as ``mpiexec``, torchrun and ``ember-run`` start them) are each a
#   group of one, and a yield hands the core straight back to the yielder: 4 ranks on 2 cores
#   (load 10, interleaved in the same processes, medians of 20 blocks, 2 runs) measured 4 KB
#   all_reduce 10.3-12.7 ms yielding 2 ms before sleeping, 1.5-1.7 ms sleeping at once (MPICH's
#   spinning blocking call 7.8-8.6 ms); 1 MB 10.5-15.5 ms against 5.3-7.1 ms (MPICH 8.4-15.3).
#   Ranks sharing one group (``mp.spawn``'s children share their parent's session) do hand the
#   core to a peer by yielding, so there the wait yields for ``_OVERSUBSCRIBED_YIELD_SECONDS``
#   first, then sleeps (a peer that is late, not just off its core, should not cost a core of
#   yields): at load 8-10, 5 runs, 4 KB 0.11-1.9 ms against 0.53-2.6 ms sleeping at once (MPICH
#   0.11-0.9 ms); 1 MB 2.9-9.9 ms against 2.3-9.6 ms (MPICH 2.8-9.7 ms) - the same within the
#   noise. Yielding without end made 1 MB slower there (10-13.5 ms).
#   The autogroups are only a guess, though: they apply only to processes in the root CPU cgroup
#   and while ``kernel.sched_autogroup_enabled`` is 1; ranks in one container's cgroup share it
#   whatever their sessions. So the wait times its yields (``_yield_again``): here (kernel
#   6.18, 4 processes yielding on 2 cores) a yield that came straight back took 0.6-1.1 us (p10-
#   p90), one that let a peer run 3.5-6 us. It yields while most yields reach a peer (the score
#   carries over between waits) and always once per wait (a probe), else it sleeps. A yield that
#   comes straight back only counts against yielding while more tasks are runnable than there
#   are cores (/proc/loadavg): else the peers are asleep, not out of reach, and sleeping too
#   would keep it so.
# - Not oversubscribed by ranks but the machine busy with other work (e.g. a shared development
#   machine): the peer this rank waits for is often off its core, and a spinning wait only burns
#   the slice the kernel would otherwise give it (or give this rank later). The wait spins for
#   ``_BUSY_SPIN_SECONDS`` (a transfer in flight up to a few MB completes inside it) and then
#   sleeps as when oversubscribed. Measured on a 2-core machine at load 10, 2 ranks, same
#   processes: DDP step 1.16-1.19x PyTorch's spinning, 0.92x this way; all_reduce 4 KB 15 us either
#   way, 1 MB 0.24 ms either way (1.1 ms if the spin is cut to 50 us), 16 MB 42 -> 28 ms, 64 MB
#   153 -> 133-149 ms.
#   "Busy" is this thread's own wait for a core: the share of wall time it spent runnable but
#   not running (the kernel's run delay, /proc/thread-self/schedstat) since the last look, above
#   ``_BUSY_DELAY_SHARE``. A rank with a core to itself waits ~0% (the peer does too); one that
#   competes with another process for it waits 30-50%. The load average this replaced lags a
#   minute behind and counts this job's own spinning ranks: on an otherwise idle 2-core machine
#   it stayed above the cores after any earlier job, and the napping wait made 1-64 MB
#   all_reduce 4-8% slower than MPICH's blocking call (spinning: 0-3%).
_OVERSUBSCRIBED = OVERSUBSCRIBED = [True]
_OVERSUBSCRIBED_YIELD_SECONDS = 2e-3
# Whether a yield hands the core to another task here, learnt from the yields themselves: +1 for
# each that took longer than ``_HANDED_OVER_SECONDS`` (another task ran), -1 for each that came
# straight back while other tasks were runnable, kept within +-``_YIELD_SCORE_LIMIT`` across
# waits. An oversubscribed wait yields while the score is above the lower limit, and always once
# (a probe, ~0.7 us when it comes back).
_YIELD_SCORE = [0]
_YIELD_SCORE_LIMIT = 3
_HANDED_OVER_SECONDS = 2e-6
_sched_yield = getattr(os, "sched_yield", lambda: time.sleep(0))
_OVERSUBSCRIBED_NAP = 2e-4
_BUSY_SPIN_SECONDS = 1e-3
# A large synchronous all_reduce (from 1 MB, ``_mpi_engine._LARGE_BYTES``) on a busy machine
# waits - for its signatures and its data, which is in flight meanwhile - with a ``sched_yield``
# after every test, as MPICH's blocking calls wait (strace: one yield per progress poll), with no
# nap before the collective spin ends (2 s): a nap in the middle of the transfer stalls the peer,
# which needs this rank's part of MPICH's progress. Measured at 2 ranks, load 11-19 on the 2
# cores (the same processes, alternating, medians of 120 blocks; ratios to MPICH's blocking
# ``Allreduce`` in the same run, session 16: ``benchmarks/bench_distributed_wait.py`` and its
# forerunner), 16 MB: yielding 0.84-1.24x over 13 runs (12 within 1.10x); spin 1 ms then nap (the
# wait before) 0.92-1.47x over 24 runs (10 within 1.10x); spin 1 ms then yield 1.06-1.27x (6
# runs); spin twice the fastest time seen so far then nap 0.18-2.14x (13 runs). 4 MB: yielding
# 1.00-1.27x (9 runs), spin-then-nap 0.10-1.44x (10). 64 MB: 0.95-0.98x against 0.97-1.03x. 1 MB:
# yielding for the signatures too 0.61 and 0.92x, for the data only 0.30-1.62x (8), spin-then-nap
# 0.14-1.46x (15). Times there were multiples of the 4 ms scheduler tick (one tick is 25% of
# 16 MB). NOTES.md (session 16) has the rest.
# A small synchronous all_reduce or a barrier (``small``) on a busy machine spins as long as its
# transfer takes while both ranks run (64 KB: ~50 us at 2 ranks; 4 KB completes inside the engine's
# quick tests before this loop), then waits as MPICH's blocking calls do, a ``sched_yield`` after
# every test. Spinning on (the wait before session 17) lost the most where the two ranks had
# been put on one core (the kernel places a task woken by a peer beside it; a program that also
# sleeps, e.g. in gloo or in I/O, keeps moving them there): the spinning rank then holds the core
# its peer needs for the rest of its time slice, every call. Measured at 2 ranks, load 8-13 on the
# 2 cores, gloo's all_reduce in the same processes, alternating blocks (``bench_distributed_wait.py
# --variants mpich,ember-spin,ember,...,gloo``, session 17; median of per-block ratios to MPICH's
# blocking ``Allreduce`` in the same runs): 4 KB spinning 15-23 ms median per call, 7.3-9.4x (5
# runs); this wait 0.95-1.01x (2 runs; yielding after 50 us whatever the size 1.01-1.12x, at once
# 0.89-1.08x, after 200 us 1.13-1.24x); 64 KB spinning 6.3-7.1x, this wait 1.05-1.06x (yielding
# after 50 us 1.07-1.09x, at once 0.99-1.02x). Where the ranks stay on cores of their own (the same benchmark
# without gloo, load 8), 64 KB spinning took 58 us, yielding after 50 us 62-65 us, at once
# 67-236 us (MPICH 266-590 us: its yields give the core away mid-transfer): hence the spin
# proportional to the size.
_SMALL_SPIN_PER_BYTE = 50e-6 / 65536
# Session 18: past that spin it naps rather than yields, from 10 us doubling up to
# ``_SMALL_BUSY_NAP`` (the kernel's default timer slack makes each nap >= ~60 us). A yielding
# thread stays runnable and takes its turns on the loaded cores while it waits; a sleeping one
# leaves the core to the peer and, woken, gets a core sooner. Measured at 2 ranks, load 17-18 on
# the 2 cores, the same processes, alternating blocks (``bench_distributed_wait.py --sizes 4K,64K
# --variants mpich,ember,ember-nap20,ember-nap50,...``; medians of per-block ratios to MPICH's
# blocking ``Allreduce``), with gloo's all_reduce in the processes (4 runs): 4 KB yielding
# 0.94-1.30x, napping (cap 20/50/100/200 us) 0.17-0.32x (medians 0.39-0.71 ms against MPICH's
# 1.8-3.2 ms and gloo's 1.7-1.8 ms); 64 KB yielding 1.04-1.19x, napping 0.21-0.29x (0.77-1.3 ms
# against gloo's 1.6-2.1 ms); without gloo (1 run) 4 KB 1.11x against 0.19-0.22x, 64 KB 1.08x
# against 0.21-0.22x. The caps differ by less than the runs do. In the blocks where the machine
# was quiet for a moment the nap cost nothing measurable (4 KB 10th percentile 8.3 us, yielding
# 11.6 us, MPICH 6.9 us). Not measured: a moderate load (4-10), where session 17 found a 1 ms
# spin followed by naps of up to 200 us slow (2.1 ms median at load 6 against 56 us spinning);
# this nap follows the size's spin instead. None: yield after every test (the wait before).
_SMALL_BUSY_NAP = 50e-6
_NEVER = float("inf")
_BUSY_CHECK_EVERY = 0.5
_BUSY_DELAY_SHARE = 0.1
_CORES = os.cpu_count() or 1
# when the run delay was last read, whether the machine was busy then, the run delay (ns) read
# and the thread it was read in (schedstat is per thread)
_LOAD: list = [-1.0, False, 0, None]


def _run_delay_ns() -> int | None:
    """The calling thread's total time spent runnable but not running (None: not Linux, or a
    kernel without scheduler statistics)."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _machine_busy(now: float) -> bool:
    if now - _LOAD[0] > _BUSY_CHECK_EVERY:
        delay = _run_delay_ns()
        thread = threading.get_ident()
        if delay is None:
            try:  # no scheduler statistics: the load average above the cores
                _LOAD[1] = os.getloadavg()[0] > _CORES + 0.5
            except OSError:
                _LOAD[1] = False
        elif _LOAD[3] == thread:
            _LOAD[1] = (delay - _LOAD[2]) * 1e-9 > _BUSY_DELAY_SHARE * (now - _LOAD[0])
        _LOAD[0], _LOAD[2], _LOAD[3] = now, delay or 0, thread
    return _LOAD[1]


# Whether each rank of this node has a second core for a helper thread (cores >= 2 x ranks):
# only then does a thread that waits on MPI beside the computing one (spinning in ``MPI_Wait``)
# overlap communication with computation instead of taking the core from it.
_SPARE_CORE = [False]


def set_oversubscribed(flag: bool, one_group: bool = False) -> None:
    """``one_group``: the node's ranks seem to share one scheduling group (autogroup or CPU
    cgroup), where a yield hands the core to a peer - the first guess, which the yields correct."""
    _OVERSUBSCRIBED[0] = bool(flag)
    _YIELD_SCORE[0] = _YIELD_SCORE_LIMIT if one_group else -_YIELD_SCORE_LIMIT


def _others_runnable() -> bool:
    """Whether more tasks are runnable on the machine than it has cores (the kernel's count in
    /proc/loadavg; True where it cannot be read)."""
    try:
        with open("/proc/loadavg", "rb") as f:
            return int(f.read().split()[3].split(b"/")[0]) > _CORES
    except (OSError, ValueError, IndexError):
        return True


def _yield_again() -> bool:
    """Yields once and learns from it (``_YIELD_SCORE``); whether the wait should yield again
    rather than sleep. A yield that came straight back while other tasks wanted a core did not
    reach them (a peer in another autogroup); one that came back because nothing else was
    runnable says nothing - the peers may sleep, and yielding is then as good as spinning."""
    before = time.monotonic()
    _sched_yield()
    if time.monotonic() - before > _HANDED_OVER_SECONDS:
        _YIELD_SCORE[0] = min(_YIELD_SCORE_LIMIT, _YIELD_SCORE[0] + 1)
        return True
    if not _others_runnable():
        return True
    _YIELD_SCORE[0] = max(-_YIELD_SCORE_LIMIT, _YIELD_SCORE[0] - 1)
    return _YIELD_SCORE[0] > -_YIELD_SCORE_LIMIT


def set_spare_core(flag: bool) -> None:
    _SPARE_CORE[0] = bool(flag)


def progress_thread_pays() -> bool:
    return _SPARE_CORE[0]


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
                  spin_seconds: float = _SPIN_SECONDS, small: int | None = None, large: bool = False) -> None:
    """Waits until every MPI request completes, or raises ``DistBackendError`` (see the module doc).
    ``small``: the bytes of a barrier (0) or a synchronous all_reduce of up to 64 KB, whose wait is
    all peer latency: on an idle machine it spins until the collective spin ends (a thread that
    slept waits for a core again when woken: 4 KB all_reduce measured 2.1 ms median at load 6 with
    the busy naps of other waits - a 1 ms spin, then naps up to 200 us - 56 us spinning); on a busy
    machine it spins only as long as such a transfer takes while both ranks run
    (``_SMALL_SPIN_PER_BYTE``), then naps of 10-50 us (``_SMALL_BUSY_NAP``: the comments there say
    why).
    ``large``: a synchronous all_reduce of 1 MB or more (``MPIEngine.allreduce_now``): on a busy
    machine it waits as MPICH's blocking calls do, a ``sched_yield`` after every test, instead of
    napping after ``_BUSY_SPIN_SECONDS`` (the comment below ``_BUSY_SPIN_SECONDS`` says why)."""
    if not requests:
        return
    if len(requests) == 1 and statuses is None:
        test = requests[0].Test
    else:
        test_all = group.MPI.Request.Testall

        def test():
            return test_all(requests, statuses)

    start = last_check = time.monotonic()
    nap = 0.0
    yield_until = 0.0
    yield_from = _NEVER
    yielding = spin_yield = False
    if _OVERSUBSCRIBED[0]:
        spin_seconds, max_nap = 0.0, _OVERSUBSCRIBED_NAP
        # yield at least once (a probe, ~0.7 us where it comes straight back), on while it helps
        yield_until, yielding = _OVERSUBSCRIBED_YIELD_SECONDS, True
    elif small is not None:
        max_nap = _MAX_NAP
        if _machine_busy(start):
            yield_from = _SMALL_SPIN_PER_BYTE * small
    elif _machine_busy(start):
        max_nap = _OVERSUBSCRIBED_NAP
        if large:
            spin_yield = True
        else:
            spin_seconds = min(spin_seconds, _BUSY_SPIN_SECONDS)
    else:
        max_nap = _MAX_NAP
    while True:
        # A tight burst of tests between clock reads: most operations end inside the first one.
        try:
            if spin_yield:
                for _ in range(_TESTS_PER_CHECK):
                    if test():
                        return
                    _sched_yield()
            else:
                for _ in range(_TESTS_PER_CHECK):
                    if test():
                        return
        except group.MPI.Exception as err:  # e.g. a receive truncated by a larger send
            raise DistBackendError(_explained(group, what, _mpi_error(group.MPI, err, statuses, what))) from None
        now = time.monotonic()
        if now - start > yield_from:
            yield_from = _NEVER
            if _SMALL_BUSY_NAP is None:
                spin_yield = True
            else:  # naps from 10 us doubling up to _SMALL_BUSY_NAP instead
                spin_seconds, max_nap = 0.0, _SMALL_BUSY_NAP
        if now - last_check > _CHECK_EVERY:
            last_check = now
            problem = group.health_problem(now, deadline, what)
            if problem is not None:
                group.mark_broken(problem)
                raise DistBackendError(problem)
        if now - start > spin_seconds:
            if yielding and now - start < yield_until:
                yielding = _yield_again()
                continue
            # Past the spin: a peer is late (or off its core), not a transfer in flight.
            nap = min(max_nap, nap * 2 if nap else 1e-5)
            time.sleep(nap)


def _explained(group, what: str, text: str) -> str:
    """``text`` (an MPI error's message), or the exit of a peer that explains it (the engine's
    ``explain_mpi_error``)."""
    explain = getattr(group, "explain_mpi_error", None)
    return text if explain is None else explain(what, text)


def _mpi_error(MPI, err, statuses, what: str) -> str:
    """The message of an MPI error raised by a test: the failed request's own error where MPI
    only says "see the statuses"."""
    code = err.Get_error_code()
    if err.Get_error_class() == MPI.ERR_IN_STATUS and statuses:
        code = next((s.Get_error() for s in statuses if s.Get_error() != MPI.SUCCESS), code)
    text = MPI.Get_error_string(code)
    if MPI.Get_error_class(code) == MPI.ERR_TRUNCATE:
        text += " (a message larger than the receive buffer: do the sizes of the send and the receive match?)"
    return f"{what} failed in MPI: {text}"


class WorkFuture(Future):
    """``Work.get_future()``: an ``ember.futures.Future`` of the work's output tensors (or its
    error). MPI requests only progress when tested or waited on, so the future completes - and
    runs its ``then``/``add_done_callback`` callbacks - in the thread that asks: ``wait()`` (on it
    or on a future chained from it, e.g. DDP's reducer waiting on a comm hook's result),
    ``done()``, ``value()`` or the work's own ``wait()``/``is_completed()``. Never in a background
    thread: a callback that starts another collective (PowerSGD's) thus starts it in program order
    on every rank, which MPI's matching of collectives needs (docs/deviations.md)."""

    def __init__(self, work):
        super().__init__()
        self._work = work

    def _settle(self) -> None:
        with self._cond:
            work, self._work = self._work, None
        if work is None or self.done():  # (a user may have completed it by hand)
            return
        error = work.exception()
        if error is not None:
            self.set_exception(error)
        else:
            self.set_result(work.result())

    def _poll(self) -> None:
        work = self._work
        if work is not None and work.is_completed():
            self._settle()

    def _drive(self) -> None:
        work = self._work
        if work is not None:
            try:
                work.wait()
            except Exception:  # noqa: BLE001 - the future carries it (work.exception())
                pass
            self._settle()


def _deadline(base: float, timeout) -> float:
    """The earlier of ``base`` and ``timeout`` (seconds or a timedelta) from now."""
    if timeout is None:
        return base
    seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
    return min(base, time.monotonic() + seconds)


class Work:
    """One started operation: ``wait(timeout)``, ``is_completed()``, ``get_future()``, ``result()``.

    ``finish`` runs once after the requests complete (copying results back into the caller's
    tensors); ``outputs`` is what ``result()`` and the future return.
    """

    _spin = _SPIN_SECONDS
    _seq = 0  # a collective's number on its communicator (0: point to point)
    _future: WorkFuture | None = None

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
            if self._future is not None:
                self._future._settle()

    def wait(self, timeout=None) -> bool:
        if self._error is not None:
            raise self._error
        if self._done:
            return True
        try:
            self._wait_until(_deadline(self._deadline, timeout))
        except DistBackendError as err:
            self._error = err
            abandoned = getattr(self._group, "abandoned", None)
            if abandoned is not None:
                abandoned.append(self)
            if self._future is not None:
                self._future._settle()
            raise
        self._complete()
        return True

    def _wait_until(self, deadline: float) -> None:
        self._group.waiting_seq = self._seq
        wait_requests(self._requests, self._group, deadline, self._what, self._statuses, self._spin)

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
        """The output tensors. As PyTorch's gloo, only once the work is complete: call ``wait()``
        first (an unfinished one raises, as the request may still be writing the outputs)."""
        completed = self.is_completed()
        if self._error is not None:
            raise self._error
        if not completed:
            raise RuntimeError("Work needs to be completed before calling result(). "
                               "Should call wait() before result().")
        return self._outputs

    def get_future(self) -> Future:
        """An ``ember.futures.Future`` of ``result()`` (the same one on every call)."""
        future = self._future
        if future is None:
            future = self._future = WorkFuture(self)
            if self._done or self._error is not None:
                future._settle()
        return future

    def synchronize(self) -> None:
        self.wait()


class CompletedWork(Work):
    """A ``Work`` with nothing left to do (world size 1, empty tensors)."""

    def __init__(self, group, outputs=None, finish=None):
        super().__init__(group, [], "", finish, outputs)
        self._complete()


class _Job:
    __slots__ = ("request", "work", "done", "error")

    def __init__(self, request, work):
        self.request = request
        self.work = work  # held until MPI is done with its buffers, even if the caller drops it
        self.done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        """Waits for the work's signature exchange (``_matching``), checks it, then for its data."""
        work = self.work
        if work._signatures is not None:
            work._signatures[0].Wait()
            problem = work.signatures_problem()
            if problem is not None:
                self.error = DistBackendError(problem)
                return
        self.request.Wait()


class Worker:
    """One thread per process group that waits on its ``async_op`` collectives' requests.

    The requests are already started (by the caller, in program order); the worker only waits,
    in submission order, each ``MPI_Wait`` in C without the GIL: it drives MPICH's progress
    engine, so large transfers stream at MPI's speed while the caller computes. (A worker that
    tested and napped instead, to leave the core to the caller's backward, measured no better
    at 2 ranks on 2 cores: the transfer then waited for the end of backward.) The caller's
    thread waits on the job's event with a timeout (where it notices dead peers and gives up; a
    wait stuck on a dead peer is abandoned with its group).
    """

    def __init__(self, name: str):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._loop, name=name, daemon=True).start()

    def submit(self, request, work) -> _Job:
        job = _Job(request, work)
        self._queue.put(job)
        return job

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            try:
                job.run()
            except BaseException as err:  # noqa: BLE001 - handed to the waiting thread
                job.error = err
            finally:
                job.work = None
                job.done.set()


class CollectiveWork(Work):
    """A started collective (its nonblocking MPI request). ``launch()`` (``async_op``: the caller
    goes on computing) hands the request to the group's worker, which waits on it; a work never
    launched (a synchronous call) is polled in the waiting thread. MPI lets only one thread wait
    on a request: once launched, only the worker touches it. ``signatures``: the collective's
    signature exchange (``_matching``: request, receive buffer, signature, count), started just
    before the data and checked before the data is waited on."""

    _spin = COLLECTIVE_SPIN_SECONDS

    def __init__(self, group, request, what: str, finish=None, outputs=None, keep=(), signatures=None, seq=0):
        super().__init__(group, [request], what, finish, outputs)
        self._seq = seq  # its number among the communicator's collectives (names absent ranks on a timeout)
        self._keep = keep  # the staged tensors MPI reads and writes
        self._job: _Job | None = None
        self._signatures = signatures

    def signatures_problem(self) -> str | None:
        """After the signature exchange: None if every rank runs this collective, else the error.
        Where every rank's call was synchronous (``_matching``) the group goes on on a new
        communicator; otherwise it is marked broken (a rank may have started later collectives
        on this one)."""
        _, recv, sig, count = self._signatures[:4]
        group = self._group
        me = group.global_ranks[group.rank]
        problem = mismatch_problem(recv, sig, count, self._what, me)
        if problem is None:
            return None
        usable = (self._job is None and all_synchronous(recv)
                  and group._recover(self._what, self._requests[0], self._keep))
        if usable:
            return mismatch_problem(recv, sig, count, self._what, me, True)
        group.mark_broken(problem)
        return problem

    def _check_signatures(self, deadline: float) -> None:
        if self._signatures is not None:
            wait_requests(self._signatures[:1], self._group, deadline, self._what, None, self._spin)
            problem = self.signatures_problem()
            self._signatures = None
            if problem is not None:
                raise DistBackendError(problem)

    def launch(self) -> None:
        if self._job is None and not self._done and self._error is None:
            self._job = self._group.worker().submit(self._requests[0], self)

    def _wait_until(self, deadline: float) -> None:
        self._group.waiting_seq = self._seq
        job = self._job
        if job is None:
            self._check_signatures(deadline)
            super()._wait_until(deadline)
            return
        group = self._group
        while not job.done.wait(_CHECK_EVERY * 5):
            problem = group.health_problem(time.monotonic(), deadline, self._what)
            if problem is not None:
                group.mark_broken(problem)
                raise DistBackendError(problem)
        if job.error is not None:
            if not isinstance(job.error, DistBackendError):
                job.error = DistBackendError(_explained(group, self._what, f"{self._what} failed in MPI: {job.error}"))
            raise job.error

    def is_completed(self) -> bool:
        job = self._job
        if job is None:
            if self._error is None and self._signatures is not None:
                if not self._signatures[0].Test():
                    return False
                problem = self.signatures_problem()
                self._signatures = None
                if problem is not None:
                    self._error = DistBackendError(problem)
                    abandoned = getattr(self._group, "abandoned", None)
                    if abandoned is not None:
                        abandoned.append(self)
                    return True
            return super().is_completed()
        if not self._done and self._error is None and job.done.is_set():
            if job.error is None:
                self._complete()
            elif isinstance(job.error, DistBackendError):
                self._error = job.error
            else:
                self._error = DistBackendError(_explained(self._group, self._what,
                                                          f"{self._what} failed in MPI: {job.error}"))
        return self._done or self._error is not None
