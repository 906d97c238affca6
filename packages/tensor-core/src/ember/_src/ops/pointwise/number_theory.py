"""Integer and sign functions: ``gcd``, ``lcm`` (one native kernel each, ``_C.gcd_``/``_C.lcm_``,
over PyTorch's promoted integer dtype) and ``heaviside`` (composed with ``where``).

gcd and lcm have no derivative (integer results); heaviside is not differentiable in PyTorch either,
so it is computed without recording history.
"""

from __future__ import annotations

from ... import dtypes, grad_mode
from ..._native import _C
from ...device import META
from ...dispatch import define
from ...optable import declare
from ...shapes import broadcast_shapes
from ...tensor import Tensor
from .._common import check_same_device, convert, empty, type_name, write_out
from .._common import check_write as _check_write
from . import elementwise
from .fused import check_inplace

_INTEGRAL = (dtypes.uint8, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64)


def _check_tensor(x, fn: str, arg: str, pos: int) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be Tensor, not {type(x).__name__}")


def _integral_meta(name: str):
    def meta(self, other):
        _check_tensor(self, name, "input", 1)
        _check_tensor(other, name, "other", 2)
        check_same_device(self, other)
        dtype = dtypes.result_type_of(self, other)
        if dtype not in _INTEGRAL:
            raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{type_name(dtype)}'")
        return empty(broadcast_shapes(self._shape, other._shape), dtype, META)

    return meta


def _declare_integral(name: str):
    meta = _integral_meta(name)
    op = define(f"{name}(Tensor self, Tensor other) -> Tensor", ("pointwise",), meta)
    op.kernels["meta"] = meta

    @op.kernel("cpu")
    def cpu(self, other):
        result = meta(self, other)
        out = empty(result._shape, result.dtype, self._device)
        getattr(_C, f"{name}_")(out, convert(self, result.dtype), convert(other, result.dtype))
        return out

    inplace = define(f"{name}_(Tensor(a!) self, Tensor other) -> Tensor(a!)", ("pointwise", "inplace"))

    @inplace.kernel("cpu")
    @inplace.kernel("meta")
    def inplace_kernel(self, other):
        _check_write(self, (other,))
        result = meta(self, other)
        check_inplace(self, result._shape, result.dtype)
        if self._device is not META:
            if result.dtype is self.dtype:
                getattr(_C, f"{name}_")(self, self, convert(other, self.dtype))
            else:  # computed in the promoted dtype, then cast into self as PyTorch does
                _C.copy_(self, cpu(self, other))
            self._bump_version()
        return self

    return op, inplace


gcd_op, gcd_inplace_op = _declare_integral("gcd")
lcm_op, lcm_inplace_op = _declare_integral("lcm")


def gcd(input: Tensor, other: Tensor, *, out=None) -> Tensor:
    """Elementwise greatest common divisor (non-negative; gcd(0, 0) = 0)."""
    return write_out(gcd_op(input, other), out)


def lcm(input: Tensor, other: Tensor, *, out=None) -> Tensor:
    """Elementwise least common multiple (non-negative; 0 when either operand is 0)."""
    return write_out(lcm_op(input, other), out)


def gcd_(input: Tensor, other: Tensor) -> Tensor:
    return gcd_inplace_op(input, other)


def lcm_(input: Tensor, other: Tensor) -> Tensor:
    return lcm_inplace_op(input, other)


def heaviside(input: Tensor, values: Tensor, *, out=None) -> Tensor:
    """0 where input < 0 (or NaN), ``values`` where input == 0, 1 where input > 0."""
    _check_tensor(input, "heaviside", "input", 1)
    _check_tensor(values, "heaviside", "values", 2)
    if input.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    if input.dtype.is_complex:
        raise NotImplementedError(f"\"heaviside_cpu\" not implemented for '{type_name(input.dtype)}'")
    with grad_mode.no_grad():
        if input.dtype is dtypes.bool:
            # bool: false -> values, true -> true (input > 0 is input itself)
            result = elementwise.where(input, input, values)
        else:
            step = convert(elementwise.gt(input, 0), input.dtype)
            result = elementwise.where(
                elementwise.eq(input, 0), values, step
            )  # NaN > 0 is false: NaN gives 0, as PyTorch
    return write_out(result, out)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
gcd                         function method
gcd_                        function method
heaviside                   function method inplace
lcm                         function method
lcm_                        function method
""")
