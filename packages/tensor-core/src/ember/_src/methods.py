"""Attaches the functional ops to Tensor as methods and Python operators.

A method is the functional op with the tensor as its first argument, so each op is written
once. Operators map to the dispatcher's ops directly (no out=/alpha handling needed).
"""

from __future__ import annotations

from . import dtypes as dt
from .ops import fused_pointwise as fpw
from .ops import pointwise as pw
from .ops import views as vw
from .ops._common import check_write
from .tensor import Tensor


def _reflected(op):
    def method(self, other):
        return op(other, self)

    return method


def _operators():
    def _sub(self, other):
        pw._check_sub_bool(self, other)
        return pw.sub_op(self, other)

    def _rsub(self, other):
        pw._check_sub_bool(other, self)
        return pw.sub_op(other, self)

    def _pow(self, other):
        pw._check_int_pow(self, other)
        return pw.pow_op(self, other)

    def _inplace(op):
        def method(self, other):
            return op(self, other)

        return method

    def _isub(self, other):
        pw._check_sub_bool(self, other)
        return pw.sub_inplace_op(self, other)

    def _neg(self):
        if self.dtype is dt.bool:
            raise RuntimeError(
                "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
                "use the `~` or `logical_not()` operator instead."
            )
        return pw.UNARY_OPS["neg"][0](self)

    def _invert(self):
        if self.dtype.is_floating_point:
            raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
        return pw.UNARY_OPS["bitwise_not"][0](self)

    def _matmul(self, other):
        from .ops.linalg import matmul

        return matmul(self, other)

    def _rmatmul(self, other):
        from .ops.linalg import matmul

        return matmul(other, self)

    def _eq(self, other):
        if not isinstance(other, (Tensor, bool, int, float, complex)):
            return NotImplemented
        return pw.eq_op(self, other)

    def _ne(self, other):
        if not isinstance(other, (Tensor, bool, int, float, complex)):
            return NotImplemented
        return pw.ne_op(self, other)

    return {
        "__add__": pw.add_op,
        "__radd__": _reflected(pw.add_op),
        "__iadd__": _inplace(pw.add_inplace_op),
        "__sub__": _sub,
        "__rsub__": _rsub,
        "__isub__": _isub,
        "__mul__": pw.mul_op,
        "__rmul__": _reflected(pw.mul_op),
        "__imul__": _inplace(pw.mul_inplace_op),
        "__truediv__": pw.div_op,
        "__rtruediv__": _reflected(pw.div_op),
        "__itruediv__": _inplace(pw.div_inplace_op),
        "__floordiv__": pw.floor_divide_op,
        "__rfloordiv__": _reflected(pw.floor_divide_op),
        "__ifloordiv__": _inplace(pw.floor_divide_inplace_op),
        "__mod__": pw.remainder_op,
        "__rmod__": _reflected(pw.remainder_op),
        "__imod__": _inplace(pw.remainder_inplace_op),
        "__pow__": _pow,
        "__rpow__": _reflected(pw.pow_op),
        "__ipow__": _inplace(pw.pow_inplace_op),
        "__matmul__": _matmul,
        "__rmatmul__": _rmatmul,
        "__and__": pw.bitwise_and_op,
        "__rand__": _reflected(pw.bitwise_and_op),
        "__iand__": _inplace(pw.bitwise_and_inplace_op),
        "__or__": pw.bitwise_or_op,
        "__ror__": _reflected(pw.bitwise_or_op),
        "__ior__": _inplace(pw.bitwise_or_inplace_op),
        "__xor__": pw.bitwise_xor_op,
        "__rxor__": _reflected(pw.bitwise_xor_op),
        "__ixor__": _inplace(pw.bitwise_xor_inplace_op),
        "__lshift__": pw.bitwise_left_shift_op,
        "__rlshift__": _reflected(pw.bitwise_left_shift_op),
        "__ilshift__": _inplace(pw.bitwise_left_shift_inplace_op),
        "__rshift__": pw.bitwise_right_shift_op,
        "__rrshift__": _reflected(pw.bitwise_right_shift_op),
        "__irshift__": _inplace(pw.bitwise_right_shift_inplace_op),
        "__eq__": _eq,
        "__ne__": _ne,
        "__lt__": pw.lt_op,
        "__le__": pw.le_op,
        "__gt__": pw.gt_op,
        "__ge__": pw.ge_op,
        "__neg__": _neg,
        "__pos__": pw.positive,
        "__abs__": pw.UNARY_OPS["abs"][0],
        "__invert__": _invert,
    }


def _inplace_method(name):
    """``x.exp_()``-style methods for unary and binary pointwise ops."""
    if name in pw.UNARY_OPS and pw.UNARY_OPS[name][1] is not None:
        return pw.UNARY_OPS[name][1]
    op = getattr(pw, f"{name}_inplace_op", None)
    return op


def install(functional: dict) -> None:
    """Installs every functional op whose first argument is the tensor as a method."""
    for name, fn in _operators().items():
        setattr(Tensor, name, fn)
    for name, fn in functional.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
    for name in list(pw.UNARY_OPS) + [n[:-11] for n in dir(pw) if n.endswith("_inplace_op")]:
        op = _inplace_method(name)
        if op is not None and not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", op)

    def polygamma(self, n):
        return pw.polygamma(n, self)

    def polygamma_(self, n):
        return self.copy_(pw.polygamma(n, self))

    def mvlgamma_(self, p):
        return self.copy_(pw.mvlgamma(self, p))

    def add_(self, other, *, alpha=1):
        if fpw.fuses_alpha(self, other, alpha):
            return fpw.add_scaled_inplace_op(self, other, alpha)
        return pw.add_inplace_op(self, pw._scaled(self, other, alpha))

    def sub_(self, other, *, alpha=1):
        pw._check_sub_bool(self, other)
        if fpw.fuses_alpha(self, other, alpha):
            return fpw.add_scaled_inplace_op(self, other, fpw.negated_alpha(alpha))
        return pw.sub_inplace_op(self, pw._scaled(self, other, alpha))

    def div_(self, other, *, rounding_mode=None):
        if rounding_mode is None:
            return pw.div_inplace_op(self, other)
        check_write(self, (other,))  # computed out of place: PyTorch's checks on the in-place write first
        result = pw.div(self, other, rounding_mode=rounding_mode)
        if not dt.can_cast(result.dtype, self.dtype):  # bool.div_(1, rounding_mode=...) is int64 there
            from .ops._common import type_name

            raise RuntimeError(f"result type {type_name(result.dtype)} can't be cast to the desired output type "
                               f"{type_name(self.dtype)}")
        return self.copy_(result)

    def lerp_(self, end, weight):
        return fpw.lerp_inplace_op(self, end, weight)

    def logit_(self, eps=None):  # PyTorch's signature: eps by keyword, None for no clamping
        return pw.logit_inplace_op(self, -1.0 if eps is None else float(eps))

    def addcmul_(self, tensor1, tensor2, *, value=1):
        return fpw.addcmul_inplace_op(self, tensor1, tensor2, value)

    def addcdiv_(self, tensor1, tensor2, *, value=1):
        return fpw.addcdiv_inplace_op(self, tensor1, tensor2, value)

    def masked_fill_(self, mask, value):
        from .ops.indexing import masked_fill_

        return masked_fill_(self, mask, value)

    def where(self, condition, other):  # the method's self is the values, not the condition
        return pw.where(condition, self, other)

    extra = {
        "where": where,
        "add_": add_, "sub_": sub_, "subtract_": sub_, "mul_": pw.mul_inplace_op, "multiply_": pw.mul_inplace_op,
        "div_": div_, "divide_": div_, "true_divide_": div_,
        "lerp_": lerp_, "logit_": logit_, "addcmul_": addcmul_, "addcdiv_": addcdiv_,
        "clamp_": pw.clamp_, "clip_": pw.clamp_,
        "relu_": pw.relu_inplace_op, "sigmoid_": pw.UNARY_OPS["sigmoid"][1], "nan_to_num_": pw.nan_to_num_,
        "T": property(vw._full_transpose), "mT": property(vw._matrix_transpose), "H": property(vw._conj_full_transpose),
        "mH": property(vw.adjoint),
        "view": vw.view, "type": vw._type_, "fill_": vw.fill_, "zero_": vw.zero_,
        "eq_": pw.eq_inplace_op, "ne_": pw.ne_inplace_op, "lt_": pw.lt_inplace_op, "le_": pw.le_inplace_op,
        "gt_": pw.gt_inplace_op, "ge_": pw.ge_inplace_op,
        "polygamma": polygamma, "polygamma_": polygamma_, "mvlgamma_": mvlgamma_,
    }
    for name, fn in extra.items():
        setattr(Tensor, name, fn)
    casts = {"float": dt.float32, "double": dt.float64, "half": dt.float16, "bfloat16": dt.bfloat16,
             "long": dt.int64, "int": dt.int32, "short": dt.int16, "char": dt.int8, "byte": dt.uint8, "bool": dt.bool,
             "cfloat": dt.complex64, "cdouble": dt.complex128}
    for name, d in casts.items():
        setattr(Tensor, name, vw._cast(d))

    def cpu(self, memory_format=None):
        return vw.to(self, "cpu")

    def numpy(self, *, force: bool = False):
        from .interop import to_numpy

        return to_numpy(self, force=force)

    Tensor.cpu = cpu
    Tensor.numpy = numpy
