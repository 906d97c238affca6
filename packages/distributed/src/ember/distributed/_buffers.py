"""The memory of ember tensors as MPI buffers, and how results get back.

A contiguous tensor is handed to MPI as its memory's address and length (``MPI.buffer``: no copy,
and no NumPy array to build - that alone cost as much as a small all_reduce). Such a buffer does
not own the memory: the ``Work`` of the operation keeps its ``Staged`` tensors alive until MPI is
done with them (the worker holds an ``async_op`` work; a failed one is kept by its group, as the
peer might still write into it). Anything else goes through a contiguous
staging copy that ``writeback`` copies into the caller's tensor once the operation completed
(non-contiguous tensors). Reductions of float16/bfloat16 run in float32 (MPI has no arithmetic on
half types), rounded once at the end.
"""

from __future__ import annotations

import math

import ember
from ember._src.dispatch import sync_pending

from ._backend import RedOpType

_F16, _BF16 = ember.float16, ember.bfloat16


class Staged:
    """``target``: the contiguous tensor MPI works on; ``writeback()``: results into the original."""

    __slots__ = ("tensor", "staging", "target")

    def __init__(self, tensor, staging):
        self.tensor = tensor
        self.staging = staging
        self.target = tensor if staging is None else staging

    def buffer(self, MPI, owned: bool = False):
        """The target's bytes as an MPI buffer; ``owned``: a slice of the storage object, which
        keeps it alive as long as MPI's request holds the buffer (point-to-point: a dropped
        ``isend`` work must not free the memory under a transfer; a little slower)."""
        t = self.target
        sync_pending(t, "a collective")
        item = t.dtype.itemsize
        start, size = t._offset * item, math.prod(t._shape) * item
        if owned:
            return MPI.buffer(t._storage)[start:start + size]
        return MPI.buffer.fromaddress(t._storage.data_ptr() + start, size)

    def writeback(self) -> None:
        if self.staging is not None:
            self.tensor.copy_(self.staging)


def check_tensor(tensor, name: str = "tensor") -> None:
    if not isinstance(tensor, ember.Tensor):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type torch.Tensor\n"
                        f"             but got {type(tensor)} instead.")
    # The device is the process group's business: it picks the engine for it, or raises
    # "No backend type associated with device type ..." (``ProcessGroup.engine_for``).


def for_transfer(tensor) -> Staged:
    """For operations that move bytes without arithmetic (broadcast, gather, send...)."""
    return Staged(tensor, None if tensor.is_contiguous() else tensor.contiguous())


def for_reduction(tensor) -> Staged:
    """For reductions: float16/bfloat16 widen to float32."""
    dtype = tensor.dtype
    if dtype is _F16 or dtype is _BF16:
        return Staged(tensor, tensor.to(ember.float32).contiguous())
    return for_transfer(tensor)


def divide(staged: Staged, size: int) -> None:
    """AVG: the sum divided by the group size, in place (outside autograd, as MPI's write was)."""
    with ember.no_grad():
        staged.target.div_(size)


_VALID: set = set()  # (op, dtype) pairs already checked


def check_op_for_dtype(op: RedOpType, dtype) -> None:
    """Rejects what MPI (and gloo) cannot reduce, with gloo's error types."""
    if (op, dtype) in _VALID:
        return
    if op in (RedOpType.PREMUL_SUM, RedOpType.UNUSED):
        raise ValueError(f"ReduceOp.{op.name} is not supported by the MPI engine")
    if dtype.is_complex and op not in (RedOpType.SUM, RedOpType.AVG):
        raise ValueError(f"all_reduce does not support RedOpType.{op.name} on complex tensors")
    if op in (RedOpType.BAND, RedOpType.BOR, RedOpType.BXOR) and dtype.is_floating_point:
        raise RuntimeError(f"Cannot use ReduceOp.{op.name} with non-integral dtype")
    if op == RedOpType.AVG and not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f"result type Float can't be cast to the desired output type {dtype}")
    _VALID.add((op, dtype))


_OPS: dict = {}  # (op, dtype) -> MPI operation
_TYPES: dict = {}  # dtype -> MPI datatype


def _tables(MPI) -> None:
    logical = {
        RedOpType.SUM: MPI.LOR, RedOpType.MAX: MPI.LOR, RedOpType.BOR: MPI.LOR, RedOpType.AVG: MPI.LOR,
        RedOpType.PRODUCT: MPI.LAND, RedOpType.MIN: MPI.LAND, RedOpType.BAND: MPI.LAND,
        RedOpType.BXOR: MPI.LXOR,
    }
    numeric = {
        RedOpType.SUM: MPI.SUM, RedOpType.AVG: MPI.SUM, RedOpType.PRODUCT: MPI.PROD,
        RedOpType.MIN: MPI.MIN, RedOpType.MAX: MPI.MAX, RedOpType.BAND: MPI.BAND,
        RedOpType.BOR: MPI.BOR, RedOpType.BXOR: MPI.BXOR,
    }
    _TYPES.update({
        ember.bool: MPI.C_BOOL, ember.uint8: MPI.UINT8_T, ember.int8: MPI.INT8_T, ember.int16: MPI.INT16_T,
        ember.int32: MPI.INT32_T, ember.int64: MPI.INT64_T, ember.float32: MPI.FLOAT,
        ember.float64: MPI.DOUBLE, ember.complex64: MPI.C_FLOAT_COMPLEX,
        ember.complex128: MPI.C_DOUBLE_COMPLEX,
        # half types reduce in float32 (``for_reduction``), but their operations are numeric
        _F16: None, _BF16: None,
    })
    for dtype in _TYPES:
        for op, mop in (logical if dtype is ember.bool else numeric).items():
            _OPS[(op, dtype)] = mop


def mpi_op(MPI, op: RedOpType, dtype):
    """The MPI operation for ``op`` on ``dtype`` (bool reduces logically, as PyTorch does)."""
    if not _OPS:
        _tables(MPI)
    return _OPS[(op, dtype)]


def mpi_type(MPI, dtype):
    """The MPI datatype MPI reduces ``dtype`` as."""
    if not _TYPES:
        _tables(MPI)
    found = _TYPES.get(dtype)
    if found is None:
        raise RuntimeError(f"Invalid scalar type: the MPI engine cannot reduce {dtype}")
    return found
