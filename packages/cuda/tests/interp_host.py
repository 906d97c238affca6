"""An "interpreter host": ember's whole CUDA path on a machine without a GPU, with real results. Device memory is
host memory (the driver's allocations are ctypes buffers, copies are memmove), every Triton kernel ember builds
(``_compile.kernel``: generated and hand-written alike) runs in Triton's CPU interpreter on the raw addresses,
cuBLAS's GEMMs are torch CPU matmuls on views of that memory and cuFFT is NumPy's FFT (``cuda_helpers.NumpyCufft``).
Everything above the driver (dispatch, autograd, the CUDA kernels' Python, the allocator, streams) runs as on
the device, so a GPU test's Python path can be run here: ``python interp_host.py <pytest args>`` runs pytest with
the host installed (``ember.cuda.is_available()`` is then True, so tests marked ``gpu`` run), e.g.
``python interp_host.py -q test_cuda_complex.py -m gpu``. What it cannot tell: machine-code behaviour (Triton's
compiler, libdevice's roundings, races between programs), cuBLAS's/cuFFT's own numerics, and speed (a kernel's
programs run one after another in Python: keep tensors small).

Must be imported before Triton (TRITON_INTERPRET is read when kernels are decorated) and before ember's CUDA
plugin starts; ``install()`` does the rest."""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"
os.environ["EMBER_CUDA_NATIVE_LAUNCH"] = "0"  # (launchers are replaced below; the Python ones are plain to patch)

import ctypes  # noqa: E402
import importlib.util  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton.language as tl  # noqa: E402
import triton.runtime.interpreter as interp  # noqa: E402

_BUFFERS: dict = {}  # address -> ctypes buffer (device and pinned host allocations)
_TORCH = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "fp64": torch.float64,
          "i1": torch.bool, "i8": torch.int8, "u8": torch.uint8, "i16": torch.int16, "i32": torch.int32,
          "i64": torch.int64, "u32": torch.int32, "u64": torch.int64}
_SCALAR = {"i1": (np.bool_, tl.int1), "i8": (np.int8, tl.int8), "i16": (np.int16, tl.int16),
           "i32": (np.int32, tl.int32), "i64": (np.int64, tl.int64), "u32": (np.uint32, tl.uint32),
           "u64": (np.uint64, tl.uint64), "fp32": (np.float32, tl.float32), "fp64": (np.float64, tl.float64)}
_TOTAL = 80 << 30  # the device's memory, as an H100's


def _alloc(nbytes: int) -> int:
    buf = ctypes.create_string_buffer(max(int(nbytes), 1))
    ctypes.memset(buf, 0xFF, len(buf))  # NaN / -1 everywhere: a kernel that reads memory nobody wrote shows it
    addr = ctypes.addressof(buf)
    _BUFFERS[addr] = buf
    return addr


class _Enum:
    def __init__(self, **values):
        self.__dict__.update(values)


class _Driver:
    """The cuda-bindings calls ember makes outside the hot path, on host memory: (error, value) tuples."""

    CUresult = staticmethod(int)
    CUstream_flags = _Enum(CU_STREAM_NON_BLOCKING=1)
    CUevent_flags = _Enum(CU_EVENT_DISABLE_TIMING=2, CU_EVENT_BLOCKING_SYNC=1, CU_EVENT_INTERPROCESS=4)
    CUfunction_attribute = _Enum(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES=8)

    def __init__(self):
        self._next = 1

    def _handle(self):
        self._next += 1
        return self._next

    def cuGetErrorName(self, code):  # noqa: N802 - the driver's names
        return 0, f"CUDA_ERROR_{int(code)}".encode()

    def cuGetErrorString(self, code):  # noqa: N802
        return 0, b"(interpreter host)"

    def cuMemAlloc(self, size):  # noqa: N802
        if size > _TOTAL:
            return 2, 0  # CUDA_ERROR_OUT_OF_MEMORY, as a device of _TOTAL bytes answers
        try:
            return 0, _alloc(size)
        except MemoryError:
            return 2, 0

    def cuMemFree(self, ptr):  # noqa: N802
        _BUFFERS.pop(int(ptr), None)
        return (0,)

    def cuMemHostAlloc(self, size, flags):  # noqa: N802
        return 0, _alloc(size)

    def cuMemHostGetDevicePointer(self, ptr, flags):  # noqa: N802
        return 0, int(ptr)

    def cuMemFreeHost(self, ptr):  # noqa: N802
        _BUFFERS.pop(int(ptr), None)
        return (0,)

    def cuMemGetInfo(self):  # noqa: N802
        return 0, _TOTAL - sum(len(b) for b in _BUFFERS.values()), _TOTAL

    def cuStreamCreateWithPriority(self, flags, priority):  # noqa: N802
        return 0, self._handle()

    def cuEventCreate(self, flags):  # noqa: N802
        return 0, self._handle()

    def cuEventElapsedTime(self, start, end):  # noqa: N802
        return 0, 0.0

    def __getattr__(self, name):
        if name in ("cuCtxSynchronize", "cuStreamQuery", "cuStreamWaitEvent", "cuStreamSynchronize", "cuEventRecord",
                    "cuEventQuery", "cuEventSynchronize", "cuEventDestroy", "cuStreamDestroy", "cuCtxSetCurrent"):
            return lambda *args: (0,)
        raise AttributeError(f"the interpreter host has no driver call {name}")


def _from_address(addr: int, dtype, count: int):
    """A torch CPU tensor of ``count`` elements at host address ``addr`` (no copy)."""
    if count == 0 or addr == 0:
        return torch.empty(0, dtype=dtype)
    size = torch.empty(0, dtype=dtype).element_size()
    return torch.frombuffer((ctypes.c_char * (count * size)).from_address(addr), dtype=dtype, count=count)


_EMBER_TORCH: dict = {}


def view(t):
    """A torch view of an (interpreter-host) CUDA tensor's memory: its shape, strides and dtype."""
    import ember

    if not _EMBER_TORCH:
        _EMBER_TORCH.update({getattr(ember, n): getattr(torch, n) for n in (
            "float16", "bfloat16", "float32", "float64", "complex64", "complex128", "bool", "uint8", "int8", "int16",
            "int32", "int64")})
    dtype = _EMBER_TORCH[t.dtype]
    shape, stride = tuple(t.shape), tuple(t.stride())
    if any(n == 0 for n in shape):
        return torch.empty(shape, dtype=dtype)
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, stride))
    return _from_address(t.data_ptr(), dtype, extent).as_strided(shape, stride)


# -- Triton kernels in the interpreter ---------------------------------------------------------------------------


def _numpy_fn(fn):
    """A libdevice function for the interpreter (extern calls are compiled code; it has none), computed by NumPy
    on the interpreted tensors' arrays in the first tensor argument's dtype."""

    def call(*args):
        first = next(a for a in args if isinstance(a, tl.core.tensor))
        data = [a.handle.data if isinstance(a, tl.core.tensor) else a for a in args]
        with np.errstate(all="ignore"):
            out = np.asarray(fn(*data))
        if out.dtype != np.bool_:
            out = out.astype(first.handle.data.dtype)
            return tl.core.tensor(interp.TensorHandle(out, first.handle.dtype.scalar), first.type)
        ty = tl.block_type(tl.int1, first.type.shape) if first.type.is_block() else tl.int1
        return tl.core.tensor(interp.TensorHandle(out, tl.int1), ty)

    return call


def _libdevice():
    from scipy import special

    table = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tan": np.tan,
             "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "hypot": np.hypot, "atan2": np.arctan2,
             "copysign": np.copysign, "div_rn": np.divide, "signbit": np.signbit, "log1p": np.log1p,
             "expm1": np.expm1, "floor": np.floor, "ceil": np.ceil, "erf": special.erf, "erfc": special.erfc,
             "erfinv": special.erfinv, "lgamma": special.gammaln, "digamma": special.digamma, "pow": np.power,
             "exp2": np.exp2, "log2": np.log2, "log10": np.log10, "asin": np.arcsin, "acos": np.arccos,
             "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "rsqrt":
             lambda x: 1 / np.sqrt(x), "fmod": np.fmod, "trunc": np.trunc, "rint": np.rint, "round": np.round,
             "nearbyint": np.rint, "isnan": np.isnan, "isinf": np.isinf, "nextafter": np.nextafter,
             "fast_expf": np.exp, "fast_logf": np.log, "cbrt": np.cbrt, "fabs": np.abs, "abs": np.abs,
             "fmin": np.fmin, "fmax": np.fmax, "sin_pi": lambda x: np.sin(np.pi * x), "erfcx": special.erfcx,
             "i0": special.i0, "i0e": special.i0e, "i1": special.i1, "i1e": special.i1e, "j0": special.j0,
             "j1": special.j1, "y0": special.y0, "y1": special.y1, "ndtri": special.ndtri}
    return SimpleNamespace(**{name: _numpy_fn(fn) for name, fn in table.items()})


_MODULES: dict = {}
_LIBDEVICE: list = []


def _interpreted(source: str, name: str):
    mod = _MODULES.get(source)
    if mod is None:
        folder = tempfile.mkdtemp(prefix="ember_interp_")
        modname = f"ember_interp_kernels_{len(_MODULES)}"
        path = os.path.join(folder, f"{modname}.py")
        with open(path, "w") as f:
            f.write(source)
        spec = importlib.util.spec_from_file_location(modname, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod
        spec.loader.exec_module(mod)
        if not _LIBDEVICE:
            _LIBDEVICE.append(_libdevice())
        mod.libdevice = _LIBDEVICE[0]
        _MODULES[source] = mod
    return getattr(mod, name)


class _Launcher:
    """``launcher(grid, stream, *args)`` as _fastcall's: pointers become torch tensors at their addresses, numbers
    interpreter scalars of the signature's type (a Python float would be float32 there), constexprs as given."""

    def __init__(self, fn, name, signature, constexprs):
        self.fn, self.name, self.constexprs = fn, name, dict(constexprs)
        self.args = [(k, t) for k, t in signature.items() if k not in constexprs]

    def __call__(self, grid, stream, *args):
        assert len(args) == len(self.args), (self.name, len(args), self.args)
        kwargs = dict(self.constexprs)
        for (k, t), v in zip(self.args, args):
            if t.startswith("*"):
                kwargs[k] = _from_address(int(v), _TORCH[t[1:]], 1)
            else:
                npt, tlt = _SCALAR[t]
                kwargs[k] = tl.core.tensor(interp.TensorHandle(np.array([v], dtype=npt), tlt), tlt)
        grid = tuple(int(g) for g in grid)
        if min(grid) > 0:
            self.fn[grid](**kwargs)


def _build(key, source, name, signature, constexprs, aligned, num_warps, num_stages, device, maxnreg=None):
    return _Launcher(_interpreted(source, name), name, signature, constexprs)


# -- cuBLAS -------------------------------------------------------------------------------------------------------


_GEMM: list = []  # _blas.gemm itself


def _gemm(a, b, c, batch, alpha=1.0, beta=0.0):
    """_blas.gemm's contract on host memory: c[i] = alpha * a[i] @ b[i] + beta * c[i] (beta 0: c not read)."""
    from ember._cuda import _blas

    if c.dtype not in _blas._CUDA_TYPE:
        return _GEMM[0](a, b, c, batch, alpha, beta)  # (its dtype check raises before any cuBLAS call)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if m == 0 or n == 0 or k == 0:
        return
    ta, tb, tc = view(a), view(b), view(c).reshape(batch, m, n)
    prod = torch.matmul(ta, tb)
    prod = prod.expand(batch, m, n) if prod.ndim == 2 else prod
    out = prod * alpha if alpha != 1 else prod
    if beta != 0:
        out = out + tc * beta
    tc.copy_(out)


def _gemm_bias(a, b, bias):
    import ember
    from ember._cuda._storage import new_empty

    if a.dtype not in (ember.float16, ember.bfloat16, ember.float32) or b.dtype is not a.dtype \
            or bias.dtype is not a.dtype or a.ndim != 2 or b.ndim != 2 or bias.ndim != 1:
        return None  # (where _blas.gemm_bias declines: the caller copies the bias and calls gemm)
    m, n = a.shape[0], b.shape[1]
    if not (m and n and a.shape[1]):
        return None
    out = new_empty((m, n), a.dtype, a._device)
    view(out).copy_(torch.matmul(view(a), view(b)) + view(bias))
    return out


# -- install ------------------------------------------------------------------------------------------------------


def install() -> None:
    """Makes ember.cuda see one sm_90 device whose memory is host memory and whose kernels run in Triton's
    interpreter; call before any CUDA tensor exists."""
    from ember._cuda import _blas, _compile, _driver, _fastcall, _ops_fft

    _driver._STATE["drv"] = _Driver()
    _driver._STATE["count"] = 1
    _driver._STATE["ctx"] = {0: 1}
    _driver._TLS.index, _driver._TLS.ctx = 0, 1
    _driver._PROPS[0] = SimpleNamespace(major=9, minor=0, multi_processor_count=132, name="interpreter sm_90",
                                        total_memory=_TOTAL, L2_cache_size=50 << 20, warp_size=32)
    ok = ctypes.c_int

    def c(fn, name):
        return ctypes.CFUNCTYPE(ok, *_fastcall._SIGNATURES[name])(fn)

    lib = SimpleNamespace(
        cuMemcpyHtoDAsync_v2=c(lambda dst, src, n, s: ctypes.memmove(dst, src, n) and 0, "cuMemcpyHtoDAsync_v2"),
        cuMemcpyDtoHAsync_v2=c(lambda dst, src, n, s: ctypes.memmove(dst, src, n) and 0, "cuMemcpyDtoHAsync_v2"),
        cuMemcpyDtoDAsync_v2=c(lambda dst, src, n, s: ctypes.memmove(dst, src, n) and 0, "cuMemcpyDtoDAsync_v2"),
        cuMemsetD8Async=c(lambda dst, v, n, s: ctypes.memset(dst, v, n) and 0, "cuMemsetD8Async"),
        cuStreamSynchronize=c(lambda s: 0, "cuStreamSynchronize"),
        cuLaunchKernel=None, cuLaunchKernelEx=None)
    _fastcall._LIB[:] = [lib]
    _fastcall._EX[0] = False
    _compile._build = _build
    _GEMM[:] = [_blas.gemm]
    _blas.gemm, _blas.gemm_bias = _gemm, _gemm_bias
    from cuda_helpers import NumpyCufft  # (after the device count: the module asks ember.cuda.is_available())

    _ops_fft._STATE["lib"] = NumpyCufft()


def _patch_interpreter() -> None:
    # NumPy 2 refuses int() of a 1-element array (the interpreter's loop bounds): as fused_interp_check._load
    original = interp._patch_lang_tensor

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interp._patch_lang_tensor = patched


_patch_interpreter()

if __name__ == "__main__":
    import pytest

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    install()
    sys.exit(pytest.main(["-p", "no:cacheprovider", *sys.argv[1:]]))
