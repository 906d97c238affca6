"""Tensor methods that are not a functional op with the tensor first: the Python operators,
the in-place methods whose signature differs from their op's, dtype casts and properties.

Each is bound to ``Tensor`` by its record in the table at the end (bindings.py generates them).
"""

from __future__ import annotations

from . import dtypes
from ._native import _C
from .interop import to_numpy
from .ops._common import check_write, label_as_op, type_name
from .ops.linalg import products as linalg
from .ops.pointwise import elementwise as pointwise
from .ops.pointwise import fused as fused_pointwise
from .ops.shape import views
from .optable import declare
from .tensor import Tensor


def _reflected(op):
    def method(self, other):
        return op(other, self)

    method.__name__ = f"__r{op.name}__"
    return method


def _inplace_operator(op):
    def method(self, other):
        return op(self, other)

    method.__name__ = f"__i{op.name.rstrip('_')}__"
    return method


# -- operators ---------------------------------------------------------------------------------------

def _sub(self, other):
    pointwise._check_sub_bool(self, other)
    return pointwise.sub_op(self, other)


def _rsub(self, other):
    pointwise._check_sub_bool(other, self)
    # grad_fn as PyTorch's overloads name them: number - tensor is rsub.Scalar (RsubBackward1).
    return label_as_op(pointwise.sub_op(other, self), "rsub_scalar", (self,))


def _pow(self, other):
    pointwise._check_int_pow(self, other)
    out = pointwise.pow_op(self, other)
    return label_as_op(out, "pow_tensor_tensor") if isinstance(other, Tensor) else out  # PowBackward1


def _rtruediv(self, other):
    # PyTorch computes number / tensor as reciprocal(tensor) * number: its node is MulBackward0.
    return label_as_op(pointwise.div_op(other, self), "mul")


def _rpow(self, other):
    return label_as_op(pointwise.pow_op(other, self), "pow_scalar")  # pow.Scalar: PowBackward2


def _isub(self, other):
    pointwise._check_sub_bool(self, other)
    return pointwise.sub_inplace_op(self, other)


def _neg(self):
    if self.dtype is dtypes.bool:
        raise RuntimeError(pointwise.NEG_BOOL_MESSAGE)
    return pointwise.UNARY_OPS["neg"][0](self)


def _invert(self):
    if self.dtype.is_floating_point:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    return pointwise.UNARY_OPS["bitwise_not"][0](self)


_matmul = linalg.matmul  # the function itself: a forwarding frame cost ~5% of a 64x64 product


def _rmatmul(self, other):
    return linalg.matmul(other, self)


def _eq(self, other):
    if not isinstance(other, (Tensor, bool, int, float, complex)):
        return NotImplemented
    return pointwise.eq_op(self, other)


def _ne(self, other):
    if not isinstance(other, (Tensor, bool, int, float, complex)):
        return NotImplemented
    return pointwise.ne_op(self, other)


_radd = _reflected(pointwise.add_op)
_rmul = _reflected(pointwise.mul_op)
_rfloordiv = _reflected(pointwise.floor_divide_op)
_rmod = _reflected(pointwise.remainder_op)
_rand = _reflected(pointwise.bitwise_and_op)
_ror = _reflected(pointwise.bitwise_or_op)
_rxor = _reflected(pointwise.bitwise_xor_op)
_rlshift = _reflected(pointwise.bitwise_left_shift_op)
_rrshift = _reflected(pointwise.bitwise_right_shift_op)
_iadd = _inplace_operator(pointwise.add_inplace_op)
_imul = _inplace_operator(pointwise.mul_inplace_op)
_itruediv = _inplace_operator(pointwise.div_inplace_op)
_ifloordiv = _inplace_operator(pointwise.floor_divide_inplace_op)
_imod = _inplace_operator(pointwise.remainder_inplace_op)
_ipow = _inplace_operator(pointwise.pow_inplace_op)
_iand = _inplace_operator(pointwise.bitwise_and_inplace_op)
_ior = _inplace_operator(pointwise.bitwise_or_inplace_op)
_ixor = _inplace_operator(pointwise.bitwise_xor_inplace_op)
_ilshift = _inplace_operator(pointwise.bitwise_left_shift_inplace_op)
_irshift = _inplace_operator(pointwise.bitwise_right_shift_inplace_op)
_abs = pointwise.UNARY_OPS["abs"][0]


# -- methods whose signature differs from their op's ---------------------------------------------------

def polygamma(self, n):
    return pointwise.polygamma(n, self)


def polygamma_(self, n):
    return self.copy_(pointwise.polygamma(n, self))


def mvlgamma_(self, p):
    return self.copy_(pointwise.mvlgamma(self, p))


_DEPRECATED_WARNED: set = set()


def _scalar_first(name: str, tensor_names: tuple, scalar_name: str, first, rest: tuple):
    """PyTorch's deprecated overloads that take the scalar first (``p.add_(-lr, grad)``,
    ``v.addcmul_(1 - beta, g, g)``, ``p.addcdiv_(-step, m, d)``), still accepted there with a
    warning (once per overload): (scalar, tensors) when the call has that form, else None."""
    if len(rest) != len(tensor_names) or isinstance(first, Tensor) or not all(isinstance(t, Tensor) for t in rest):
        return None
    if not isinstance(first, (int, float, complex)):
        return None
    if name not in _DEPRECATED_WARNED:
        _DEPRECATED_WARNED.add(name)
        import warnings

        old = ", ".join(f"Tensor {t}" for t in tensor_names)
        warnings.warn(f"This overload of {name} is deprecated:\n\t{name}(Number {scalar_name}, {old})\nConsider "
                      f"using one of the following signatures instead:\n\t{name}({old}, *, Number {scalar_name} = 1)",
                      UserWarning, stacklevel=3)
    return first, rest


def _too_many(name: str, given: int, takes: int):
    return TypeError(f"{name}() takes {takes} positional arguments but {given} were given")


def add_(self, other, *args, alpha=1):
    if args:
        form = _scalar_first("add_", ("other",), "alpha", other, args)
        if form is None:
            raise _too_many("add_", 2 + len(args), 2)
        alpha, (other,) = form
    pointwise.check_alpha(self, other, alpha)
    if fused_pointwise.fuses_alpha(self, other, alpha):
        return fused_pointwise.add_scaled_inplace_op(self, other, alpha)
    return pointwise.add_inplace_op(self, pointwise._scaled(self, other, alpha))


def sub_(self, other, *args, alpha=1):
    if args:
        form = _scalar_first("sub_", ("other",), "alpha", other, args)
        if form is None:
            raise _too_many("sub_", 2 + len(args), 2)
        alpha, (other,) = form
    pointwise._check_sub_bool(self, other)
    pointwise.check_alpha(self, other, alpha)
    if fused_pointwise.fuses_alpha(self, other, alpha):
        return fused_pointwise.add_scaled_inplace_op(self, other, fused_pointwise.negated_alpha(alpha))
    return pointwise.sub_inplace_op(self, pointwise._scaled(self, other, alpha))


def div_(self, other, *, rounding_mode=None):
    if rounding_mode is None:
        return pointwise.div_inplace_op(self, other)
    check_write(self, (other,))  # computed out of place: PyTorch's checks on the in-place write first
    result = pointwise.div(self, other, rounding_mode=rounding_mode)
    if not dtypes.can_cast(result.dtype, self.dtype):  # bool.div_(1, rounding_mode=...) is int64 there
        raise RuntimeError(f"result type {type_name(result.dtype)} can't be cast to the desired output type "
                           f"{type_name(self.dtype)}")
    return self.copy_(result)



# With no keyword these are their in-place op (alpha 1, no rounding mode): called from C
# (csrc/common/fast_front.cpp) without this module's Python frame.
add_ = _C.FastFront(pointwise.add_inplace_op, 14, add_)
sub_ = _C.FastFront(pointwise.sub_inplace_op, 14, sub_)
div_ = _C.FastFront(pointwise.div_inplace_op, 14, div_)

def lerp_(self, end, weight):
    return fused_pointwise.lerp_inplace_op(self, end, weight)


def logit_(self, eps=None):  # PyTorch's signature: eps by keyword, None for no clamping
    return pointwise.logit_inplace_op(self, -1.0 if eps is None else float(eps))


def addcmul_(self, tensor1, tensor2, *args, value=1):
    if args:
        form = _scalar_first("addcmul_", ("tensor1", "tensor2"), "value", tensor1, (tensor2,) + args)
        if form is None:
            raise _too_many("addcmul_", 3 + len(args), 3)
        value, (tensor1, tensor2) = form
    return fused_pointwise.addcmul_inplace_op(self, tensor1, tensor2, value)


def addcdiv_(self, tensor1, tensor2, *args, value=1):
    if args:
        form = _scalar_first("addcdiv_", ("tensor1", "tensor2"), "value", tensor1, (tensor2,) + args)
        if form is None:
            raise _too_many("addcdiv_", 3 + len(args), 3)
        value, (tensor1, tensor2) = form
    return fused_pointwise.addcdiv_inplace_op(self, tensor1, tensor2, value)



def where(self, condition, other):  # the method's self is the values, not the condition
    return pointwise.where(condition, self, other)


def cpu(self, memory_format=None):
    return views.to(self, "cpu")


def numpy(self, *, force: bool = False):
    return to_numpy(self, force=force)


# -- dtype casts (``x.float()`` ...) --------------------------------------------------------------------

_to_float32 = views._cast(dtypes.float32)
_to_float64 = views._cast(dtypes.float64)
_to_float16 = views._cast(dtypes.float16)
_to_bfloat16 = views._cast(dtypes.bfloat16)
_to_int64 = views._cast(dtypes.int64)
_to_int32 = views._cast(dtypes.int32)
_to_int16 = views._cast(dtypes.int16)
_to_int8 = views._cast(dtypes.int8)
_to_uint8 = views._cast(dtypes.uint8)
_to_bool = views._cast(dtypes.bool)
_to_complex64 = views._cast(dtypes.complex64)
_to_complex128 = views._cast(dtypes.complex128)


declare(__name__, """
__add__          method=pointwise.add_op
__radd__         method=_radd
__iadd__         method=_iadd
__sub__          method=_sub
__rsub__         method=_rsub
__isub__         method=_isub
__mul__          method=pointwise.mul_op
__rmul__         method=_rmul
__imul__         method=_imul
__truediv__      method=pointwise.div_op
__rtruediv__     method=_rtruediv
__itruediv__     method=_itruediv
__floordiv__     method=pointwise.floor_divide_op
__rfloordiv__    method=_rfloordiv
__ifloordiv__    method=_ifloordiv
__mod__          method=pointwise.remainder_op
__rmod__         method=_rmod
__imod__         method=_imod
__pow__          method=_pow
__rpow__         method=_rpow
__ipow__         method=_ipow
__matmul__       method=_matmul
__rmatmul__      method=_rmatmul
__and__          method=pointwise.bitwise_and_op
__rand__         method=_rand
__iand__         method=_iand
__or__           method=pointwise.bitwise_or_op
__ror__          method=_ror
__ior__          method=_ior
__xor__          method=pointwise.bitwise_xor_op
__rxor__         method=_rxor
__ixor__         method=_ixor
__lshift__       method=pointwise.bitwise_left_shift_op
__rlshift__      method=_rlshift
__ilshift__      method=_ilshift
__rshift__       method=pointwise.bitwise_right_shift_op
__rrshift__      method=_rrshift
__irshift__      method=_irshift
__eq__           method=_eq
__ne__           method=_ne
__lt__           method=pointwise.lt_op
__le__           method=pointwise.le_op
__gt__           method=pointwise.gt_op
__ge__           method=pointwise.ge_op
__neg__          method=_neg
__pos__          method=pointwise.positive
__abs__          method=_abs
__invert__       method=_invert
polygamma        method
polygamma_       method
mvlgamma_        method
add_             method
sub_             method alias=subtract_
div_             method alias=divide_,true_divide_
lerp_            method
logit_           function method
addcmul_         method
addcdiv_         method
where            method
cpu              method
numpy            method
float            method=_to_float32
double           method=_to_float64
half             method=_to_float16
bfloat16         method=_to_bfloat16
long             method=_to_int64
int              method=_to_int32
short            method=_to_int16
char             method=_to_int8
byte             method=_to_uint8
bool             method=_to_bool
cfloat           method=_to_complex64
cdouble          method=_to_complex128
""")
