"""CUDA kernels of adaptive 2-d pooling: _adaptive_avg_pool2d, adaptive_max_pool2d and their
backward passes, with the CPU kernels' (PyTorch's) windows: output row ``i`` of ``O`` over an
input of ``I`` rows covers rows ``floor(i * I / O)`` to ``ceil((i + 1) * I / O)`` (exclusive).

Windows may overlap (I not a multiple of O), so the backward passes add each output's gradient
into a float32 (float64) buffer with atomic adds and round once, as ``_ops_pool`` does. A max
keeps the first position of its window in row-major order and lets NaN win.
"""

from __future__ import annotations

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.ops.nn import pool as core_pool
from ember._src.tensor import new_empty_tensor

from . import _compile
from ._elementwise import HEADER, TL, TRITON, launch
from ._ops_pool import _contiguous, _ct, _dims
from ._streams import current_handle

_BLOCK = 256

_FORWARD = HEADER + '''
@triton.jit
def k(x, out, idx, total, H, W, OH, OW, KH, KW, BLOCK: tl.constexpr, MAX: tl.constexpr):
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = o < total
    ow = o % OW
    oh = (o // OW) % OH
    xp = x + (o // (OW * OH)) * H * W
    hs = (oh * H) // OH
    he = ((oh + 1) * H + OH - 1) // OH
    ws = (ow * W) // OW
    we = ((ow + 1) * W + OW - 1) // OW
    m = tl.full([BLOCK], float('-inf'), __CT__)
    mi = hs * W + ws
    s = tl.zeros([BLOCK], __CT__)
    for i in range(0, KH):
        h = hs + i
        for j in range(0, KW):
            w = ws + j
            ok = mask & (h < he) & (w < we)
            v = tl.load(xp + h * W + w, mask=ok, other=0).to(__CT__)
            if MAX:
                take = ok & ((v > m) | (v != v)) & (m == m)
                m = tl.where(take, v, m)
                mi = tl.where(take, h * W + w, mi)
            else:
                s += tl.where(ok, v, 0)
    if MAX:
        tl.store(out + o, m.to(out.dtype.element_ty), mask=mask)
        tl.store(idx + o, mi, mask=mask)
    else:
        tl.store(out + o, (s / ((he - hs) * (we - ws)).to(__CT__)).to(out.dtype.element_ty), mask=mask)
'''

_BACKWARD = HEADER + '''
@triton.jit
def k(g, gi, idx, total, H, W, OH, OW, KH, KW, BLOCK: tl.constexpr, MAX: tl.constexpr):
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = o < total
    ow = o % OW
    oh = (o // OW) % OH
    gp = gi + (o // (OW * OH)) * H * W
    gv = tl.load(g + o, mask=mask, other=0).to(__CT__)
    if MAX:
        at = tl.load(idx + o, mask=mask, other=0)
        tl.atomic_add(gp + at, gv, mask=mask, sem='relaxed')
    else:
        hs = (oh * H) // OH
        he = ((oh + 1) * H + OH - 1) // OH
        ws = (ow * W) // OW
        we = ((ow + 1) * W + OW - 1) // OW
        share = gv / ((he - hs) * (we - ws)).to(__CT__)
        for i in range(0, KH):
            h = hs + i
            for j in range(0, KW):
                w = ws + j
                ok = mask & (h < he) & (w < we)
                tl.atomic_add(gp + h * W + w, share, mask=ok, sem='relaxed')
'''


def _window(i: int, o: int) -> int:
    """The longest adaptive window over ``i`` inputs split into ``o`` outputs."""
    return -(-i // o) + 1 if o else 0


def _forward(self, output_size, is_max: bool, name: str):
    shape = core_pool._adaptive_shape(self, output_size, name)
    dev = self._device
    out = new_empty_tensor(shape, self.dtype, dev)
    idx = new_empty_tensor(shape, dt.int64, dev) if is_max else None
    planes, h, w, oh, ow = _dims(self, shape)
    total = planes * oh * ow
    if total:
        x = _contiguous(self)
        ct = _ct(self.dtype)
        sig = {"x": "*" + TRITON[x.dtype], "out": "*" + TRITON[out.dtype], "idx": "*i64",
               **{n: "i64" for n in ("total", "H", "W", "OH", "OW", "KH", "KW")}, "BLOCK": "constexpr",
               "MAX": "constexpr"}
        index = dev.index or 0
        launcher = _compile.kernel(_FORWARD.replace("__CT__", TL[ct]), "k", sig, {"BLOCK": _BLOCK, "MAX": is_max},
                                   (), 4, 1, index)
        launcher((-(-total // _BLOCK), 1, 1), current_handle(index), x.data_ptr(), out.data_ptr(),
                 (idx if idx is not None else out).data_ptr(), total, h, w, oh, ow, _window(h, oh), _window(w, ow))
    return (out, idx) if is_max else out


def _backward(grad_output, self, indices):
    if grad_output.ndim != self.ndim:
        raise RuntimeError("adaptive_avg_pool2d_backward: grad_output and input must have the same rank")
    dev = self._device
    ct = _ct(self.dtype)
    gi = new_empty_tensor(self._shape, ct, dev, zero=True)
    shape = tuple(self._shape[:-2]) + tuple(grad_output._shape[-2:])
    planes, h, w, oh, ow = _dims(self, shape)
    total = planes * oh * ow
    if total:
        g = _contiguous(grad_output)
        is_max = indices is not None
        ix = _contiguous(indices) if is_max else g
        sig = {"g": "*" + TRITON[g.dtype], "gi": "*" + TRITON[ct], "idx": "*" + ("i64" if is_max else TRITON[g.dtype]),
               **{n: "i64" for n in ("total", "H", "W", "OH", "OW", "KH", "KW")}, "BLOCK": "constexpr",
               "MAX": "constexpr"}
        index = dev.index or 0
        launcher = _compile.kernel(_BACKWARD.replace("__CT__", TL[ct]), "k", sig, {"BLOCK": _BLOCK, "MAX": is_max},
                                   (), 4, 1, index)
        launcher((-(-total // _BLOCK), 1, 1), current_handle(index), g.data_ptr(), gi.data_ptr(), ix.data_ptr(),
                 total, h, w, oh, ow, _window(h, oh), _window(w, ow))
    if gi.dtype is self.dtype:
        return gi
    out = new_empty_tensor(self._shape, self.dtype, dev)
    launch("{0}", out, [gi], [ct])
    return out


def _adaptive_avg(self, output_size):
    return _forward(self, output_size, False, "adaptive_avg_pool2d")


def _adaptive_avg_backward(grad_output, self):
    return _backward(grad_output, self, None)


def _adaptive_max(self, output_size):
    return _forward(self, output_size, True, "adaptive_max_pool2d")


def _adaptive_max_backward(grad_output, self, indices):
    if tuple(indices._shape) != tuple(grad_output._shape) or indices.dtype is not dt.int64:
        raise RuntimeError("adaptive_max_pool2d_backward: indices must be int64 of grad_output's size")
    if grad_output.ndim != self.ndim:
        raise RuntimeError("adaptive_max_pool2d_backward: grad_output and input must have the same rank")
    return _backward(grad_output, self, indices)


def register() -> None:
    OPS["_adaptive_avg_pool2d"].kernels["cuda"] = _adaptive_avg
    OPS["_adaptive_avg_pool2d_backward"].kernels["cuda"] = _adaptive_avg_backward
    OPS["adaptive_max_pool2d"].kernels["cuda"] = _adaptive_max
    OPS["adaptive_max_pool2d_backward"].kernels["cuda"] = _adaptive_max_backward
