"""The NCCL engine: the collectives of a process group on CUDA tensors, through ``libnccl``.

One communicator per process group, made on the group's first CUDA operation (as PyTorch does
lazily): rank 0 of the group makes NCCL's unique id and publishes it in the group's store, the
others read it there, and every rank joins with ``ncclCommInitRankConfig`` in non-blocking mode
(``_nccl_comm``). Operations run on the communicator's own side stream, which first waits for
the caller's current stream, so communication overlaps later compute on the current stream (a
DDP bucket's all-reduce beside backward); each returns an ``NCCLWork`` (``_nccl_work``) whose
wait makes the current stream wait in turn. Tensors touched on the side stream are recorded
there for the caching allocator, so memory freed by the caller is not reused under the kernel.
"""

from __future__ import annotations

import ctypes

import ember

from . import _nccl_lib as N
from ._backend import Engine, RedOpType
from ._errors import DistBackendError
from ._nccl_comm import Communicator
from ._nccl_work import NCCLWork, blocking_wait_requested

_REDUCE_TYPES = {
    ember.int8: N.INT8, ember.uint8: N.UINT8, ember.int32: N.INT32, ember.int64: N.INT64,
    ember.float16: N.FLOAT16, ember.float32: N.FLOAT32, ember.float64: N.FLOAT64, ember.bfloat16: N.BFLOAT16,
    ember.bool: N.UINT8, ember.complex64: N.FLOAT32, ember.complex128: N.FLOAT64,
}
for _name, _code in (("uint32", N.UINT32), ("uint64", N.UINT64)):
    if hasattr(ember, _name):
        _REDUCE_TYPES[getattr(ember, _name)] = _code
_OPS = {RedOpType.SUM: N.SUM, RedOpType.PRODUCT: N.PROD, RedOpType.MIN: N.MIN, RedOpType.MAX: N.MAX,
        RedOpType.AVG: N.AVG}
# NCCL has no logical operations: on bools (bytes 0/1) "or" is max and "and" is min, as PyTorch maps them.
_BOOL_OPS = {RedOpType.SUM: N.MAX, RedOpType.AVG: N.MAX, RedOpType.MAX: N.MAX, RedOpType.PRODUCT: N.MIN,
             RedOpType.MIN: N.MIN}


_OP_CACHE: dict = {}  # (int(op), dtype) -> NCCL op, for the ops that need no per-call scalar


def _red_type(dtype) -> int:
    code = _REDUCE_TYPES.get(dtype)
    if code is None:
        raise TypeError(f"Input tensor data type is not supported for NCCL process group: {dtype}")
    return code


def _count(tensor) -> int:
    return tensor.numel() * (2 if tensor.dtype.is_complex else 1)


class _Staged:
    """A contiguous tensor NCCL can address; ``writeback`` copies results into the original."""

    __slots__ = ("tensor", "buf", "ptr")

    def __init__(self, tensor):
        self.tensor = tensor
        self.buf = tensor if tensor.is_contiguous() else tensor.contiguous()
        self.ptr = self.buf.data_ptr()  # read once: data_ptr() costs microseconds in Python

    def writeback(self) -> None:
        if self.buf is not self.tensor:
            self.tensor.copy_(self.buf)


class NCCLEngine(Engine):
    """The ``nccl`` engine of one process group (``group``: its ``ProcessGroup``)."""

    name = "nccl"

    def __init__(self, group):
        self._mpi = group._engine  # the group's MPI engine: liveness and timeouts of the world
        self.rank = group.rank()
        self.size = group.size()
        self.global_ranks = list(group._ranks)
        self.global_rank = self.global_ranks[self.rank]
        self.timeout_seconds = self._mpi.timeout_seconds
        self._store = group.store
        self._comm: Communicator | None = None
        self.error: str | None = None
        self.blocking_wait = blocking_wait_requested()
        # ``ember.cuda.<name>`` resolves through the plugin on every access: bind the hot ones once.
        cuda = ember.cuda
        self._current_stream, self._record_stream, self._event = cuda.current_stream, cuda.record_stream, cuda.Event

    # -- the communicator ----------------------------------------------------------------

    @property
    def device_index(self) -> int:
        return self._comm.device_index if self._comm is not None else ember.cuda.current_device()

    def _communicator(self, tensor) -> Communicator:
        if self.error is not None:
            raise DistBackendError(f"the NCCL process group is broken by an earlier error: {self.error}")
        index = tensor.device.index if tensor.device.index is not None else ember.cuda.current_device()
        if self._comm is None:
            self._comm = Communicator(self, index)
        elif self._comm.device_index != index:
            raise ValueError(
                f"this NCCL process group runs on cuda:{self._comm.device_index}; got a tensor on cuda:{index} "
                "(one process drives one GPU per group: move the tensor or make a group for that device)"
            )
        return self._comm

    def async_error(self) -> str | None:
        return self._comm.async_error() if self._comm is not None else None

    def peer_problem(self, now: float, deadline: float, what: str) -> str | None:
        problem = self._mpi.health_problem(now, deadline, what)
        if problem is not None:
            problem = problem.replace("a peer never joined this operation", "a peer never joined this NCCL operation")
        return problem

    def abort(self, problem: str) -> None:
        if self.error is None:
            self.error = problem
        if self._comm is not None:
            self._comm.abort()

    # -- launching ------------------------------------------------------------------------

    def _launch(self, what: str, tensors, issue, outputs, finish=None, keep=(), source=None) -> NCCLWork:
        """Runs ``issue(comm, stream_handle)`` on the side stream after the current stream's work."""
        for t in tensors:
            if t.device.type != "cuda":
                raise ValueError(f"{what}: every tensor must be a CUDA tensor on the group's device, got {t.device}")
        comm = self._communicator(tensors[0])
        side = comm.stream
        comm.ready.record(self._current_stream(comm.device_index))
        side.wait_event(comm.ready)  # the wait captures the event now: one event serves every call
        comm.run(what, lambda: issue(comm.handle, side.cuda_stream))
        for t in tensors:
            self._record_stream(t, side)
        event = comm.events.pop() if comm.events else self._event()
        event.record(side)
        work = NCCLWork(self, event, what, outputs, keep, finish, source)
        comm.watchdog.add(work)
        return work

    def _op(self, op, dtype):
        """The NCCL operation for ``op`` on ``dtype`` (PREMUL_SUM makes one for this call).

        Checked once per (op, dtype) and remembered: comparisons of IntEnum members cost
        microseconds each, which shows in the fixed cost of every small collective."""
        key = (int(op), dtype)
        hit = _OP_CACHE.get(key)
        if hit is not None:
            return hit, None
        nccl_op, factor = self._check_op(op, dtype)
        if nccl_op != "premul":
            _OP_CACHE[key] = nccl_op
        return nccl_op, factor

    @staticmethod
    def _check_op(op, dtype):
        if dtype == ember.bool and op in _BOOL_OPS:
            return _BOOL_OPS[op], None
        if op in (RedOpType.BAND, RedOpType.BOR, RedOpType.BXOR):
            raise ValueError(f"Cannot use ReduceOp.{RedOpType(op).name} with NCCL")
        if dtype.is_complex and op not in (RedOpType.SUM, RedOpType.AVG, RedOpType.PREMUL_SUM):
            raise ValueError(f"all_reduce does not support RedOpType.{RedOpType(op).name} on complex tensors")
        if op == RedOpType.AVG and not (dtype.is_floating_point or dtype.is_complex):
            raise RuntimeError(f"result type Float can't be cast to the desired output type {dtype}")
        if op == RedOpType.PREMUL_SUM:
            factor = getattr(op, "factor", None)
            if factor is None:
                raise ValueError("ReduceOp.PREMUL_SUM needs a factor: use ember.distributed._make_nccl_premul_sum")
            return "premul", factor
        if op not in _OPS:
            raise ValueError(f"Unsupported reduce op for NCCL: {op!r}")
        return _OPS[op], None

    def _reduce_call(self, what, tensor, op, call):
        """Shared body of all_reduce / reduce / reduce_scatter: ``call(comm, stream, nccl_op, dtype)``."""
        code = _red_type(tensor.dtype)
        nccl_op, factor = self._op(op, tensor.dtype)
        keep = []
        if nccl_op == "premul":
            scalar = factor if isinstance(factor, ember.Tensor) else ember.tensor(float(factor))
            real = {ember.complex64: ember.float32, ember.complex128: ember.float64}.get(tensor.dtype, tensor.dtype)
            scalar = scalar.to(device=tensor.device, dtype=real).reshape(1).contiguous()
            keep.append(scalar)

            def issue(comm, stream):
                made = ctypes.c_int(0)
                N.check(N.lib().ncclRedOpCreatePreMulSum(ctypes.byref(made), scalar.data_ptr(), code,
                                                         N.SCALAR_DEVICE, comm), "ncclRedOpCreatePreMulSum", comm)
                try:
                    return call(comm, stream, made.value, code)
                finally:
                    N.lib().ncclRedOpDestroy(made.value, comm)

            return issue, keep
        return (lambda comm, stream: call(comm, stream, nccl_op, code)), keep

    # -- collectives ----------------------------------------------------------------------

    def allreduce(self, tensor, op):
        s = _Staged(tensor)
        count = _count(tensor)
        issue, keep = self._reduce_call("all_reduce", tensor, op, lambda comm, stream, o, code: N.lib().ncclAllReduce(
            s.ptr, s.ptr, count, code, o, comm, stream))
        return self._launch("all_reduce", [s.buf], issue, [tensor], s.writeback, keep + [s.buf])

    def broadcast(self, tensor, root):
        s = _Staged(tensor)
        nbytes = tensor.numel() * tensor.element_size()
        issue = lambda comm, stream: N.lib().ncclBroadcast(s.ptr, s.ptr, nbytes, N.UINT8, root, comm, stream)
        return self._launch("broadcast", [s.buf], issue, [tensor], s.writeback, [s.buf])

    def reduce(self, tensor, root, op):
        s = _Staged(tensor)
        count = _count(tensor)
        issue, keep = self._reduce_call("reduce", tensor, op, lambda comm, stream, o, code: N.lib().ncclReduce(
            s.ptr, s.ptr, count, code, o, root, comm, stream))
        finish = s.writeback if self.rank == root else None
        return self._launch("reduce", [s.buf], issue, [tensor], finish, keep + [s.buf])

    def allgather(self, output, tensor):
        src, dst = _Staged(tensor), _Staged(output)
        nbytes = tensor.numel() * tensor.element_size()
        issue = lambda comm, stream: N.lib().ncclAllGather(src.ptr, dst.ptr, nbytes, N.UINT8, comm, stream)
        return self._launch("all_gather", [src.buf, dst.buf], issue, [output], dst.writeback, [src.buf, dst.buf])

    def reduce_scatter(self, output, inputs, op):
        src, dst = _Staged(inputs), _Staged(output)
        count = _count(output)
        issue, keep = self._reduce_call("reduce_scatter", output, op, lambda comm, stream, o, code: (
            N.lib().ncclReduceScatter(src.ptr, dst.ptr, count, code, o, comm, stream)))
        return self._launch("reduce_scatter", [src.buf, dst.buf], issue, [output], dst.writeback,
                            keep + [src.buf, dst.buf])

    def _grouped(self, what, tensors, pairs, outputs, finish=None, source=None):
        """``pairs``: (is_send, pointer, nbytes, peer) issued between ncclGroupStart/End."""
        def issue(comm, stream):
            lib = N.lib()
            N.check(lib.ncclGroupStart(), "ncclGroupStart")
            try:
                for is_send, ptr, nbytes, peer in pairs:
                    if nbytes == 0:
                        continue
                    fn = lib.ncclSend if is_send else lib.ncclRecv
                    N.check(fn(ptr, nbytes, N.UINT8, peer, comm, stream), what, comm)
            finally:
                result = lib.ncclGroupEnd()
            return result

        return self._launch(what, tensors, issue, outputs, finish, tensors, source)

    def gather(self, output, tensor, root):
        src = _Staged(tensor)
        nbytes = tensor.numel() * tensor.element_size()
        pairs = [(True, src.ptr, nbytes, root)]
        tensors = [src.buf]
        finish = None
        if self.rank == root:
            dst = _Staged(output)
            tensors.append(dst.buf)
            pairs += [(False, dst.ptr + r * nbytes, nbytes, r) for r in range(self.size)]
            finish = dst.writeback
        return self._grouped("gather", tensors, pairs, [output], finish)

    def scatter(self, output, inputs, root):
        dst = _Staged(output)
        nbytes = output.numel() * output.element_size()
        pairs = [(False, dst.ptr, nbytes, root)]
        tensors = [dst.buf]
        if self.rank == root:
            src = _Staged(inputs)
            tensors.append(src.buf)
            pairs = [(True, src.ptr + r * nbytes, nbytes, r) for r in range(self.size)] + pairs
        return self._grouped("scatter", tensors, pairs, [output], dst.writeback)

    def alltoall(self, output, tensor, output_splits, input_splits):
        src, dst = _Staged(tensor), _Staged(output)
        item = tensor.element_size()
        pairs, offset_in, offset_out = [], 0, 0
        for peer in range(self.size):
            pairs.append((True, src.ptr + offset_in * item, input_splits[peer] * item, peer))
            pairs.append((False, dst.ptr + offset_out * item, output_splits[peer] * item, peer))
            offset_in += input_splits[peer]
            offset_out += output_splits[peer]
        return self._grouped("all_to_all", [src.buf, dst.buf], pairs, [output], dst.writeback)

    def send(self, tensor, peer, tag):
        s = _Staged(tensor)
        pairs = [(True, s.ptr, tensor.numel() * tensor.element_size(), peer)]
        return self._grouped("send", [s.buf], pairs, [tensor])

    def recv(self, tensor, peer, tag):
        if peer is None:
            raise RuntimeError("ProcessGroupNCCL does not support recv from any source: give src")
        s = _Staged(tensor)
        pairs = [(False, s.ptr, tensor.numel() * tensor.element_size(), peer)]
        return self._grouped("recv", [s.buf], pairs, [tensor], s.writeback, self.global_ranks[peer])

    def batch_p2p(self, ops):
        """``ops``: (is_send, tensor, group peer); one NCCL group, one ``Work`` per op (sharing its event)."""
        staged = [(_Staged(t), is_send, peer, t) for is_send, t, peer in ops]
        pairs = [(is_send, s.ptr, t.numel() * t.element_size(), peer) for s, is_send, peer, t in staged]

        def finish():
            for s, is_send, _, _ in staged:
                if not is_send:
                    s.writeback()

        work = self._grouped("batch_isend_irecv", [s.buf for s, *_ in staged], pairs, [t for *_, t in staged],
                             finish)
        return work

    def barrier(self, device_index=None):
        """An all-reduce of one element on the group's device; the host waits for it, as PyTorch."""
        index = device_index if device_index is not None else (
            self._comm.device_index if self._comm is not None else ember.cuda.current_device())
        flag = ember.ones(1, device=f"cuda:{index}")
        work = self.allreduce(flag, RedOpType.SUM)
        work.wait(timeout=self.timeout_seconds)
        return work

    def shutdown(self) -> None:
        comm, self._comm = self._comm, None
        if comm is not None:
            comm.destroy(self.error is not None)

    def bind(self, device) -> None:
        """Makes the communicator on ``device`` now (``init_process_group(device_id=...)``)."""
        self._communicator(ember.empty(0, device=device))
