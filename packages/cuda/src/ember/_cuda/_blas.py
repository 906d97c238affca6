"""Matrix products on cuBLAS (the ``nvidia-cublas`` wheel, called through ctypes).

Row-major ``C = A @ B`` is computed as the column-major ``C^T = B^T A^T``: a row-major
operand is its own transpose in column-major terms, so no copy is needed for contiguous or
transposed (``.t()``, ``.mT``) operands; other layouts are made contiguous first. Batched
products use ``cublasGemmStridedBatchedEx`` (batch stride 0 broadcasts). float16/bfloat16
accumulate in float32; float32 uses TF32 tensor cores only when
``ember.backends.cuda.matmul.allow_tf32`` is set or the float32 matmul precision is not
"highest", as in PyTorch. complex64/complex128 are the same calls on CUDA_C_32F/CUDA_C_64F
(interleaved pairs, as ember stores them), with complex alpha/beta.

The per-call entry points (``cublasGemmEx``, ``cublasGemmStridedBatchedEx``, ``cublasSetStream_v2``,
``cublasLtMatmul`` and the bias attribute's ``cublasLtMatmulDescSetAttribute``) are called through
``_C._device_call`` with their addresses (found here by ctypes once): every one takes only integer-class
arguments (the scalars by pointer), which that call passes as ctypes would, without converting each
argument through argtypes (~2.4 us a GEMM). ``EMBER_CUDA_NATIVE_BLAS=0`` (or a core without it) keeps
the ctypes calls.
"""

from __future__ import annotations

import ctypes
import os
import threading

from ember import _C
from ember._src import dtypes as dt

from . import _libs
from ._allocator import allocator
from ._storage import new_empty as new_empty_tensor  # one frame per CUDA result
from ._streams import _TLS as _STREAMS_TLS

_CUDA_TYPE = {dt.float32: 0, dt.float64: 1, dt.float16: 2, dt.bfloat16: 14,
              dt.complex64: 4, dt.complex128: 5}  # CUDA_C_32F / CUDA_C_64F: cuBLAS's complex GEMMs
_COMPUTE_32F, _COMPUTE_32F_FAST_TF32, _COMPUTE_64F = 68, 77, 70
_OP_N, _OP_T = 0, 1
_STATE: dict = {}
_TLS = threading.local()


_NAMES = ("libcublas.so.13", "libcublas.so.12", "libcublas.so")


def _find_library():
    return _libs.load(_NAMES, "cublas", "cuBLAS not found: install the nvidia-cublas wheel (pip install ember[cuda])",
                      companions=("libcublasLt.so*",))


_CALL = getattr(_C, "_device_call", None) if os.environ.get("EMBER_CUDA_NATIVE_BLAS", "1") != "0" else None


def _address(fn) -> int:
    """The address of a ctypes function (a library's, or a CFUNCTYPE over an address)."""
    return ctypes.cast(fn, ctypes.c_void_p).value


def _fns(lib):
    """(lib, cublasGemmEx, cublasGemmStridedBatchedEx, cublasSetStream_v2) addresses for _C._device_call,
    for the library object in use (the fake host swaps it)."""
    fns = _STATE.get("fns")
    if fns is None or fns[0] is not lib:
        fns = _STATE["fns"] = (lib, _address(lib.cublasGemmEx), _address(lib.cublasGemmStridedBatchedEx),
                               _address(lib.cublasSetStream_v2))
    return fns


# (compute type, alpha, beta) -> (alpha, beta as ctypes scalars, their addresses): cuBLAS reads the scalars
# through pointers (float for the 32-bit compute types, double for 64F); the common pairs are kept.
_SCALARS: dict = {}


def _scalars(double: bool, alpha, beta, cplx: bool = False):
    key = (double, alpha, beta, cplx)
    sc = _SCALARS.get(key)
    if sc is None:
        ty = ctypes.c_double if double else ctypes.c_float
        if cplx:  # cuComplex / cuDoubleComplex: (real, imag)
            alpha, beta = complex(alpha), complex(beta)
            al, be = (ty * 2)(alpha.real, alpha.imag), (ty * 2)(beta.real, beta.imag)
        else:
            al, be = ty(alpha), ty(beta)
        sc = (al, be, ctypes.addressof(al), ctypes.addressof(be))
        if len(_SCALARS) < 64:
            _SCALARS[key] = sc
    return sc


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
                                  "covers float16, bfloat16, float32, float64, complex64 and complex128)")
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
    streams = _STREAMS_TLS.streams  # current_handle(index), inline
    s = streams.get(index) if streams else None
    stream = 0 if s is None else s.cuda_stream
    call = _CALL
    cplx = dtype is dt.complex64 or dtype is dt.complex128
    if dtype is dt.float64 or dtype is dt.complex128:
        compute = _COMPUTE_64F
    elif cplx:
        compute = _COMPUTE_32F
    else:
        compute = _COMPUTE_32F_FAST_TF32 if (dtype is dt.float32 and _tf32()) else _COMPUTE_32F
    ty = _CUDA_TYPE[dtype]
    op_b, ldb = (_OP_T if lb[0] else _OP_N), lb[1]
    op_a, lda = (_OP_T if la[0] else _OP_N), la[1]
    single = batch == 1 and a.ndim == 2 and b.ndim == 2
    if call is not None:
        fns = _fns(lib)
        hv = h.value
        if _TLS.stream.get(index) != stream:
            _check(call(fns[3], hv, stream), "cublasSetStream")
            _TLS.stream[index] = stream
        sc = _scalars(compute == _COMPUTE_64F, alpha, beta, cplx)
        if single:
            status = call(fns[1], hv, op_b, op_a, n, m, k, sc[2], b.data_ptr(), ty, ldb, a.data_ptr(), ty, lda, sc[3],
                          c.data_ptr(), ty, n, compute, -1)
            if status:
                _check(status, "cublasGemmEx")
            return
        sa = a._stride[0] if a.ndim == 3 else 0
        sb = b._stride[0] if b.ndim == 3 else 0
        _check(call(fns[2], hv, op_b, op_a, n, m, k, sc[2], b.data_ptr(), ty, ldb, sb, a.data_ptr(), ty, lda, sa,
                    sc[3], c.data_ptr(), ty, n, m * n, batch, compute, -1), "cublasGemmStridedBatchedEx")
        return
    if _TLS.stream.get(index) != stream:
        _check(lib.cublasSetStream_v2(h, stream), "cublasSetStream")
        _TLS.stream[index] = stream
    al, be = _scalars(compute == _COMPUTE_64F, alpha, beta, cplx)[:2]
    if single:
        _check(lib.cublasGemmEx(h, op_b, op_a, n, m, k, ctypes.byref(al), b.data_ptr(), ty, ldb, a.data_ptr(), ty,
                                lda, ctypes.byref(be), c.data_ptr(), ty, n, compute, -1), "cublasGemmEx")
        return
    sa = a._stride[0] if a.ndim == 3 else 0
    sb = b._stride[0] if b.ndim == 3 else 0
    _check(lib.cublasGemmStridedBatchedEx(h, op_b, op_a, n, m, k, ctypes.byref(al), b.data_ptr(), ty, ldb, sb,
                                          a.data_ptr(), ty, lda, sa, ctypes.byref(be), c.data_ptr(), ty, n, m * n,
                                          batch, compute, -1), "cublasGemmStridedBatchedEx")


# ---- cuBLASLt: a GEMM with the bias added in its epilogue ----------------------------------------------------
# nn.Linear's addmm(bias, x, W^T) otherwise costs a broadcast copy of the bias into the output and a GEMM
# that reads it back (beta = 1); the epilogue adds the bias as the tile is stored (measured on the H200:
# GPT-2's forward linears 0.60-0.84x PyTorch's time with the copy, PyTorch uses this epilogue).
_LT_DESC_TRANSA, _LT_DESC_TRANSB, _LT_DESC_EPILOGUE, _LT_DESC_BIAS_POINTER = 3, 4, 7, 8
_LT_EPILOGUE_BIAS = 4
_LT_PREF_MAX_WORKSPACE, _LT_PREF_ALIGN_A, _LT_PREF_ALIGN_B, _LT_PREF_ALIGN_C, _LT_PREF_ALIGN_D = 1, 5, 6, 7, 8
_CUDA_R_32F = 0
LT_WORKSPACE_BYTES = 32 << 20
_HEURISTIC_BYTES = 96  # sizeof(cublasLtMatmulHeuristicResult_t): algo (64), workspaceSize, state, waves, 4 ints


def _lt():
    lib = _STATE.get("lt")
    if lib is None:
        # libcublas links libcublasLt: the one it mapped is in /proc/self/maps however libcublas was found
        _lib()
        path = next((p for p in _loaded_paths() if "libcublasLt.so" in p), None)
        lib = ctypes.CDLL(path or "libcublasLt.so.13", mode=ctypes.RTLD_GLOBAL)
        vp, i32, u64, i64, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_int64, ctypes.c_size_t
        lib.cublasLtCreate.argtypes = [ctypes.POINTER(vp)]
        lib.cublasLtMatmulDescCreate.argtypes = [ctypes.POINTER(vp), i32, i32]
        lib.cublasLtMatmulDescSetAttribute.argtypes = [vp, i32, vp, sz]
        lib.cublasLtMatrixLayoutCreate.argtypes = [ctypes.POINTER(vp), i32, u64, u64, i64]
        lib.cublasLtMatmulPreferenceCreate.argtypes = [ctypes.POINTER(vp)]
        lib.cublasLtMatmulPreferenceSetAttribute.argtypes = [vp, i32, vp, sz]
        lib.cublasLtMatmulAlgoGetHeuristic.argtypes = [vp, vp, vp, vp, vp, vp, vp, i32, vp, ctypes.POINTER(i32)]
        lib.cublasLtMatmul.argtypes = [vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, sz, vp]
        _STATE["lt"] = lib
    return lib


def _loaded_paths():
    try:
        with open("/proc/self/maps") as f:
            return [line.split()[-1] for line in f if "cublasLt" in line]
    except OSError:
        return []


def _alignment(ptr: int) -> int:
    """The largest power of two (at most 256) dividing the address."""
    return min(ptr & -ptr, 256) if ptr else 256


class _LtPlan:
    """The descriptors and the chosen algorithm of one GEMM shape (per thread: the bias pointer is set on
    the shared matmul descriptor just before each call)."""

    __slots__ = ("desc", "a", "b", "d", "algo", "algo_ptr", "workspace_size", "bias", "bias_ref", "bias_addr",
                 "values")


def _lt_plan(index, ty, compute, op_b, op_a, n, m, k, ldb, lda, aligns):
    plans = getattr(_TLS, "lt_plans", None)
    if plans is None:
        plans = _TLS.lt_plans = {}
    key = (index, ty, compute, op_b, op_a, n, m, k, ldb, lda, aligns)
    plan = plans.get(key, False)
    if plan is not False:
        return plan
    lt = _lt()
    vp = ctypes.c_void_p
    desc, la, lb, ld, pref = vp(), vp(), vp(), vp(), vp()
    _check(lt.cublasLtMatmulDescCreate(ctypes.byref(desc), compute, _CUDA_R_32F), "cublasLtMatmulDescCreate")
    for attr, value in ((_LT_DESC_TRANSA, op_b), (_LT_DESC_TRANSB, op_a), (_LT_DESC_EPILOGUE, _LT_EPILOGUE_BIAS)):
        v = ctypes.c_int32(value)
        _check(lt.cublasLtMatmulDescSetAttribute(desc, attr, ctypes.byref(v), 4), "cublasLtMatmulDescSetAttribute")
    # Column-major: D (n x m) = op(b) (n x k) @ op(a) (k x m); each operand described as stored.
    rows_b, cols_b = (n, k) if op_b == _OP_N else (k, n)
    rows_a, cols_a = (k, m) if op_a == _OP_N else (m, k)
    _check(lt.cublasLtMatrixLayoutCreate(ctypes.byref(la), ty, rows_b, cols_b, ldb), "cublasLtMatrixLayoutCreate")
    _check(lt.cublasLtMatrixLayoutCreate(ctypes.byref(lb), ty, rows_a, cols_a, lda), "cublasLtMatrixLayoutCreate")
    _check(lt.cublasLtMatrixLayoutCreate(ctypes.byref(ld), ty, n, m, n), "cublasLtMatrixLayoutCreate")
    _check(lt.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)), "cublasLtMatmulPreferenceCreate")
    ws = ctypes.c_uint64(LT_WORKSPACE_BYTES)
    _check(lt.cublasLtMatmulPreferenceSetAttribute(pref, _LT_PREF_MAX_WORKSPACE, ctypes.byref(ws), 8),
           "cublasLtMatmulPreferenceSetAttribute")
    for attr, value in zip((_LT_PREF_ALIGN_A, _LT_PREF_ALIGN_B, _LT_PREF_ALIGN_C, _LT_PREF_ALIGN_D), aligns):
        v = ctypes.c_uint32(value)
        _check(lt.cublasLtMatmulPreferenceSetAttribute(pref, attr, ctypes.byref(v), 4),
               "cublasLtMatmulPreferenceSetAttribute")
    result = ctypes.create_string_buffer(_HEURISTIC_BYTES)
    found = ctypes.c_int(0)
    status = lt.cublasLtMatmulAlgoGetHeuristic(_lt_handle(index), desc, la, lb, ld, ld, pref, 1,
                                               ctypes.addressof(result), ctypes.byref(found))
    if status != 0 or found.value < 1:
        plans[key] = None  # no algorithm for this case: the caller takes the copy-and-GEMM path
        return None
    plan = _LtPlan()
    plan.desc, plan.a, plan.b, plan.d = desc, la, lb, ld
    plan.algo = ctypes.create_string_buffer(result.raw[:64], 64)
    plan.algo_ptr = ctypes.addressof(plan.algo)
    plan.bias = ctypes.c_void_p()  # the bias address, set per call through this reference
    plan.bias_ref = ctypes.byref(plan.bias)
    plan.bias_addr = ctypes.addressof(plan.bias)
    plan.values = (desc.value, la.value, lb.value, ld.value)  # the descriptors' addresses, for _C._device_call
    plan.workspace_size = ctypes.c_size_t.from_buffer_copy(result.raw[64:72]).value
    plans[key] = plan
    return plan


def _lt_handle(index: int):
    handles = _LT_HANDLES
    h = handles.get(index)
    if h is None:
        h = ctypes.c_void_p()
        _check(_lt().cublasLtCreate(ctypes.byref(h)), "cublasLtCreate")
        handles[index] = h
    return h


_LT_HANDLES: dict = {}


def _lt_workspace(device, stream, nbytes: int):
    """A workspace per (device, stream), kept for the process: kernels still queued on the stream use it
    (a larger one replaces it: the allocator reuses the old block only after the stream's queued work)."""
    spaces = _STATE.setdefault("lt_workspaces", {})
    buf = spaces.get((device.index, stream))
    if buf is None or buf.numel() < nbytes:
        buf = spaces[(device.index, stream)] = new_empty_tensor((nbytes,), dt.uint8, device)
    return buf


def gemm_bias(a, b, bias):
    """A fresh (m, n) = a (m, k) @ b (k, n) + bias (n,) from one cuBLASLt call with the bias epilogue, or
    None (nothing allocated) where that does not apply: the caller then copies the bias and runs ``gemm``."""
    dtype = a.dtype
    if dtype not in (dt.float16, dt.bfloat16, dt.float32) or b.dtype is not dtype:
        return None
    if _STATE.get("lt_broken"):
        return None
    if bias.dtype is not dtype or bias.ndim != 1 or bias._stride[0] != 1 or a.ndim != 2 or b.ndim != 2:
        return None
    m, k = a._shape
    n = b._shape[1]
    if not (m and n and k) or bias._shape[0] != n:
        return None
    la, lb = _layout(a, m, k), _layout(b, k, n)
    if la is None or lb is None:
        return None
    device = a._device
    index = device.index or 0
    if _capturing(index):
        return None  # (its workspace would be allocated inside the capture)
    compute = _COMPUTE_32F_FAST_TF32 if (dtype is dt.float32 and _tf32()) else _COMPUTE_32F
    op_b, ldb = (_OP_T if lb[0] else _OP_N), lb[1]
    op_a, lda = (_OP_T if la[0] else _OP_N), la[1]
    pbias = bias.data_ptr()
    if pbias & 15:
        return None  # the bias epilogue reads the vector in 16-byte pieces
    out = new_empty_tensor((m, n), dtype, device)
    pa, pb, pd = a.data_ptr(), b.data_ptr(), out.data_ptr()
    align_d = _alignment(pd)
    aligns = (_alignment(pb), _alignment(pa), align_d, align_d)
    try:
        plan = _lt_plan(index, _CUDA_TYPE[dtype], compute, op_b, op_a, n, m, k, ldb, lda, aligns)
    except (OSError, AttributeError):  # no usable libcublasLt: the copy-and-GEMM path from now on
        _STATE["lt_broken"] = True
        return None
    if plan is None:
        return None
    lt = _STATE["lt"]
    streams = _STREAMS_TLS.streams  # current_handle(index), inline
    s = streams.get(index) if streams else None
    stream = 0 if s is None else s.cuda_stream
    ws = _lt_workspace(device, stream, plan.workspace_size).data_ptr() if plan.workspace_size else None
    plan.bias.value = pbias
    call = _CALL
    if call is not None:
        fns = _STATE.get("lt_fns")
        if fns is None or fns[0] is not lt:
            fns = _STATE["lt_fns"] = (lt, _address(lt.cublasLtMatmulDescSetAttribute), _address(lt.cublasLtMatmul))
        desc, pla, plb, pld = plan.values
        status = call(fns[1], desc, _LT_DESC_BIAS_POINTER, plan.bias_addr, 8)
        if status:
            _check(status, "cublasLtMatmulDescSetAttribute")
        status = call(fns[2], _lt_handle(index).value, desc, _ONE32_ADDR, pb, pla, pa, plb, _ZERO32_ADDR, pd, pld, pd,
                      pld, plan.algo_ptr, ws, plan.workspace_size, stream)
        if status:
            _check(status, "cublasLtMatmul")
        return out
    status = lt.cublasLtMatmulDescSetAttribute(plan.desc, _LT_DESC_BIAS_POINTER, plan.bias_ref, 8)
    if status:
        _check(status, "cublasLtMatmulDescSetAttribute")
    status = lt.cublasLtMatmul(_lt_handle(index), plan.desc, _ONE32_REF, pb, plan.a, pa, plan.b, _ZERO32_REF, pd,
                               plan.d, pd, plan.d, plan.algo_ptr, ws, plan.workspace_size, stream)
    if status:
        _check(status, "cublasLtMatmul")
    return out


_ONE32_REF, _ZERO32_REF = ctypes.byref(_ONE32), ctypes.byref(_ZERO32)
_ONE32_ADDR, _ZERO32_ADDR = ctypes.addressof(_ONE32), ctypes.addressof(_ZERO32)


def _capturing(index: int) -> bool:
    return bool(allocator(index).capturing)
