"""Matrix products on cuBLAS (the ``nvidia-cublas`` wheel, called through ctypes).

Row-major ``C = A @ B`` is computed as the column-major ``C^T = B^T A^T``: a row-major
operand is its own transpose in column-major terms, so no copy is needed for contiguous or
transposed (``.t()``, ``.mT``) operands; other layouts are made contiguous first. Batched
products use ``cublasGemmStridedBatchedEx`` (batch stride 0 broadcasts). float16/bfloat16
accumulate in float32; float32 uses TF32 tensor cores only when
``ember.backends.cuda.matmul.allow_tf32`` is set or the float32 matmul precision is not
"highest", as in PyTorch.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading

from ember._src import dtypes as dt

from ._streams import current_handle

_CUDA_TYPE = {dt.float32: 0, dt.float64: 1, dt.float16: 2, dt.bfloat16: 14}
_COMPUTE_32F, _COMPUTE_32F_FAST_TF32, _COMPUTE_64F = 68, 77, 70
_OP_N, _OP_T = 0, 1
_STATE: dict = {}
_TLS = threading.local()


def _find_library():
    names = ("libcublas.so.13", "libcublas.so.12", "libcublas.so")
    try:
        import nvidia.cublas as pkg  # the nvidia-cublas wheel

        for folder in list(pkg.__path__):
            for name in names:
                for path in sorted(glob.glob(os.path.join(folder, "lib", name))):
                    lt = glob.glob(os.path.join(folder, "lib", "libcublasLt.so*"))
                    for p in sorted(lt):
                        ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL)
                    return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except ImportError:
        pass
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        return ctypes.CDLL(load_nvidia_dynamic_lib("cublas").abs_path, mode=ctypes.RTLD_GLOBAL)
    except Exception:  # noqa: BLE001 - fall through to the system search
        pass
    for name in names:
        try:
            return ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue
    raise RuntimeError("cuBLAS not found: install the nvidia-cublas wheel (pip install ember[cuda])")


def _lib():
    lib = _STATE.get("lib")
    if lib is None:
        lib = _find_library()
        vp, i32, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
        lib.cublasCreate_v2.argtypes = [ctypes.POINTER(vp)]
        lib.cublasSetStream_v2.argtypes = [vp, vp]
        lib.cublasGemmEx.argtypes = [vp, i32, i32, i32, i32, i32, vp, vp, i32, i32, vp, i32, i32, vp, vp, i32, i32,
                                     i32, i32]
        lib.cublasGemmStridedBatchedEx.argtypes = [vp, i32, i32, i32, i32, i32, vp, vp, i32, i32, i64, vp, i32, i32,
                                                   i64, vp, vp, i32, i32, i64, i32, i32, i32]
        _STATE["lib"] = lib
    return lib


def _handle(index: int):
    handles = getattr(_TLS, "handles", None)
    if handles is None:
        handles = _TLS.handles = {}
    h = handles.get(index)
    if h is None:
        h = ctypes.c_void_p()
        _check(_lib().cublasCreate_v2(ctypes.byref(h)), "cublasCreate")
        handles[index] = h
        _TLS.stream = {}
    return h


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"CUDA error: cuBLAS {what} failed with status {status}")


def _tf32() -> bool:
    import ember

    if ember.backends.cuda.matmul.allow_tf32:
        return True
    return ember.get_float32_matmul_precision() != "highest"


def _layout(t, rows: int, cols: int):
    """(transposed?, leading dim) of a row-major (rows, cols) operand view, or None if it needs a copy."""
    sr, sc = t._stride[-2], t._stride[-1]
    if sc == 1 and sr >= max(1, cols):
        return False, sr
    if sr == 1 and sc >= max(1, rows):
        return True, sc
    return None


_ONE32, _ZERO32 = ctypes.c_float(1.0), ctypes.c_float(0.0)


def gemm(a, b, c, batch: int, alpha: float = 1.0, beta: float = 0.0) -> None:
    """c[i] = alpha * a[i] @ b[i] + beta * c[i] for i < batch; a (.., M, K), b (.., K, N), c (batch, M, N)
    contiguous. 2-d ``a``/``b`` are shared by every batch (stride 0)."""
    dtype = c.dtype
    if dtype not in _CUDA_TYPE:
        from ember._src.ops._common import type_name

        raise NotImplementedError(f"\"addmm_cuda\" not implemented for '{type_name(dtype)}' (ember's CUDA matmul "
                                  "covers float16, bfloat16, float32 and float64)")
    m, k = a._shape[-2], a._shape[-1]
    n = b._shape[-1]
    if m == 0 or n == 0:
        return
    if k == 0:
        return  # the callers zero-fill (or scale) c
    la = _layout(a, m, k)
    if la is None:
        a = a.contiguous()
        la = (False, k)
    lb = _layout(b, k, n)
    if lb is None:
        b = b.contiguous()
        lb = (False, n)
    index = c._device.index or 0
    h = _handle(index)
    lib = _lib()
    stream = current_handle(index)
    if _TLS.stream.get(index) != stream:
        _check(lib.cublasSetStream_v2(h, stream), "cublasSetStream")
        _TLS.stream[index] = stream
    if dtype is dt.float64:
        compute = _COMPUTE_64F
        al, be = ctypes.c_double(alpha), ctypes.c_double(beta)
    else:
        compute = _COMPUTE_32F_FAST_TF32 if (dtype is dt.float32 and _tf32()) else _COMPUTE_32F
        al, be = ctypes.c_float(alpha), ctypes.c_float(beta)
    ty = _CUDA_TYPE[dtype]
    op_b, ldb = (_OP_T if lb[0] else _OP_N), lb[1]
    op_a, lda = (_OP_T if la[0] else _OP_N), la[1]
    if batch == 1 and a.ndim == 2 and b.ndim == 2:
        _check(lib.cublasGemmEx(h, op_b, op_a, n, m, k, ctypes.byref(al), b.data_ptr(), ty, ldb, a.data_ptr(), ty,
                                lda, ctypes.byref(be), c.data_ptr(), ty, n, compute, -1), "cublasGemmEx")
        return
    sa = a._stride[0] if a.ndim == 3 else 0
    sb = b._stride[0] if b.ndim == 3 else 0
    _check(lib.cublasGemmStridedBatchedEx(h, op_b, op_a, n, m, k, ctypes.byref(al), b.data_ptr(), ty, ldb, sb,
                                          a.data_ptr(), ty, lda, sa, ctypes.byref(be), c.data_ptr(), ty, n, m * n,
                                          batch, compute, -1), "cublasGemmStridedBatchedEx")
