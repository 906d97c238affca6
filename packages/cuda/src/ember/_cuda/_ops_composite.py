"""CUDA kernels composed of other CUDA kernels: count_nonzero, nanmean, angle, sgn(_),
conj_physical(_), rounded division, the in-place scans cumsum_/cumprod_, bincount, histc and
binary_cross_entropy; complex and polar. angle, sgn and conj_physical of complex tensors are one
generated kernel each (_exprs' "c" entries); the others are for real dtypes.

The core's own checks run first where it has them as functions; results keep the CPU kernels'
dtypes (angle of an integer tensor is of the default float dtype, nanmean rounds once to the
input's or the requested dtype).
"""

from __future__ import annotations

import math

from ember._src import dtypes as dt
from ember._src._native import _C
from ember._src.dispatch import OPS
from ember._src.shapes import wrap_dims
from ember._src.tensor import new_empty_tensor

_HALF = (dt.float16, dt.bfloat16)


def _real(x, name: str) -> None:
    if x.dtype.is_complex:
        raise NotImplementedError(f"ember.ops.{name} of complex tensors has no CUDA kernel")


def _dims(dim, ndim: int):
    if dim is None:
        return None
    return list(wrap_dims([dim] if isinstance(dim, int) else list(dim), max(ndim, 1)))


def _count_nonzero(x, dim=None):
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


def _complex_unary(name: str, x, result):
    from . import _exprs
    from ._elementwise import launch

    out = new_empty_tensor(x._shape, result, x._device)
    launch(_exprs.lookup(_exprs.UNARY, name, x.dtype), out, [x], [x.dtype])
    return out


def _angle(x):
    if x.dtype.is_complex:
        return _complex_unary("angle", x, x.dtype.to_real())
    rd = x.dtype if x.dtype.is_floating_point else dt.get_default_dtype()
    xf = x.to(rd)
    return xf.where(xf.isnan(), (xf < 0).to(rd) * math.pi)


def _sgn(x):
    if x.dtype.is_complex:
        return _complex_unary("sgn", x, x.dtype)
    return x.sign()


def _conj_physical(x):
    if x.dtype.is_complex:
        return _complex_unary("conj_physical", x, x.dtype)
    return x.clone()


def _from_parts(name: str, names: tuple):
    """complex(real, imag) / polar(abs, angle): one kernel writing both parts (broadcast, as the CPU's)."""
    from ember._src.ops.pointwise import complex as cx

    from . import _exprs
    from ._elementwise import launch

    expr = getattr(_exprs, name)

    def kernel(a, b):
        shape, dtype = cx._parts_check(a, b, names)
        if a._device is not b._device:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{a._device} and {b._device}!")
        out = new_empty_tensor(shape, dtype, a._device)
        launch(expr, out, [a, b], [a.dtype, a.dtype])
        return out

    return kernel


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


def _fresh(out):
    """A result this module filled in place (``zero_``, ``index_add_``) that nothing else holds: at
    ``_version`` 0, as PyTorch's (whose kernels write below the version counter)."""
    if out._version:
        _C._new_version_counter(out)
    return out


def _bincount(self, weights=None, minlength=0):
    """Counts by ``index_add_``; the size needs the input's extremes on the host (one sync, as
    PyTorch's CUDA bincount)."""
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if self.ndim != 1 or self.dtype.is_floating_point or self.dtype is dt.bool:
        if self.dtype.is_floating_point:
            raise NotImplementedError(f"\"bincount_cuda\" not implemented for '{self.dtype}'")
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and (weights.ndim != 1 or weights._shape[0] != self._shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    n = self._shape[0]
    top = -1
    if n:
        low, top = (int(v.item()) for v in (self.amin(), self.amax()))
        if low < 0:
            raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    out_dtype = dt.int64 if weights is None else (weights.dtype if weights.dtype.is_floating_point else dt.float64)
    work = dt.float32 if out_dtype in _HALF else out_dtype
    out = new_empty_tensor((max(top + 1, minlength),), work, self._device).zero_()
    if n:
        w = new_empty_tensor((n,), work, self._device).fill_(1) if weights is None else weights.to(work)
        out.index_add_(0, self.to(dt.int64), w)
    return _fresh(out.to(out_dtype))


def _histc(self, bins=100, min=0, max=0):
    """The CPU kernel's binning in float64: ``trunc((v - lo) * bins / (hi - lo))``, the top edge in
    the last bin; a range of min == max is the data's (one sync)."""
    from ember._src.ops.indexing.sorting import _histc_check

    _histc_check(self, bins, min, max)
    lo, hi = float(min), float(max)
    v = self.to(dt.float64).reshape(-1)
    if lo == hi and v.numel():
        if bool(v.isnan().any().item()):
            lo = hi = float("nan")
        else:
            lo, hi = v.amin().item(), v.amax().item()
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"torch.histc: range of [{lo:f}, {hi:f}] is not finite")
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    work = dt.float32 if self.dtype in _HALF else self.dtype
    out = new_empty_tensor((bins,), work, self._device).zero_()
    if v.numel():
        inside = (v >= lo) & (v <= hi)
        b = ((v - lo) * bins / (hi - lo)).floor().clamp(0, bins - 1).to(dt.int64)
        out.index_add_(0, b, inside.to(work))
    return _fresh(out.to(self.dtype))


def register() -> None:
    from . import _ops_attention_math

    # (registered from here, a composite too, so the plugin's module list stays as it is)
    _ops_attention_math.register()
    OPS["bincount"].kernels["cuda"] = _bincount
    OPS["histc"].kernels["cuda"] = _histc
    OPS["count_nonzero"].kernels["cuda"] = _count_nonzero
    OPS["nanmean"].kernels["cuda"] = _nanmean
    OPS["angle"].kernels["cuda"] = _angle
    OPS["sgn"].kernels["cuda"] = _sgn
    OPS["conj_physical"].kernels["cuda"] = _conj_physical
    from . import _ops_complex, _ops_fft

    _ops_fft.register()  # the FFT primitives on cuFFT, composed by ember.fft as on the CPU
    _ops_complex.register()  # complex tensors through the real kernels registered above (by their parts)
    OPS["complex"].kernels["cuda"] = _from_parts("COMPLEX_FROM_PARTS", ("real", "imag"))
    OPS["polar"].kernels["cuda"] = _from_parts("COMPLEX_POLAR", ("abs", "angle"))
    # The core's rounded division is itself a composite of dispatched ops (floor_divide, fmod, div, trunc).
    OPS["div_rounding"].kernels["cuda"] = OPS["div_rounding"].kernels["cpu"]
    # So is native_channel_shuffle's (reshape, transpose, contiguous).
    OPS["native_channel_shuffle"].kernels["cuda"] = OPS["native_channel_shuffle"].kernels["cpu"]
    # binary_cross_entropy's kernel too (logs, clamps and a reduction, dispatched).
    OPS["binary_cross_entropy"].kernels["cuda"] = OPS["binary_cross_entropy"].kernels["cpu"]
    for name in ("cumsum", "cumprod", "sgn", "conj_physical"):
        OPS[name + "_"].kernels["cuda"] = _inplace(name)
