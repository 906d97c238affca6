"""Closeness comparisons: isclose, allclose (composites over pointwise ops and ``all``)."""

from __future__ import annotations

from .. import dtypes as dt
from ..optable import declare
from ..tensor import Tensor
from ._common import type_name


def isclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """``|input - other| <= atol + rtol * |other|`` elementwise; equal infinities are close."""
    from . import pointwise as pw

    if not isinstance(other, Tensor):
        from .creation import scalar_tensor

        other = scalar_tensor(other, input.dtype, input.device)
    if input.dtype is not other.dtype:
        raise RuntimeError(
            f"{type_name(input.dtype)} did not match {type_name(other.dtype)}"
        )
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    close = pw.eq_op(input, other)
    if equal_nan and (input.dtype.is_floating_point or input.dtype.is_complex):
        close = pw.logical_or_op(close, pw.logical_and_op(pw.isnan(input), pw.isnan(other)))
    if input.dtype is dt.bool or (rtol == 0 and atol == 0):
        return close
    # Computed in the promoted floating type so integer inputs get a tolerance as PyTorch does.
    work = input.dtype if (input.dtype.is_floating_point or input.dtype.is_complex) else dt.get_default_dtype()
    a, b = input.to(work), other.to(work)
    diff = pw.abs(pw.sub_op(a, b))
    allowed = pw.add_op(pw.mul_op(pw.abs(b), rtol), atol)
    finite_close = pw.logical_and_op(pw.le_op(diff, allowed), pw.isfinite(diff))
    return pw.logical_or_op(close, finite_close)


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    return bool(isclose(input, other, rtol, atol, equal_nan).all().item())


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
allclose                    function method
isclose                     function method
""")
