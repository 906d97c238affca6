"""The memory of ember tensors as MPI buffers, and how results get back.

A contiguous tensor is handed to MPI as its memory's address and length (``MPI.buffer``: no copy,
and no NumPy array to build - that alone cost as much as a small all_reduce). Such a buffer does
not own the memory: the ``Work`` of the operation keeps its ``Staged`` tensors alive until MPI is
done with them (the worker holds an ``async_op`` work; a failed one is kept by its group, as the
peer might still write into it). Anything else goes through a contiguous
staging copy that ``writeback`` copies into the caller's tensor once the operation completed
(non-contiguous tensors). Reductions of float16/bfloat16 run in float32 (MPI has no arithmetic on
half types), rounded once at the end.

Large buffers go to MPI on transparent huge pages (``huge_pages``): MPICH moves a large message
between processes of one host with the kernel's cross-process copy, which walks and pins the
buffer page by page - measured 2x slower on 4 KB pages than on 2 MB ones at 16 MB. ember's
allocator puts blocks under 32 MiB on 4 KB pages (NumPy's arrays from 4 MB are huge), so the
first time a storage of several MB goes to MPI its whole 2 MB extents are collapsed into huge
pages (``MADV_COLLAPSE``, Linux 6.1+: a copy of the memory, once; the data and addresses stay).
"""

from __future__ import annotations

import ctypes
import math
import sys

import ember
from ember._src.dispatch import sync_pending
from ember._src.ops._common import type_name

from ._backend import RedOpType

_F16, _BF16 = ember.float16, ember.bfloat16


_HUGE = 2 << 20
HUGE_FROM = 4 << 20  # smaller messages gain nothing measurable (1 MB: the same time either way)
_MADV_COLLAPSE = 25
_collapsed: set = set()  # (address, length) of the extents already handed to the kernel
_madvise: list = []  # libc's madvise once looked up; [None] where there is none


def huge_pages(address: int, nbytes: int) -> None:
    """Asks the kernel once per extent to back the whole 2 MB pages of ``address``..+``nbytes``
    with huge pages (best effort: an error - no THP, an old kernel, pinned pages - leaves the
    memory as it was). Called with a storage's whole memory, so a storage is collapsed once."""
    if nbytes < HUGE_FROM:
        return
    start = (address + _HUGE - 1) & ~(_HUGE - 1)
    end = (address + nbytes) & ~(_HUGE - 1)
    key = (start, end)
    if end <= start or key in _collapsed:
        return
    if len(_collapsed) > 4096:  # addresses get reused by other storages: forget old ones
        _collapsed.clear()
    _collapsed.add(key)
    if not _madvise:
        fn = None
        if sys.platform.startswith("linux"):
            try:
                fn = ctypes.CDLL(None, use_errno=True).madvise
                fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
            except (OSError, AttributeError):
                fn = None
        _madvise.append(fn)
    fn = _madvise[0]
    if fn is not None:
        fn(start, end - start, _MADV_COLLAPSE)


def storage_huge_pages(storage) -> None:
    """``huge_pages`` over a CPU storage's whole memory (once per storage)."""
    nbytes = storage.nbytes()
    if nbytes >= HUGE_FROM:
        huge_pages(storage.data_ptr(), nbytes)


class Staged:
    """``target``: the contiguous tensor MPI works on; ``writeback()``: results into the original.

    ``expanded``: where the caller's tensor repeats memory through stride-0 dimensions (``expand``),
    ``writeback`` stores the first element along each of them, so each memory location receives
    one result, as gloo leaves an expanded all_reduce, broadcast, reduce, scatter or all_to_all
    output. Without it (outputs PyTorch copies into: ``all_gather_into_tensor``,
    ``reduce_scatter_tensor``, an AVG's in-place division) the copy raises PyTorch's
    "more than one element of the written-to tensor refers to a single memory location"."""

    __slots__ = ("tensor", "staging", "target", "expanded")

    def __init__(self, tensor, staging, expanded: bool = False):
        self.tensor = tensor
        self.staging = staging
        self.target = tensor if staging is None else staging
        self.expanded = expanded

    def buffer(self, MPI, owned: bool = False):
        """The target's bytes as an MPI buffer; ``owned``: a slice of the storage object, which
        keeps it alive as long as MPI's request holds the buffer (point-to-point: a dropped
        ``isend`` work must not free the memory under a transfer; a little slower)."""
        t = self.target
        sync_pending(t, "a collective")
        item = t.dtype.itemsize
        start, size = t._offset * item, math.prod(t._shape) * item
        if size >= HUGE_FROM:
            storage_huge_pages(t._storage)
        if owned:
            return MPI.buffer(t._storage)[start:start + size]
        return MPI.buffer.fromaddress(t._storage.data_ptr() + start, size)

    def writeback(self) -> None:
        if self.staging is None:
            return
        tensor, staging = self.tensor, self.staging
        if self.expanded:
            for dim, (size, stride) in enumerate(zip(tensor._shape, tensor.stride())):
                if stride == 0 and size > 1:
                    tensor, staging = tensor.narrow(dim, 0, 1), staging.narrow(dim, 0, 1)
        tensor.copy_(staging)


def check_tensor(tensor, name: str = "tensor") -> None:
    if not isinstance(tensor, ember.Tensor):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type torch.Tensor\n"
                        f"             but got {type(tensor)} instead.")
    # The device is the process group's business: it picks the engine for it, or raises
    # "No backend type associated with device type ..." (``ProcessGroup.engine_for``).


def for_transfer(tensor, expanded: bool = False) -> Staged:
    """For operations that move bytes without arithmetic (broadcast, gather, send...)."""
    return Staged(tensor, None if tensor.is_contiguous() else tensor.contiguous(), expanded)


def for_reduction(tensor, expanded: bool = False) -> Staged:
    """For reductions: float16/bfloat16 widen to float32."""
    dtype = tensor.dtype
    if dtype is _F16 or dtype is _BF16:
        return Staged(tensor, tensor.to(ember.float32).contiguous(), expanded)
    return for_transfer(tensor, expanded)


def divide(staged: Staged, size: int) -> None:
    """AVG: the sum divided by the group size, in place (outside autograd, as MPI's write was)."""
    with ember.no_grad():
        staged.target.div_(size)


_VALID: set = set()  # (op, dtype) pairs already checked


def check_op_for_dtype(op: RedOpType, dtype) -> None:
    """Rejects what MPI (and gloo) cannot reduce, with gloo's error types."""
    if (op, dtype) in _VALID:
        return
    if op == RedOpType.PREMUL_SUM:  # NCCL's alone, as in PyTorch
        raise RuntimeError("Cannot use ReduceOp.PREMUL_SUM with Gloo (ember's MPI engine)")
    if op == RedOpType.UNUSED:
        raise ValueError(f"ReduceOp.{op.name} is not supported by the MPI engine")
    if dtype.is_complex and op not in (RedOpType.SUM, RedOpType.AVG):
        raise ValueError(f"all_reduce does not support RedOpType.{op.name} on complex tensors")
    if op in (RedOpType.BAND, RedOpType.BOR, RedOpType.BXOR) and dtype.is_floating_point:
        raise RuntimeError(f"Cannot use ReduceOp.{op.name} with non-integral dtype")
    if op == RedOpType.AVG and not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f"result type Float can't be cast to the desired output type {type_name(dtype)}")
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
