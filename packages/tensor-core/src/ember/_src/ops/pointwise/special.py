"""Special functions: the modified Bessel functions ``i0``/``special.i1`` (``_C.bessel_i_``), the
regularized incomplete gamma functions ``igamma``/``igammac`` (``_C.igamma_``), ``frexp``
(``_C.frexp_``), and the composites ``sinc`` and ``ldexp``.

Native ops compute float16/bfloat16 in float32 and integer inputs in the default float dtype, as
PyTorch's CPU kernels do; their derivatives live in ember-autograd's ``formulas/mathfns.py``.
"""

from __future__ import annotations

import math

from ... import dtypes, grad_mode
from ..._native import _C
from ...device import META
from ...dispatch import define
from ...optable import declare
from ...shapes import broadcast_shapes
from ...tensor import Tensor
from .._common import (
    HALF_TYPES,
    check_same_device,
    compute_dtype,
    convert,
    empty,
    return_type,
    type_name,
    write_out,
)
from ..shape import views
from . import elementwise
from .fused import check_inplace

frexp_result = return_type("frexp", ["mantissa", "exponent"])


def _check_tensor(x, fn: str, arg: str = "input", pos: int = 1) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be Tensor, not {type(x).__name__}")


def _float_result(x: Tensor, fn: str):
    """PyTorch's unary float result dtype: integers and bool give the default float dtype."""
    if x.dtype.is_complex:
        raise NotImplementedError(f"\"{fn}\" not implemented for '{type_name(x.dtype)}'")
    return x.dtype if x.dtype.is_floating_point else dtypes.get_default_dtype()


def _declare(schema: str, meta, tags=("pointwise",)):
    op = define(schema, tags, meta)
    op.kernels["meta"] = meta
    return op


# -- i0 / special.i1 ----------------------------------------------------------------------------

def _bessel_op(name: str, order: int, kernel_name: str, tags=("pointwise",)):
    def meta(self):
        _check_tensor(self, name)
        return empty(self._shape, _float_result(self, kernel_name), META)

    op = _declare(f"{name}(Tensor self) -> Tensor", meta, tags)

    @op.kernel("cpu")
    def cpu(self):
        dtype = _float_result(self, kernel_name)
        work = convert(self, compute_dtype(dtype))
        out = empty(self._shape, work.dtype, self._device)
        _C.bessel_i_(out, work, order)
        return convert(out, dtype)

    return op


i0_op = _bessel_op("i0", 0, "i0_cpu")
i1_op = _bessel_op("special_i1", 1, "i1_cpu", ())  # not top-level: kept out of the pointwise fuzz table


def i0(input: Tensor, *, out=None) -> Tensor:
    """Modified Bessel function of the first kind, order 0."""
    return write_out(i0_op(input), out)


def i0_(input: Tensor) -> Tensor:
    return _inplace(input, i0_op, input)


def special_i1(input: Tensor, *, out=None) -> Tensor:
    """Modified Bessel function of the first kind, order 1 (``ember.special.i1``)."""
    return write_out(i1_op(input), out)


def _inplace(self: Tensor, fn, *args) -> Tensor:
    """``fn(*args)`` (whose first argument is ``self``) written back into ``self``: the in-place
    methods of composites. When autograd records, ``fn`` reads a clone of ``self``: its backward
    may save that input, which the write-back would otherwise overwrite (a version error)."""
    if grad_mode.STATE.grad_enabled and any(isinstance(a, Tensor) and a._requires_grad for a in args):
        args = (views.clone_op(self), *args[1:])
    result = fn(*args)
    check_inplace(self, result._shape, result.dtype)
    return self.copy_(result)


# -- igamma / igammac ---------------------------------------------------------------------------

def _igamma_op(name: str, upper: bool):
    def meta(self, other):
        _check_tensor(self, name)
        _check_tensor(other, name, "other", 2)
        check_same_device(self, other)
        dtype = dtypes.result_type_of(self, other)
        if not dtype.is_floating_point:
            raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{type_name(dtype)}'")
        return empty(broadcast_shapes(self._shape, other._shape), dtype, META)

    op = _declare(f"{name}(Tensor self, Tensor other) -> Tensor", meta)

    @op.kernel("cpu")
    def cpu(self, other):
        result = meta(self, other)
        work = compute_dtype(result.dtype)
        out = empty(result._shape, work, self._device)
        # Through the result dtype first: a float16 result rounds its operands to float16.
        a, x = (convert(convert(t, result.dtype), work) for t in (self, other))
        _C.igamma_(out, a, x, upper)
        return convert(out, result.dtype)

    return op


igamma_op = _igamma_op("igamma", False)
igammac_op = _igamma_op("igammac", True)


def igamma(input: Tensor, other: Tensor, *, out=None) -> Tensor:
    """Regularized lower incomplete gamma function P(input, other)."""
    return write_out(igamma_op(input, other), out)


def igammac(input: Tensor, other: Tensor, *, out=None) -> Tensor:
    """Regularized upper incomplete gamma function Q(input, other) = 1 - P(input, other)."""
    return write_out(igammac_op(input, other), out)


def igamma_(input: Tensor, other: Tensor) -> Tensor:
    return _inplace(input, igamma_op, input, other)


def igammac_(input: Tensor, other: Tensor) -> Tensor:
    return _inplace(input, igammac_op, input, other)


# -- frexp -----------------------------------------------------------------------------------------

def _frexp_meta(self):
    _check_tensor(self, "frexp")
    if not self.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    return empty(self._shape, self.dtype, META), empty(self._shape, dtypes.int32, META)


frexp_op = _declare("frexp.Tensor(Tensor self) -> (Tensor mantissa, Tensor exponent)", _frexp_meta, ())


@frexp_op.kernel("cpu")
def _frexp_cpu(self):
    _frexp_meta(self)
    work = views.contiguous(convert(self, compute_dtype(self.dtype)))
    mantissa = empty(self._shape, work.dtype, self._device)
    exponent = empty(self._shape, dtypes.int32, self._device)
    _C.frexp_(mantissa, exponent, work)
    return convert(mantissa, self.dtype), exponent


def frexp(input: Tensor, *, out=None):
    """Decomposes input into mantissa (|m| in [0.5, 1)) and int32 exponent: input = m * 2**e."""
    mantissa, exponent = frexp_op(input)
    if out is not None:
        write_out(mantissa, out[0])
        write_out(exponent, out[1])
        return frexp_result(out[0], out[1])
    return frexp_result(mantissa, exponent)


# -- composites -----------------------------------------------------------------------------------

def sinc(input: Tensor, *, out=None) -> Tensor:
    """sin(pi x) / (pi x), 1 at x == 0 (normalized sinc)."""
    _check_tensor(input, "sinc")
    dtype = _float_result(input, "sinc")
    x = input.to(compute_dtype(dtype))
    zero = elementwise.eq(x, 0)
    # x == 0 is replaced before dividing so that its (masked) gradient is not 0 * nan.
    px = elementwise.mul(elementwise.where(zero, 1.0, x), math.pi)
    result = elementwise.where(zero, 1.0, elementwise.div(elementwise.sin(px), px))
    if dtype in HALF_TYPES:
        result = result.to(dtype)
    return write_out(result, out)


def sinc_(input: Tensor) -> Tensor:
    return _inplace(input, sinc, input)


def ldexp(input: Tensor, other: Tensor, *, out=None) -> Tensor:
    """input * 2**other, in the operands' promoted floating dtype."""
    _check_tensor(input, "ldexp")
    _check_tensor(other, "ldexp", "other", 2)
    dtype = dtypes.promote_types(input.dtype, other.dtype)
    if not (dtype.is_floating_point or dtype.is_complex):
        dtype = dtypes.get_default_dtype()
    return write_out(elementwise.mul(input.to(dtype), elementwise.pow(2.0, other.to(dtype))), out)


def ldexp_(input: Tensor, other: Tensor) -> Tensor:
    return _inplace(input, ldexp, input, other)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
frexp                       function method
i0                          function method special=i0
i0_                         function method
i1                          fn=special_i1 special=i1
igamma                      function method special=gammainc
igamma_                     method
igammac                     function method special=gammaincc
igammac_                    method
ldexp                       function method
ldexp_                      function method
sinc                        function method special=sinc
sinc_                       function method
""")
