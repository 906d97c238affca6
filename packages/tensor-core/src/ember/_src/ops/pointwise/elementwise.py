"""Elementwise ops: binary arithmetic/comparison/logical/bitwise, unary math, activations.

Each op is declared once with ``define``; its meta function gives the result's shape and
dtype, and the CPU kernel calls the native unary/binary kernel after promoting operands to
the compute dtype (see Note [Type promotion] in dtypes.py). float16/bfloat16 are computed
in float32 and rounded once at the end.
"""

from __future__ import annotations

import builtins
import math

from ... import dtypes
from ..._native import _C
from ...device import META
from ...dispatch import define
from ...optable import declare
from ...shapes import broadcast_shapes
from ...tensor import Tensor
from .._common import (
    HALF_TYPES,
    check_meta_operands,
    check_scalar_fits,
    convert,
    empty,
    empty_pointwise,
    int64_scalar,
    label_as_op,
    type_meta_name,
    type_name,
    write_out,
)
from .._common import check_internal_overlap as _check_internal_overlap
from .._common import check_write as _check_write
from ..creation.factories import scalar_tensor
from . import complex as _complex_numbers
from . import fused as _fused

BINARY_CODES = _C.binary_ops
UNARY_CODES = _C.unary_ops

_NUMBER = (builtins.bool, int, float, complex)


def _check_operand(x, op_name):
    if not isinstance(x, (Tensor,) + _NUMBER):
        raise TypeError(
            f"{op_name}(): argument 'other' must be Tensor or Number, not {type(x).__name__}"
        )


# -- binary ------------------------------------------------------------------------------

# kind -> how the result dtype follows from the promoted operand dtype
_FLOAT_RESULT = "float"      # integer inputs give the default float dtype (div, atan2, ...)
_SAME_RESULT = "same"        # the promoted dtype (add, mul, maximum, ...)
_BOOL_RESULT = "bool"        # comparisons and logical ops
_INTEGRAL_ONLY = "integral"  # bitwise ops


_FLOAT_TYPES = frozenset((dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64))
_NON_FLOAT_TYPES = frozenset((dtypes.bool, dtypes.uint8, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64))
_BOOL_ONLY = frozenset((dtypes.bool,))

# (op, promoted input dtype) pairs PyTorch has no kernel for: NotImplementedError, as in PyTorch.
_NO_KERNEL = {
    "floor_divide": _BOOL_ONLY, "remainder": _BOOL_ONLY, "fmod": _BOOL_ONLY, "pow": _BOOL_ONLY,
    "hypot": _NON_FLOAT_TYPES, "logaddexp": _NON_FLOAT_TYPES, "logaddexp2": _NON_FLOAT_TYPES,
    "nextafter": _NON_FLOAT_TYPES, "bitwise_and": _FLOAT_TYPES, "bitwise_or": _FLOAT_TYPES,
    "bitwise_xor": _FLOAT_TYPES, "bitwise_left_shift": _FLOAT_TYPES | _BOOL_ONLY,
    "bitwise_right_shift": _FLOAT_TYPES | _BOOL_ONLY,
    "abs": _BOOL_ONLY, "floor": _BOOL_ONLY, "ceil": _BOOL_ONLY, "round": _BOOL_ONLY, "trunc": _BOOL_ONLY,
    "frac": _NON_FLOAT_TYPES, "round_decimals": _NON_FLOAT_TYPES, "bitwise_not": _FLOAT_TYPES,
    "threshold": _BOOL_ONLY,
    **{name: _NON_FLOAT_TYPES for name in (
        "gelu", "gelu_tanh", "silu", "softplus", "elu", "leaky_relu", "hardsigmoid", "hardswish", "mish", "selu",
        "celu")},
}
# Pairs PyTorch rejects with a RuntimeError instead (a check before its kernel).
_REJECTED = {"relu": _BOOL_ONLY, "relu6": _BOOL_ONLY, "hardtanh": frozenset((dtypes.bool, dtypes.uint8)),
             "neg": _BOOL_ONLY}


_EMPTY = frozenset()
# The names of PyTorch's CPU kernels where they are not "<op>_cpu" (its NotImplementedError names them).
_KERNEL_NAMES = {
    "floor_divide": "div_floor_cpu", "pow": "pow", "bitwise_left_shift": "lshift_cpu",
    "bitwise_right_shift": "rshift_cpu", "floor": "floor_vml_cpu", "ceil": "ceil_vml_cpu",
    "round": "round_vml_cpu", "trunc": "trunc_vml_cpu", "round_decimals": "round_cpu",
}
NEG_BOOL_MESSAGE = ("Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a "
                    "mask, use the `~` or `logical_not()` operator instead.")


def _check_kernel_exists(op_name: str, dtype) -> None:
    """Raises PyTorch's exception for dtypes its ``op_name`` kernel does not support."""
    if dtype in _NO_KERNEL.get(op_name, _EMPTY):
        kernel = _KERNEL_NAMES.get(op_name, f"{op_name}_cpu")
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{type_name(dtype)}'")
    if dtype in _REJECTED.get(op_name, _EMPTY):
        if dtype is dtypes.bool and op_name in ("relu", "relu6", "hardtanh"):  # PyTorch's wordings
            raise RuntimeError("Boolean inputs not supported for relu" if op_name == "relu"
                               else "Bool inputs not supported for hardtanh")
        if dtype is dtypes.bool and op_name == "neg":  # neg(b), b.neg() say what -b says
            raise RuntimeError(NEG_BOOL_MESSAGE)
        raise RuntimeError(f"{op_name}: inputs of dtype {type_name(dtype)} are not supported")


def _binary_result(a, b, kind: str, op_name: str):
    """(shape, compute dtype, result dtype) for a binary op on tensors/scalars."""
    if type(a) is Tensor and type(b) is Tensor and a.dtype is b.dtype:
        promoted = a.dtype  # the common case, without the general promotion walk
    else:
        _check_operand(a, op_name)
        _check_operand(b, op_name)
        promoted = dtypes.result_type_of(a, b)
    if promoted.is_complex:
        _complex_numbers._check_binary(op_name, promoted)
    if not _bool_pow_by_bool(op_name, promoted, a, b):
        _check_kernel_exists(op_name, promoted)
    if kind == _FLOAT_RESULT and not (promoted.is_floating_point or promoted.is_complex):
        promoted = dtypes.get_default_dtype()
    a_shape = a._shape if isinstance(a, Tensor) else ()
    b_shape = b._shape if isinstance(b, Tensor) else ()
    shape = a_shape if a_shape == b_shape else broadcast_shapes(a_shape, b_shape)
    result = dtypes.bool if kind == _BOOL_RESULT else promoted
    return shape, promoted, result


def _half_nextafter(a: Tensor, b: Tensor, dtype, shape) -> Tensor:
    """nextafter in a 16-bit float format: the neighbour of ``a`` towards ``b`` in that format (the
    float32 kernel's neighbour rounds back to ``a``). Both formats are sign-magnitude, so stepping
    away from zero adds 1 to the bit pattern and stepping towards it subtracts 1."""
    x = convert(a, dtype).expand(shape).contiguous()
    y = convert(b, dtype).expand(shape).contiguous()
    xf, yf = convert(x, dtypes.float32), convert(y, dtypes.float32)
    bits = convert(x.view(dtypes.int16), dtypes.int32)
    outward = eq_op(lt_op(xf, yf), gt_op(xf, 0))
    stepped = add_op(bits, where_op(outward, scalar_tensor(1, dtype=dtypes.int32),
                                    scalar_tensor(-1, dtype=dtypes.int32)))
    # From +-0 the neighbour is the smallest subnormal with b's sign (bit patterns 0x0001 / 0x8001).
    smallest = where_op(gt_op(yf, 0), scalar_tensor(1, dtype=dtypes.int32), scalar_tensor(-32767, dtype=dtypes.int32))
    stepped = where_op(eq_op(xf, 0), smallest, stepped)
    result = convert(stepped, dtypes.int16).view(dtype)
    result = where_op(eq_op(xf, yf), y, result)
    nan = UNARY_OPS["isnan"][0]
    return where_op(logical_or_op(nan(xf), nan(yf)), scalar_tensor(math.nan, dtype=dtype), result)


def _bool_pow_by_bool(op_name: str, promoted, a, b) -> bool:
    # PyTorch's pow(Tensor, Scalar) answers the exponents 0 (ones) and 1 (a copy) before it looks for
    # a kernel, so a bool tensor to a Python bool power works although there is no bool pow kernel.
    return op_name == "pow" and promoted is dtypes.bool and isinstance(a, Tensor) and isinstance(b, builtins.bool)


def _device_of(a, b):
    if isinstance(a, Tensor):
        if isinstance(b, Tensor) and b._device is not a._device:
            if a.ndim == 0 and a._device.type == "cpu":
                return b._device
            if not (b.ndim == 0 and b._device.type == "cpu"):
                if b._device is META:  # PyTorch's TensorIterator words a meta operand so
                    raise RuntimeError(f"Tensor on device meta is not on the expected device {a._device}!")
                raise RuntimeError(
                    f"Expected all tensors to be on the same device, but found at least two devices, "
                    f"{a._device} and {b._device}!"
                )
        return a._device
    return b._device


def _run_binary(code: int, kind: str, op_name: str, a, b, out: Tensor | None = None):
    shape, promoted, result_dtype = _binary_result(a, b, kind, op_name)
    device = _device_of(a, b)
    if out is None:
        out = empty_pointwise(shape, result_dtype, device, a, b)
    if device is META:
        return out
    if op_name == "nextafter" and promoted in HALF_TYPES:
        _C.copy_(out, _half_nextafter(a, b, promoted, shape))
        return out
    if _bool_pow_by_bool(op_name, promoted, a, b):
        if b:
            _C.copy_(out, a)
        else:
            _C.fill_(out, True)
        return out
    compute = dtypes.float32 if promoted in HALF_TYPES else promoted
    write_bool = kind == _BOOL_RESULT
    if compute.is_complex:  # std::complex kernels (ops/complex.py)
        target = out if out.dtype is (dtypes.bool if write_bool else compute) else empty(shape, out.dtype, device)
        _complex_numbers._run_binary(op_name, target, a, b, compute)
        if target is not out:
            _C.copy_(out, target)
        return out
    target = out if (out.dtype is compute or write_bool) else empty_pointwise(shape, compute, device, out)
    if type(b) is int:
        b = int64_scalar(b)
    elif type(a) is int:
        a = int64_scalar(a)
    if isinstance(a, Tensor):
        if isinstance(b, Tensor):
            _C.binary(code, target, convert(a, compute), convert(b, compute))
        else:
            _C.binary_scalar(code, target, convert(a, compute), b, False)
    else:
        _C.binary_scalar(code, target, convert(b, compute), a, True)
    if target is not out:
        _C.copy_(out, target)
    return out


def _binary_meta(kind, op_name):
    def meta(a, b):
        check_meta_operands(b)
        shape, _, result = _binary_result(a, b, kind, op_name)
        return empty_pointwise(shape, result, META, a, b)

    return meta


def _check_inplace(self: Tensor, shape, result_dtype, op_name):
    if not isinstance(self, Tensor):
        raise TypeError(f"{op_name}: self must be a Tensor")
    if not dtypes.can_cast(result_dtype, self.dtype):
        raise RuntimeError(
            f"result type {type_name(result_dtype)} can't be cast to the desired output type {type_name(self.dtype)}"
        )
    if tuple(shape) != self._shape:
        raise RuntimeError(
            f"output with shape {list(self._shape)} doesn't match the broadcast shape {list(shape)}"
        )


def _check_cast_first(self: Tensor, other, kind: str, op_name: str) -> None:
    """In-place ops check that the promoted type can be written into self before they look for a
    kernel: int.bitwise_xor_(nan) is PyTorch's cast RuntimeError, not "not implemented for Float"."""
    if kind == _BOOL_RESULT or (type(other) is Tensor and other.dtype is self.dtype) or not isinstance(self, Tensor):
        return
    _check_operand(other, op_name)
    promoted = dtypes.result_type_of(self, other)
    if not dtypes.can_cast(promoted, self.dtype):
        raise RuntimeError(
            f"result type {type_name(promoted)} can't be cast to the desired output type {type_name(self.dtype)}"
        )


# Ops whose plain calls (same-dtype CPU tensors, or a tensor and an int/float) the native
# dispatcher runs itself (csrc/common/fast_dispatch.cpp); it falls back here for anything else.
_NATIVE_BINARY = frozenset("add sub mul div maximum minimum eq ne lt le gt ge".split())
_NATIVE_RESULT = {"same": 0, "float": 1, "bool": 2}
_NATIVE_UNARY = frozenset((
    "sqrt rsqrt exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh "
    "sigmoid erf erfc reciprocal abs neg floor ceil trunc square relu relu6 gelu silu mish hardsigmoid hardswish "
    "isnan isinf isfinite"
).split())


def _declare_binary(name: str, kind: str, code_name: str | None = None, doc: str = ""):
    code = BINARY_CODES[code_name or name]
    op = define(f"{name}(Tensor self, Tensor other) -> Tensor", ("pointwise",), _binary_meta(kind, name))
    inplace = define(f"{name}_(Tensor(a!) self, Tensor other) -> Tensor(a!)", ("pointwise", "inplace"))

    @op.kernel("cpu")
    def cpu(a, b):
        return _run_binary(code, kind, name, a, b)

    if name in _NATIVE_BINARY:
        op._set_fast(1, code, _NATIVE_RESULT[kind])
        if kind != _BOOL_RESULT:
            inplace._set_fast(3, code, _NATIVE_RESULT[kind])  # self.op_(other), no promotion, no grad

    op.kernels["meta"] = op.meta

    @inplace.kernel("cpu")
    def cpu_inplace(self, other):
        # PyTorch's overlap checks, before its dtype and shape checks (the test inlined: every in-place op runs it).
        if 0 in self._stride or (isinstance(other, Tensor) and other._storage is self._storage):
            _check_write(self, (other,))
        if name == "pow":  # PyTorch's negative-power check comes before its cast check
            _check_int_pow(self, other)
        _check_cast_first(self, other, kind, name)
        shape, promoted, result_dtype = _binary_result(self, other, kind, name)
        # Comparison/logical results (0/1) are written in self's dtype, whatever it is.
        _check_inplace(self, shape, self.dtype if kind == _BOOL_RESULT else result_dtype, name + "_")
        if kind == _BOOL_RESULT or promoted is not self.dtype or promoted in HALF_TYPES:
            _C.copy_(self, _run_binary(code, kind, name, self, other))
        else:
            _run_binary(code, kind, name, self, other, out=self)
        self._bump_version()
        return self

    @inplace.kernel("meta")
    def meta_inplace(self, other):
        if name not in ("add", "sub", "mul", "div"):  # PyTorch's meta add_/sub_/mul_/div_ take any device
            check_meta_operands(other)
        _check_cast_first(self, other, kind, name)
        shape, _, result_dtype = _binary_result(self, other, kind, name)
        _check_inplace(self, shape, self.dtype if kind == _BOOL_RESULT else result_dtype, name + "_")
        return self

    op.__doc__ = doc or op.schema
    return op, inplace


add_op, add_inplace_op = _declare_binary("add", _SAME_RESULT)
sub_op, sub_inplace_op = _declare_binary("sub", _SAME_RESULT)
mul_op, mul_inplace_op = _declare_binary("mul", _SAME_RESULT)
div_op, div_inplace_op = _declare_binary("div", _FLOAT_RESULT)
floor_divide_op, floor_divide_inplace_op = _declare_binary("floor_divide", _SAME_RESULT)
remainder_op, remainder_inplace_op = _declare_binary("remainder", _SAME_RESULT)
fmod_op, fmod_inplace_op = _declare_binary("fmod", _SAME_RESULT)
pow_op, pow_inplace_op = _declare_binary("pow", _SAME_RESULT)
maximum_op, _ = _declare_binary("maximum", _SAME_RESULT)
minimum_op, _ = _declare_binary("minimum", _SAME_RESULT)
fmax_op, _ = _declare_binary("fmax", _SAME_RESULT)
fmin_op, _ = _declare_binary("fmin", _SAME_RESULT)
atan2_op, atan2_inplace_op = _declare_binary("atan2", _FLOAT_RESULT)
hypot_op, hypot_inplace_op = _declare_binary("hypot", _FLOAT_RESULT)
copysign_op, copysign_inplace_op = _declare_binary("copysign", _FLOAT_RESULT)
logaddexp_op, _ = _declare_binary("logaddexp", _FLOAT_RESULT)
logaddexp2_op, _ = _declare_binary("logaddexp2", _FLOAT_RESULT)
xlogy_op, xlogy_inplace_op = _declare_binary("xlogy", _FLOAT_RESULT)
nextafter_op, _ = _declare_binary("nextafter", _SAME_RESULT)
bitwise_and_op, bitwise_and_inplace_op = _declare_binary("bitwise_and", _INTEGRAL_ONLY)
bitwise_or_op, bitwise_or_inplace_op = _declare_binary("bitwise_or", _INTEGRAL_ONLY)
bitwise_xor_op, bitwise_xor_inplace_op = _declare_binary("bitwise_xor", _INTEGRAL_ONLY)
bitwise_left_shift_op, bitwise_left_shift_inplace_op = _declare_binary("bitwise_left_shift", _INTEGRAL_ONLY)
bitwise_right_shift_op, bitwise_right_shift_inplace_op = _declare_binary("bitwise_right_shift", _INTEGRAL_ONLY)
logical_and_op, logical_and_inplace_op = _declare_binary("logical_and", _BOOL_RESULT)
logical_or_op, logical_or_inplace_op = _declare_binary("logical_or", _BOOL_RESULT)
logical_xor_op, logical_xor_inplace_op = _declare_binary("logical_xor", _BOOL_RESULT)
eq_op, eq_inplace_op = _declare_binary("eq", _BOOL_RESULT)
ne_op, ne_inplace_op = _declare_binary("ne", _BOOL_RESULT)
lt_op, lt_inplace_op = _declare_binary("lt", _BOOL_RESULT)
le_op, le_inplace_op = _declare_binary("le", _BOOL_RESULT)
gt_op, gt_inplace_op = _declare_binary("gt", _BOOL_RESULT)
ge_op, ge_inplace_op = _declare_binary("ge", _BOOL_RESULT)


def _check_sub_bool(a, b):
    # PyTorch rejects a bool operand on either side (a Python bool counts as a bool tensor), with
    # one message for two bools and another for one.
    a_bool = getattr(a, "dtype", None) is dtypes.bool or isinstance(a, builtins.bool)
    b_bool = getattr(b, "dtype", None) is dtypes.bool or isinstance(b, builtins.bool)
    if a_bool and b_bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. "
            "Use the `^` or `logical_xor()` operator instead."
        )
    if a_bool or b_bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. "
            "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead."
        )


def _check_int_pow(base, exponent):
    if isinstance(base, Tensor) and dtypes.is_integral(base.dtype, include_bool=True):
        if isinstance(exponent, int) and not isinstance(exponent, builtins.bool) and exponent < 0:
            raise RuntimeError("Integers to negative integer powers are not allowed.")


def check_alpha(input, other, alpha) -> None:
    """PyTorch's checks of add/sub's alpha against the result type, before any work: a float alpha
    needs a float result, a complex alpha a complex one, a bool alpha a bool one, and alpha must
    fit the result type (int8 + 1 * 1000 raises)."""
    if isinstance(alpha, Tensor) or alpha is None:
        return
    if alpha == 1 and not isinstance(alpha, builtins.bool):
        return
    promoted = dtypes.result_type_of(input, other)
    if isinstance(alpha, builtins.bool) and promoted is not dtypes.bool:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if isinstance(alpha, float) and not (promoted.is_floating_point or promoted.is_complex):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    if isinstance(alpha, complex) and not promoted.is_complex:
        raise RuntimeError("For non-complex input tensors, argument alpha must not be a complex number.")
    check_scalar_fits(alpha, promoted)


def _scaled(input, other, alpha):
    if alpha is None or (not isinstance(alpha, Tensor) and alpha == 1 and not isinstance(alpha, builtins.bool)):
        return other
    check_alpha(input, other, alpha)
    promoted = dtypes.result_type_of(input, other)
    if promoted is dtypes.bool:
        alpha = builtins.bool(alpha)  # PyTorch converts alpha to the (bool) result type
        if not isinstance(other, Tensor):
            return builtins.bool(other) and alpha
    if not isinstance(other, Tensor):
        return other * alpha  # a Python number: scaling stays a Python number (weakly typed)
    # Scale in the result type: alpha must not take part in type promotion (a float alpha
    # would otherwise turn f16 + alpha * bool into float32) nor overflow a narrower dtype.
    return mul_op(convert(other, promoted), alpha)


# Public functional forms (the user-facing signatures). Two tensors with alpha != 1 take the
# fused one-pass op (fused_pointwise.py).
def add(input, other, *, alpha=1, out=None):
    check_alpha(input, other, alpha)
    if _fused.fuses_alpha(input, other, alpha):
        return write_out(_fused.add_scaled_op(input, other, alpha), out, (input, other))
    return write_out(add_op(input, _scaled(input, other, alpha)), out, (input, other))


def sub(input, other, *, alpha=1, out=None):
    _check_sub_bool(input, other)
    check_alpha(input, other, alpha)
    if _fused.fuses_alpha(input, other, alpha):
        return write_out(_fused.add_scaled_op(input, other, _fused.negated_alpha(alpha)), out, (input, other))
    return write_out(sub_op(input, _scaled(input, other, alpha)), out, (input, other))


subtract = sub


def rsub(input, other, *, alpha=1):
    out = sub(other, input, alpha=alpha)
    return label_as_op(out, "rsub" if isinstance(other, Tensor) else "rsub_scalar")  # RsubBackward0 / 1


def mul(input, other, *, out=None):
    return write_out(mul_op(input, other), out, (input, other))


multiply = mul


def div(input, other, *, rounding_mode=None, out=None):
    if rounding_mode is None:
        result = div_op(input, other)
    elif rounding_mode in ("floor", "trunc"):
        result = div_rounding_op(input, other, rounding_mode)
    else:
        raise RuntimeError(
            f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'"
        )
    return write_out(result, out, (input, other))


# Rounded division is its own op (not floor_divide, nor trunc of div, as seen from outside) so that
# autograd gives it PyTorch's zero gradient: floor_divide has no derivative, and trunc(div) would
# send NaN to the inputs where other is 0.
div_rounding_op = define("div_rounding(Tensor self, Scalar|Tensor other, str rounding_mode) -> Tensor")


@div_rounding_op.kernel("cpu")
@div_rounding_op.kernel("meta")
def _div_rounding_kernel(input, other, rounding_mode):
    if rounding_mode == "floor":
        return floor_divide_op(input, other)
    return _trunc_div(input, other)


div_rounding_op.meta = _div_rounding_kernel


def _trunc_div(a, b):
    promoted = dtypes.result_type_of(a, b)
    if promoted.is_floating_point:
        return trunc(div_op(a, b))  # noqa: F821 - defined by the unary loop below
    if not promoted.is_signed:
        return floor_divide_op(a, b)  # unsigned (a negative scalar wraps): truncation is floor
    # Integer truncation: floor division corrected where signs differ and a remainder exists.
    q = floor_divide_op(a, b)
    r = fmod_op(a, b)
    fix = logical_and_op(ne_op(r, 0), ne_op(lt_op(r, 0), lt_op(b, 0) if isinstance(b, Tensor) else (b < 0)))
    return add_op(q, fix.to(q.dtype))


divide = div
true_divide = div


def floor_divide(input, other, *, out=None):
    return write_out(floor_divide_op(input, other), out, (input, other))


def remainder(input, other, *, out=None):
    return write_out(remainder_op(input, other), out, (input, other))


def fmod(input, other, *, out=None):
    return write_out(fmod_op(input, other), out, (input, other))


def pow(input, exponent, *, out=None):  # noqa: A001 - PyTorch's name
    _check_int_pow(input, exponent)
    result = pow_op(input, exponent)
    if isinstance(exponent, Tensor):  # grad_fn as PyTorch's overloads: PowBackward1 / PowBackward2
        result = label_as_op(result, "pow_tensor_tensor" if isinstance(input, Tensor) else "pow_scalar")
    return write_out(result, out, (input, exponent))


def float_power(input, exponent, *, out=None):
    a = input.to(dtypes.float64) if isinstance(input, Tensor) else float(input)
    b = exponent.to(dtypes.float64) if isinstance(exponent, Tensor) else float(exponent)
    return write_out(pow_op(a, b), out, (input, exponent))


def _simple_binary(op, tensors_only=False):
    def fn(input, other, *, out=None):
        if tensors_only:
            for pos, x in ((1, input), (2, other)):
                if not isinstance(x, Tensor):
                    arg = "input" if pos == 1 else "other"
                    raise TypeError(f"{op.name}(): argument '{arg}' (position {pos}) must be Tensor, "
                                    f"not {type(x).__name__}")
        return write_out(op(input, other), out, (input, other))

    fn.__name__ = fn.__qualname__ = op.name  # pickled by name (the module holds it as op.name)
    fn.__doc__ = op.schema
    return fn


maximum = _simple_binary(maximum_op, tensors_only=True)
minimum = _simple_binary(minimum_op, tensors_only=True)
fmax = _simple_binary(fmax_op, tensors_only=True)
fmin = _simple_binary(fmin_op, tensors_only=True)
atan2 = _simple_binary(atan2_op, tensors_only=True)
arctan2 = atan2
hypot = _simple_binary(hypot_op, tensors_only=True)
copysign = _simple_binary(copysign_op)
logaddexp = _simple_binary(logaddexp_op, tensors_only=True)
logaddexp2 = _simple_binary(logaddexp2_op, tensors_only=True)
xlogy = _simple_binary(xlogy_op)
nextafter = _simple_binary(nextafter_op, tensors_only=True)
bitwise_and = _simple_binary(bitwise_and_op)
bitwise_or = _simple_binary(bitwise_or_op)
bitwise_xor = _simple_binary(bitwise_xor_op)
bitwise_left_shift = _simple_binary(bitwise_left_shift_op)
bitwise_right_shift = _simple_binary(bitwise_right_shift_op)
logical_and = _simple_binary(logical_and_op, tensors_only=True)
logical_or = _simple_binary(logical_or_op, tensors_only=True)
logical_xor = _simple_binary(logical_xor_op, tensors_only=True)
eq = _simple_binary(eq_op)
ne = _simple_binary(ne_op)
not_equal = ne
lt = _simple_binary(lt_op)
less = lt
le = _simple_binary(le_op)
less_equal = le
gt = _simple_binary(gt_op)
greater = gt
ge = _simple_binary(ge_op)
greater_equal = ge


def equal(input: Tensor, other: Tensor) -> bool:
    """True when both tensors have the same shape and elements."""
    if input._shape != other._shape:
        return False
    return bool(eq_op(input, other).all().item())


# -- unary -------------------------------------------------------------------------------

_FLOAT_OP = "float"        # integers -> default float dtype
_KEEP_OP = "keep"          # dtype kept (abs, neg, floor, ...)
_PREDICATE_OP = "predicate"  # bool result


def _unary_result(a, kind: str, name: str):
    if not isinstance(a, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(a).__name__}")
    if a.dtype.is_complex:
        return _complex_numbers._check_unary(name, a.dtype)
    _check_kernel_exists(name, a.dtype)
    if kind == _PREDICATE_OP:
        return dtypes.bool
    if kind == _FLOAT_OP and not a.dtype.is_floating_point:
        return dtypes.get_default_dtype()
    return a.dtype


def _run_unary(code: int, kind: str, name: str, a: Tensor, p0=0.0, p1=0.0, p2=0.0, out: Tensor | None = None):
    if isinstance(a, Tensor) and a.dtype.is_complex:
        return _complex_numbers._run_unary(name, a, out)
    result_dtype = _unary_result(a, kind, name)
    if out is None:
        out = empty_pointwise(a._shape, result_dtype, a._device, a)
    if a._device is META:
        return out
    if kind == _PREDICATE_OP:
        compute = dtypes.float32 if a.dtype in HALF_TYPES else a.dtype
        _C.unary(code, out, convert(a, compute), p0, p1, p2)
        return out
    compute = dtypes.float32 if result_dtype in HALF_TYPES else result_dtype
    target = out if out.dtype is compute else empty_pointwise(a._shape, compute, a._device, out)
    source = convert(a, compute)
    if name == "logit" and p0 >= 0 and result_dtype in HALF_TYPES:
        source, p0 = _half_logit_clamp(source, p0, result_dtype), -1.0
    _C.unary(code, target, source, p0, p1, p2)
    if target is not out:
        _C.copy_(out, target)
    return out


def _half_logit_clamp(x: Tensor, eps: float, dtype) -> Tensor:
    """logit's clamp to [eps, 1 - eps] with PyTorch's bounds for a 16-bit input: eps rounded to that
    dtype and 1 - eps computed in it (float16: 1 - 1e-6 is 1, so logit(1) stays inf)."""
    def rounded(v):
        return convert(scalar_tensor(v, dtype=dtypes.float32), dtype).item()

    lo = rounded(eps)
    hi = rounded(1.0 - lo)
    low, high = scalar_tensor(lo, dtype=x.dtype), scalar_tensor(hi, dtype=x.dtype)
    return where_op(lt_op(x, low), low, where_op(gt_op(x, high), high, x))


def _declare_unary(name: str, kind: str, inplace: bool = True, params: tuple = (), code_name=None):
    """Declares ``name`` (and ``name_``); ``params`` are (param_name, default) pairs."""
    code = UNARY_CODES[code_name or name]
    arg_text = "".join(f", float {p}={d}" for p, d in params)
    op = define(f"{name}(Tensor self{arg_text}) -> Tensor", ("pointwise",))

    def full(args, kwargs):
        # The schema's defaults for parameters a caller of the op left out (by position or keyword).
        given = dict(zip((p for p, _ in params), args), **kwargs)
        return tuple(given.get(p, d) for p, d in params)

    def meta(a, *args, **kwargs):
        return empty_pointwise(a._shape, _unary_result(a, kind, name), META, a)

    op.meta = meta
    op.kernels["meta"] = meta

    @op.kernel("cpu")
    def cpu(a, *args, **kwargs):
        return _run_unary(code, kind, name, a, *full(args, kwargs))

    if name in _NATIVE_UNARY and not params:
        op._set_fast(2, code, 1 if kind == _PREDICATE_OP else 0)

    inplace_op = None
    checks_overlap = name != "threshold"  # PyTorch's threshold_ skips the check (its kernel is shared with backward)
    if inplace:
        inplace_op = define(f"{name}_(Tensor(a!) self{arg_text}) -> Tensor(a!)", ("pointwise", "inplace"))

        @inplace_op.kernel("cpu")
        def cpu_inplace(self, *args, **kwargs):
            args = full(args, kwargs)
            if checks_overlap and 0 in self._stride:
                _check_internal_overlap(self)
            result_dtype = _unary_result(self, kind, name)
            if name == "square" and self.dtype is dtypes.bool:  # square(bool) is int64, as pow(bool, 2)
                raise RuntimeError("result type Long can't be cast to the desired output type Bool")
            if kind == _PREDICATE_OP:  # logical_not_: the 0/1 result is written in self's dtype
                _C.copy_(self, _run_unary(code, kind, name, self, *args))
                self._bump_version()
                return self
            if result_dtype is not self.dtype:
                raise RuntimeError(
                    f"result type {type_name(result_dtype)} can't be cast to the desired output type "
                    f"{type_name(self.dtype)}"
                )
            if self.dtype in HALF_TYPES:
                _C.copy_(self, _run_unary(code, kind, name, self, *args))
            else:
                _run_unary(code, kind, name, self, *args, out=self)
            self._bump_version()
            return self

        @inplace_op.kernel("meta")
        def meta_inplace(self, *args, **kwargs):
            return self

    return op, inplace_op


def _public_unary(op, inplace_op):
    def fn(input, *, out=None):
        return write_out(op(input), out, (input,))

    fn.__name__ = fn.__qualname__ = op.name  # pickled by name (the module holds it as op.name)
    fn.__doc__ = f"Elementwise {op.name}. Schema: {op.schema}"
    return fn


_UNARY_FLOAT = (
    "sqrt rsqrt exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh acosh "
    "atanh sigmoid erf erfc erfinv reciprocal lgamma digamma"
).split()
_UNARY_KEEP = "abs neg sign floor ceil trunc square bitwise_not".split()
_UNARY_PREDICATE = "isnan isinf isfinite isposinf isneginf signbit logical_not".split()

UNARY_OPS = {}
for _name in _UNARY_FLOAT:
    UNARY_OPS[_name] = _declare_unary(_name, _FLOAT_OP)
for _name in _UNARY_KEEP:
    UNARY_OPS[_name] = _declare_unary(_name, _KEEP_OP)
for _name in _UNARY_PREDICATE:
    UNARY_OPS[_name] = _declare_unary(_name, _PREDICATE_OP, inplace=_name == "logical_not")
UNARY_OPS["frac"] = _declare_unary("frac", _KEEP_OP)
UNARY_OPS["round"] = _declare_unary("round", _KEEP_OP)
round_decimals_op, _ = _declare_unary("round_decimals", _KEEP_OP, inplace=False, params=(("scale", 1.0),))

_g = globals()
for _name, (_op, _iop) in UNARY_OPS.items():
    if _iop is not None:
        _g[_name + "_inplace_op"] = _iop  # Tensor.<name>_ (the table at the end)
    if _name == "round":
        continue
    _g[_name] = _public_unary(_op, _iop)
del _g, _name, _op, _iop


def _no_out(op):
    # PyTorch's isnan/isinf/isfinite take no out= (an out keyword is a TypeError there).
    def fn(input):
        return op(input)

    fn.__name__ = fn.__qualname__ = op.name  # pickled by name (the module holds it as op.name)
    fn.__doc__ = f"Elementwise {op.name}. Schema: {op.schema}"
    return fn


isnan, isinf, isfinite = (_no_out(UNARY_OPS[n][0]) for n in ("isnan", "isinf", "isfinite"))

absolute = abs  # noqa: F821 - defined by the loop above
negative = neg  # noqa: F821
arcsin, arccos, arctan = asin, acos, atan  # noqa: F821
arcsinh, arccosh, arctanh = asinh, acosh, atanh  # noqa: F821
fix = trunc  # noqa: F821


# -- polygamma(n, x): the n-th derivative of digamma (one unary kernel with n as its parameter) ----

polygamma_op = define("polygamma(int n, Tensor self) -> Tensor", ("pointwise",))


def _polygamma_meta(n, a):
    return empty(a._shape, _unary_result(a, _FLOAT_OP, "polygamma"), META)


polygamma_op.meta = _polygamma_meta
polygamma_op.kernels["meta"] = _polygamma_meta


@polygamma_op.kernel("cpu")
def _polygamma_cpu(n, a):
    return _run_unary(UNARY_CODES["polygamma"], _FLOAT_OP, "polygamma", a, float(n))


def polygamma(n, input, *, out=None):
    """The n-th derivative of digamma: (-1)^(n+1) n! zeta(n + 1, x) for n >= 1."""
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    return write_out(polygamma_op(n, input), out, (input,))


def mvlgamma(input, p, *, out=None):
    """Multivariate log-gamma of dimension ``p``: sum_i lgamma(x - i/2) + p(p-1)/4 log(pi)."""
    if not isinstance(p, int) or p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    if not isinstance(input, Tensor):
        raise TypeError(f"mvlgamma(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    terms = [lgamma(input - i / 2) for i in range(p)]  # noqa: F821 - defined by the unary loop
    result = terms[0]
    for t in terms[1:]:
        result = result + t
    return write_out(result + p * (p - 1) / 4 * math.log(math.pi), out, (input,))


def logical_not(input, *, out=None):
    return write_out(UNARY_OPS["logical_not"][0](input), out, (input,))


def frac(input, *, out=None):
    _check_kernel_exists("frac", input.dtype)
    return write_out(UNARY_OPS["frac"][0](input), out, (input,))


def round(input, *, decimals: int = 0, out=None):  # noqa: A001 - PyTorch's name
    if decimals == 0:
        return write_out(UNARY_OPS["round"][0](input), out, (input,))
    _check_kernel_exists("round_decimals", input.dtype)
    return write_out(round_decimals_op(input, float(10.0 ** decimals)), out, (input,))


def positive(input):
    if input.dtype is dtypes.bool:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


# -- parameterized elementwise ops (activations, nan_to_num) -------------------------------

def _declare_param_unary(name, kind, params):
    op, inplace_op = _declare_unary(name, kind, params=params)
    return op, inplace_op


relu_op, relu_inplace_op = _declare_unary("relu", _KEEP_OP)
relu6_op, _ = _declare_unary("relu6", _KEEP_OP, inplace=False)
gelu_op, _ = _declare_unary("gelu", _FLOAT_OP, inplace=False)
gelu_tanh_op, _ = _declare_unary("gelu_tanh", _FLOAT_OP, inplace=False)
silu_op, silu_inplace_op = _declare_unary("silu", _FLOAT_OP)
mish_op, mish_inplace_op = _declare_unary("mish", _FLOAT_OP)
hardsigmoid_op, hardsigmoid_inplace_op = _declare_unary("hardsigmoid", _FLOAT_OP)
hardswish_op, hardswish_inplace_op = _declare_unary("hardswish", _FLOAT_OP)
selu_op, selu_inplace_op = _declare_unary("selu", _FLOAT_OP)
softsign_op, _ = _declare_unary("softsign", _FLOAT_OP, inplace=False)
tanhshrink_op, _ = _declare_unary("tanhshrink", _FLOAT_OP, inplace=False)
softplus_op, _ = _declare_unary("softplus", _FLOAT_OP, inplace=False, params=(("beta", 1.0), ("threshold", 20.0)))
elu_op, elu_inplace_op = _declare_unary(
    "elu", _FLOAT_OP, params=(("alpha", 1.0), ("scale", 1.0), ("input_scale", 1.0))
)
celu_op, celu_inplace_op = _declare_unary("celu", _FLOAT_OP, params=(("alpha", 1.0),))
leaky_relu_op, leaky_relu_inplace_op = _declare_unary("leaky_relu", _KEEP_OP, params=(("negative_slope", 0.01),))
hardtanh_op, hardtanh_inplace_op = _declare_unary("hardtanh", _KEEP_OP, params=(("min_val", -1.0), ("max_val", 1.0)))
threshold_op, threshold_inplace_op = _declare_unary("threshold", _KEEP_OP, params=(("threshold", 0.0), ("value", 0.0)))
logit_op, logit_inplace_op = _declare_unary("logit", _FLOAT_OP, params=(("eps", -1.0),))
nan_to_num_op, nan_to_num_inplace_op = _declare_unary(
    "nan_to_num", _KEEP_OP, params=(("nan", 0.0), ("posinf", 0.0), ("neginf", 0.0))
)


def _maybe_inplace(op, inplace_op, input, inplace, *args):
    return inplace_op(input, *args) if inplace else op(input, *args)


def relu(input, inplace: bool = False):
    return _maybe_inplace(relu_op, relu_inplace_op, input, inplace)


def relu_(input):
    return relu_inplace_op(input)


def relu6(input, inplace: bool = False):
    # In place, PyTorch's relu6_ is hardtanh_(input, 0, 6) (copying relu6's result into input would
    # overwrite what autograd saved for relu6).
    return hardtanh_inplace_op(input, 0.0, 6.0) if inplace else relu6_op(input)


def gelu(input, approximate: str = "none"):
    if approximate == "none":
        return gelu_op(input)
    if approximate == "tanh":
        return gelu_tanh_op(input)
    raise RuntimeError("approximate argument must be either none or tanh.")


def silu(input, inplace: bool = False):
    return _maybe_inplace(silu_op, silu_inplace_op, input, inplace)


def mish(input, inplace: bool = False):
    return _maybe_inplace(mish_op, mish_inplace_op, input, inplace)


def hardsigmoid(input, inplace: bool = False):
    return _maybe_inplace(hardsigmoid_op, hardsigmoid_inplace_op, input, inplace)


def hardswish(input, inplace: bool = False):
    return _maybe_inplace(hardswish_op, hardswish_inplace_op, input, inplace)


def selu(input, inplace: bool = False):
    return _maybe_inplace(selu_op, selu_inplace_op, input, inplace)


def softsign(input):
    # Composite like PyTorch's (abs and the division round separately, int inputs wrap in abs).
    return div(input, add(abs(input), 1))  # noqa: F821 - abs is defined by the unary loop


def tanhshrink(input):
    # Composite like PyTorch's: tanh rounds to the input's dtype before the subtraction.
    return sub(input, tanh(input))  # noqa: F821


def softplus(input, beta: float = 1.0, threshold: float = 20.0):
    return softplus_op(input, float(beta), float(threshold))


def elu(input, alpha: float = 1.0, inplace: bool = False):
    return _maybe_inplace(elu_op, elu_inplace_op, input, inplace, float(alpha), 1.0, 1.0)


def celu(input, alpha: float = 1.0, inplace: bool = False):
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    return _maybe_inplace(celu_op, celu_inplace_op, input, inplace, float(alpha))


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):
    return _maybe_inplace(leaky_relu_op, leaky_relu_inplace_op, input, inplace, float(negative_slope))


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _maybe_inplace(hardtanh_op, hardtanh_inplace_op, input, inplace, float(min_val), float(max_val))


def threshold(input, threshold: float, value: float, inplace: bool = False):
    if not input.dtype.is_floating_point and input.dtype is not dtypes.bool:
        info = dtypes.iinfo(input.dtype)
        for v in (threshold, value):
            if not info.min <= v <= info.max:
                raise RuntimeError(f"value cannot be converted to type {input.dtype.name}_t without overflow")
    return _maybe_inplace(threshold_op, threshold_inplace_op, input, inplace, float(threshold), float(value))


def logit(input, eps: float | None = None, *, out=None):
    return write_out(logit_op(input, -1.0 if eps is None else float(eps)), out, (input,))


def nan_to_num(input, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None, *, out=None):
    if not input.dtype.is_floating_point:
        return write_out(input.clone(), out, (input,))
    info = dtypes.finfo(input.dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    return write_out(nan_to_num_op(input, float(nan), float(posinf), float(neginf)), out, (input,))


def nan_to_num_(input, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None):
    if not input.dtype.is_floating_point:
        input._bump_version()  # PyTorch still writes (a copy onto itself)
        return input
    info = dtypes.finfo(input.dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    return nan_to_num_inplace_op(input, float(nan), float(posinf), float(neginf))


# -- ternary and composites -----------------------------------------------------------------

where_op = define("where(Tensor condition, Tensor self, Tensor other) -> Tensor", ("pointwise",))


def _where_result(condition, a, b):
    if not isinstance(condition, Tensor):
        raise TypeError("where(): argument 'condition' must be Tensor")
    if condition.dtype is not dtypes.bool:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                           f"{type_name(condition.dtype)}")
    dtype = dtypes.result_type_of(a, b)
    shapes = [condition._shape] + [x._shape for x in (a, b) if isinstance(x, Tensor)]
    return broadcast_shapes(*shapes), dtype


def _where_meta(condition, a, b):
    check_meta_operands(condition, a, b)
    shape, dtype = _where_result(condition, a, b)
    return empty_pointwise(shape, dtype, META, condition, a, b)


where_op.meta = _where_meta
where_op.kernels["meta"] = _where_meta


@where_op.kernel("cpu")
def _where_cpu(condition, a, b):
    for x in (a, b):
        if isinstance(x, Tensor) and x._device is META and x.ndim != 0:
            raise RuntimeError(f"Tensor on device meta is not on the expected device {condition._device}!")
    shape, dtype = _where_result(condition, a, b)
    out = empty_pointwise(shape, dtype, condition._device, condition, a, b)
    a_t = convert(a, dtype) if isinstance(a, Tensor) else scalar_tensor(a, dtype)
    b_t = convert(b, dtype) if isinstance(b, Tensor) else scalar_tensor(b, dtype)
    _C.where(out, condition, a_t, b_t)
    return out


def where(condition, input=None, other=None, *, out=None):
    if input is None and other is None:
        return condition.nonzero(as_tuple=True)
    result = where_op(condition, input, other)
    if isinstance(out, Tensor) and out.dtype is not result.dtype:
        raise RuntimeError(f"Expected out type to be {type_name(result.dtype)} but got {type_name(out.dtype)}")
    return write_out(result, out, (condition, input, other))


def lerp(input, end, weight, *, out=None):
    return write_out(_fused.lerp_op(input, end, weight), out, (input, end, weight))


# clamp is its own op (not maximum-then-minimum as seen from outside) so that autograd gives
# the whole gradient to input at a bound, as PyTorch does, instead of maximum's tie split.
clamp_op = define("clamp(Tensor self, Scalar|Tensor? min=None, Scalar|Tensor? max=None) -> Tensor", ("pointwise",))


@clamp_op.kernel("cpu")
@clamp_op.kernel("meta")
def _clamp_kernel(input, min=None, max=None):  # noqa: A002 - PyTorch's names
    if any(getattr(x, "dtype", None) in _complex_numbers.COMPLEX or isinstance(x, complex) for x in (input, min, max)):
        _complex_numbers._reject("clamp", input.dtype)
    result = input
    dtype = dtypes.result_type_of(*[x for x in (input, min, max) if x is not None])
    for bound in (min, max):
        if bound is not None and not isinstance(bound, Tensor):
            check_scalar_fits(bound, dtype)  # uint8.clamp(-5, 300) raises, as in PyTorch
    if result.dtype is not dtype:
        result = result.to(dtype)
    if min is not None:
        result = maximum_op(result, min)
    if max is not None:
        result = minimum_op(result, max)
    if result is input:
        result = input.clone()
    if result.dtype is not dtype:
        result = result.to(dtype)
    return result


clamp_op.meta = _clamp_kernel

# clamp_ is an in-place op of its own (not clamp(out=self)) so that autograd records it on self.
clamp_inplace_op = define(
    "clamp_(Tensor(a!) self, Scalar|Tensor? min=None, Scalar|Tensor? max=None) -> Tensor(a!)", ("pointwise", "inplace")
)


@clamp_inplace_op.kernel("cpu")
@clamp_inplace_op.kernel("meta")
def _clamp_inplace_kernel(self, min=None, max=None):  # noqa: A002 - PyTorch's names
    _check_write(self, (min, max))
    result = _clamp_kernel(self, min, max)
    if not any(isinstance(b, Tensor) for b in (min, max)) and not dtypes.can_cast(result.dtype, self.dtype):
        # clamp_(Scalar, Scalar) names self's type as c10's TypeMeta does ("long int"), clamp_(Tensor) as "Long"
        raise RuntimeError(f"result type {type_name(result.dtype)} can't be cast to the desired output type "
                           f"{type_meta_name(self.dtype)}")
    _check_inplace(self, result._shape, result.dtype, "clamp_")
    if self._device is not META:
        _C.copy_(self, result)
        self._bump_version()
    return self


def _check_clamp_bounds(fn: str, min, max) -> None:  # noqa: A002
    """PyTorch's clamp has a (Tensor?, Tensor?) and a (Number?, Number?) form, a 0-d tensor passing
    for a number: a tensor of one or more dims beside a number bound is a TypeError."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if min is None or max is None or isinstance(min, Tensor) == isinstance(max, Tensor):
        return
    tensor, number = (min, max) if isinstance(min, Tensor) else (max, min)
    if tensor.ndim != 0:
        raise TypeError(f"{fn}() received an invalid combination of arguments - got min and max of types "
                        f"({type(min).__name__}, {type(max).__name__}), but expected both Tensor or both Number "
                        f"(a {tensor.ndim}-d tensor is no Number)")


def clamp(input, min=None, max=None, *, out=None):  # noqa: A002 - PyTorch's names
    _check_clamp_bounds("clamp", min, max)
    result = clamp_op(input, min, max)
    if isinstance(out, Tensor) and out.dtype is not result.dtype:  # clamp's out= takes no cast in PyTorch
        raise RuntimeError(f"Found dtype {type_name(out.dtype)} but expected {type_name(result.dtype)}")
    return write_out(result, out, (input, min, max))


clip = clamp


def clamp_(input, min=None, max=None):  # noqa: A002
    """In place: a real in-place op, so autograd records ClampBackward on ``input`` like PyTorch."""
    _check_clamp_bounds("clamp_", min, max)
    return clamp_inplace_op(input, min, max)


def clamp_min(input, min):  # noqa: A002
    return clamp(input, min=min)


def clamp_max(input, max):  # noqa: A002
    return clamp(input, max=max)


def sigmoid_(input):
    return UNARY_OPS["sigmoid"][1](input)


def rad2deg(input):
    return mul(input if input.dtype.is_floating_point else input.to(dtypes.get_default_dtype()), 180.0 / math.pi)


def deg2rad(input):
    return mul(input if input.dtype.is_floating_point else input.to(dtypes.get_default_dtype()), math.pi / 180.0)


def addcmul(input, tensor1, tensor2, *, value=1, out=None):
    return write_out(_fused.addcmul_op(input, tensor1, tensor2, value), out, (input, tensor1, tensor2))


def addcdiv(input, tensor1, tensor2, *, value=1, out=None):
    return write_out(_fused.addcdiv_op(input, tensor1, tensor2, value), out, (input, tensor1, tensor2))


def square(input, *, out=None):
    if input.dtype is dtypes.bool:
        return write_out(pow_op(input, 2), out, (input,))
    return write_out(UNARY_OPS["square"][0](input), out, (input,))


# where on the native fast path (csrc/common/fast_where.cpp): a bool condition with float values of one
# dtype runs in C; ember.where with three positional arguments calls the op from C (fast_front.cpp).
where_op._set_fast(12, 0, 0)
where = _C.FastFront(where_op, 13, where)
# add/sub/mul/div(tensor, tensor or number) with no keyword are their op (alpha 1, no rounding mode, no
# bool operand): called from C without these functions' frames.
add = _C.FastFront(add_op, 14, add)
sub = _C.FastFront(sub_op, 14, sub)
mul = _C.FastFront(mul_op, 14, mul)
div = _C.FastFront(div_op, 14, div)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
abs                         function method alias=absolute
abs_                        function method fn=abs_inplace_op
absolute_                   method fn=abs_inplace_op
acos                        function method alias=arccos
acos_                       function method fn=acos_inplace_op alias=arccos_
acosh                       function method alias=arccosh
acosh_                      function method fn=acosh_inplace_op alias=arccosh_
add                         function method
addcdiv                     function method
addcmul                     function method
arcsin_                     function method fn=asin_inplace_op alias=asin_
arcsinh_                    function method fn=asinh_inplace_op alias=asinh_
arctan2_                    method fn=atan2_inplace_op alias=atan2_
arctan_                     function method fn=atan_inplace_op alias=atan_
arctanh_                    function method fn=atanh_inplace_op alias=atanh_
asin                        function method alias=arcsin
asinh                       function method alias=arcsinh
atan                        function method alias=arctan
atan2                       function method alias=arctan2
atanh                       function method alias=arctanh
bitwise_and                 function method
bitwise_and_                method fn=bitwise_and_inplace_op
bitwise_left_shift          function method
bitwise_left_shift_         method fn=bitwise_left_shift_inplace_op
bitwise_not                 function method
bitwise_not_                method fn=bitwise_not_inplace_op
bitwise_or                  function method
bitwise_or_                 method fn=bitwise_or_inplace_op
bitwise_right_shift         function method
bitwise_right_shift_        method fn=bitwise_right_shift_inplace_op
bitwise_xor                 function method
bitwise_xor_                method fn=bitwise_xor_inplace_op
ceil                        function method
ceil_                       function method fn=ceil_inplace_op
celu                        function method
clamp                       function method alias=clip
clamp_                      function method
clamp_max                   function method
clamp_min                   function method
copysign                    function method
copysign_                   method fn=copysign_inplace_op
cos                         function method
cos_                        function method fn=cos_inplace_op
cosh                        function method
cosh_                       function method fn=cosh_inplace_op
deg2rad                     function method
digamma                     function method special=digamma,psi
digamma_                    method fn=digamma_inplace_op
div                         function method alias=divide,true_divide
elu                         function method
elu_                        method fn=elu_inplace_op
eq                          function method
eq_                         method fn=eq_inplace_op
equal                       function method
erf                         function method special=erf
erf_                        function method fn=erf_inplace_op
erfc                        function method special=erfc
erfc_                       function method fn=erfc_inplace_op
erfinv                      function method special=erfinv
erfinv_                     method fn=erfinv_inplace_op
exp                         function method
exp2                        function method special=exp2
exp2_                       function method fn=exp2_inplace_op
exp_                        function method fn=exp_inplace_op
expm1                       function method special=expm1
expm1_                      function method fn=expm1_inplace_op
fix_                        function method fn=trunc_inplace_op alias=trunc_
float_power                 function method
floor                       function method
floor_                      function method fn=floor_inplace_op
floor_divide                function method
floor_divide_               method fn=floor_divide_inplace_op
fmax                        function method
fmin                        function method
fmod                        function method
fmod_                       method fn=fmod_inplace_op
frac                        function method
frac_                       function method fn=frac_inplace_op
ge                          function method alias=greater_equal
ge_                         method fn=ge_inplace_op alias=greater_equal_
gelu                        function method
greater_                    method fn=gt_inplace_op alias=gt_
gt                          function method alias=greater
hardsigmoid                 function method
hardsigmoid_                method fn=hardsigmoid_inplace_op
hardswish                   function method
hardswish_                  method fn=hardswish_inplace_op
hardtanh                    function method
hardtanh_                   method fn=hardtanh_inplace_op
hypot                       function method
hypot_                      method fn=hypot_inplace_op
isfinite                    function method
isinf                       function method
isnan                       function method
isneginf                    function method
isposinf                    function method
le                          function method alias=less_equal
le_                         method fn=le_inplace_op alias=less_equal_
leaky_relu                  function method
leaky_relu_                 method fn=leaky_relu_inplace_op
lerp                        function method
less_                       method fn=lt_inplace_op alias=lt_
lgamma                      function method special=gammaln
lgamma_                     method fn=lgamma_inplace_op
log                         function method
log10                       function method
log10_                      function method fn=log10_inplace_op
log1p                       function method special=log1p
log1p_                      function method fn=log1p_inplace_op
log2                        function method
log2_                       function method fn=log2_inplace_op
log_                        function method fn=log_inplace_op
logaddexp                   function method
logaddexp2                  function method
logical_and                 function method
logical_and_                method fn=logical_and_inplace_op
logical_not                 function method
logical_not_                method fn=logical_not_inplace_op
logical_or                  function method
logical_or_                 method fn=logical_or_inplace_op
logical_xor                 function method
logical_xor_                method fn=logical_xor_inplace_op
logit                       function method
lt                          function method alias=less
maximum                     function method
minimum                     function method
mish                        function method
mish_                       method fn=mish_inplace_op
mul                         function method alias=multiply
mul_                        method fn=mul_inplace_op alias=multiply_
mvlgamma                    function method special=multigammaln
nan_to_num                  function method
nan_to_num_                 function method
ne                          function method alias=not_equal
ne_                         method fn=ne_inplace_op alias=not_equal_
neg                         function method alias=negative
neg_                        function method fn=neg_inplace_op alias=negative_
nextafter                   function method
polygamma                   function special=polygamma
positive                    function method
pow                         function method
pow_                        method fn=pow_inplace_op
rad2deg                     function method
reciprocal                  function method
reciprocal_                 function method fn=reciprocal_inplace_op
relu                        function method
relu6                       function method
relu_                       function method=relu_inplace_op
remainder                   function method
remainder_                  method fn=remainder_inplace_op
round                       function method
round_                      function method fn=round_inplace_op
rsqrt                       function method
rsqrt_                      function method fn=rsqrt_inplace_op
rsub                        function method
selu                        function method
sigmoid                     function method special=expit
sigmoid_                    function method=sigmoid_inplace_op
sign                        function method
sign_                       method fn=sign_inplace_op
signbit                     function method
silu                        function method
silu_                       method fn=silu_inplace_op
sin                         function method
sin_                        function method fn=sin_inplace_op
sinh                        function method
sinh_                       function method fn=sinh_inplace_op
softplus                    function method
softsign                    function method
sqrt                        function method
sqrt_                       function method fn=sqrt_inplace_op
square                      function method
square_                     function method fn=square_inplace_op
sub                         function method alias=subtract
tan                         function method
tan_                        function method fn=tan_inplace_op
tanh                        function method
tanh_                       function method fn=tanh_inplace_op
tanhshrink                  function method
threshold                   function method
trunc                       function method alias=fix
where                       function
xlogy                       function method
xlogy_                      function method fn=xlogy_inplace_op
""")
