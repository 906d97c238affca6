"""Complex tensors, FFTs and eig on CUDA (issue 16, session 19). Without a GPU: the generated complex kernels
in Triton's interpreter (complex_interp_check.py, against torch's complex kernels); _ops_fft's layouts, passes
and plan cache on CPU tensors with cuFFT replaced by NumPy's FFT (against torch's _fft_c2c/_fft_r2c/_fft_c2r);
every complex/FFT/eig op on the fake host of benchmarks/host_cuda_fake.py (devices, shapes, dtypes, the cuBLAS
complex GEMM's arguments). On the GPU (marked ``gpu``): values and gradients against the CPU kernels."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cuda_helpers import NumpyCufft, needs_gpu, run_interpreter_check

import ember

torch = pytest.importorskip("torch")


def test_complex_kernels_in_the_interpreter():
    run_interpreter_check("complex_interp_check.py", 10)


# -- _ops_fft on the CPU, cuFFT replaced by NumPy ------------------------------------------------------------


@pytest.fixture
def numpy_cufft(monkeypatch):
    from ember._cuda import _ops_copy, _ops_fft

    fake = NumpyCufft(work=256)
    monkeypatch.setitem(_ops_fft._STATE, "lib", fake)
    monkeypatch.setattr(_ops_fft, "_PLANS", {})
    monkeypatch.setattr(_ops_fft, "new_empty_tensor", lambda shape, dtype, dev, zero=False: ember.empty(
        shape, dtype=dtype))
    monkeypatch.setattr(_ops_fft, "launch", lambda expr, out, ops, computes: out.mul_(ops[1]))  # the scaling
    monkeypatch.setattr(_ops_copy, "device_copy", lambda dst, src: dst.copy_(src))
    return fake


def _t(x):
    return torch.from_numpy(np.array(x.numpy()))  # (a copy that keeps 0-d arrays 0-d)


def _e(x):
    return ember.from_numpy(x.numpy().copy())


def _close(got, want, double):
    tol = 1e-10 if double else 2e-5
    torch.testing.assert_close(_t(got), want, rtol=tol, atol=tol * max(1.0, float(want.abs().max())))


C2C_CASES = [  # (shape, dims, normalization, forward, transposed input)
    ((16,), [0], 0, True, False), ((6, 10), [1], 2, False, False), ((6, 10), [0], 1, True, True),
    ((3, 4, 5), [2, 0], 1, True, False), ((2, 3, 4, 5), [0, 1, 2, 3], 2, False, False),
    ((2, 3, 2, 3, 2), [4, 0, 2, 3], 0, True, True), ((4, 0, 3), [2], 0, True, False),
]


@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("case", C2C_CASES)
def test_fft_c2c_layouts_with_numpy_cufft(numpy_cufft, case, double):
    """_fft_c2c: dims moved last (any order), passes of <= 3 dims for more, the batch, normalization, a
    transposed input, an empty batch; against torch's _fft_c2c."""
    from ember._cuda import _ops_fft

    shape, dims, norm, forward, transposed = case
    g = torch.Generator().manual_seed(len(shape) * 7 + norm)
    dtype = torch.complex128 if double else torch.complex64
    base = torch.randn(shape[::-1] if transposed else shape, dtype=dtype, generator=g)
    flip = list(reversed(range(base.ndim)))
    x, ex = (base.permute(*flip), _e(base).permute(*flip)) if transposed else (base, _e(base))
    got = _ops_fft._c2c(ex, dims, norm, forward)
    want = torch._fft_c2c(x, dims, norm, forward) if x.numel() else x  # (torch's MKL refuses an empty batch)
    assert tuple(got.shape) == tuple(want.shape)
    if want.numel():
        _close(got, want, double)
    if len(dims) > 3:  # two passes: 3 dims, then the rest
        assert sorted(len(c[1]) for c in numpy_cufft.calls) == [len(dims) - 3, 3]


R2C_CASES = [((16,), [0], 0, True), ((5, 9), [1], 2, True), ((5, 9), [0, 1], 1, True), ((6, 7), [1], 0, False),
             ((2, 3, 4, 6), [0, 1, 2, 3], 1, True), ((3, 4, 5), [0, 2], 2, True)]


@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("case", R2C_CASES)
def test_fft_r2c_layouts_with_numpy_cufft(numpy_cufft, case, double):
    from ember._cuda import _ops_fft

    shape, dims, norm, onesided = case
    g = torch.Generator().manual_seed(len(shape) + norm)
    x = torch.randn(shape, dtype=torch.float64 if double else torch.float32, generator=g)
    got = _ops_fft._r2c(_e(x), dims, norm, onesided)
    want = torch._fft_r2c(x, dims, norm, onesided)
    assert tuple(got.shape) == tuple(want.shape) and got.dtype.is_complex
    _close(got, want, double)


C2R_CASES = [  # (signal shape, dims, normalization, last_dim_size, extra/missing half-spectrum entries)
    ((16,), [0], 2, 16, 0), ((16,), [0], 0, 15, 0), ((4, 9), [1], 1, 9, 2), ((4, 10), [1], 2, 10, -2),
    ((5, 6), [0, 1], 2, 6, 0), ((2, 3, 4, 6), [0, 1, 2, 3], 0, 6, 0), ((3, 4, 8), [2, 0], 1, 8, 0),
]


@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("case", C2R_CASES)
def test_fft_c2r_layouts_with_numpy_cufft(numpy_cufft, case, double):
    """_fft_c2r of Hermitian spectra (an r2c's, what irfft/irfftn receive), the half spectrum narrowed or
    zero-padded to last_dim_size // 2 + 1, the input left unchanged (cuFFT's c2r overwrites its own copy)."""
    from ember._cuda import _ops_fft

    shape, dims, norm, last, extra = case
    g = torch.Generator().manual_seed(len(shape) * 3 + last)
    x = torch.randn(shape, dtype=torch.float64 if double else torch.float32, generator=g)
    spec = torch._fft_r2c(x, dims, 0, True)
    d = dims[-1]
    if extra > 0:
        spec = torch.cat([spec, torch.zeros(*spec.shape[:d], extra, *spec.shape[d + 1:], dtype=spec.dtype)], d)
    elif extra < 0:
        spec = spec.narrow(d, 0, spec.shape[d] + extra)
    inp = _e(spec)
    before = inp.numpy().copy()
    got = _ops_fft._c2r(inp, dims, norm, last)
    # (torch's public irfftn, which narrows or pads the half spectrum too: its primitive asserts an exact one)
    want = torch.fft.irfftn(spec, s=[shape[d] for d in dims[:-1]] + [last], dim=dims,
                            norm={0: "forward", 1: "ortho", 2: "backward"}[norm])
    assert tuple(got.shape) == tuple(want.shape) and not got.dtype.is_complex
    _close(got, want, double)
    np.testing.assert_array_equal(inp.numpy(), before)


def test_fft_plan_cache(numpy_cufft):
    """Plans cached per (type, sizes, batch), reused, counted by ember.backends.cuda.cufft_plan_cache, evicted
    least recently used first past max_size (destroyed), not kept at max_size 0, destroyed by clear()."""
    from ember._cuda import _ops_fft

    cache = ember.backends.cuda.cufft_plan_cache[0]
    x = _e(torch.randn(4, 8, dtype=torch.complex64))
    try:
        _ops_fft._c2c(x, [1], 0, True)
        _ops_fft._c2c(x, [1], 0, False)  # the same plan: the direction is the call's
        assert cache.size == 1 and len(numpy_cufft.plans) == 1
        _ops_fft._c2c(x, [0], 0, True)
        _ops_fft._r2c(_e(torch.randn(4, 8)), [1], 0, True)
        assert cache.size == 3
        cache.max_size = 2
        _ops_fft._c2c(x, [0, 1], 0, True)
        assert cache.size == 2 and numpy_cufft.destroyed == [1, 2]  # the two least recently used
        cache.max_size = 0
        _ops_fft._c2c(_e(torch.randn(3, dtype=torch.complex64)), [0], 0, True)
        assert cache.size == 0 and len(numpy_cufft.destroyed) == 5  # both cached ones, then the uncached one
        cache.max_size = 4096
        _ops_fft._c2c(x, [1], 0, True)
        cache.clear()
        assert cache.size == 0 and len(numpy_cufft.destroyed) == 6
    finally:
        cache.max_size = 4096


def _fake_nvidia_wheels(monkeypatch, tmp_path, rels):
    """Empty files at ``rels`` under a fake ``nvidia`` namespace package that importlib finds."""
    import importlib.util
    from types import SimpleNamespace

    for rel in rels:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"")
    real_find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: SimpleNamespace(
        submodule_search_locations=[str(tmp_path / "nvidia")]) if name == "nvidia" else real_find(name, *a))


def test_cufft_library_search(monkeypatch, tmp_path):
    """The wheels' layouts (nvidia/cufft/lib for cu12 and cu13 packages, nvidia/cu13/lib), the newest soname
    first; a clear error naming the wheel when nothing is found."""
    from ember._cuda import _libs, _ops_fft

    _fake_nvidia_wheels(monkeypatch, tmp_path, ("nvidia/cufft/lib/libcufft.so.11", "nvidia/cu13/lib/libcufft.so.12",
                                                "nvidia/cu13/lib/libcublas.so.13"))
    assert _libs.wheel_paths(_ops_fft._NAMES) == [str(tmp_path / "nvidia/cu13/lib/libcufft.so.12"),
                                                  str(tmp_path / "nvidia/cufft/lib/libcufft.so.11")]
    monkeypatch.setattr(_ops_fft, "_NAMES", ("libember_no_such_cufft.so.99",))
    monkeypatch.setitem(sys.modules, "cuda.pathfinder", None)
    with pytest.raises(RuntimeError, match="cuFFT not found.*nvidia-cufft"):
        _ops_fft._find_library()


def test_cublas_library_search(monkeypatch, tmp_path):
    """cuBLAS through the same search as cuFFT: the wheels' newest soname first, its folder's libcublasLt loaded
    before it (global), a library that fails to load skipped, the system's loader last; a clear error naming the
    wheel when nothing is found."""
    from ember._cuda import _blas, _libs

    _fake_nvidia_wheels(monkeypatch, tmp_path, (
        "nvidia/cublas/lib/libcublas.so.12", "nvidia/cublas/lib/libcublasLt.so.12", "nvidia/cu13/lib/libcublas.so.13",
        "nvidia/cu13/lib/libcublasLt.so.13", "nvidia/cu13/lib/libcufft.so.12"))
    assert _libs.wheel_paths(_blas._NAMES) == [str(tmp_path / "nvidia/cu13/lib/libcublas.so.13"),
                                               str(tmp_path / "nvidia/cublas/lib/libcublas.so.12")]
    loaded = []

    def cdll(path, mode=0):
        loaded.append((os.path.relpath(path, tmp_path) if path.startswith(str(tmp_path)) else path, mode))
        if "cu13" in path:
            raise OSError("wrong CUDA major")  # the cu13 wheel does not load here: the cu12 one is next
        return path

    monkeypatch.setattr(_libs.ctypes, "CDLL", cdll)
    assert _blas._find_library() == str(tmp_path / "nvidia/cublas/lib/libcublas.so.12")
    g = ctypes.RTLD_GLOBAL
    assert loaded == [("nvidia/cu13/lib/libcublasLt.so.13", g), ("nvidia/cublas/lib/libcublasLt.so.12", g),
                      ("nvidia/cublas/lib/libcublas.so.12", g)]
    monkeypatch.setattr(_blas, "_NAMES", ("libember_no_such_cublas.so.99",))
    monkeypatch.setitem(sys.modules, "cuda.pathfinder", None)
    monkeypatch.setattr(_libs.ctypes, "CDLL", lambda path, mode=0: (_ for _ in ()).throw(OSError(path)))
    with pytest.raises(RuntimeError, match="cuBLAS not found.*nvidia-cublas"):
        _blas._find_library()


def test_fft_padding_keeps_autograd_on_cpu():
    """fft's n/s zero padding (now constant_pad_nd, dispatched) records autograd, as torch's."""
    pytest.importorskip("ember.autograd")  # (a package above ember-cuda)
    x = torch.randn(2, 5, dtype=torch.float64, requires_grad=True)
    torch.fft.rfft(x, n=12).abs().sum().backward()
    ex = _e(x.detach()).requires_grad_()
    ember.fft.rfft(ex, n=12).abs().sum().backward()
    torch.testing.assert_close(_t(ex.grad), x.grad)
    y = torch.randn(3, 4, dtype=torch.complex128, requires_grad=True)
    torch.fft.fft2(y, s=(5, 6)).real.sum().backward()
    ey = _e(y.detach()).requires_grad_()
    ember.fft.fft2(ey, s=(5, 6)).real.sum().backward()
    torch.testing.assert_close(_t(ey.grad), y.grad)


# -- the fake host ------------------------------------------------------------------------------------------

_FAKE = r"""
import ctypes, json, sys, warnings
sys.path.insert(0, sys.argv[1])
import host_cuda_fake
host_cuda_fake.install()
import ember
from ember._cuda import _blas
warnings.simplefilter("ignore")

gemms = []
vp, i32, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
def gemm(h, ob, oa, n, m, k, alpha, b, tb, ldb, a, ta, lda, beta, c, tc, ldc, compute, algo):
    al = ctypes.cast(alpha, ctypes.POINTER(ctypes.c_double if compute == 70 else ctypes.c_float))
    gemms.append([tb, ta, tc, compute, al[0], al[1] if tb in (4, 5) else 0.0])
    return 0
lib = _blas._STATE["lib"]
lib.cublasGemmEx = ctypes.CFUNCTYPE(i32, vp, i32, i32, i32, i32, i32, vp, vp, i32, i32, vp, i32, i32, vp, vp, i32,
                                    i32, i32, i32)(gemm)
_blas._STATE.pop("fns", None)

out = {}
def put(name, r):
    out[name] = [r.device.type, list(r.shape), str(r.dtype).replace("ember.", "")]

z = ember.ones(3, 4, dtype=ember.complex64, device="cuda")
z2 = ember.ones(3, 4, dtype=ember.complex128, device="cuda")
r = ember.ones(3, 4, device="cuda")
calls = {
    "add": lambda: z + z, "sub scalar": lambda: z - 2j, "mul real": lambda: z * r, "div": lambda: z / z2,
    "rdiv": lambda: 1 / z, "pow": lambda: z ** 2, "eq": lambda: z == z, "neg": lambda: -z, "abs": lambda: z.abs(),
    "angle": lambda: z.angle(), "sgn": lambda: z.sgn(), "conj": lambda: z.conj(), "exp": lambda: z2.exp(),
    "log": lambda: z.log(), "sqrt": lambda: z.sqrt(), "tanh": lambda: z.tanh(), "isnan": lambda: z.isnan(),
    "real": lambda: z.real, "imag": lambda: z.imag, "view_as_real": lambda: ember.view_as_real(z),
    "view_as_complex": lambda: ember.view_as_complex(ember.ones(3, 2, device="cuda")),
    "to complex": lambda: r.to(ember.complex64), "to float": lambda: z.to(ember.float32),
    "to bool": lambda: z.to(ember.bool), "clone T": lambda: z.T.contiguous(), "cpu": lambda: z.cpu(),
    "where": lambda: ember.where(r > 0, z, 0), "fill_": lambda: z.clone().fill_(1 + 2j),
    "add alpha": lambda: ember.add(z, z, alpha=2j), "complex": lambda: ember.complex(r, r),
    "polar": lambda: ember.polar(r, r.double()[0].float()), "sum": lambda: z.sum(), "sum dim": lambda: z.sum(1),
    "mean keepdim": lambda: z2.mean(0, keepdim=True), "sum dtype": lambda: r.sum(dtype=ember.complex64),
    "mm": lambda: z @ z.T, "bmm": lambda: ember.ones(2, 3, 4, dtype=ember.complex128, device="cuda") @ z2.T,
    "addmm": lambda: ember.addmm(z[:, :3], z, z.T, beta=2, alpha=1j),
    "fft": lambda: ember.fft.fft(r), "ifft n": lambda: ember.fft.ifft(z, n=7), "rfft": lambda: ember.fft.rfft(r),
    "irfft": lambda: ember.fft.irfft(z), "hfft": lambda: ember.fft.hfft(z, n=5),
    "fft2 s": lambda: ember.fft.fft2(r, s=(2, 6), norm="ortho"),
    "fftn 5d": lambda: ember.fft.fftn(ember.ones(2, 2, 3, 2, 2, device="cuda")),
    "rfftn": lambda: ember.fft.rfftn(r.double(), norm="forward"), "irfftn": lambda: ember.fft.irfftn(z2, s=(3, 6)),
    "stft": lambda: ember.stft(ember.ones(2, 100, device="cuda"), 16, window=ember.hann_window(16, device="cuda"),
                               return_complex=True),
    "istft": lambda: ember.istft(ember.ones(9, 13, dtype=ember.complex64, device="cuda"), 16, length=90),
    "eig": lambda: ember.linalg.eig(ember.eye(3, device="cuda"))[1],
    "eigvals": lambda: ember.linalg.eigvals(ember.eye(3, dtype=ember.float64, device="cuda")),
    "flip": lambda: z.flip(0), "index_select": lambda: z.index_select(1, ember.tensor([0, 2], device="cuda")),
    "index": lambda: z[ember.tensor([1, 0], device="cuda")], "cumsum": lambda: z.cumsum(0),
    "var": lambda: z.var(1), "std_mean": lambda: z2.std_mean(0)[1], "norm": lambda: z.norm(),
    "prod": lambda: z.prod(1), "index_put_": lambda: z.clone().index_put_((ember.tensor([0], device="cuda"),),
                                                                        z[:1]),
    "addcmul": lambda: ember.addcmul(z, z, z, value=1j), "asin": lambda: z.asin(), "eq_": lambda: z.clone().eq_(z),
}
for name, call in calls.items():
    put(name, call())
t = ember.ones(3, 4, dtype=ember.complex64, device="cuda", requires_grad=True)
(t * t).abs().sum().backward()
put("grad abs(t*t)", t.grad)
t.grad = None
ember.fft.rfft(t.real, n=6).abs().sum().backward()
put("grad rfft", t.grad)
errors = {}
# (lerp and cumprod: PyTorch has them, ember has no complex kernel: an error, never a wrong result)
for name, call in {"maximum": lambda: ember.maximum(z, z), "floor": lambda: z.floor(),
                   "lerp": lambda: ember.lerp(z, z, 0.5), "cumprod": lambda: z.cumprod(0)}.items():
    try:
        call()
        errors[name] = "no error"
    except (RuntimeError, NotImplementedError) as e:
        errors[name] = type(e).__name__
out["errors"] = errors
out["gemms"] = gemms
out["plan cache"] = ember.backends.cuda.cufft_plan_cache.size
print(json.dumps(out))
"""


def test_fake_host_complex_fft_eig():
    """Every op of the work on the fake CUDA host (results' devices, shapes, dtypes); cuBLAS's complex GEMM
    called with CUDA_C_32F/CUDA_C_64F and a complex alpha; cuFFT plans cached; the errors of ops without a
    complex kernel (as PyTorch's)."""
    pytest.importorskip("ember.autograd")  # (a package above ember-cuda)
    pytest.importorskip("triton")
    if ember.cuda.is_available():
        pytest.skip("the fake host replaces the driver of a process without a GPU")
    benchmarks = Path(__file__).resolve().parents[3] / "benchmarks"
    done = subprocess.run([sys.executable, "-c", _FAKE, str(benchmarks)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    c64, c128, f32, f64 = "complex64", "complex128", "float32", "float64"
    want = {
        "add": [3, 4], "sub scalar": [3, 4], "mul real": [3, 4], "neg": [3, 4], "sgn": [3, 4], "conj": [3, 4],
        "log": [3, 4], "sqrt": [3, 4], "tanh": [3, 4], "rdiv": [3, 4], "pow": [3, 4], "to complex": [3, 4],
        "clone T": [4, 3], "where": [3, 4], "fill_": [3, 4], "add alpha": [3, 4], "complex": [3, 4],
        "polar": [3, 4], "sum": [], "sum dim": [3], "sum dtype": [], "mm": [3, 3], "addmm": [3, 3], "fft": [3, 4],
        "ifft n": [3, 7], "rfft": [3, 3], "fft2 s": [2, 6], "fftn 5d": [2, 2, 3, 2, 2], "stft": [2, 9, 26],
        "view_as_complex": [3], "eig": [3, 3], "grad abs(t*t)": [3, 4], "grad rfft": [3, 4], "flip": [3, 4],
        "index_select": [3, 2], "index": [2, 4], "cumsum": [3, 4], "prod": [3], "index_put_": [3, 4],
        "addcmul": [3, 4], "asin": [3, 4], "eq_": [3, 4]}
    for name, shape in want.items():
        assert got[name] == ["cuda", shape, c64], name
    for name, value in {"div": ["cuda", [3, 4], c128], "exp": ["cuda", [3, 4], c128], "abs": ["cuda", [3, 4], f32],
                        "angle": ["cuda", [3, 4], f32], "eq": ["cuda", [3, 4], "bool"],
                        "isnan": ["cuda", [3, 4], "bool"], "real": ["cuda", [3, 4], f32],
                        "imag": ["cuda", [3, 4], f32], "view_as_real": ["cuda", [3, 4, 2], f32],
                        "to float": ["cuda", [3, 4], f32], "to bool": ["cuda", [3, 4], "bool"],
                        "cpu": ["cpu", [3, 4], c64], "mean keepdim": ["cuda", [1, 4], c128],
                        "bmm": ["cuda", [2, 3, 3], c128], "irfft": ["cuda", [3, 6], f32],
                        "hfft": ["cuda", [3, 5], f32], "rfftn": ["cuda", [3, 3], c128],
                        "irfftn": ["cuda", [3, 6], f64], "istft": ["cuda", [90], f32],
                        "eigvals": ["cuda", [3], c128], "var": ["cuda", [3], f32], "std_mean": ["cuda", [4], c128],
                        "norm": ["cuda", [], f32]}.items():
        assert got[name] == value, name
    assert got["errors"] == {"maximum": "RuntimeError", "floor": "NotImplementedError",
                             "lerp": "NotImplementedError", "cumprod": "NotImplementedError"}
    # mm, bmm (two calls: broadcast operand 2-d... one strided-batched, not through GemmEx), addmm: the GemmEx
    # calls carry the complex types, the compute type of the parts' precision and a complex alpha
    assert [4, 4, 4, 68, 1.0, 0.0] in got["gemms"]
    assert [4, 4, 4, 68, 0.0, 1.0] in got["gemms"]  # addmm's alpha = 1j
    assert all(g[0] == g[1] == g[2] and g[0] in (4, 5) and g[3] == {4: 68, 5: 70}[g[0]] for g in got["gemms"])
    assert got["plan cache"] >= 10


_COMPILE = r"""
import sys
sys.path.insert(0, sys.argv[1])
import host_cuda_fake
host_cuda_fake.install()
import ember
from ember._src import dtypes as dt
from ember._cuda import _elementwise as ew, _exprs
ember.ones(1, device="cuda")
cd, rd = dt.complex128, dt.float64
jobs = [(e["c"], (("t", cd, cd), ("s", cd)), dt.bool if n in ("eq", "ne") else cd)
        for n, e in _exprs.BINARY.items() if "c" in e]
jobs += [(e["c"], (("t", cd, cd),), rd if n in ("abs", "angle") else dt.bool if n.startswith("is") else cd)
         for n, e in _exprs.UNARY.items() if "c" in e]
jobs += [(_exprs.COMPLEX_COPY, (("t", dt.complex64, cd),), cd), (_exprs.COMPLEX_TO_BOOL, (("t", cd, cd),), dt.bool),
         (_exprs.COMPLEX_WHERE, (("t", dt.bool, dt.bool), ("t", cd, cd), ("s", cd)), cd),
         (_exprs.COMPLEX_MASKED_FILL, (("t", cd, cd), ("t", dt.bool, dt.bool), ("s", cd)), cd),
         (_exprs.COMPLEX_FILL, (("s", cd),), cd),
         (_exprs.COMPLEX_ADD_SCALED, (("t", cd, cd), ("t", rd, cd), ("s", cd)), cd),
         (_exprs.COMPLEX_ADDCMUL, (("t", cd, cd),) * 3 + (("s", cd),), cd),
         (_exprs.COMPLEX_ADDCDIV, (("t", cd, cd),) * 3 + (("s", cd),), cd),
         (_exprs.COMPLEX_FROM_PARTS, (("t", rd, rd),) * 2, cd), (_exprs.COMPLEX_POLAR, (("t", rd, rd),) * 2, cd),
         ("{0}", (("t", cd, rd),), rd)]
for expr, spec, out in jobs:  # 2-d strided operands with 64-bit offsets: every part of the code generation
    ew._plan(expr, spec, out, 2, (False,) * (1 + sum(s[0] == "t" for s in spec)), True, False, False, 0)
from ember._cuda import _reduce
for dtype in (ember.complex64, ember.complex128):  # complex sums' pairs forms: row, grid-stride, chunked
    z = ember.zeros(2, 70000, dtype=dtype, device="cuda")
    z[0].sum(), z.mean(1)
    _reduce.STRIDE_CONFIG["ppsm"] = 0
    z[0].sum()
    _reduce.STRIDE_CONFIG["ppsm"] = 4
assert {k[0] for k in _reduce._LAUNCHERS} >= {"row pairs", "stride pairs"}
print(len(jobs), "compiled")
"""


def test_every_complex_expression_compiles_for_sm90():
    """Every "c" expression and complex helper compiled by Triton for sm_90 (the interpreter runs Python and
    accepts code the compiler refuses): complex128 with a complex scalar, strided, 64-bit offsets; the complex
    sums' pairs forms of the row reductions."""
    pytest.importorskip("triton")
    if ember.cuda.is_available():
        pytest.skip("the fake host replaces the driver of a process without a GPU")
    benchmarks = Path(__file__).resolve().parents[3] / "benchmarks"
    done = subprocess.run([sys.executable, "-c", _COMPILE, str(benchmarks)], capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("compiled"), done.stdout


# -- on the GPU -------------------------------------------------------------------------------------------------


def _gpu_close(gpu, cpu, double=False, scale=1.0, what=""):
    assert gpu.device.type == "cuda" and gpu.dtype is cpu.dtype and tuple(gpu.shape) == tuple(cpu.shape), what
    tol = 1e-9 if double else 3e-5  # (libdevice's and glibc's float64 functions each within an ulp or two)
    np.testing.assert_allclose(gpu.detach().cpu().numpy(), cpu.detach().numpy(), rtol=tol, atol=tol * scale,
                               equal_nan=True, err_msg=what)


def _crandn(*shape, dtype=ember.complex64, seed=0):
    g = ember.Generator().manual_seed(seed)
    return ember.complex(ember.randn(*shape, generator=g), ember.randn(*shape, generator=g)).to(dtype)


@needs_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [ember.complex64, ember.complex128])
def test_complex_elementwise_and_reductions_on_cuda(dtype):
    a, b = _crandn(5, 7, dtype=dtype, seed=1), _crandn(5, 7, dtype=dtype, seed=2)
    r = ember.randn(7, dtype=dtype.to_real())
    ga, gb, gr = a.cuda(), b.cuda(), r.cuda()
    double = dtype is ember.complex128
    for name, fn in {"add": lambda x, y, s: x + y, "sub": lambda x, y, s: x - y * 2j, "mul": lambda x, y, s: x * y,
                     "div": lambda x, y, s: x / y, "pow": lambda x, y, s: x ** y, "pow2": lambda x, y, s: x ** 2,
                     "mul real": lambda x, y, s: x * s, "real / c": lambda x, y, s: s / x,
                     "eq": lambda x, y, s: x == x.T.T, "ne": lambda x, y, s: x != y,
                     "neg": lambda x, y, s: -x, "conj": lambda x, y, s: x.conj(), "abs": lambda x, y, s: x.abs(),
                     "angle": lambda x, y, s: x.angle(), "sgn": lambda x, y, s: x.sgn(),
                     "exp": lambda x, y, s: x.exp(), "log": lambda x, y, s: x.log(), "sqrt": lambda x, y, s: x.sqrt(),
                     "rsqrt": lambda x, y, s: x.rsqrt(), "reciprocal": lambda x, y, s: x.reciprocal(),
                     "sin": lambda x, y, s: x.sin(), "cos": lambda x, y, s: x.cos(), "tan": lambda x, y, s: x.tan(),
                     "tanh": lambda x, y, s: x.tanh(), "sigmoid": lambda x, y, s: x.sigmoid(),
                     "log10": lambda x, y, s: x.log10(), "square": lambda x, y, s: x.square(),
                     "strided": lambda x, y, s: x.T * y.T[:, :1], "where": lambda x, y, s: ember.where(s > 0, x, y),
                     "to c64": lambda x, y, s: x.to(ember.complex64), "to real": lambda x, y, s: x.to(s.dtype),
                     "from real": lambda x, y, s: s.to(x.dtype), "complex": lambda x, y, s: ember.complex(s, s * 2),
                     "polar": lambda x, y, s: ember.polar(s.abs(), s), "sum": lambda x, y, s: x.sum(),
                     "sum dims": lambda x, y, s: x.sum((0, 1), keepdim=True), "mean": lambda x, y, s: x.mean(0),
                     "fill": lambda x, y, s: x.clone().fill_(2 - 1j),
                     "add_": lambda x, y, s: x.clone().add_(y, alpha=3j),
                     "masked_fill": lambda x, y, s: x.masked_fill(s > 0, 1j)}.items():
        _gpu_close(fn(ga, gb, gr), fn(a, b, r), double, scale=10.0, what=name)


@needs_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [ember.complex64, ember.complex128])
@pytest.mark.parametrize("chunked", [False, True], ids=["strided", "chunked"])
def test_complex_sum_mean_on_cuda(dtype, chunked, monkeypatch):
    """sum/mean of complex tensors: over the trailing dims of a contiguous tensor by the row kernels' pairs form
    (a group's interleaved parts one row; long rows split into partials by the grid-stride pass, or by chunks
    when that pass is off), other dims by the real kernels over the parts' view."""
    from ember._cuda import _reduce

    if chunked:
        monkeypatch.setitem(_reduce.STRIDE_CONFIG, "ppsm", 0)
    double = dtype is ember.complex128
    small, big = _crandn(3, 5, 7, dtype=dtype, seed=14), _crandn(2, 70007, dtype=dtype, seed=15)
    cases = [(small, {}), (small, {"dim": (1, 2)}), (small, {"dim": -1, "keepdim": True}), (small, {"dim": (2, 1)}),
             (small, {"dim": 0}), (small, {"dim": (0, 2)}), (small.transpose(0, 2), {"dim": (1, 2)}),
             (small[:, 1:4], {"dim": 2}), (big, {"dim": 1}), (big, {}), (big[0], {}), (big.reshape(2, 7, 10001), {
                 "dim": (1, 2), "keepdim": True}), (_crandn(4, 0, 3, dtype=dtype), {"dim": 2}),
             (_crandn(4, 0, 3, dtype=dtype), {"dim": 1}), (_crandn(1, 1, 1, dtype=dtype), {"dim": (1, 2)})]
    for i, (x, kw) in enumerate(cases):
        gx = x.cuda()
        for name in ("sum", "mean"):
            got, want = getattr(gx, name)(**kw), getattr(x, name)(**kw)
            _gpu_close(got, want, double, scale=100.0, what=f"{name} case {i} {tuple(x.shape)} {kw}")
    if dtype is ember.complex64:  # a wider result dtype: the input cast first
        _gpu_close(small.cuda().sum((1, 2), dtype=ember.complex128), small.sum((1, 2), dtype=ember.complex128), True,
                   scale=10.0)


@needs_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [ember.complex64, ember.complex128])
def test_complex_matmul_on_cuda(dtype):
    a, b = _crandn(2, 33, 17, dtype=dtype, seed=3), _crandn(17, 9, dtype=dtype, seed=4)
    double = dtype is ember.complex128
    for name, fn in {"mm": lambda x, y: x[0] @ y, "bmm": lambda x, y: x @ y, "mT": lambda x, y: x[0] @ x[1].mT,
                     "mv": lambda x, y: x[0] @ y[:, 0], "addmm": lambda x, y: ember.addmm(x[1, :, :9], x[0], y,
                                                                                          beta=0.5j, alpha=2 - 1j),
                     "dot": lambda x, y: y[:, 0].dot(y[:, 1])}.items():
        _gpu_close(fn(a.cuda(), b.cuda()), fn(a, b), double, scale=30.0, what=name)


@needs_gpu
@pytest.mark.gpu
def test_complex_autograd_on_cuda():
    a, b = _crandn(4, 6, seed=5), _crandn(6, 3, seed=6)
    grads = []
    for dev in ("cpu", "cuda"):
        # (detached: a.to("cpu") is a itself, which requires_grad_ would turn into the CUDA copy's graph input)
        x, y = a.detach().to(dev).requires_grad_(), b.detach().to(dev).requires_grad_()
        ((x @ y).abs().sum() + (x.exp() * x.conj()).real.sum() + (x / (x.abs() + 1)).imag.sum()).backward()
        grads.append((x.grad, y.grad))
    _gpu_close(grads[1][0], grads[0][0], scale=10.0)
    _gpu_close(grads[1][1], grads[0][1], scale=10.0)


@needs_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("double", [False, True])
def test_fft_family_on_cuda(double):
    dtype = ember.float64 if double else ember.float32
    g = ember.Generator().manual_seed(7)
    x = ember.randn(3, 10, 12, dtype=dtype, generator=g)
    z = ember.complex(x, ember.randn(3, 10, 12, dtype=dtype, generator=g))
    cases = {
        "fft": lambda t: ember.fft.fft(t), "fft n pad": lambda t: ember.fft.fft(t, n=17, dim=1),
        "fft n crop": lambda t: ember.fft.fft(t, n=5, norm="ortho"), "ifft": lambda t: ember.fft.ifft(t, dim=0),
        "ifft forward": lambda t: ember.fft.ifft(t, norm="forward"), "rfft": lambda t: ember.fft.rfft(t.real),
        "irfft": lambda t: ember.fft.irfft(t, n=12), "irfft odd": lambda t: ember.fft.irfft(t, n=9, dim=1),
        "hfft": lambda t: ember.fft.hfft(t, n=8), "ihfft": lambda t: ember.fft.ihfft(t.real),
        "fft2": lambda t: ember.fft.fft2(t, s=(6, 16)), "ifft2": lambda t: ember.fft.ifft2(t, norm="ortho"),
        "fftn": lambda t: ember.fft.fftn(t), "fftn dims": lambda t: ember.fft.fftn(t, dim=(2, 0)),
        "rfftn": lambda t: ember.fft.rfftn(t.real), "rfft2": lambda t: ember.fft.rfft2(t.real, norm="forward"),
        "irfftn": lambda t: ember.fft.irfftn(ember.fft.rfftn(t.real), s=(3, 10, 12)),
        "irfft2": lambda t: ember.fft.irfft2(ember.fft.rfft2(t.real)),
        "fftn 4d": lambda t: ember.fft.fftn(t.reshape(3, 2, 5, 12)),
        "rfftn 4d": lambda t: ember.fft.rfftn(t.real.reshape(3, 2, 5, 12)),
        "irfftn 4d": lambda t: ember.fft.irfftn(ember.fft.rfftn(t.real.reshape(3, 2, 5, 12)), s=(3, 2, 5, 12)),
        "transposed": lambda t: ember.fft.fft(t.transpose(0, 2)), "fftshift": lambda t: ember.fft.fftshift(t),
    }
    for name, fn in cases.items():
        _gpu_close(fn(z.cuda()), fn(z), double, scale=50.0, what=name)


@needs_gpu
@pytest.mark.gpu
def test_stft_istft_and_fft_gradients_on_cuda():
    g = ember.Generator().manual_seed(8)
    sig = ember.randn(2, 600, generator=g)
    w = ember.hann_window(64)
    spec = ember.stft(sig, 64, hop_length=16, window=w, return_complex=True)
    gspec = ember.stft(sig.cuda(), 64, hop_length=16, window=w.cuda(), return_complex=True)
    _gpu_close(gspec, spec, scale=50.0)
    _gpu_close(ember.istft(gspec, 64, hop_length=16, window=w.cuda(), length=600),
               ember.istft(spec, 64, hop_length=16, window=w, length=600), scale=10.0)
    grads = []
    for dev in ("cpu", "cuda"):
        x = sig.detach().to(dev).requires_grad_()
        (ember.fft.rfft(x, n=700).abs().sum() + ember.fft.ifft(x.to(ember.complex64), norm="ortho").real.sum()
         ).backward()
        grads.append(x.grad)
    _gpu_close(grads[1], grads[0], scale=50.0)


@needs_gpu
@pytest.mark.gpu
def test_eig_on_cuda():
    g = ember.Generator().manual_seed(9)
    for dtype in (ember.float32, ember.float64):
        m = ember.randn(2, 5, 5, generator=g).to(dtype)
        vals, vecs = ember.linalg.eig(m.cuda())
        assert vals.device.type == vecs.device.type == "cuda"
        cv, cvec = ember.linalg.eig(m)
        _gpu_close(vals, cv, dtype is ember.float64, scale=10.0)
        _gpu_close(vecs, cvec, dtype is ember.float64, scale=10.0)
        _gpu_close(ember.linalg.eigvals(m.cuda()), cv, dtype is ember.float64, scale=10.0)
    # complex input: ember's CPU geev takes none yet; the CUDA op (the CPU kernel on a host copy) raises the same
    with pytest.raises(NotImplementedError, match="complex inputs are not supported"):
        ember.linalg.eig(ember.randn(5, 5, generator=g).to(ember.complex64).cuda())


# -- _ops_complex's wrappers, around the CPU kernels --------------------------------------------------------------


def _by_parts_cases(L, z, w, r, idx, mask):
    """(name, in place?, call) of the ops _ops_complex runs part by part, on library L's tensors."""
    return [
        ("flip", False, lambda: L.flip(z, [0, 2])),
        ("index_select", False, lambda: L.index_select(z, 1, idx)),
        ("gather", False, lambda: L.gather(z, 2, idx.reshape(1, 1, 3).expand(4, 5, 3).contiguous())),
        ("index", False, lambda: z[idx, :, idx[:1]]),
        ("embedding", False, lambda: L.nn.functional.embedding(idx, w)),
        ("index_put_", True, lambda: z.clone().index_put_((idx,), w[:3, :1, None], accumulate=True)),
        ("masked_scatter_", True, lambda: z.clone().masked_scatter_(mask, w.reshape(-1).repeat(3))),
        ("index_copy_", True, lambda: z.clone().index_copy_(1, idx, z[:, :3] * 2)),
        ("index_fill_", True, lambda: z.clone().index_fill_(2, idx, 1.5 - 2j)),
        ("index_add_", True, lambda: z.clone().index_add_(0, idx[:2], w[:2, :, None].expand(2, 5, 6), alpha=2)),
        ("cumsum", False, lambda: L.cumsum(z, 1)), ("cumsum 0-d", False, lambda: L.cumsum(z[0, 0, 0], 0)),
        ("var", False, lambda: L.var(z, (0, 2), correction=0)), ("std", False, lambda: L.std(z, 1, keepdim=True)),
        ("var_mean", False, lambda: L.var_mean(z, 2)), ("std_mean", False, lambda: L.std_mean(z)),
        ("norm", False, lambda: L.linalg.vector_norm(z, 3, dim=1)), ("norm fro", False, lambda: z.norm()),
        ("prod", False, lambda: L.prod(z[:2, :2, :3], 1)),
        ("logsumexp", False, lambda: L.logsumexp(z, (0, 2))), ("logsumexp kd", False, lambda: L.logsumexp(z, 1, True)),
    ]


def test_complex_by_parts_wrappers_on_cpu(monkeypatch):
    """_ops_complex's wrappers (the op on the real parts, then on the imaginary parts; cumsum on the parts'
    view; var/std from the parts' variances; norm of abs) around the CPU kernels, on CPU tensors, against
    PyTorch: the splitting is device independent, the CUDA kernels under it are the real ones."""
    pytest.importorskip("ember.nn")  # (a package above ember-cuda)
    from ember._cuda import _ops_complex
    from ember._src.dispatch import OPS

    for name in ("flip", "index_select", "gather", "index", "index_put_", "masked_scatter_", "embedding",
                 "index_copy_", "index_fill_", "index_add_", "cumsum", "var", "var_mean", "std", "std_mean", "norm",
                 "prod", "logsumexp"):
        monkeypatch.setitem(OPS[name].kernels, "cuda", OPS[name].kernels["cpu"])
    saved = {name: dict(OPS[name].kernels) for name in ("flip", "index_select", "gather", "index", "index_put_",
                                                         "masked_scatter_", "embedding", "index_copy_", "index_fill_",
                                                         "index_add_", "cumsum", "var", "var_mean", "std", "std_mean",
                                                         "norm", "prod", "logsumexp")}
    _ops_complex.register()  # wraps the "cuda" slots (the CPU kernels here)
    for name in saved:  # the wrapped kernels in the CPU slots, so CPU tensors take them
        monkeypatch.setitem(OPS[name].kernels, "cpu", OPS[name].kernels["cuda"])
        monkeypatch.setitem(OPS[name].kernels, "cuda", saved[name]["cuda"])
    g = torch.Generator().manual_seed(11)
    tz = torch.randn(4, 5, 6, dtype=torch.complex128, generator=g)
    tw = torch.randn(6, 5, dtype=torch.complex128, generator=g)
    tr = torch.randn(4, 6, dtype=torch.float64, generator=g)
    tidx = torch.tensor([2, 0, 3])
    tmask = torch.rand(4, 5, 6, generator=g) > 0.5
    ours = _by_parts_cases(ember, _e(tz), _e(tw), _e(tr), _e(tidx), _e(tmask))
    theirs = _by_parts_cases(torch, tz, tw, tr, tidx, tmask)
    for (name, _, call), (_, _, ref) in zip(ours, theirs):
        got, want = call(), ref()
        for gv, wv in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert gv.dtype.is_complex == wv.is_complex(), name
            torch.testing.assert_close(_t(gv), wv, rtol=1e-12, atol=1e-12, msg=lambda m, n=name: f"{n}: {m}")


@needs_gpu
@pytest.mark.gpu
def test_complex_by_parts_ops_on_cuda():
    """The ops _ops_complex runs part by part, on CUDA, against PyTorch's complex kernels (ember's CPU lacks some:
    index_copy_/index_add_ of complex tensors raise there)."""
    z, w = _crandn(4, 5, 6, dtype=ember.complex128, seed=12), _crandn(6, 5, dtype=ember.complex128, seed=13)
    r = ember.randn(4, 6, dtype=ember.float64)
    idx, mask = ember.tensor([2, 0, 3]), ember.rand(4, 5, 6) > 0.5
    theirs = _by_parts_cases(torch, *(_t(t) for t in (z, w, r, idx, mask)))
    gpu = _by_parts_cases(ember, z.cuda(), w.cuda(), r.cuda(), idx.cuda(), mask.cuda())
    for (name, _, call), (_, _, ref) in zip(gpu, theirs):
        got, want = call(), ref()
        for gv, wv in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert gv.device.type == "cuda" and gv.dtype.is_complex == wv.is_complex(), name
            torch.testing.assert_close(_t(gv.cpu()), wv, rtol=1e-9, atol=1e-8, msg=lambda m, n=name: f"{n}: {m}")
    for name, fn in {"addcmul": lambda a: ember.addcmul(a, a, a.conj(), value=0.5j),
                     "addcdiv": lambda a: ember.addcdiv(a, a, a + 3, value=2), "count_nonzero":
                     lambda a: ember.count_nonzero(a.masked_fill(a.real > 0, 0), 1),
                     "eq_": lambda a: a.clone().eq_(a.conj()), "asin": lambda a: a.asin(), "acos": lambda a: a.acos(),
                     "atan": lambda a: a.atan(), "asinh": lambda a: a.asinh(), "acosh": lambda a: a.acosh(),
                     "atanh": lambda a: a.atanh()}.items():
        _gpu_close(fn(z.cuda()), fn(z), True, scale=10.0, what=name)
