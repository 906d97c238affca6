"""CUDA kernels composed of other CUDA kernels, for real dtypes (ember's CUDA device has no complex
kernels): count_nonzero, nanmean, angle, sgn(_), conj_physical(_), rounded division, and the
in-place scans cumsum_/cumprod_.

The core's own checks run first where it has them as functions; results keep the CPU kernels'
dtypes (angle of an integer tensor is of the default float dtype, nanmean rounds once to the
input's or the requested dtype).
"""

from __future__ import annotations

import math

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.shapes import wrap_dims

_HALF = (dt.float16, dt.bfloat16)


def _real(x, name: str) -> None:
    if x.dtype.is_complex:
        raise NotImplementedError(f"ember.ops.{name} of complex tensors has no CUDA kernel")


def _dims(dim, ndim: int):
    if dim is None:
        return None
    return list(wrap_dims([dim] if isinstance(dim, int) else list(dim), max(ndim, 1)))


def _count_nonzero(x, dim=None):
    _real(x, "count_nonzero")
    dims = _dims(dim, x.ndim)
    nz = (x != 0).to(dt.int64)
    return nz.sum(dims) if dims else nz.sum()  # an empty dim list reduces everything, as in PyTorch


def _nanmean(x, dim=None, keepdim=False, dtype=None):
    _real(x, "nanmean")
    if not (x.dtype.is_floating_point or (dtype is not None and dtype.is_floating_point)):
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype but got {x.dtype}")
    rd = dtype or x.dtype
    xc = x.to(dt.float32 if rd in _HALF else rd)
    dims = _dims(dim, x.ndim)
    keep = (~xc.isnan()).to(dt.int64)
    if dims:
        total, count = xc.nansum(dims, keepdim=keepdim), keep.sum(dims, keepdim=keepdim)
    else:  # no dim (or an empty list): every element
        total, count = xc.nansum(), keep.sum()
        if keepdim:
            total, count = total.reshape((1,) * x.ndim), count.reshape((1,) * x.ndim)
    return (total / count).to(rd)


def _angle(x):
    _real(x, "angle")
    rd = x.dtype if x.dtype.is_floating_point else dt.get_default_dtype()
    xf = x.to(rd)
    return xf.where(xf.isnan(), (xf < 0).to(rd) * math.pi)


def _sgn(x):
    _real(x, "sgn")
    return x.sign()


def _conj_physical(x):
    _real(x, "conj_physical")
    return x.clone()


def _inplace(oop_name: str):
    """``<op>_``: the out-of-place CUDA kernel's result copied into self (PyTorch's result checks)."""
    from ember._src.ops.inplace_variants import _check_result

    def kernel(self, *args, **kwargs):
        result = OPS[oop_name].kernels["cuda"](self, *args, **kwargs)
        _check_result(self, result)
        if result is not self:
            self.copy_(result)
        return self

    return kernel


def register() -> None:
    OPS["count_nonzero"].kernels["cuda"] = _count_nonzero
    OPS["nanmean"].kernels["cuda"] = _nanmean
    OPS["angle"].kernels["cuda"] = _angle
    OPS["sgn"].kernels["cuda"] = _sgn
    OPS["conj_physical"].kernels["cuda"] = _conj_physical
    # The core's rounded division is itself a composite of dispatched ops (floor_divide, fmod, div, trunc).
    OPS["div_rounding"].kernels["cuda"] = OPS["div_rounding"].kernels["cpu"]
    for name in ("cumsum", "cumprod", "sgn", "conj_physical"):
        OPS[name + "_"].kernels["cuda"] = _inplace(name)
