"""The FFT primitives on CUDA (``_fft_c2c``, ``_fft_r2c``, ``_fft_c2r``) through cuFFT, NVIDIA's library
from its wheel (``nvidia-cufft-cu12``: ``nvidia/cufft/lib/libcufft.so.11``; ``nvidia-cufft`` for CUDA 13:
``nvidia/cu13/lib/libcufft.so.12`` or ``nvidia/cufft/lib``), loaded on the first transform, never at import.

Each transform makes its input contiguous with the transformed dims last (in the order given), so one
cuFFT plan of rank <= 3 covers them and the other dims are its batch; more than 3 dims run as c2c passes
over the leading ones (c2r: before the c2r of the last three; r2c: after the r2c of the last three). The
result is permuted back to the input's dim order (a view of the contiguous result, as the CPU's values;
its strides are not PyTorch's). Normalization (the codes of ``ember._src.ops.spectral.fft``: 0 none,
1 1/sqrt(n), 2 1/n) is one scaling kernel after the transform. cuFFT's c2r overwrites its input, so it
always reads a private copy (as PyTorch's CUDA c2r does).

Plans are cached per (device, transform type, sizes, batch) as PyTorch's cuFFT plan cache
(``ember.backends.cuda.cufft_plan_cache[device]``: ``size``, ``max_size``, ``clear()``); a plan's work
area comes from the caching allocator per call (``cufftSetAutoAllocation(0)``), on the current stream.
"""

from __future__ import annotations

import ctypes
import math
from collections import OrderedDict

from ember._src import dtypes as dt
from ember._src.dispatch import OPS

from . import _exprs, _libs
from ._elementwise import launch
from ._storage import new_empty as new_empty_tensor
from ._streams import current_handle

# cufftType: real-to-complex, complex-to-real and complex-to-complex, single (R/C) and double (D/Z)
_R2C, _C2R, _C2C, _D2Z, _Z2D, _Z2Z = 0x2A, 0x2C, 0x29, 0x6A, 0x6C, 0x69
_FORWARD, _INVERSE = -1, 1
_EXEC = {_R2C: "cufftExecR2C", _C2R: "cufftExecC2R", _C2C: "cufftExecC2C", _D2Z: "cufftExecD2Z",
         _Z2D: "cufftExecZ2D", _Z2Z: "cufftExecZ2Z"}
_STATE: dict = {}
_PLANS: dict = {}  # device index -> OrderedDict(key -> (plan handle, work size)), least recently used first
_NAMES = ("libcufft.so.12", "libcufft.so.11", "libcufft.so")


def _find_library():
    return _libs.load(_NAMES, "cufft", "cuFFT not found: ember's CUDA FFTs need NVIDIA's cuFFT library, from "
                      "the nvidia-cufft wheel (CUDA 13: pip install ember[cuda] installs it) or nvidia-cufft-cu12 "
                      "(CUDA 12)")


def _lib():
    lib = _STATE.get("lib")
    if lib is None:
        lib = _find_library()
        vp, i32, i64, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong, ctypes.c_size_t
        lib.cufftCreate.argtypes = [ctypes.POINTER(i32)]
        lib.cufftSetAutoAllocation.argtypes = [i32, i32]
        lib.cufftMakePlanMany64.argtypes = [i32, i32, ctypes.POINTER(i64), vp, i64, i64, vp, i64, i64, i32, i64,
                                            ctypes.POINTER(sz)]
        lib.cufftSetStream.argtypes = [i32, vp]
        lib.cufftSetWorkArea.argtypes = [i32, vp]
        lib.cufftDestroy.argtypes = [i32]
        for kind, name in _EXEC.items():
            getattr(lib, name).argtypes = [i32, vp, vp, i32] if kind in (_C2C, _Z2Z) else [i32, vp, vp]
        _STATE["lib"] = lib
    return lib


_ERRORS = {1: "CUFFT_INVALID_PLAN", 2: "CUFFT_ALLOC_FAILED", 3: "CUFFT_INVALID_TYPE", 4: "CUFFT_INVALID_VALUE",
           5: "CUFFT_INTERNAL_ERROR", 6: "CUFFT_EXEC_FAILED", 7: "CUFFT_SETUP_FAILED", 8: "CUFFT_INVALID_SIZE",
           10: "CUFFT_INCOMPLETE_PARAMETER_LIST", 11: "CUFFT_INVALID_DEVICE", 14: "CUFFT_NO_WORKSPACE",
           15: "CUFFT_NOT_IMPLEMENTED", 16: "CUFFT_NOT_SUPPORTED"}


def _check(status: int, what: str) -> None:
    if status:
        raise RuntimeError(f"cuFFT error: {_ERRORS.get(status, status)} from {what}")


def _max_size(index: int) -> int:
    import ember.backends

    return int(ember.backends.cuda.cufft_plan_cache[index].max_size)


def plan_cache_size(index: int) -> int:
    return len(_PLANS.get(index, ()))


def clear_plan_cache(index: int) -> None:
    plans = _PLANS.pop(index, None)
    if plans and "lib" in _STATE:
        for handle, _ in plans.values():
            _STATE["lib"].cufftDestroy(handle)


def _plan(index: int, kind: int, sizes: tuple, batch: int) -> tuple:
    """(plan handle, work-area bytes) of a contiguous batched transform over the trailing dims ``sizes``
    (the signal's sizes: a c2r's output, an r2c's input), made on first use and cached per device."""
    plans = _PLANS.setdefault(index, OrderedDict())
    key = (kind, sizes, batch)
    entry = plans.get(key)
    if entry is not None:
        plans.move_to_end(key)
        return entry
    lib = _lib()
    handle = ctypes.c_int(0)
    _check(lib.cufftCreate(ctypes.byref(handle)), "cufftCreate")
    try:
        _check(lib.cufftSetAutoAllocation(handle.value, 0), "cufftSetAutoAllocation")
        n = (ctypes.c_longlong * len(sizes))(*sizes)
        work = ctypes.c_size_t(0)
        # NULL embeds: the basic contiguous layout (a real signal of prod(sizes), a half spectrum whose last
        # dim is sizes[-1] // 2 + 1), each batch entry right after the previous one
        _check(lib.cufftMakePlanMany64(handle.value, len(sizes), n, None, 1, 0, None, 1, 0, kind, batch,
                                       ctypes.byref(work)), "cufftMakePlanMany64")
    except RuntimeError:
        lib.cufftDestroy(handle.value)
        raise
    entry = (handle.value, work.value)
    limit = _max_size(index)
    while plans and len(plans) >= max(limit, 1):
        old, _ = plans.popitem(last=False)[1]
        lib.cufftDestroy(old)
    if limit > 0:
        plans[key] = entry
    else:
        _STATE.setdefault("uncached", []).append(entry)  # destroyed after its call (below)
    return entry


def _exec(kind: int, src, dst, sizes: tuple, batch: int, direction: int = _FORWARD) -> None:
    """One cuFFT call: ``dst`` (contiguous) from ``src`` (contiguous, the transform dims last)."""
    if batch == 0:
        return
    index = dst._device.index or 0
    handle, work = _plan(index, kind, sizes, batch)
    lib = _STATE["lib"]
    _check(lib.cufftSetStream(handle, current_handle(index)), "cufftSetStream")
    space = new_empty_tensor((work,), dt.uint8, dst._device) if work else None
    if space is not None:  # freed after the call: the allocator reuses it only after this stream's work
        _check(lib.cufftSetWorkArea(handle, space.data_ptr()), "cufftSetWorkArea")
    name = _EXEC[kind]
    if kind in (_C2C, _Z2Z):
        _check(getattr(lib, name)(handle, src.data_ptr(), dst.data_ptr(), direction), name)
    else:
        _check(getattr(lib, name)(handle, src.data_ptr(), dst.data_ptr()), name)
    uncached = _STATE.pop("uncached", None)
    if uncached:
        for h, _ in uncached:
            lib.cufftDestroy(h)


# -- the primitives -------------------------------------------------------------------------------------------


def _moved(x, dims):
    """(x with ``dims`` moved last, contiguous; the permutation back; the batch size)."""
    dims = list(dims)
    rest = [d for d in range(x.ndim) if d not in dims]
    order = rest + dims
    y = x.permute(*order).contiguous() if order != list(range(x.ndim)) else x.contiguous()
    back = [0] * x.ndim
    for i, d in enumerate(order):
        back[d] = i
    batch = 1
    for d in rest:
        batch *= x._shape[d]
    return y, back, batch


def _copy_of(y):
    """A private contiguous copy (c2r's input, which cuFFT overwrites)."""
    out = new_empty_tensor(y._shape, y.dtype, y._device)
    from ._ops_copy import device_copy

    device_copy(out, y)
    return out


def _scaled(out, normalization: int, n: int):
    if normalization and out.numel():
        scale = 1.0 / math.sqrt(n) if normalization == 1 else 1.0 / n
        expr = _exprs.BINARY["mul"]["c" if out.dtype.is_complex else "f"]
        launch(expr, out, [out, scale], [out.dtype, out.dtype])  # in place, on a fresh result: no version bump
    return out


def _back(y, back):
    return y.permute(*back) if back != list(range(len(back))) else y


def _c2c_moved(y, k: int, forward: bool):
    """The c2c transform of the last ``k`` dims of contiguous ``y``, in passes of at most 3 dims."""
    kind = _C2C if y.dtype is dt.complex64 else _Z2Z
    while k > 0:
        r = min(k, 3)
        lead = y.ndim - (k - r) - r  # this pass: dims [lead, lead + r); the dims after it move before
        if k > r:  # bring this pass's dims last, transform, and put them back
            order = list(range(lead)) + list(range(lead + r, y.ndim)) + list(range(lead, lead + r))
            z = y.permute(*order).contiguous()
        else:
            order, z = None, y
        sizes = tuple(z._shape[-r:])
        out = new_empty_tensor(z._shape, z.dtype, z._device)
        if out.numel():
            _exec(kind, z, out, sizes, out.numel() // math.prod(sizes), _FORWARD if forward else _INVERSE)
        if order is not None:
            back = [0] * len(order)
            for i, d in enumerate(order):
                back[d] = i
            out = out.permute(*back).contiguous()
        y = out
        k -= r
    return y


def _c2c(x, dim, normalization: int, forward: bool):
    dims = list(dim)
    if not dims:
        return x.clone()
    y, back, _ = _moved(x, dims)
    out = _c2c_moved(y, len(dims), bool(forward))
    return _back(_scaled(out, normalization, math.prod(x._shape[d] for d in dims)), back)


def _r2c(x, dim, normalization: int, onesided: bool):
    dims = list(dim)
    if not onesided:  # the full spectrum: a c2c transform of the complex-converted input
        return _c2c(x.to(x.dtype.to_complex()), dims, normalization, True)
    y, back, _ = _moved(x, dims)
    r = min(len(dims), 3)
    sizes = tuple(y._shape[-r:])
    shape = y._shape[:-1] + (y._shape[-1] // 2 + 1,)
    out = new_empty_tensor(shape, x.dtype.to_complex(), x._device)
    if out.numel():
        _exec(_R2C if x.dtype is dt.float32 else _D2Z, y, out, sizes, y.numel() // math.prod(sizes))
        if len(dims) > r:
            out = _lead_c2c(out, len(dims), r, True)
    return _back(_scaled(out, normalization, math.prod(x._shape[d] for d in dims)), back)


def _lead_c2c(y, k: int, done: int, forward: bool):
    """c2c over the dims [-k, -done) of contiguous ``y`` (the ones a rank-3 r2c/c2r left)."""
    order = list(range(y.ndim - k)) + list(range(y.ndim - done, y.ndim)) + list(range(y.ndim - k, y.ndim - done))
    z = _c2c_moved(y.permute(*order).contiguous(), k - done, forward)
    back = [0] * len(order)
    for i, d in enumerate(order):
        back[d] = i
    return z.permute(*back).contiguous()


def _c2r(x, dim, normalization: int, last_dim_size: int):
    dims = list(dim)
    y, back, _ = _moved(x, dims)
    half = last_dim_size // 2 + 1  # cuFFT reads exactly the half spectrum of the output's last dim
    if y._shape[-1] > half:
        y = y.narrow(-1, 0, half).contiguous()
    elif y._shape[-1] < half:
        y = OPS["constant_pad_nd"](y, (0, half - y._shape[-1]), 0)
    r = min(len(dims), 3)
    if len(dims) > r:
        y = _lead_c2c(y, len(dims), r, False)  # a fresh result: cuFFT may overwrite it
    else:
        y = _copy_of(y)
    shape = y._shape[:-1] + (last_dim_size,)
    out = new_empty_tensor(shape, x.dtype.to_real(), x._device)
    if out.numel():
        sizes = tuple(shape[-r:])
        _exec(_C2R if x.dtype is dt.complex64 else _Z2D, y, out, sizes, out.numel() // math.prod(sizes))
    n = math.prod(shape[len(shape) - len(dims):])
    return _back(_scaled(out, normalization, n), back)


def register() -> None:
    OPS["_fft_c2c"].kernels["cuda"] = _c2c
    OPS["_fft_r2c"].kernels["cuda"] = _r2c
    OPS["_fft_c2r"].kernels["cuda"] = _c2r
