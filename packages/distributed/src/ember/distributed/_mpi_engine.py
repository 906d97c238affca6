"""The MPI engine: every collective as one MPICH call on the group's communicator.

Inputs arrive already checked and shaped by ``_collectives``: flat contiguous outputs where MPI
needs one, group-local ranks. Each method stages its tensors (``_buffers``) and returns a
``CollectiveWork`` around its nonblocking MPI call (``Iallreduce``, ...), started at once in the
calling thread: a synchronous call polls it there, an ``async_op`` one is waited on by the
group's worker thread (``_work`` says why); point-to-point posts ``MPI_Isend``/``MPI_Irecv`` at
once. The ``Work``'s ``finish`` copies results back.
"""

from __future__ import annotations

import numpy as np

from . import _mpi
from ._backend import Engine, RedOpType
from ._buffers import as_bytes, check_op_for_dtype, for_reduction, for_transfer, mpi_op, mpi_type
from ._errors import DistBackendError
from ._work import EXIT_GRACE, CollectiveWork, CompletedWork, Work, Worker


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
        self.global_ranks = global_ranks
        self.world = world
        self.timeout_seconds = timeout_seconds
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.broken: str | None = None
        self._worker: Worker | None = None

    # -- fault handling (called by the wait loop) -----------------------------------------

    def health_problem(self, now: float, deadline: float, what: str) -> str | None:
        if self.broken is not None:
            return self.broken
        world_broken = self.world.health.broken
        if world_broken is not None:
            return world_broken
        me = self.global_ranks[self.rank]
        hit = self.world.health.first_exit_among(r for r in self.global_ranks if r != me)
        if hit is not None and now - hit[1] > EXIT_GRACE:
            how = "left the process group" if hit[2] else "died (killed or crashed)"
            return (f"{what} failed on rank {me}: rank {hit[0]} {how} while this rank waited for it; "
                    "the process group is no longer usable")
        if now > deadline:
            return (f"{what} timed out on rank {me} after {self.timeout_seconds:g}s: a peer never joined "
                    "this operation; the process group is no longer usable")
        return None

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

    def _job(self, call: str, args: tuple, what: str, finish=None, outputs=None, **kwargs) -> Work:
        """Starts the nonblocking collective ``comm.<call>(*args)`` (``Iallreduce``, ...) now, in
        this thread: every rank starts a communicator's collectives in program order and in
        the same form, whatever thread later waits on them (``_work`` says why)."""
        try:
            request = getattr(self.comm, call)(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - an MPI error, reported in the engine's terms
            raise DistBackendError(f"{what} failed in MPI: {err}") from None
        return CollectiveWork(self, request, what, finish, outputs)

    # -- collectives ----------------------------------------------------------------------

    def allreduce(self, tensor, op):
        self._start("all_reduce")
        check_op_for_dtype(op, tensor.dtype)
        staged = for_reduction(tensor)
        array, size = staged.array, self.size
        args = (self.MPI.IN_PLACE, [array, mpi_type(self.MPI, array)], mpi_op(self.MPI, op, tensor.dtype))

        def finish():
            if op == RedOpType.AVG:
                np.divide(array, size, out=array)
            staged.writeback()

        return self._job("Iallreduce", args, "all_reduce", finish, [tensor])

    def broadcast(self, tensor, root):
        self._start("broadcast")
        staged = for_transfer(tensor)
        finish = staged.writeback if self.rank != root else None
        return self._job("Ibcast", ([as_bytes(staged.array), self.MPI.BYTE],), "broadcast", finish, [tensor],
                         root=root)

    def reduce(self, tensor, root, op):
        self._start("reduce")
        check_op_for_dtype(op, tensor.dtype)
        staged = for_reduction(tensor)
        array = staged.array
        buf = [array, mpi_type(self.MPI, array)]
        mop = mpi_op(self.MPI, op, tensor.dtype)
        args = (self.MPI.IN_PLACE, buf, mop) if self.rank == root else (buf, None, mop)

        def finish():
            if self.rank == root:
                if op == RedOpType.AVG:
                    np.divide(array, self.size, out=array)
                staged.writeback()

        return self._job("Ireduce", args, "reduce", finish, [tensor], root=root)

    def allgather(self, output, tensor):
        self._start("all_gather")
        src, dst = for_transfer(tensor), for_transfer(output)
        args = ([as_bytes(src.array), self.MPI.BYTE], [as_bytes(dst.array), self.MPI.BYTE])
        return self._job("Iallgather", args, "all_gather", dst.writeback, [output])

    def gather(self, output, tensor, root):
        self._start("gather")
        src = for_transfer(tensor)
        dst = for_transfer(output) if self.rank == root else None
        recvbuf = [as_bytes(dst.array), self.MPI.BYTE] if dst is not None else None
        args = ([as_bytes(src.array), self.MPI.BYTE], recvbuf)
        return self._job("Igather", args, "gather", dst.writeback if dst is not None else None, [output], root=root)

    def scatter(self, output, inputs, root):
        self._start("scatter")
        dst = for_transfer(output)
        sendbuf = None
        if self.rank == root:
            sendbuf = [as_bytes(for_transfer(inputs).array), self.MPI.BYTE]
        args = (sendbuf, [as_bytes(dst.array), self.MPI.BYTE])
        return self._job("Iscatter", args, "scatter", dst.writeback, [output], root=root)

    def reduce_scatter(self, output, inputs, op):
        self._start("reduce_scatter")
        check_op_for_dtype(op, output.dtype)
        src, dst = for_reduction(inputs), for_reduction(output)
        mop = mpi_op(self.MPI, op, output.dtype)
        args = ([src.array, mpi_type(self.MPI, src.array)], [dst.array, mpi_type(self.MPI, dst.array)], mop)

        def finish():
            if op == RedOpType.AVG:
                np.divide(dst.array, self.size, out=dst.array)
            dst.writeback()

        return self._job("Ireduce_scatter_block", args, "reduce_scatter", finish, [output])

    def alltoall(self, output, tensor, output_splits, input_splits):
        """``output_splits``/``input_splits``: elements exchanged with each rank, in rank order."""
        self._start("all_to_all")
        src, dst = for_transfer(tensor), for_transfer(output)
        item = tensor.element_size()

        def layout(splits):
            counts = [n * item for n in splits]
            displs = np.cumsum([0] + counts[:-1]).tolist()
            return counts, displs

        args = (
            [as_bytes(src.array), layout(input_splits), self.MPI.BYTE],
            [as_bytes(dst.array), layout(output_splits), self.MPI.BYTE],
        )
        return self._job("Ialltoallv", args, "all_to_all", dst.writeback, [output])

    def send(self, tensor, peer, tag):
        self._start("send")
        src = for_transfer(tensor)
        request = self.comm.Isend([as_bytes(src.array), self.MPI.BYTE], dest=peer, tag=tag)
        return self._work([request], "send", None, [tensor])

    def recv(self, tensor, peer, tag):
        self._start("recv")
        dst = for_transfer(tensor)
        status = self.MPI.Status()
        source = self.MPI.ANY_SOURCE if peer is None else peer
        request = self.comm.Irecv([as_bytes(dst.array), self.MPI.BYTE], source=source, tag=tag)
        return RecvWork(self, [request], "recv", dst.writeback, [tensor], status)

    def barrier(self):
        self._start("barrier")
        return self._job("Ibarrier", (), "barrier")

    def completed(self, outputs=None):
        return CompletedWork(self, outputs)

    def shutdown(self) -> None:
        comm = self.comm
        self.comm = None
        if comm is not None and comm != self.MPI.COMM_WORLD and self.broken is None:
            try:
                comm.Free()
            except Exception:
                pass
