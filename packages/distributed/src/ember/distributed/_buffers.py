"""NumPy views of ember tensors that MPI can read and write, and how results get back.

A contiguous tensor whose dtype NumPy knows is handed to MPI as a zero-copy view. Anything else
goes through a contiguous staging copy that ``writeback`` copies into the caller's tensor once
the operation completed (non-contiguous tensors, bfloat16 which NumPy lacks). Reductions of
float16/bfloat16 run in float32 (MPI has no arithmetic on half types), rounded once at the end.
"""

from __future__ import annotations

import numpy as np

import ember

from ._backend import RedOpType

_HALF = (ember.float16, ember.bfloat16)


class Staged:
    """``array``: 1-D NumPy view MPI works on; ``writeback()``: results into the original."""

    __slots__ = ("tensor", "staging", "array")

    def __init__(self, tensor, staging, array):
        self.tensor = tensor
        self.staging = staging
        self.array = array

    def writeback(self) -> None:
        if self.staging is not None:
            self.tensor.copy_(self.staging)


def check_tensor(tensor, name: str = "tensor") -> None:
    if not isinstance(tensor, ember.Tensor):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type torch.Tensor\n"
                        f"             but got {type(tensor)} instead.")
    # The device is the process group's business: it picks the engine for it, or raises
    # "No backend type associated with device type ..." (``ProcessGroup.engine_for``).


def _numpy_view(contiguous) -> np.ndarray:
    if contiguous.dtype == ember.bfloat16:
        return contiguous.view(ember.int16).numpy().reshape(-1)
    return contiguous.numpy().reshape(-1)


def for_transfer(tensor) -> Staged:
    """A view for operations that move bytes without arithmetic (broadcast, gather, send...)."""
    if tensor.is_contiguous():
        return Staged(tensor, None, _numpy_view(tensor))
    staging = tensor.contiguous()
    return Staged(tensor, staging, _numpy_view(staging))


def for_reduction(tensor) -> Staged:
    """A view for reductions: float16/bfloat16 widen to float32."""
    if tensor.dtype in _HALF:
        staging = tensor.to(ember.float32).contiguous()
        return Staged(tensor, staging, staging.numpy().reshape(-1))
    return for_transfer(tensor)


def empty_like_flat(tensor, count: int):
    """A fresh contiguous tensor of ``count`` elements with ``tensor``'s dtype."""
    return ember.empty(count, dtype=tensor.dtype)


def as_bytes(array: np.ndarray) -> np.ndarray:
    return array.view(np.uint8)


def check_op_for_dtype(op: RedOpType, dtype) -> None:
    """Rejects what MPI (and gloo) cannot reduce, with gloo's error types."""
    if op in (RedOpType.PREMUL_SUM, RedOpType.UNUSED):
        raise ValueError(f"ReduceOp.{op.name} is not supported by the MPI engine")
    if dtype.is_complex and op not in (RedOpType.SUM, RedOpType.AVG):
        raise ValueError(f"all_reduce does not support RedOpType.{op.name} on complex tensors")
    if op in (RedOpType.BAND, RedOpType.BOR, RedOpType.BXOR) and dtype.is_floating_point:
        raise RuntimeError(f"Cannot use ReduceOp.{op.name} with non-integral dtype")
    if op == RedOpType.AVG and not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f"result type Float can't be cast to the desired output type {dtype}")


_OP_TABLES: dict = {}


def _op_tables(MPI) -> tuple[dict, dict, dict]:
    """(ops for bool, ops for numbers, MPI datatypes by NumPy type code), built once."""
    if not _OP_TABLES:
        _OP_TABLES["bool"] = {
            RedOpType.SUM: MPI.LOR, RedOpType.MAX: MPI.LOR, RedOpType.BOR: MPI.LOR,
            RedOpType.PRODUCT: MPI.LAND, RedOpType.MIN: MPI.LAND, RedOpType.BAND: MPI.LAND,
            RedOpType.BXOR: MPI.LXOR, RedOpType.AVG: MPI.LOR,
        }
        _OP_TABLES["number"] = {
            RedOpType.SUM: MPI.SUM, RedOpType.AVG: MPI.SUM, RedOpType.PRODUCT: MPI.PROD,
            RedOpType.MIN: MPI.MIN, RedOpType.MAX: MPI.MAX, RedOpType.BAND: MPI.BAND,
            RedOpType.BOR: MPI.BOR, RedOpType.BXOR: MPI.BXOR,
        }
        _OP_TABLES["types"] = {
            "?": MPI.C_BOOL, "B": MPI.UINT8_T, "b": MPI.INT8_T, "h": MPI.INT16_T, "i": MPI.INT32_T,
            "l": MPI.INT64_T, "q": MPI.INT64_T, "f": MPI.FLOAT, "d": MPI.DOUBLE,
            "F": MPI.C_FLOAT_COMPLEX, "D": MPI.C_DOUBLE_COMPLEX,
        }
    return _OP_TABLES["bool"], _OP_TABLES["number"], _OP_TABLES["types"]


def mpi_op(MPI, op: RedOpType, dtype):
    """The MPI operation for ``op`` on ``dtype`` (bool reduces logically, as PyTorch does)."""
    for_bool, for_numbers, _ = _op_tables(MPI)
    return (for_bool if dtype == ember.bool else for_numbers)[op]


def mpi_type(MPI, array: np.ndarray):
    return _op_tables(MPI)[2][array.dtype.char]
