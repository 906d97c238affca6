"""The special functions of ``ember.special`` computed by the ``specfns`` kernel family
(``_C.special_unary_``, ``_C.zeta_``): Bessel J0/J1/Y0/Y1, modified Bessel I0/I1/K0/K1 (plain and
scaled), the spherical Bessel j0, Airy Ai, i0e/i1e, erfcx, log_ndtr and the Hurwitz zeta.

As in PyTorch, integer inputs compute in the default float dtype, float16/bfloat16 in float32,
and only i0e, i1e, erfcx, log_ndtr and zeta (in its second argument) are differentiable; their
derivatives live in ember-autograd's ``formulas/mathfns.py``.
"""

from __future__ import annotations

from ... import dtypes
from ..._native import _C
from ...device import META
from ...dispatch import define
from ...optable import declare
from ...shapes import broadcast_shapes
from ...tensor import Tensor
from .._common import check_same_device, compute_dtype, convert, empty, type_name, write_out
from .special import _check_tensor, _float_result

# name -> (the kernel's function code, differentiable); the codes match specfns.cpp's enum.
_UNARY = {
    "special_i0e": (0, True), "special_i1e": (1, True), "special_bessel_j0": (2, False),
    "special_bessel_j1": (3, False), "special_bessel_y0": (4, False), "special_bessel_y1": (5, False),
    "special_modified_bessel_i0": (6, False), "special_modified_bessel_i1": (7, False),
    "special_modified_bessel_k0": (8, False), "special_modified_bessel_k1": (9, False),
    "special_scaled_modified_bessel_k0": (10, False), "special_scaled_modified_bessel_k1": (11, False),
    "special_spherical_bessel_j0": (12, False), "special_airy_ai": (13, False), "special_erfcx": (14, True),
    "special_log_ndtr": (15, True),
}


def _no_half(dtype, name: str) -> None:
    # PyTorch's CPU kernels of these functions exist for float32/float64 only.
    if dtype in (dtypes.float16, dtypes.bfloat16):
        raise NotImplementedError(f"\"{name[len('special_'):]}_cpu\" not implemented for '{type_name(dtype)}'")


def _unary_op(name: str, code: int, differentiable: bool):
    def meta(self):
        _check_tensor(self, name)
        dtype = _float_result(self, name)
        if name not in ("special_i0e", "special_i1e"):
            _no_half(dtype, name)
        return empty(self._shape, dtype, META)

    # No "pointwise" tag: not top-level functions, so kept out of the pointwise fuzz table (as special_i1).
    op = define(f"{name}(Tensor self) -> Tensor", (), meta, differentiable=differentiable)
    op.kernels["meta"] = meta

    @op.kernel("cpu")
    def cpu(self):
        dtype = meta(self).dtype
        work = convert(self, compute_dtype(dtype))
        out = empty(self._shape, work.dtype, self._device)
        _C.special_unary_(out, work, code)
        return convert(out, dtype)

    return op


UNARY_OPS = {name: _unary_op(name, code, diff) for name, (code, diff) in _UNARY.items()}


def _public(name: str):
    op = UNARY_OPS[name]

    def fn(input: Tensor, *, out=None) -> Tensor:
        _check_tensor(input, name[len("special_"):])
        return write_out(op(input), out)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``ember.special.{name[len('special_'):]}``, elementwise."
    return fn


for _name in _UNARY:
    globals()[_name] = _public(_name)


def _zeta_meta(self, other):
    _check_tensor(self, "zeta")
    _check_tensor(other, "zeta", "other", 2)
    check_same_device(self, other)
    dtype = dtypes.result_type_of(self, other)
    if dtype.is_complex:
        raise NotImplementedError(f"\"zeta\" not implemented for '{type_name(dtype)}'")
    if not dtype.is_floating_point:
        dtype = dtypes.get_default_dtype()
    _no_half(dtype, "special_zeta")
    return empty(broadcast_shapes(self._shape, other._shape), dtype, META)


zeta_op = define("special_zeta(Tensor self, Tensor other) -> Tensor", (), _zeta_meta)
zeta_op.kernels["meta"] = _zeta_meta


@zeta_op.kernel("cpu")
def _zeta_cpu(self, other):
    result = _zeta_meta(self, other)
    work = compute_dtype(result.dtype)
    out = empty(result._shape, work, self._device)
    x, q = (convert(convert(t, result.dtype), work) for t in (self, other))
    _C.zeta_(out, x, q)
    return convert(out, result.dtype)


def special_zeta(input, other, *, out=None) -> Tensor:
    """The Hurwitz zeta function sum_k (k + other)^-input; a Python number takes the tensor's dtype."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError("zeta(): expected at least one Tensor argument")
    if not isinstance(input, Tensor):
        input = _scalar_like(input, other)
    if not isinstance(other, Tensor):
        other = _scalar_like(other, input)
    return write_out(zeta_op(input, other), out)


def _scalar_like(value, ref: Tensor) -> Tensor:
    from ..creation.factories import scalar_tensor

    dtype = ref.dtype if (ref.dtype.is_floating_point or isinstance(value, int)) else dtypes.get_default_dtype()
    return scalar_tensor(value, dtype=dtype, device=ref.device)


declare(__name__, """
special_airy_ai                     special=airy_ai
special_bessel_j0                   special=bessel_j0
special_bessel_j1                   special=bessel_j1
special_bessel_y0                   special=bessel_y0
special_bessel_y1                   special=bessel_y1
special_erfcx                       special=erfcx
special_i0e                         special=i0e
special_i1e                         special=i1e
special_log_ndtr                    special=log_ndtr
special_modified_bessel_i0          special=modified_bessel_i0
special_modified_bessel_i1          special=modified_bessel_i1
special_modified_bessel_k0          special=modified_bessel_k0
special_modified_bessel_k1          special=modified_bessel_k1
special_scaled_modified_bessel_k0   special=scaled_modified_bessel_k0
special_scaled_modified_bessel_k1   special=scaled_modified_bessel_k1
special_spherical_bessel_j0         special=spherical_bessel_j0
special_zeta                        special=zeta
""")
