"""The MPI engine: every collective as one MPICH call on the group's communicator.

Inputs arrive already checked and shaped by ``_collectives``: flat contiguous outputs where MPI
needs one, group-local ranks. Each method stages its tensors (``_buffers``) and returns a
``CollectiveWork`` around its nonblocking MPI call (``Iallreduce``, ...), started at once in the
calling thread: a synchronous call polls it there, an ``async_op`` one is waited on by the
group's worker thread (``_work`` says why); point-to-point posts ``MPI_Isend``/``MPI_Irecv`` at
once. The ``Work``'s ``finish`` copies results back.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
import zlib

import ember
from ember._src.dispatch import sync_pending

from . import _mpi
from . import _work as _waits
from ._backend import Engine, RedOpType
from ._buffers import (
    HUGE_FROM,
    check_op_for_dtype,
    divide,
    for_reduction,
    for_transfer,
    mpi_op,
    mpi_type,
    storage_huge_pages,
)
from ._errors import DistBackendError
from ._matching import CALL, all_synchronous, signature
from ._matching import buffers as signature_buffers
from ._matching import fill as fill_signature
from ._matching import problem as mismatch_problem
from ._work import (
    COLLECTIVE_SPIN_SECONDS,
    EXIT_GRACE,
    KILLED_GRACE,
    OVERSUBSCRIBED,
    CollectiveWork,
    CompletedWork,
    Work,
    Worker,
    wait_requests,
)

_F16, _BF16 = ember.float16, ember.bfloat16
_SMALL_BYTES = 64 * 1024  # a synchronous all_reduce this small never naps (``_work.wait_requests``)
# one this large waits for its signatures and data as MPICH's blocking calls do on a busy machine
# (``_work``'s ``wait_requests``, ``large``)
_LARGE_BYTES = 1 << 20
# A wait that lasts this long tells the store which collective this rank waits in, so that a
# peer that times out can name the ranks that never joined it (``MPIEngine.health_problem``).
_ANNOUNCE_AFTER = 0.1
# How long an MPI error waits for the liveness watch to say whether a peer exited (the likely
# cause; ``MPIEngine.explain_mpi_error``). The watch hears of an exit when the peer's socket
# closes: within milliseconds where the machine is not overloaded.
_MPI_ERROR_GRACE = 1.0
_COMMS: dict = {}  # group ranks -> communicators made for them so far (every member in step)


_QUICK_TESTS = 64
_SMALL_AT_ONCE_IF_BUSY = True  # (``_run_now``; a switch for benchmarks/bench_distributed_wait.py)
_ADDRESS_BUFFERS: dict = {}  # (address, length) -> MPI buffer of that memory (``allreduce_now``)


def _settles(request) -> bool:
    """Tests ``request`` a few dozen times (a few us): a small collective of peers that are
    running usually completes inside that, without the set-up of the full wait loop."""
    test = request.Test
    for _ in range(_QUICK_TESTS):
        if test():
            return True
    return False


class RecvWork(Work):
    """A receive: ``source_rank()`` tells who sent (for ``recv`` from any source)."""

    def __init__(self, group, requests, what, finish, outputs, status):
        super().__init__(group, requests, what, finish, outputs)
        self._statuses = [status]

    def source_rank(self) -> int:
        self.wait()
        return self._group.global_ranks[self._statuses[0].Get_source()]


class MPIEngine(Engine):
    """One communicator of the MPI world; ``world`` holds the shared fault state."""

    name = "mpi"

    def __init__(self, comm, global_ranks: list[int], world, timeout_seconds: float):
        self.MPI = _mpi.mpi()
        self.comm = comm
        # An MPI error (a receive truncated by a larger send, ...) comes back as an exception
        # (``wait_requests`` reports it), not as MPICH's default abort of the whole process.
        comm.Set_errhandler(self.MPI.ERRORS_RETURN)
        self.MPI.COMM_WORLD.Set_errhandler(self.MPI.ERRORS_RETURN)
        self.global_ranks = global_ranks
        self.world = world
        self.timeout_seconds = timeout_seconds
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.broken: str | None = None
        self._worker: Worker | None = None
        self.abandoned: list = []  # failed works whose buffers MPI may still touch: never freed
        # The signature exchange of synchronous calls (``_matching``), its buffers reused
        send, recv = signature_buffers(0, 0, True)
        self._sig_recv = recv
        self._sig_send = send
        self._sig_args = ([send, self.MPI.INT64_T], [recv, self.MPI.INT64_T], self.MPI.MAX)
        self._me = global_ranks[self.rank]
        made = _COMMS.get(tuple(global_ranks), 0)
        _COMMS[tuple(global_ranks)] = made + 1
        self._wait_key = f"ember/waiting/{'-'.join(map(str, global_ranks))}/{made}/"
        self._seq = 0  # collectives started on this communicator
        self.waiting_seq = 0  # the one being waited for (0: none, or not a collective)
        self._announced = 0
        self._recoveries = 0  # communicators made for this group after mismatches (``_recover``)

    # -- fault handling (called by the wait loop) -----------------------------------------

    def health_problem(self, now: float, deadline: float, what: str) -> str | None:
        if self.broken is not None:
            return self.broken
        world_broken = self.world.health.broken
        if world_broken is not None:
            return world_broken
        hit = self._peer_exit()
        if hit is not None and now - hit[1] > (EXIT_GRACE if hit[2] else KILLED_GRACE):
            return self._exit_problem(what, hit)
        seq = self.waiting_seq
        if now > deadline:
            absent = self._absent(seq)
            who = (f"rank{'s' if len(absent) > 1 else ''} {', '.join(map(str, absent))} never joined this "
                   "operation" if absent else "a peer never joined this operation")
            return (f"{what} timed out on rank {self._me} after {self.timeout_seconds:g}s: {who}; the process group is "
                    "no longer usable")
        if seq and self._announced != seq and now > deadline - self.timeout_seconds + _ANNOUNCE_AFTER:
            self._announced = seq
            try:
                self.world.store.set(self._wait_key + str(self.rank), str(seq))
            except Exception:  # noqa: BLE001 - only a better message at stake
                pass
        return None

    def _peer_exit(self):
        """The first exit the liveness watch reported among this group's other ranks: (global
        rank, when, clean), or None."""
        me = self.global_ranks[self.rank]
        return self.world.health.first_exit_among(r for r in self.global_ranks if r != me)

    def _exit_problem(self, what: str, hit) -> str:
        how = "left the process group" if hit[2] else "died (killed or crashed)"
        return (f"{what} failed on rank {self.global_ranks[self.rank]}: rank {hit[0]} {how} while this rank waited "
                "for it; the process group is no longer usable")

    def explain_mpi_error(self, what: str, text: str) -> str:
        """The error to raise for an MPI error ``text`` met while waiting for ``what``. MPICH may
        notice a peer that was killed mid-operation before the liveness watch reports it, and fail
        the request with only "Other MPI error" and its call stack (a broadcast from a rank killed
        while sending, 4 ranks: 2 of 13 runs). Where the watch reports an exit among this group's
        ranks within ``_MPI_ERROR_GRACE``, the error names that rank, as the wait's own check
        would have a moment later, and the group is marked broken; otherwise ``text``."""
        give_up = time.monotonic() + _MPI_ERROR_GRACE
        while True:
            hit = self._peer_exit()
            if hit is not None:
                problem = f"{self._exit_problem(what, hit)} (MPI: {text.splitlines()[0]})"
                self.mark_broken(problem)
                return problem
            if time.monotonic() > give_up:
                return text
            time.sleep(0.01)

    def _absent(self, seq: int) -> list[int]:
        """The group's ranks (global) that have not said they wait in collective ``seq`` of this
        communicator (a wait says so after ``_ANNOUNCE_AFTER``); [] if the store cannot tell."""
        if not seq:
            return []
        absent = []
        try:
            store = self.world.store
            for r in range(self.size):
                key = self._wait_key + str(r)
                if r != self.rank and (not store.check([key]) or store.get(key) != str(seq).encode()):
                    absent.append(self.global_ranks[r])
        except Exception:  # noqa: BLE001 - only a better message at stake
            return []
        return absent

    def _recover(self, what: str, request, memory) -> bool:
        """After mismatched synchronous calls on every rank (``_matching``): retires the
        communicator - MPI may still run the mismatched data operations on it, into ``memory``,
        so neither is ever freed - and goes on on a new one; whether that worked.

        The new communicator comes from the world's control communicator (``_world``: one per
        world, used for nothing but making communicators), by ``MPI_Comm_create_group`` of this
        group's ranks: only they take part, at this same point of their programs. (A spare
        duplicate held by every group, as before, took two of MPICH's 2048 context ids per group:
        1022 groups fitted.) MPI has no nonblocking form of it, so a helper thread makes it while
        this one waits with the group's timeout and fault checks: a rank that dies now leaves
        that thread stuck in MPI, not this one."""
        self.abandoned.append((self.comm, request, memory))
        control = getattr(self.world, "control_comm", None)
        if control is None:
            return False
        self._recoveries += 1
        ranks = self.global_ranks
        # The same on every member, distinct for other rank sets and later recoveries.
        tag = (zlib.crc32(repr(ranks).encode()) + self._recoveries * 7919) % 32749
        made: list = []

        def create():
            everyone = control.Get_group()
            members = everyone.Incl(ranks)
            try:
                made.append(control.Create_group(members, tag=tag))
            except BaseException as err:  # noqa: BLE001 - handed to the waiting thread
                made.append(err)
            finally:
                members.Free()
                everyone.Free()

        helper = threading.Thread(target=create, name="ember-recover", daemon=True)
        helper.start()
        deadline = time.monotonic() + self.timeout_seconds
        nap = 1e-5
        while helper.is_alive():
            if self.health_problem(time.monotonic(), deadline, what) is not None:
                return False
            time.sleep(nap)
            nap = min(2e-3, nap * 2)
        if not made or isinstance(made[0], BaseException):
            return False
        made[0].Set_errhandler(self.MPI.ERRORS_RETURN)
        self.comm = made[0]
        return True

    def mark_broken(self, problem: str) -> None:
        self.broken = problem
        _mpi.disable_finalize()

    def _start(self, what: str) -> None:
        # Only known breakage fails at once; a peer's exit is judged by the wait loop (it may
        # have done its part of this operation before leaving).
        broken = self.broken or self.world.health.broken
        if broken is not None:
            raise DistBackendError(f"{what}: the process group is broken by an earlier error: {broken}")

    def _work(self, requests, what, finish=None, outputs=None) -> Work:
        return Work(self, requests, what, finish, outputs)

    def worker(self) -> Worker:
        if self._worker is None:
            self._worker = Worker("ember-collectives")
        return self._worker

    def _job(self, call: str, args: tuple, what: str, finish=None, outputs=None, keep=(), sig=0, count=0,
             **kwargs) -> Work:
        """Starts the nonblocking collective ``comm.<call>(*args)`` (``Iallreduce``, ...) now, in
        this thread: every rank starts a communicator's collectives in program order and in
        the same form, whatever thread later waits on them (``_work`` says why). ``keep``: the
        ``Staged`` tensors whose memory MPI uses, held by the work until it completes. Just
        before it, the exchange of ``sig`` and ``count`` (``_matching``), which the work checks
        before it waits for the data."""
        signatures = None
        self._seq += 1
        try:
            if self.size > 1:
                send, recv = signature_buffers(sig, count, getattr(CALL, "synchronous", False))
                exchange = self.comm.Iallreduce([send, self.MPI.INT64_T], [recv, self.MPI.INT64_T], self.MPI.MAX)
                signatures = (exchange, recv, sig, count, send)
            request = getattr(self.comm, call)(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - an MPI error, reported in the engine's terms
            raise DistBackendError(f"{what} failed in MPI: {err}") from None
        return CollectiveWork(self, request, what, finish, outputs, keep, signatures, self._seq)

    # -- buffers ---------------------------------------------------------------------------

    def _bytes(self, staged):
        return [staged.buffer(self.MPI), self.MPI.BYTE]

    def _owned_bytes(self, staged):
        return [staged.buffer(self.MPI, owned=True), self.MPI.BYTE]

    def _typed(self, staged):
        return [staged.buffer(self.MPI), mpi_type(self.MPI, staged.target.dtype)]

    def _averaged(self, staged, op):
        """The finish of a reduction: AVG divides the sum; results go back to the caller's tensor."""
        if op != RedOpType.AVG:
            return staged.writeback if staged.staging is not None else None
        size = self.size

        def finish():
            divide(staged, size)
            staged.writeback()

        return finish

    # -- the synchronous all_reduce fast path ----------------------------------------------

    def sync_allreduce_plan(self, dtype, op):
        """What ``allreduce_now`` needs for a synchronous all_reduce of ``dtype`` with ``op`` -
        (item size, MPI datatype, MPI operation) - or None where the general path must run: half
        types (reduced in float32), AVG (a division after), ops MPI cannot apply (its errors)."""
        if dtype is _F16 or dtype is _BF16 or op == RedOpType.AVG or type(op) is not RedOpType:
            return None
        try:
            check_op_for_dtype(op, dtype)
            return dtype.itemsize, mpi_type(self.MPI, dtype), mpi_op(self.MPI, op, dtype), signature(
                "all_reduce", dtype, op)
        except (ValueError, RuntimeError, KeyError):
            return None

    def allreduce_now(self, tensor, plan) -> None:
        """A synchronous in-place all_reduce of a contiguous CPU tensor (``sync_allreduce_plan``
        chose the case): the same ``MPI_Iallreduce`` as ``allreduce``, so it matches that on
        other ranks, waited on here with nothing to stage or finish."""
        item, mtype, mop, sig = plan
        sync_pending(tensor, "a collective")
        storage = tensor._storage
        count = math.prod(tensor._shape)
        nbytes = count * item
        if nbytes >= HUGE_FROM:
            storage_huge_pages(storage)
        # An MPI buffer is only an address and a length (it owns nothing): one made for the same
        # memory before serves again, and saves building it (~0.6 us of the call's ~3 us).
        key = (storage.data_ptr() + tensor._offset * item, nbytes)
        buf = _ADDRESS_BUFFERS.get(key)
        if buf is None:
            if len(_ADDRESS_BUFFERS) >= 256:
                _ADDRESS_BUFFERS.clear()
            buf = _ADDRESS_BUFFERS[key] = self.MPI.buffer.fromaddress(*key)
        self._run_now("all_reduce", nbytes if nbytes <= _SMALL_BYTES else None, storage, sig, count, "Iallreduce",
                      self.MPI.IN_PLACE, [buf, mtype], mop, large=nbytes >= _LARGE_BYTES)

    _BARRIER = signature("barrier")

    def barrier_now(self) -> None:
        # The signature exchange is a barrier: nothing else to run.
        self._run_now("barrier", 0, None, self._BARRIER, 0, None)

    def _run_now(self, what: str, small: int | None, memory, sig: int, count: int, call, *args,
                 large: bool = False) -> None:
        """Exchanges the call's signature (``_matching``) and runs ``comm.<call>(*args)``, waiting
        for both in this thread (a synchronous call with nothing to finish needs no ``Work``);
        raises before the data is waited for if the signatures differ. ``memory``: what MPI
        writes, kept forever if the wait fails (MPI may still write into it).

        Both start at once where ranks share cores or the message is large: the data then waits
        for no round of its own (4 ranks on 2 cores, 4 KB: 0.48-1.47 ms against 0.59-1.69 ms
        with the signatures first; 1 MB the same within the noise). A small message of ranks
        that each have a core starts its data after the signatures: there the signatures came
        back in ~2 us and both at once made each test of MPI's progress dearer (2 ranks, 4 KB:
        5.1-8.6 us signatures first, 5.7-9.4 us both at once; 1 MB 3% faster at once) - unless the
        machine is busy (``_work._machine_busy``), where each round may wait for a peer that is
        off its core: 2 ranks, load 9-13, 4 KB yielding after 50 us with both at once 1.01-1.12x
        MPICH's blocking call in the same runs, signatures first 1.45-1.58x (64 KB 1.07-1.09x
        against 1.23-1.25x).

        ``small``: the bytes of a synchronous all_reduce of up to 64 KB or a barrier (0), None for
        larger ones (``_work.wait_requests``)."""
        if self.broken is not None or self.world.health.broken is not None:
            self._start(what)
        self._seq += 1
        self.waiting_seq = self._seq
        check = request = None
        at_once = call is not None and (small is None or OVERSUBSCRIBED[0]
                                        or _SMALL_AT_ONCE_IF_BUSY and _waits._machine_busy(time.monotonic()))
        try:
            if self.size > 1:
                fill_signature(self._sig_send, sig, count, True)
                check = self.comm.Iallreduce(*self._sig_args)
            if at_once or check is None and call is not None:
                request = getattr(self.comm, call)(*args)
        except Exception as err:  # noqa: BLE001 - an MPI error, reported in the engine's terms
            raise DistBackendError(f"{what} failed in MPI: {err}") from None
        if check is not None:
            if not _settles(check):
                # (a large message's data is in flight meanwhile: its wait, as the data's below)
                self._wait_now(check, what, small, None, request, memory, large)
            recv = self._sig_recv
            if recv[0] != -recv[1] or recv[2] != -recv[3]:
                usable = all_synchronous(recv) and self._recover(what, request, memory)
                problem = mismatch_problem(recv, sig, count, what, self._me, usable)
                if not usable:
                    self.mark_broken(problem)
                    if request is not None:
                        self.abandoned.append((request, memory))
                raise DistBackendError(problem)
            if request is None and call is not None:
                try:
                    request = getattr(self.comm, call)(*args)
                except Exception as err:  # noqa: BLE001 - an MPI error, reported in the engine's terms
                    raise DistBackendError(f"{what} failed in MPI: {err}") from None
        if request is not None and not _settles(request):
            self._wait_now(request, what, small, memory, large=large)

    def _wait_now(self, request, what: str, small: int | None, memory, data=None, data_memory=None,
                  large: bool = False) -> None:
        """``data``: the data request started beside the signature exchange ``request`` waits
        for, abandoned with it if the wait fails. ``large``: ``wait_requests``'s (a synchronous
        all_reduce of 1 MB or more)."""
        try:
            wait_requests([request], self, time.monotonic() + self.timeout_seconds, what, None,
                          COLLECTIVE_SPIN_SECONDS, small, large)
        except DistBackendError:
            self.abandoned.append((request, memory))
            if data is not None:
                self.abandoned.append((data, data_memory))
            raise

    # -- collectives ----------------------------------------------------------------------

    def allreduce(self, tensor, op):
        self._start("all_reduce")
        check_op_for_dtype(op, tensor.dtype)
        staged = for_reduction(tensor, expanded=op != RedOpType.AVG)
        args = (self.MPI.IN_PLACE, self._typed(staged), mpi_op(self.MPI, op, tensor.dtype))
        return self._job("Iallreduce", args, "all_reduce", self._averaged(staged, op), [tensor], (staged,),
                         signature("all_reduce", tensor.dtype, op), tensor.numel())

    def broadcast(self, tensor, root):
        self._start("broadcast")
        staged = for_transfer(tensor, expanded=True)
        finish = staged.writeback if self.rank != root and staged.staging is not None else None
        return self._job("Ibcast", (self._bytes(staged),), "broadcast", finish, [tensor], (staged,),
                         signature("broadcast", tensor.dtype, None, root), tensor.numel(), root=root)

    def reduce(self, tensor, root, op):
        self._start("reduce")
        check_op_for_dtype(op, tensor.dtype)
        staged = for_reduction(tensor, expanded=op != RedOpType.AVG)
        buf = self._typed(staged)
        mop = mpi_op(self.MPI, op, tensor.dtype)
        mine = self.rank == root
        args = (self.MPI.IN_PLACE, buf, mop) if mine else (buf, None, mop)
        finish = self._averaged(staged, op) if mine else None
        return self._job("Ireduce", args, "reduce", finish, [tensor], (staged,),
                         signature("reduce", tensor.dtype, op, root), tensor.numel(), root=root)

    def allgather(self, output, tensor):
        self._start("all_gather")
        src, dst = for_transfer(tensor), for_transfer(output)
        return self._job("Iallgather", (self._bytes(src), self._bytes(dst)), "all_gather", dst.writeback, [output],
                         (src, dst), signature("all_gather", tensor.dtype), tensor.numel())

    def gather(self, output, tensor, root):
        self._start("gather")
        src = for_transfer(tensor)
        dst = for_transfer(output) if self.rank == root else None
        args = (self._bytes(src), self._bytes(dst) if dst is not None else None)
        finish = dst.writeback if dst is not None else None
        return self._job("Igather", args, "gather", finish, [output], (src, dst),
                         signature("gather", tensor.dtype, None, root), tensor.numel(), root=root)

    def scatter(self, output, inputs, root):
        self._start("scatter")
        dst = for_transfer(output, expanded=True)
        src = for_transfer(inputs) if self.rank == root else None
        sendbuf = self._bytes(src) if src is not None else None
        return self._job("Iscatter", (sendbuf, self._bytes(dst)), "scatter", dst.writeback, [output], (src, dst),
                         signature("scatter", output.dtype, None, root), output.numel(), root=root)

    def reduce_scatter(self, output, inputs, op):
        self._start("reduce_scatter")
        check_op_for_dtype(op, output.dtype)
        src, dst = for_reduction(inputs), for_reduction(output)
        args = (self._typed(src), self._typed(dst), mpi_op(self.MPI, op, output.dtype))
        return self._job("Ireduce_scatter_block", args, "reduce_scatter", self._averaged(dst, op), [output],
                         (src, dst), signature("reduce_scatter", output.dtype, op), output.numel())

    def alltoall(self, output, tensor, output_splits, input_splits):
        """``output_splits``/``input_splits``: elements exchanged with each rank, in rank order."""
        self._start("all_to_all")
        src, dst = for_transfer(tensor), for_transfer(output, expanded=True)
        item = tensor.element_size()

        def layout(splits):
            counts = [n * item for n in splits]
            displs = list(itertools.accumulate(counts[:-1], initial=0))
            return counts, displs

        args = (
            [src.buffer(self.MPI), layout(input_splits), self.MPI.BYTE],
            [dst.buffer(self.MPI), layout(output_splits), self.MPI.BYTE],
        )
        return self._job("Ialltoallv", args, "all_to_all", dst.writeback, [output], (src, dst),
                         signature("all_to_all", tensor.dtype))

    def send(self, tensor, peer, tag):
        self._start("send")
        src = for_transfer(tensor)
        request = self.comm.Isend(self._owned_bytes(src), dest=peer, tag=tag)
        return self._work([request], "send", None, [tensor])

    def recv(self, tensor, peer, tag):
        self._start("recv")
        dst = for_transfer(tensor, expanded=True)
        status = self.MPI.Status()
        source = self.MPI.ANY_SOURCE if peer is None else peer
        request = self.comm.Irecv(self._owned_bytes(dst), source=source, tag=tag)
        return RecvWork(self, [request], "recv", dst.writeback, [tensor], status)

    def barrier(self):
        self._start("barrier")
        return self._job("Ibarrier", (), "barrier", sig=self._BARRIER)

    def completed(self, outputs=None):
        return CompletedWork(self, outputs)

    def shutdown(self) -> None:
        comm, self.comm = self.comm, None
        if comm is not None and comm != self.MPI.COMM_WORLD and self.broken is None:
            try:
                comm.Free()
            except Exception:
                pass
