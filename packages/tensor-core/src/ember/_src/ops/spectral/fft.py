"""Discrete Fourier transforms (``ember.fft``), as PyTorch's ``torch.fft``.

Three primitive ops, as in ATen: ``_fft_c2c`` (complex to complex), ``_fft_r2c`` (real to
the one-sided half spectrum) and ``_fft_c2r`` (half spectrum to real), each over a list of
dims with a normalization code (0: none, 1: 1/sqrt(n), 2: 1/n, n the signal size). They run
pocketfft from SciPy or NumPy (``_fft_numpy``, in every install), or FFTW3 through ``_C.fft_``
(csrc/cpu/fft.cpp) when a build links that optional library. The public functions below resize the input to
``n``/``s`` (trim or zero-pad), promote dtypes and map ``norm`` onto the codes:

- real inputs of c2c transforms become complex (integers take the default float's complex);
- float16/bfloat16 are rejected, as PyTorch does on CPU;
- hfft is c2r of the conjugate and ihfft the conjugate of r2c (both Hermitian identities).
"""

from __future__ import annotations

import builtins
import math
import operator

from ... import dtypes
from ..._native import _C
from ...autocast import composite as _autocast_composite
from ...device import META
from ...dispatch import define
from ...shapes import wrap_dim
from ...tensor import Tensor
from .._common import convert, empty, type_name, write_out
from ..creation.factories import arange
from ..nn.resample import constant_pad_nd_op
from ..pointwise import complex as complex_numbers
from ..pointwise.elementwise import mul_op
from ..shape.joining import cat
from ..shape.reorder import roll
from . import pocketfft as _fft_numpy

__all__ = [
    "fft", "fft2", "fftfreq", "fftn", "fftshift", "hfft", "hfft2", "hfftn", "ifft", "ifft2", "ifftn", "ifftshift",
    "ihfft", "ihfft2", "ihfftn", "irfft", "irfft2", "irfftn", "rfft", "rfft2", "rfftfreq", "rfftn",
]

_KIND = {"c2c": 0, "r2c": 1, "c2r": 2}


def _use_fftw() -> bool:
    """FFTW when the build links it (an optional accelerator); pocketfft (SciPy's or NumPy's) otherwise."""
    return _fft_numpy.engine() == "fftw"


def _scale(norm_code: int, n: int) -> float:
    return 1.0 if norm_code == 0 else (1.0 / math.sqrt(n) if norm_code == 1 else 1.0 / n)


def _signal_size(shape: tuple, dims) -> int:
    n = 1
    for d in dims:
        n *= shape[d]
    return n


# -- the primitive ops ----------------------------------------------------------------------------

c2c_op = define("_fft_c2c(Tensor self, int[] dim, int normalization, bool forward) -> Tensor", ())
r2c_op = define("_fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> Tensor", ())
c2r_op = define("_fft_c2r(Tensor self, int[] dim, int normalization, SymInt last_dim_size) -> Tensor", ())


def _c2c(x: Tensor, dim, normalization: int, forward: bool) -> Tensor:
    out = empty(x._shape, x.dtype, x._device)
    if x._device is not META and out.numel():
        if not _use_fftw():
            _fft_numpy.c2c(out, x, dim, normalization, bool(forward))
            return out
        _C.fft_(_KIND["c2c"], out, _strided_input(x), list(dim), bool(forward),
                _scale(normalization, _signal_size(x._shape, dim)))
    return out


def _r2c(x: Tensor, dim, normalization: int, onesided: bool) -> Tensor:
    if not onesided:  # the full spectrum: a c2c transform of the complex-converted input
        return _c2c(convert(x, x.dtype.to_complex()), dim, normalization, True)
    last = dim[-1]
    shape = list(x._shape)
    shape[last] = shape[last] // 2 + 1
    out = empty(tuple(shape), x.dtype.to_complex(), x._device)
    if x._device is not META and out.numel():
        if not _use_fftw():
            _fft_numpy.r2c(out, x, dim, normalization)
            return out
        _C.fft_(_KIND["r2c"], out, _strided_input(x), list(dim), True,
                _scale(normalization, _signal_size(x._shape, dim)))
    return out


def _c2r(x: Tensor, dim, normalization: int, last_dim_size: int) -> Tensor:
    shape = list(x._shape)
    shape[dim[-1]] = last_dim_size
    out = empty(tuple(shape), x.dtype.to_real(), x._device)
    if x._device is not META and out.numel():
        if not _use_fftw():
            _fft_numpy.c2r(out, x, dim, normalization, last_dim_size)
            return out
        scratch = empty(x._shape, x.dtype, x._device)  # FFTW's c2r overwrites its input
        _C.copy_(scratch, x)
        _C.fft_(_KIND["c2r"], out, scratch, list(dim), False, _scale(normalization, _signal_size(out._shape, dim)),
                last_dim_size)
    return out


def _strided_input(x: Tensor) -> Tensor:
    # FFTW reads any positive strides; an expanded (stride 0) dim is materialized first.
    if any(st == 0 and n > 1 for st, n in zip(x._stride, x._shape)):
        return convert(x.contiguous(), x.dtype)
    return x


for _op, _fn in ((c2c_op, _c2c), (r2c_op, _r2c), (c2r_op, _c2r)):
    _op.kernels["cpu"] = _fn
    _op.kernels["meta"] = _fn
    _op.meta = _fn
del _op, _fn


# -- argument handling ----------------------------------------------------------------------------


def _norm_code(norm, forward: bool) -> int:
    """Maps ``norm`` for a transform in the given direction to 0 (none), 1 (ortho) or 2 (1/n)."""
    if norm is None or norm == "backward":
        return 0 if forward else 2
    if norm == "forward":
        return 2 if forward else 0
    if norm == "ortho":
        return 1
    raise RuntimeError(f"Invalid normalization mode: \"{norm}\"")


def _check_input(x, name: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"fft_{name}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")
    if x.dtype in (dtypes.float16, dtypes.bfloat16):
        raise RuntimeError(f"Unsupported dtype {type_name(x.dtype)}")


def _to_complex(x: Tensor) -> Tensor:
    if x.dtype.is_complex:
        return x
    if x.dtype.is_floating_point:
        # A dispatched cast, so that autograd records it (a real input's gradient is the real part).
        return x.to(x.dtype.to_complex())
    return convert(x, dtypes.get_default_dtype().to_complex())


def _to_real(x: Tensor, name: str) -> Tensor:
    if x.dtype.is_complex:
        raise RuntimeError(f"{name} expects a real input tensor, but got {type_name(x.dtype)}")
    return x if x.dtype.is_floating_point else convert(x, dtypes.get_default_dtype())


def _check_n(n: int) -> int:
    n = operator.index(n)
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    return n


def _resize(x: Tensor, dims, sizes) -> Tensor:
    """Trims or zero-pads ``x`` along each dim to the given size."""
    for d, n in zip(dims, sizes):
        n = _check_n(n)
        have = x._shape[d]
        if n < have:
            x = x.narrow(d, 0, n)
        elif n > have:
            # a dispatched zero pad at the end of dim d: autograd records it, and it runs on every device
            x = constant_pad_nd_op(x, (0, 0) * (x.ndim - 1 - d) + (0, n - have), 0)
    return x


def _one_dim(x: Tensor, n, dim: int, name: str):
    if x.ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    d = wrap_dim(dim, x.ndim)
    return d, (None if n is None else _check_n(n))


def _dims_and_sizes(x: Tensor, s, dim, default_all: bool = True):
    """PyTorch's (s, dim) resolution for the n-dimensional transforms."""
    if isinstance(dim, int):
        dim = (dim,)
    if s is not None:
        s = [operator.index(v) for v in s]
        if dim is not None and len(dim) != len(s):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
        if len(s) > x.ndim:
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has {x.ndim} dimensions.")
        if dim is None:
            dim = tuple(range(x.ndim - len(s), x.ndim))
    if dim is None:
        dim = tuple(range(x.ndim)) if default_all else ()
    dims = tuple(wrap_dim(d, x.ndim) for d in dim)
    if len(set(dims)) != len(dims):
        raise RuntimeError("FFT dims must be unique")
    if s is None:
        sizes = [x._shape[d] for d in dims]
    else:
        sizes = [x._shape[d] if v == -1 else _check_n(v) for d, v in zip(dims, s)]
    return dims, sizes


def _c2c_public(x, dims, sizes, norm, forward: bool):
    x = _resize(_to_complex(x), dims, sizes)
    if not dims:
        return x.clone()
    return c2c_op(x, list(dims), _norm_code(norm, forward), forward)


def _r2c_public(x, dims, sizes, norm, name: str, forward: bool = True):
    x = _resize(_to_real(x, name), dims, sizes)
    out = r2c_op(x, list(dims), _norm_code(norm, forward), True)
    return out if forward else complex_numbers.conj_physical_op(out)  # ihfft: the conjugate of a one-sided inverse


def _c2r_public(x, dims, sizes, last_n, norm, forward: bool = False):
    x = _to_complex(x)
    if forward:
        x = complex_numbers.conj_physical_op(x)  # hfft
    half = list(sizes[:-1]) + [last_n // 2 + 1]
    x = _resize(x, dims, half)
    return c2r_op(x, list(dims), _norm_code(norm, forward), last_n)


# -- public functions -----------------------------------------------------------------------------


@_autocast_composite("fp32")
def fft(input, n=None, dim=-1, norm=None, *, out=None):
    _check_input(input, "fft")
    d, n = _one_dim(input, n, dim, "fft")
    return write_out(_c2c_public(input, (d,), [input._shape[d] if n is None else n], norm, True), out)


@_autocast_composite("fp32")
def ifft(input, n=None, dim=-1, norm=None, *, out=None):
    _check_input(input, "ifft")
    d, n = _one_dim(input, n, dim, "ifft")
    return write_out(_c2c_public(input, (d,), [input._shape[d] if n is None else n], norm, False), out)


@_autocast_composite("fp32")
def rfft(input, n=None, dim=-1, norm=None, *, out=None):
    _check_input(input, "rfft")
    d, n = _one_dim(input, n, dim, "rfft")
    return write_out(_r2c_public(input, (d,), [input._shape[d] if n is None else n], norm, "rfft"), out)


@_autocast_composite("fp32")
def ihfft(input, n=None, dim=-1, norm=None, *, out=None):
    _check_input(input, "ihfft")
    d, n = _one_dim(input, n, dim, "ihfft")
    return write_out(_r2c_public(input, (d,), [input._shape[d] if n is None else n], norm, "ihfft", False), out)


def _c2r_last_n(x: Tensor, d: int, n) -> int:
    if n is not None:
        return n
    last_n = 2 * (x._shape[d] - 1)
    if last_n < 1:
        raise RuntimeError(f"Invalid number of data points ({last_n}) specified")
    return last_n


@_autocast_composite("fp32")
def irfft(input, n=None, dim=-1, norm=None, *, out=None):
    _check_input(input, "irfft")
    d, n = _one_dim(input, n, dim, "irfft")
    last_n = _c2r_last_n(input, d, n)
    return write_out(_c2r_public(input, (d,), [last_n], last_n, norm), out)


@_autocast_composite("fp32")
def hfft(input, n=None, dim=-1, norm=None, *, out=None):
    _check_input(input, "hfft")
    d, n = _one_dim(input, n, dim, "hfft")
    last_n = _c2r_last_n(input, d, n)
    return write_out(_c2r_public(input, (d,), [last_n], last_n, norm, forward=True), out)


@_autocast_composite("fp32")
def fftn(input, s=None, dim=None, norm=None, *, out=None):
    _check_input(input, "fftn")
    dims, sizes = _dims_and_sizes(input, s, dim)
    return write_out(_c2c_public(input, dims, sizes, norm, True), out)


@_autocast_composite("fp32")
def ifftn(input, s=None, dim=None, norm=None, *, out=None):
    _check_input(input, "ifftn")
    dims, sizes = _dims_and_sizes(input, s, dim)
    return write_out(_c2c_public(input, dims, sizes, norm, False), out)


@_autocast_composite("fp32")
def rfftn(input, s=None, dim=None, norm=None, *, out=None):
    _check_input(input, "rfftn")
    dims, sizes = _dims_and_sizes(input, s, dim)
    if not dims:
        raise RuntimeError("rfftn must transform at least one axis")
    return write_out(_r2c_public(input, dims, sizes, norm, "rfftn"), out)


@_autocast_composite("fp32")
def irfftn(input, s=None, dim=None, norm=None, *, out=None):
    _check_input(input, "irfftn")
    dims, sizes = _dims_and_sizes(input, s, dim)
    if not dims:
        raise RuntimeError("irfftn must transform at least one axis")
    last_n = sizes[-1] if s is not None and s[-1] != -1 else _c2r_last_n(input, dims[-1], None)
    return write_out(_c2r_public(input, dims, sizes, last_n, norm), out)


def hfftn(input, s=None, dim=None, norm=None, *, out=None):
    _check_input(input, "hfftn")
    dims, sizes = _dims_and_sizes(input, s, dim)
    if not dims:
        raise RuntimeError("hfftn must transform at least one axis")
    last_n = sizes[-1] if s is not None and s[-1] != -1 else _c2r_last_n(input, dims[-1], None)
    return write_out(_c2r_public(input, dims, sizes, last_n, norm, forward=True), out)


def ihfftn(input, s=None, dim=None, norm=None, *, out=None):
    _check_input(input, "ihfftn")
    dims, sizes = _dims_and_sizes(input, s, dim)
    if not dims:
        raise RuntimeError("ihfftn must transform at least one axis")
    return write_out(_r2c_public(input, dims, sizes, norm, "ihfftn", False), out)


@_autocast_composite("fp32")
def fft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return fftn(input, s, dim, norm, out=out)


@_autocast_composite("fp32")
def ifft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return ifftn(input, s, dim, norm, out=out)


@_autocast_composite("fp32")
def rfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return rfftn(input, s, dim, norm, out=out)


@_autocast_composite("fp32")
def irfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return irfftn(input, s, dim, norm, out=out)


def hfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return hfftn(input, s, dim, norm, out=out)


def ihfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return ihfftn(input, s, dim, norm, out=out)


# -- helpers: frequencies and shifts ----------------------------------------------------------------


def _freq_dtype(dtype):
    d = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
    if not (d.is_floating_point or d.is_complex):
        raise RuntimeError("fftfreq requires a floating point or complex dtype")
    if d.is_complex:  # PyTorch builds the frequencies with arange, which has no complex kernel
        raise NotImplementedError(f"\"arange_cpu\" not implemented for '{type_name(d)}'")
    return d


def fftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """[0, 1, ..., ceil(n/2) - 1, -floor(n/2), ..., -1] / (d * n)."""

    rd = _freq_dtype(dtype)
    n = operator.index(n)
    k = cat([arange((n + 1) // 2, dtype=rd, device=device), arange(-(n // 2), 0, dtype=rd, device=device)])
    result = mul_op(k, 1.0 / (n * builtins.float(d)))  # as PyTorch: times the reciprocal
    if requires_grad:
        result.requires_grad_(True)
    return write_out(result, out)


def rfftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """[0, 1, ..., n // 2] / (d * n)."""

    rd = _freq_dtype(dtype)
    n = operator.index(n)
    result = mul_op(arange(n // 2 + 1, dtype=rd, device=device), 1.0 / (n * builtins.float(d)))
    if requires_grad:
        result.requires_grad_(True)
    return write_out(result, out)


def _shift(input: Tensor, dim, inverse: bool) -> Tensor:
    if not isinstance(input, Tensor):
        raise TypeError(f"argument 'input' must be Tensor, not {type(input).__name__}")
    if dim is None:
        dims = tuple(range(input.ndim))
    else:
        dims = tuple(wrap_dim(d, input.ndim) for d in ((dim,) if isinstance(dim, int) else dim))
    if not dims:
        return input.clone()
    shifts = [(input._shape[d] + 1) // 2 if inverse else input._shape[d] // 2 for d in dims]
    return roll(input, shifts, dims)


def fftshift(input, dim=None):
    return _shift(input, dim, False)


def ifftshift(input, dim=None):
    return _shift(input, dim, True)
