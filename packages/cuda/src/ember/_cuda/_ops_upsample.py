"""_upsample (nearest, nearest-exact, (bi/tri)linear, bicubic interpolation) and its backward on
CUDA, separably: one dim at a time, each output position a weighted sum of 1, 2 or 4 input
positions along that dim.

The taps (positions and weights) are PyTorch's source-index rules, computed on the host in the
precision the CPU kernel uses (float32 below float64 inputs) exactly as it computes them
(csrc/cpu/resample.cpp), then the forward is ``index_select`` and multiply-add per tap and the
backward ``index_add_`` of the weighted gradient per tap, dims in reverse order. Results equal the
CPU kernel's up to the rounding of the separable order (a few float32 ulps).
"""

from __future__ import annotations

import numpy as np

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.ops.nn import resample as core

_MODE = {"nearest": 0, "nearest-exact": 1, "linear": 2, "bilinear": 2, "trilinear": 2, "bicubic": 3}


def _cubic1(x, a):
    return ((a + 2) * x - (a + 3)) * x * x + 1


def _cubic2(x, a):
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a


def taps(n_in: int, n_out: int, mode: int, align_corners: bool, scale: float, real):
    """(positions (taps, n_out) int64, weights (taps, n_out) of ``real``), as the CPU kernel's make_taps."""
    o = np.arange(n_out)
    if mode in (0, 1):
        s = np.float32(1.0 / scale) if scale > 0 else np.float32(n_in) / np.float32(n_out)
        of = o.astype(np.float32)
        if n_out == n_in:
            i = o
        elif mode == 0:
            i = o >> 1 if n_out == 2 * n_in else np.minimum(np.floor(of * s).astype(np.int64), n_in - 1)
        else:
            i = np.minimum(np.floor((of + np.float32(0.5)) * s).astype(np.int64), n_in - 1)
        return i[None, :], np.ones((1, n_out), real)
    if align_corners:
        s = real(n_in - 1) / real(n_out - 1) if n_out > 1 else real(0)
    else:
        s = real(1.0 / scale) if scale > 0 else real(n_in) / real(n_out)
    of = o.astype(real)
    half = real(0.5)
    if mode == 2:
        src = s * of if align_corners else np.maximum(s * (of + half) - half, real(0))
        i0 = src.astype(np.int64)
        i1 = i0 + (i0 < n_in - 1)
        l1 = np.clip(src - i0.astype(real), real(0), real(1))
        return np.stack([i0, i1]), np.stack([real(1) - l1, l1])
    src = s * of if align_corners else s * (of + half) - half
    fl = np.floor(src)
    x = np.clip(src - fl, real(0), real(1))
    a = real(-0.75)
    one, two = real(1), real(2)
    ws = np.stack([_cubic2(x + one, a), _cubic1(x, a), _cubic1(one - x, a), _cubic2(two - x, a)])
    i = fl.astype(np.int64)
    idx = np.stack([np.clip(i - 1 + j, 0, n_in - 1) for j in range(4)])
    return idx, ws.astype(real)


def _plan(in_shape, output_size, mode, align_corners, scales, work, device):
    """Per spatial dim: (dim, positions tensor (taps, out), weights tensor (taps, out))."""
    import ember

    real = np.float64 if work is dt.float64 else np.float32
    plan = []
    for j, (n_in, n_out) in enumerate(zip(in_shape[2:], output_size)):
        idx, w = taps(n_in, n_out, _MODE[mode], bool(align_corners), float(scales[j] or 0.0), real)
        plan.append((2 + j, ember.tensor(idx).to(device), ember.tensor(w).to(work).to(device)))
    return plan


def _along(w, d: int, ndim: int):
    """One tap's weights viewed to broadcast along dim ``d`` of an ``ndim``-d tensor."""
    return w.reshape((-1,) + (1,) * (ndim - 1 - d))


def _upsample(self, output_size, mode, align_corners, scales):
    core._upsample_check(self, output_size, mode, scales)
    work = dt.float64 if self.dtype is dt.float64 else dt.float32
    x = self.to(work)
    for d, idx, w in _plan(self._shape, output_size, mode, align_corners, scales, work, self._device):
        out = None
        for t in range(idx._shape[0]):
            term = x.index_select(d, idx[t])
            if idx._shape[0] > 1:
                term = term * _along(w[t], d, x.ndim)
            out = term if out is None else out + term
        x = out
    return x.to(self.dtype)


def _upsample_backward(grad_output, input_size, mode, align_corners, scales):
    input_size = tuple(input_size)
    if tuple(grad_output._shape[:2]) != input_size[:2] or grad_output.ndim != len(input_size):
        raise RuntimeError(f"_upsample_backward: grad_output of size {list(grad_output._shape)} does not match "
                           f"input_size {list(input_size)}")
    work = dt.float64 if grad_output.dtype is dt.float64 else dt.float32
    g = grad_output.to(work)
    plan = _plan(input_size, grad_output._shape[2:], mode, align_corners, scales, work, grad_output._device)
    for d, idx, w in reversed(plan):
        sizes = list(g._shape)
        sizes[d] = input_size[d]
        acc = g.new_zeros(tuple(sizes))
        for t in range(idx._shape[0]):
            acc.index_add_(d, idx[t], g * _along(w[t], d, g.ndim) if idx._shape[0] > 1 else g)
        g = acc
    return g.to(grad_output.dtype)


def register() -> None:
    OPS["_upsample"].kernels["cuda"] = _upsample
    OPS["_upsample_backward"].kernels["cuda"] = _upsample_backward
