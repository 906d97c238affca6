"""The per-op hot path into ``libcuda``: kernel launches and async copies through ctypes.

cuda-bindings' Python wrappers convert each argument generically (several microseconds a
call); a ctypes function with fixed ``argtypes`` costs about one. Only calls made once per
op live here; everything else goes through cuda-bindings (``_driver.py``).
"""

from __future__ import annotations

import ctypes
import os
import struct

_LIB: list = []

_u64, _u32, _sz, _vp = ctypes.c_uint64, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p

_SIGNATURES = {
    "cuLaunchKernel": (_vp, _u32, _u32, _u32, _u32, _u32, _u32, _u32, _vp, _vp, _vp),
    "cuMemcpyHtoDAsync_v2": (_u64, _vp, _sz, _vp),
    "cuMemcpyDtoHAsync_v2": (_vp, _u64, _sz, _vp),
    "cuMemcpyDtoDAsync_v2": (_u64, _u64, _sz, _vp),
    "cuMemsetD8Async": (_u64, ctypes.c_ubyte, _sz, _vp),
    "cuStreamSynchronize": (_vp,),
    "cuLaunchKernelEx": (_vp, _vp, _vp, _vp),
}


class _Lib:
    def __init__(self):
        lib = ctypes.CDLL("libcuda.so.1")
        for name, argtypes in _SIGNATURES.items():
            fn = getattr(lib, name, None)
            if fn is None:  # cuLaunchKernelEx: drivers before CUDA 11.8 lack it
                _EX[0] = False
                setattr(self, name, None)
                continue
            fn.argtypes = argtypes
            fn.restype = ctypes.c_int
            setattr(self, name, fn)


def lib() -> _Lib:
    if not _LIB:
        _LIB.append(_Lib())
    return _LIB[0]


def raise_for(code: int, what: str):
    from ._driver import cuda_error

    raise cuda_error(code, what)


def memcpy_htod(dst: int, src: int, nbytes: int, stream: int) -> None:
    rc = lib().cuMemcpyHtoDAsync_v2(dst, src, nbytes, stream)
    if rc:
        raise_for(rc, "cuMemcpyHtoDAsync")


def memcpy_dtoh(dst: int, src: int, nbytes: int, stream: int) -> None:
    rc = lib().cuMemcpyDtoHAsync_v2(dst, src, nbytes, stream)
    if rc:
        raise_for(rc, "cuMemcpyDtoHAsync")


def memcpy_dtod(dst: int, src: int, nbytes: int, stream: int) -> None:
    rc = lib().cuMemcpyDtoDAsync_v2(dst, src, nbytes, stream)
    if rc:
        raise_for(rc, "cuMemcpyDtoDAsync")


def memset8(dst: int, value: int, nbytes: int, stream: int) -> None:
    rc = lib().cuMemsetD8Async(dst, value, nbytes, stream)
    if rc:
        raise_for(rc, "cuMemsetD8Async")


def stream_synchronize(stream: int) -> None:
    rc = lib().cuStreamSynchronize(stream)
    if rc:
        raise_for(rc, "cuStreamSynchronize")


# Kernel argument kinds -> (struct code of an 8-byte slot).
_SLOT = {"ptr": "Q", "i32": "i4x", "i64": "q", "fp32": "f4x", "fp64": "d", "u64": "Q"}


# CUlaunchConfig (cuda.h): grid x/y/z, block x/y/z, dynamic shared bytes (7 uint32), 4 pad bytes, the
# stream, the attribute pointer (null), the attribute count (0) and 4 pad bytes: 56 bytes, then 8 more
# so the parameter slots start 16-byte aligned.
_CONFIG = "7I4xQQI4x8x"
_CONFIG_BYTES = 64
# Whether cuLaunchKernelEx works here: None until the first launch tells (a driver without it, or one
# that refuses the call, switches every launcher to cuLaunchKernel for good).
_EX: list = [None]


class Launcher:
    """Launches one compiled kernel with ``cuLaunchKernelEx``: one reused buffer holds the launch
    configuration (grid, block, shared bytes, stream) followed by the arguments in 8-byte slots whose
    addresses form the ``kernelParams`` array, so a launch is one ``pack_into`` and one ctypes call
    of four pre-converted arguments (cuLaunchKernel's eleven cost ctypes ~1.5 us more to convert per
    launch). The driver copies the values at launch, so reusing the buffer is safe (launches from one
    thread at a time: the GIL is held between the pack and the call)."""

    __slots__ = ("fn", "block", "shared", "_fmt", "_buf", "_params", "_launch", "_launch_ex", "_config", "name")

    def __init__(self, function: int, kinds: list, num_warps: int, shared: int, name: str = "kernel"):
        self.fn = ctypes.c_void_p(function)
        self.block = 32 * num_warps
        self.shared = shared
        self.name = name
        kinds = list(kinds) + ["ptr", "ptr"]  # Triton's global and profile scratch pointers (null)
        self._fmt = struct.Struct("<" + _CONFIG + "".join(_SLOT[k] for k in kinds))
        self._buf = ctypes.create_string_buffer(_CONFIG_BYTES + 8 * len(kinds))
        base = ctypes.addressof(self._buf)
        self._config = ctypes.c_void_p(base)
        self._params = (ctypes.c_void_p * len(kinds))(*[base + _CONFIG_BYTES + 8 * i for i in range(len(kinds))])
        lib_ = lib()
        self._launch = lib_.cuLaunchKernel
        self._launch_ex = lib_.cuLaunchKernelEx if _EX[0] is not False else None

    def __call__(self, grid, stream: int, *args) -> None:
        gx, gy, gz = grid if len(grid) == 3 else (tuple(grid) + (1, 1))[:3]
        self._fmt.pack_into(self._buf, 0, gx, gy, gz, self.block, 1, 1, self.shared, stream, 0, 0, *args, 0, 0)
        ex = self._launch_ex
        if ex is not None and _EX[0] is not False:
            rc = ex(self._config, self.fn, self._params, None)
            if not rc:
                if _EX[0] is None:
                    _EX[0] = True
                return
            if _EX[0] is None and self._classic(gx, gy, gz, stream) == 0:
                _EX[0] = False  # the driver refuses the Ex form: every launcher uses cuLaunchKernel from now on
                return
            raise_for(rc, f"cuLaunchKernelEx({self.name})")
        rc = self._classic(gx, gy, gz, stream)
        if rc:
            raise_for(rc, f"cuLaunchKernel({self.name})")

    def _classic(self, gx, gy, gz, stream) -> int:
        return self._launch(self.fn, gx, gy, gz, self.block, 1, 1, self.shared, stream, self._params, None)


# Kernel argument kinds -> the native launcher's kind letters (ember._C.DeviceLauncher).
_NATIVE_KIND = {"ptr": "p", "u64": "p", "i32": "i", "i64": "l", "fp32": "f", "fp64": "d"}
# Whether new launchers are native (``EMBER_CUDA_NATIVE_LAUNCH=0``, or a tool that wraps
# ``Launcher.__call__``, turns it off; launchers already made keep their kind).
NATIVE: list = [os.environ.get("EMBER_CUDA_NATIVE_LAUNCH", "1") not in ("0", "")]


def _address(fn) -> int | None:
    """The C address of a ctypes function (None when absent)."""
    if fn is None:
        return None
    return ctypes.cast(fn, ctypes.c_void_p).value


def make_launcher(function: int, kinds: list, num_warps: int, shared: int, name: str = "kernel"):
    """A launcher of one compiled kernel, called ``launcher(grid, stream, *args)``: the core's native
    ``DeviceLauncher`` (the arguments packed and the driver called from C++, through libcuda's entry
    points found here), or the Python ``Launcher`` where the native one is off or missing. Both write the
    same bytes and share the rule for a driver that refuses ``cuLaunchKernelEx``."""
    if NATIVE[0]:
        native = getattr(_native_module(), "DeviceLauncher", None)
        if native is not None:
            lib_ = lib()
            ex = _address(lib_.cuLaunchKernelEx) if _EX[0] is not False else None
            return native(ex, _address(lib_.cuLaunchKernel), function, "".join(_NATIVE_KIND[k] for k in kinds),
                          32 * num_warps, shared, name, raise_for)
    return Launcher(function, kinds, num_warps, shared, name)


def _native_module():
    from ember import _C

    return _C
