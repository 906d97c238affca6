"""Shared helpers of the CUDA tests: skip without a GPU, compare a CUDA result with the CPU one, run an
interpreter check in a fresh process, cuFFT computed by NumPy on host memory."""

from __future__ import annotations

import ctypes
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember

needs_gpu = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA GPU")

TOL = {ember.float32: (2e-5, 2e-5), ember.float64: (1e-10, 1e-10), ember.float16: (2e-3, 2e-3),
       ember.bfloat16: (1.6e-2, 1.6e-2)}


def host(t):
    """A CUDA (or CPU) tensor as a float64 (or exact integer/bool) NumPy array."""
    t = t.detach().cpu()
    if t.dtype in (ember.float16, ember.bfloat16):
        t = t.float()
    return t.numpy()


def assert_same(gpu, cpu, dtype=None, rtol=None, atol=None):
    assert gpu.device.type == "cuda", gpu.device
    assert tuple(gpu.shape) == tuple(cpu.shape), (gpu.shape, cpu.shape)
    assert gpu.dtype is cpu.dtype, (gpu.dtype, cpu.dtype)
    # Tolerances follow the result's dtype (a float result of integer inputs is still rounded), or the
    # inputs' where they are less precise (float16 inputs of a bool result are compared exactly anyway).
    r, a = TOL.get(cpu.dtype, (0, 0))
    if dtype in TOL and cpu.dtype.is_floating_point:
        r, a = max(r, TOL[dtype][0]), max(a, TOL[dtype][1])
    r = r if rtol is None else rtol
    a = a if atol is None else atol
    g, c = host(gpu), host(cpu)
    if g.dtype.kind in "fc":
        np.testing.assert_allclose(g, c, rtol=r, atol=a, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, c)


def run_interpreter_check(script: str, oks: int) -> str:
    """Runs ``script`` (an ``*_interp_check.py`` beside these tests) in a fresh process with Triton's interpreter
    on (it must be chosen before Triton decorates the kernels), in this folder (the checks import each other);
    asserts that it exits 0 having printed ``oks`` lines starting "ok"; skips where Triton, torch or the
    interpreter hook the checks patch is missing. Returns its output."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    path = Path(__file__).with_name(script)
    done = subprocess.run([sys.executable, str(path)], env=dict(os.environ, TRITON_INTERPRET="1"), capture_output=True,
                          text=True, timeout=900, cwd=path.parent)
    if done.returncode and "has no attribute '_patch_lang_tensor'" in done.stderr:
        pytest.skip("this Triton has no interpreter hook to run the kernels on the CPU")
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    assert sum(line.startswith("ok") for line in done.stdout.splitlines()) == oks, done.stdout
    return done.stdout


def rand(shape, dtype=ember.float32, low=-2.0, high=2.0, seed=0):
    g = np.random.default_rng(seed)
    if dtype is ember.bool:
        return ember.tensor(g.random(shape) > 0.5)
    if not dtype.is_floating_point:
        return ember.tensor(g.integers(-5, 6, size=shape)).to(dtype)
    return ember.tensor(g.uniform(low, high, size=shape)).to(dtype)


class NumpyCufft:
    """cuFFT's entry points as _ops_fft calls them, computing with NumPy on host memory: plans record (type,
    sizes, batch); executions read and write the basic contiguous layout cuFFT's NULL-embed plans use."""

    def __init__(self, work=0):
        self.plans, self.destroyed, self.work, self.next, self.calls = {}, [], work, 1, []

    def cufftCreate(self, ref):  # noqa: N802 - cuFFT's names
        ref._obj.value = self.next
        self.next += 1
        return 0

    def cufftSetAutoAllocation(self, handle, flag):  # noqa: N802
        assert flag == 0
        return 0

    def cufftMakePlanMany64(self, handle, rank, n, inembed, istride, idist, onembed, ostride, odist, kind, batch,  # noqa: N802
                            work):
        assert inembed is None and onembed is None and istride == ostride == 1
        self.plans[handle] = (kind, tuple(n[:rank]), batch)
        work._obj.value = self.work
        return 0

    def cufftSetStream(self, handle, stream):  # noqa: N802
        return 0

    def cufftSetWorkArea(self, handle, ptr):  # noqa: N802
        assert ptr
        return 0

    def cufftDestroy(self, handle):  # noqa: N802
        self.destroyed.append(handle)
        return 0

    def _array(self, ptr, dtype, shape):
        count = math.prod(shape) * np.dtype(dtype).itemsize
        return np.frombuffer((ctypes.c_char * count).from_address(ptr), dtype=dtype).reshape(shape)

    def _run(self, handle, src, dst, direction=None):
        kind, n, batch = self.plans[handle]
        self.calls.append((kind, n, batch))
        axes = tuple(range(1, len(n) + 1))
        half = n[:-1] + (n[-1] // 2 + 1,)
        single = kind in (0x29, 0x2A, 0x2C)
        c, r = (np.complex64, np.float32) if single else (np.complex128, np.float64)
        if kind in (0x29, 0x69):
            x = self._array(src, c, (batch,) + n)
            y = np.fft.fftn(x, axes=axes) if direction == -1 else np.fft.ifftn(x, axes=axes) * math.prod(n)
        elif kind in (0x2A, 0x6A):
            x = self._array(src, r, (batch,) + n)
            y = np.fft.rfftn(x, axes=axes)
        else:
            x = self._array(src, c, (batch,) + half)
            y = np.fft.irfftn(x, s=n, axes=axes) * math.prod(n)
            x.flags.writeable = True
            x[...] = np.nan  # cuFFT's c2r overwrites its input
        out = self._array(dst, y.dtype if kind not in (0x2C, 0x6C) else r, y.shape)
        out.flags.writeable = True
        out[...] = y
        return 0

    def __getattr__(self, name):
        if name.startswith("cufftExec"):
            return self._run
        raise AttributeError(name)
