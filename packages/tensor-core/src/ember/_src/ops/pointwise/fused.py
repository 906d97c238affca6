"""Fused pointwise updates: addcmul, addcdiv, lerp and add/sub with ``alpha``.

Optimizers are built from these; each is one native pass (csrc/cpu/fused_pointwise.cpp) and
the in-place forms write into ``self`` without temporaries when the operands already have the
result dtype. Type promotion and errors follow PyTorch: the scalar (``value``/``alpha``/``weight``)
never takes part in promotion, and it is converted to the compute type the way ATen's
``Scalar::to<T>()`` does (truncated for integers, overflow-checked for floating types). float16
and bfloat16 are computed in float32 inside the kernel and rounded once.

The public functions (``ember.addcmul`` ...) stay in pointwise.py; this module holds the ops.
"""

from __future__ import annotations

import builtins

from ... import dtypes
from ..._native import _C
from ...device import META
from ...dispatch import define
from ...shapes import broadcast_shapes
from ...tensor import Tensor
from .._common import check_meta_operands, convert, empty_pointwise, type_name
from .._common import check_write as _check_write
from . import elementwise

_NUMBER = (builtins.bool, int, float)

# ATen's C++ type names, which its dtype-mismatch messages print.
_CPP_NAMES = {
    dtypes.float32: "float", dtypes.float64: "double", dtypes.float16: "c10::Half", dtypes.bfloat16: "c10::BFloat16",
    dtypes.int64: "long int", dtypes.int32: "int", dtypes.int16: "short int", dtypes.int8: "signed char",
    dtypes.uint8: "unsigned char", dtypes.bool: "bool", dtypes.complex64: "c10::complex<float>",
    dtypes.complex128: "c10::complex<double>",
}

_ADDCDIV_INTEGER = (
    "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform a true "
    "division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + value * "
    "torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / "
    "tensor2) for float inputs. The future addcdiv behavior is just the latter implementation: (input + value "
    "* tensor1 / tensor2), for all dtypes."
)


def check_tensors(fn: str, names: tuple, args: tuple) -> None:
    for a in args:
        if not isinstance(a, Tensor):
            break
    else:
        return
    for pos, (name, a) in enumerate(zip(names, args), 1):
        if not isinstance(a, Tensor):
            raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not {type(a).__name__}")


def _opmath(dtype):
    return dtypes.float64 if dtype is dtypes.float64 else dtypes.float32


_FLOAT32_MAX = 3.4028234663852886e38


def _reject_complex_scalar(value, dtype) -> None:
    """A complex number where a real tensor takes a Scalar (addcmul's value, lerp's weight): PyTorch's
    conversion to the real type raises its overflow RuntimeError."""
    if isinstance(value, complex) and not dtype.is_complex:
        raise RuntimeError(f"value cannot be converted to type {_CPP_NAMES[_opmath(dtype)]} without overflow")


def scalar_arg(value, dtype, fn: str, name: str):
    """``value`` as the (float, int) pair the kernels take, converted to ``dtype``'s compute type."""
    if type(value) is float and dtype.is_floating_point and -_FLOAT32_MAX <= value <= _FLOAT32_MAX:
        return value, 0  # the optimizers' case, without the general checks below
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise RuntimeError(f"{fn}(): a Tensor with {value.numel()} elements cannot be converted to Scalar")
        value = value.item()
    _reject_complex_scalar(value, dtype)
    if not isinstance(value, _NUMBER):
        raise TypeError(f"{fn}(): argument '{name}' must be Number, not {type(value).__name__}")
    if dtype.is_floating_point:
        f = float(value)
        limit = dtypes.finfo(_opmath(dtype)).max
        if f == f and abs(f) != float("inf") and abs(f) > limit:
            raise RuntimeError(f"value cannot be converted to type {_CPP_NAMES[_opmath(dtype)]} without overflow")
        return f, 0
    # Integers: in range for the type (unsigned types also take -max..-1, which wrap), as c10's checks.
    info = dtypes.iinfo(dtype)
    low = -info.max if info.min == 0 and not isinstance(value, float) else info.min
    if not low <= value <= info.max:
        raise RuntimeError(f"value cannot be converted to type {dtype.name}_t without overflow")
    return 0.0, int(value)


def _shape(*tensors) -> tuple:
    first = tensors[0]._shape
    for t in tensors:
        if t._shape != first:
            return broadcast_shapes(*[t._shape for t in tensors])
    return first


def check_inplace(self: Tensor, shape: tuple, result_dtype) -> None:
    """PyTorch's checks on an in-place result: castable dtype, self's shape (the memory-overlap checks,
    check_write, come first, on real devices only)."""
    if result_dtype is not self.dtype and not dtypes.can_cast(result_dtype, self.dtype):
        raise RuntimeError(
            f"result type {type_name(result_dtype)} can't be cast to the desired output type {type_name(self.dtype)}"
        )
    if tuple(shape) != self._shape:
        raise RuntimeError(f"output with shape {list(self._shape)} doesn't match the broadcast shape {list(shape)}")


def _run(kernel, self: Tensor, operands: tuple, shape: tuple, dtype, scalars: tuple, inplace: bool):
    """Runs ``kernel(out, *operands, *scalars)`` with every operand in ``dtype``; writes into ``self``
    directly when ``inplace`` and self has that dtype, else through one result tensor."""
    if inplace and self.dtype is dtype:
        out = self
    else:
        out = empty_pointwise(shape, dtype, self._device, *operands)
    if self._device is not META:
        for t in operands:
            if t.dtype is not dtype:
                operands = [convert(t, dtype) for t in operands]
                break
        kernel(out, *operands, *scalars)
        if out is not self and inplace:
            _C.copy_(self, out)
    if inplace:
        self._bump_version()
        return self
    return out


# -- addcmul / addcdiv ---------------------------------------------------------------------------


def _addc_result(name: str, self, tensor1, tensor2, value):
    check_tensors(name, ("input", "tensor1", "tensor2"), (self, tensor1, tensor2))
    promoted = self.dtype
    if promoted is not tensor1.dtype or promoted is not tensor2.dtype or not promoted.is_floating_point:
        if name == "addcdiv" and dtypes.is_integral(tensor1.dtype, True) and dtypes.is_integral(tensor2.dtype, True):
            raise RuntimeError(_ADDCDIV_INTEGER)
        promoted = dtypes.result_type_of(self, tensor1, tensor2)
    if promoted is dtypes.bool:
        raise NotImplementedError(f"\"{name}_cpu_out\" not implemented for 'Bool'")
    if promoted.is_complex:  # the value may be complex; the composite checks it
        return _shape(self, tensor1, tensor2), promoted, None
    scalars = scalar_arg(value, promoted, name, "value")
    return _shape(self, tensor1, tensor2), promoted, scalars


def _addc_complex(name: str, self, tensor1, tensor2, value, in_place):
    """Complex operands: the composite (the native kernels are real-only), as before the fusion."""

    product = elementwise.mul(tensor1, tensor2) if name == "addcmul" else elementwise.div(tensor1, tensor2)
    result = elementwise.add(self, product, alpha=value)
    if not in_place:
        return result
    check_inplace(self, result._shape, result.dtype)
    _C.copy_(self, result)
    self._bump_version()
    return self


def _declare_addc(name: str, kernel):
    op = define(f"{name}(Tensor self, Tensor tensor1, Tensor tensor2, Scalar value=1) -> Tensor", ("pointwise",))
    inplace = define(
        f"{name}_(Tensor(a!) self, Tensor tensor1, Tensor tensor2, Scalar value=1) -> Tensor(a!)",
        ("pointwise", "inplace"),
    )
    scalar_count = 2 if name == "addcmul" else 1  # addcmul takes (float, int); addcdiv (float only)

    def call(self, tensor1, tensor2, value, in_place):
        if in_place:  # the fused kernels read and write in one pass
            _check_write(self, (tensor1, tensor2))
        shape, promoted, scalars = _addc_result(name, self, tensor1, tensor2, value)
        if scalars is None:
            return _addc_complex(name, self, tensor1, tensor2, value, in_place)
        if in_place:
            check_inplace(self, shape, promoted)
        return _run(kernel, self, (self, tensor1, tensor2), shape, promoted, scalars[:scalar_count], in_place)

    @op.kernel("cpu")
    def cpu(self, tensor1, tensor2, value=1):
        return call(self, tensor1, tensor2, value, False)

    @inplace.kernel("cpu")
    def cpu_inplace(self, tensor1, tensor2, value=1):
        return call(self, tensor1, tensor2, value, True)

    def meta(self, tensor1, tensor2, value=1):
        check_meta_operands(tensor1, tensor2)
        shape, promoted, _ = _addc_result(name, self, tensor1, tensor2, value)
        return empty_pointwise(shape, promoted, META, self, tensor1, tensor2)

    def meta_inplace(self, tensor1, tensor2, value=1):
        check_meta_operands(tensor1, tensor2)
        shape, promoted, _ = _addc_result(name, self, tensor1, tensor2, value)
        check_inplace(self, shape, promoted)
        return self

    op.meta = op.kernels["meta"] = meta
    inplace.meta = inplace.kernels["meta"] = meta_inplace
    return op, inplace


addcmul_op, addcmul_inplace_op = _declare_addc("addcmul", _C.addcmul)
addcdiv_op, addcdiv_inplace_op = _declare_addc("addcdiv", _C.addcdiv)


# -- lerp ------------------------------------------------------------------------------------------


def _lerp_result(start, end, weight):
    check_tensors("lerp", ("input", "end"), (start, end))
    if start.dtype is not end.dtype:
        raise RuntimeError(
            f"expected dtype {_CPP_NAMES[start.dtype]} for `end` but got dtype {_CPP_NAMES[end.dtype]}"
        )
    tensor_weight = isinstance(weight, Tensor)
    if tensor_weight and weight.ndim > 0 and weight.dtype is not start.dtype:
        raise RuntimeError(
            f"expected dtype {_CPP_NAMES[start.dtype]} for `weight` but got dtype {_CPP_NAMES[weight.dtype]}"
        )
    if not start.dtype.is_floating_point:
        kind = "tensor" if tensor_weight else "scalar"
        raise NotImplementedError(f"\"lerp_kernel_{kind}\" not implemented for '{type_name(start.dtype)}'")
    if not tensor_weight:
        _reject_complex_scalar(weight, start.dtype)
    if not tensor_weight and not isinstance(weight, _NUMBER):
        raise TypeError(f"lerp(): argument 'weight' must be Tensor or Number, not {type(weight).__name__}")
    shape = _shape(start, end, weight) if tensor_weight else _shape(start, end)
    return shape, start.dtype


lerp_op = define("lerp(Tensor self, Tensor end, Scalar|Tensor weight) -> Tensor", ("pointwise",))
lerp_inplace_op = define("lerp_(Tensor(a!) self, Tensor end, Scalar|Tensor weight) -> Tensor(a!)",
                         ("pointwise", "inplace"))


def _lerp(start, end, weight, in_place):
    if in_place:
        _check_write(start, (end, weight))
    shape, dtype = _lerp_result(start, end, weight)
    if in_place:
        check_inplace(start, shape, dtype)
    if isinstance(weight, Tensor):
        return _run(_C.lerp, start, (start, end, weight), shape, dtype, (), in_place)
    return _run(_C.lerp_scalar, start, (start, end), shape, dtype, (float(weight),), in_place)


@lerp_op.kernel("cpu")
def _lerp_cpu(start, end, weight):
    return _lerp(start, end, weight, False)


@lerp_inplace_op.kernel("cpu")
def _lerp_inplace_cpu(start, end, weight):
    return _lerp(start, end, weight, True)


def _lerp_meta(start, end, weight):
    check_meta_operands(end, weight)
    shape, dtype = _lerp_result(start, end, weight)
    return empty_pointwise(shape, dtype, META, start, end, weight)


def _lerp_inplace_meta(start, end, weight):
    check_meta_operands(end, weight)
    shape, dtype = _lerp_result(start, end, weight)
    check_inplace(start, shape, dtype)
    return start


lerp_op.meta = lerp_op.kernels["meta"] = _lerp_meta
lerp_inplace_op.meta = lerp_inplace_op.kernels["meta"] = _lerp_inplace_meta


# -- add with alpha --------------------------------------------------------------------------------
# ``add``'s own op stays two-operand (alpha == 1, the common case every caller and the autograd
# formulas rely on); ``add(x, y, alpha=a)`` and ``sub`` (alpha negated, as ATen's sub does) on two
# tensors come here, computing alpha * other in the result dtype in the same pass.


def alpha_result(self, other, alpha):
    """(shape, result dtype, kernel scalars) of ``self + alpha * other`` for two tensors."""
    promoted = self.dtype if self.dtype is other.dtype else dtypes.result_type_of(self, other)
    if isinstance(alpha, builtins.bool) and promoted is not dtypes.bool:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if isinstance(alpha, float) and not promoted.is_floating_point:
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    if promoted is dtypes.bool:
        raise NotImplementedError("add_scaled: bool results are computed by add itself")
    return _shape(self, other), promoted, scalar_arg(alpha, promoted, "add", "alpha")


add_scaled_op = define("add_scaled(Tensor self, Tensor other, Scalar alpha) -> Tensor", ("pointwise",))
add_scaled_inplace_op = define("add_scaled_(Tensor(a!) self, Tensor other, Scalar alpha) -> Tensor(a!)",
                               ("pointwise", "inplace"))


def _add_scaled(self, other, alpha, in_place):
    if in_place:
        _check_write(self, (other,))
    shape, promoted, scalars = alpha_result(self, other, alpha)
    if in_place:
        check_inplace(self, shape, promoted)
    return _run(_C.add_scaled, self, (self, other), shape, promoted, scalars, in_place)


@add_scaled_op.kernel("cpu")
def _add_scaled_cpu(self, other, alpha):
    return _add_scaled(self, other, alpha, False)


@add_scaled_inplace_op.kernel("cpu")
def _add_scaled_inplace_cpu(self, other, alpha):
    return _add_scaled(self, other, alpha, True)


def _add_scaled_meta(self, other, alpha):
    shape, promoted, _ = alpha_result(self, other, alpha)
    return empty_pointwise(shape, promoted, META, self, other)


def _add_scaled_inplace_meta(self, other, alpha):
    shape, promoted, _ = alpha_result(self, other, alpha)
    check_inplace(self, shape, promoted)
    return self


add_scaled_op.meta = add_scaled_op.kernels["meta"] = _add_scaled_meta
add_scaled_inplace_op.meta = add_scaled_inplace_op.kernels["meta"] = _add_scaled_inplace_meta


def fuses_alpha(input, other, alpha) -> bool:
    """Whether ``add(input, other, alpha=alpha)`` goes to add_scaled: two tensors, a non-bool
    result and a number alpha other than 1 (alpha == 1 is plain add)."""
    if not isinstance(input, Tensor) or not isinstance(other, Tensor) or not isinstance(alpha, _NUMBER):
        return False
    if alpha == 1 and not isinstance(alpha, builtins.bool):
        return False
    a, b = input.dtype, other.dtype
    return (a is not dtypes.bool or b is not dtypes.bool) and not a.is_complex and not b.is_complex


def negated_alpha(alpha):
    """``-alpha`` for ``sub`` (which is ``add`` with alpha negated, as in ATen)."""
    if isinstance(alpha, builtins.bool):  # fuses_alpha already excluded bool results
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    return -alpha
