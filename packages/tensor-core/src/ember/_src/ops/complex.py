"""Complex numbers: views between complex and real storage, parts, conj, construction, and
the complex paths of the elementwise ops and reductions.

``view_as_real``/``view_as_complex``/``real``/``imag`` are zero-copy views: the same storage
read as the other dtype, with strides and offset rescaled to the view's element size.
``conj`` materializes (ember has no lazy conjugate bit; see docs/deviations.md). Elementwise
kernels run natively on std::complex (``_C.complex_unary``/``_C.complex_binary``); sum and
mean reduce the (real, imag) float view with the real kernels, prod has its own kernel.
"""

from __future__ import annotations

from ... import _C
from .. import dtypes as dt
from ..device import META
from ..dispatch import define
from ..optable import declare
from ..shapes import contiguous_strides
from ..tensor import Tensor, make_view
from ._common import convert, empty, type_name, write_out
from .views import _view_op

UNARY_CODES = _C.complex_unary_ops
BINARY_CODES = _C.complex_binary_ops
COMPLEX = (dt.complex64, dt.complex128)

# Elementwise ops with a complex kernel; every other pointwise op rejects complex inputs with
# the exception PyTorch raises (_reject).
_REAL_RESULT = {"abs", "angle"}
_PREDICATES = {"isnan", "isinf", "isfinite"}
_COMPARISONS = {"eq", "ne"}


def _tensor_check(x, name: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")


# -- rejections --------------------------------------------------------------------------------

_SPECIAL_MESSAGES = {
    "sign": (NotImplementedError,
             "Unlike NumPy, torch.sign is not intended to support complex numbers. Please use torch.sgn instead."),
    "maximum": (RuntimeError, "maximum not implemented for complex tensors."),
    "minimum": (RuntimeError, "minimum not implemented for complex tensors."),
    "fmax": (RuntimeError, "fmax not implemented for complex tensors."),
    "fmin": (RuntimeError, "fmin not implemented for complex tensors."),
    "floor": (NotImplementedError, "floor is not supported for complex inputs"),
    "ceil": (NotImplementedError, "ceil is not supported for complex inputs"),
    "round": (NotImplementedError, "round is not supported for complex inputs"),
    "trunc": (NotImplementedError, "trunc is not supported for complex inputs"),
    "clamp": (NotImplementedError, "clamp is not supported for complex types"),
    "relu": (NotImplementedError, "clamp is not supported for complex types"),
}


def _reject(op_name: str, dtype) -> None:
    """Raises what PyTorch raises for an op it has no complex kernel for."""
    exc, msg = _SPECIAL_MESSAGES.get(op_name, (NotImplementedError,
                                               f"\"{op_name}_cpu\" not implemented for '{type_name(dtype)}'"))
    raise exc(msg)


def _check_unary(name: str, dtype):
    """The result dtype of the complex kernel for unary ``name``, or PyTorch's error."""
    if name not in UNARY_CODES:
        _reject(name, dtype)
    if name in _REAL_RESULT:
        return dtype.to_real()
    if name in _PREDICATES:
        return dt.bool
    return dtype


def _check_binary(name: str, dtype) -> None:
    if name not in BINARY_CODES:
        _reject(name, dtype)


def _run_unary(name: str, a: Tensor, out: Tensor | None = None) -> Tensor:
    result_dtype = _check_unary(name, a.dtype)
    if out is None:
        out = empty(a._shape, result_dtype, a._device)
    if a._device is META:
        return out
    target = out if out.dtype is result_dtype else empty(a._shape, result_dtype, a._device)
    _C.complex_unary(UNARY_CODES[name], target, a)
    if target is not out:
        _C.copy_(out, target)
    return out


def _run_binary(name: str, target: Tensor, a, b, compute) -> None:
    """target = name(a, b) with both operands converted to the complex dtype ``compute``."""
    from .creation import scalar_tensor

    _check_binary(name, compute)
    a_t = convert(a, compute) if isinstance(a, Tensor) else scalar_tensor(a, compute)
    b_t = convert(b, compute) if isinstance(b, Tensor) else scalar_tensor(b, compute)
    _C.complex_binary(BINARY_CODES[name], target, a_t, b_t)


# -- views -------------------------------------------------------------------------------------


def _retyped_view(base: Tensor, shape: tuple, stride: tuple, offset: int, dtype) -> Tensor:
    out = make_view(base, shape, stride, offset)
    out.dtype = dtype
    return out


@_view_op("view_as_real(Tensor(a) self) -> Tensor(a)")
def view_as_real_op(self: Tensor) -> Tensor:
    if not self.dtype.is_complex:
        raise RuntimeError("view_as_real is only supported for complex tensors")
    stride = tuple(s * 2 for s in self._stride) + (1,)
    return _retyped_view(self, self._shape + (2,), stride, self._offset * 2, self.dtype.to_real())


@_view_op("view_as_complex(Tensor(a) self) -> Tensor(a)")
def view_as_complex_op(self: Tensor) -> Tensor:
    if self.dtype not in (dt.float32, dt.float64):
        if self.dtype is dt.float16:
            raise RuntimeError("view_as_complex: complex32 (ComplexHalf) is not supported by ember")
        raise RuntimeError("view_as_complex is only supported for half, float and double tensors, but got a tensor "
                           f"of scalar type: {type_name(self.dtype)}")
    if self.ndim == 0:
        raise RuntimeError("Input tensor must have one or more dimensions")
    if self._shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if self._stride[-1] != 1:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % 2 for s in self._stride[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    if self._offset % 2:
        raise RuntimeError("Tensor must have a storage_offset divisible by 2")
    stride = tuple(s // 2 for s in self._stride[:-1])
    return _retyped_view(self, self._shape[:-1], stride, self._offset // 2, self.dtype.to_complex())


def view_as_real(input: Tensor) -> Tensor:
    _tensor_check(input, "view_as_real")
    return view_as_real_op(input)


def view_as_complex(input: Tensor) -> Tensor:
    _tensor_check(input, "view_as_complex")
    return view_as_complex_op(input)


def real(input: Tensor) -> Tensor:
    """The real parts as a view (the input itself for real dtypes, as PyTorch)."""
    _tensor_check(input, "real")
    if not input.dtype.is_complex:
        return input
    return view_as_real_op(input).select(-1, 0)


def imag(input: Tensor) -> Tensor:
    _tensor_check(input, "imag")
    if not input.dtype.is_complex:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return view_as_real_op(input).select(-1, 1)


# -- conj ---------------------------------------------------------------------------------------

conj_physical_op = define("conj_physical(Tensor self) -> Tensor", ("pointwise",))


@conj_physical_op.kernel("cpu")
@conj_physical_op.kernel("meta")
def _conj_physical(self: Tensor) -> Tensor:
    if not self.dtype.is_complex:
        return self.clone()
    return _run_unary("conj", self)


conj_physical_op.meta = _conj_physical


def conj_physical(input: Tensor, *, out=None) -> Tensor:
    _tensor_check(input, "conj_physical")
    return write_out(conj_physical_op(input), out, (input,))


def conj(input: Tensor) -> Tensor:
    """The conjugate: a new tensor for complex inputs (PyTorch's is a lazy view), the input for real ones."""
    _tensor_check(input, "conj")
    return conj_physical_op(input) if input.dtype.is_complex else input


def resolve_conj(input: Tensor) -> Tensor:
    return input  # conj() never returns a lazily conjugated tensor


def resolve_neg(input: Tensor) -> Tensor:
    return input


def is_conj(input: Tensor) -> bool:
    return False


def is_complex(input: Tensor) -> bool:
    _tensor_check(input, "is_complex")
    return input.dtype.is_complex


# -- angle / sgn ----------------------------------------------------------------------------------

angle_op = define("angle(Tensor self) -> Tensor", ("pointwise",))


def _angle_dtype(x: Tensor):
    if x.dtype.is_complex:
        return x.dtype.to_real()
    return x.dtype if x.dtype.is_floating_point else dt.get_default_dtype()


@angle_op.kernel("cpu")
@angle_op.kernel("meta")
def _angle(self: Tensor) -> Tensor:
    if self.dtype.is_complex:
        return _run_unary("angle", self)
    rd = _angle_dtype(self)
    compute = dt.float32 if rd in (dt.float16, dt.bfloat16) else rd
    out = empty(self._shape, compute, self._device)
    if self._device is not META:
        _C.real_angle(out, convert(self, compute))
    return convert(out, rd)


angle_op.meta = _angle


def angle(input: Tensor, *, out=None) -> Tensor:
    _tensor_check(input, "angle")
    return write_out(angle_op(input), out, (input,))


sgn_op = define("sgn(Tensor self) -> Tensor", ("pointwise",))


@sgn_op.kernel("cpu")
@sgn_op.kernel("meta")
def _sgn(self: Tensor) -> Tensor:
    if self.dtype.is_complex:
        return _run_unary("sgn", self)
    from .pointwise import UNARY_OPS

    return UNARY_OPS["sign"][0](self)


sgn_op.meta = _sgn


def sgn(input: Tensor, *, out=None) -> Tensor:
    _tensor_check(input, "sgn")
    return write_out(sgn_op(input), out, (input,))


# -- construction ---------------------------------------------------------------------------------

complex_op = define("complex(Tensor real, Tensor imag) -> Tensor", ())
polar_op = define("polar(Tensor abs, Tensor angle) -> Tensor", ())


def _parts_check(a, b, names: tuple) -> tuple:
    for x, n in zip((a, b), names):
        if not isinstance(x, Tensor):
            raise TypeError(f"complex(): argument '{n}' must be Tensor, not {type(x).__name__}")
    if a.dtype not in (dt.float32, dt.float64) or b.dtype not in (dt.float32, dt.float64):
        if a.dtype is dt.float16 and b.dtype is dt.float16:
            raise RuntimeError("complex32 (ComplexHalf) is not supported by ember")
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got "
                           f"{type_name(a.dtype)} and {type_name(b.dtype)}")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"Expected object of scalar type {type_name(a.dtype)} but got scalar type "
                           f"{type_name(b.dtype)} for second argument")
    from ..shapes import broadcast_shapes

    return broadcast_shapes(a._shape, b._shape), a.dtype.to_complex()


def _fill_parts(shape, dtype, device, re: Tensor, im: Tensor) -> Tensor:
    out = empty(shape, dtype, device)
    if device is not META:
        parts = view_as_real_op(out)
        _C.copy_(parts.select(-1, 0), re)  # copy_ broadcasts each part to the output's shape
        _C.copy_(parts.select(-1, 1), im)
    return out


@complex_op.kernel("cpu")
@complex_op.kernel("meta")
def _complex(real: Tensor, imag: Tensor) -> Tensor:
    shape, dtype = _parts_check(real, imag, ("real", "imag"))
    return _fill_parts(shape, dtype, real._device, real, imag)


complex_op.meta = _complex


@polar_op.kernel("cpu")
@polar_op.kernel("meta")
def _polar(abs: Tensor, angle: Tensor) -> Tensor:  # noqa: A002 - PyTorch's names
    shape, dtype = _parts_check(abs, angle, ("abs", "angle"))
    if abs._device is META:
        return empty(shape, dtype, META)
    from .pointwise import UNARY_OPS, mul_op

    re = mul_op(abs, UNARY_OPS["cos"][0](angle))
    im = mul_op(abs, UNARY_OPS["sin"][0](angle))
    return _fill_parts(shape, dtype, abs._device, re, im)


polar_op.meta = _polar


def complex(real: Tensor, imag: Tensor, *, out=None) -> Tensor:  # noqa: A001 - PyTorch's name
    return write_out(complex_op(real, imag), out, (real, imag))


def polar(abs: Tensor, angle: Tensor, *, out=None) -> Tensor:  # noqa: A002
    return write_out(polar_op(abs, angle), out, (abs, angle))


# -- reductions -------------------------------------------------------------------------------------


def _prod_rows(x: Tensor, dims: tuple, out_shape: tuple) -> Tensor:
    """The complex product of ``x`` over ``dims`` (validated), shaped ``out_shape``."""
    from .views import contiguous

    kept = [d for d in range(x.ndim) if d not in dims]
    order = kept + list(dims)
    rows = 1
    for d in kept:
        rows *= x._shape[d]
    n = 1
    for d in dims:
        n *= x._shape[d]
    out = empty(out_shape, x.dtype, x._device)
    if x._device is META or rows == 0:
        return out
    if n == 0:  # the empty product
        _C.fill_(out, 1)
        return out
    moved = contiguous(x.permute(*order)) if x.ndim else contiguous(x)
    flat = make_view(moved, (rows, n), contiguous_strides((rows, n)), moved._offset)
    _C.complex_prod_rows(make_view(out, (rows,), (1,), 0), flat)
    return out


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
angle                       function method
complex                     function method
conj                        function method
conj_physical               function method
imag                        function
is_complex                  function
is_conj                     function method
polar                       function method
real                        function
resolve_conj                function method
resolve_neg                 function method
sgn                         function method
view_as_complex             function method
view_as_real                function method
""")
