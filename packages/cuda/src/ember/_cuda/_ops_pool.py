"""CUDA kernels of 2-d pooling: max_pool2d (with and without indices), its backward, avg_pool2d
and its backward, with the CPU kernels' semantics (csrc/cpu/pool.cpp, PyTorch's): NaN wins a max,
ties keep the first position in row-major window order, an index is the flat position in its
(H, W) plane; average windows clipped to the padded input, divided by the window's size
(``count_include_pad``), by its in-bounds size, or by ``divisor_override``.

One program computes BLOCK outputs (over planes x oH x oW), each looping over its window. The
backward passes scatter each output's gradient into a float32 (float64) buffer with atomic adds
(overlapping windows add up), then round once to the input's dtype. The core's meta functions
check the arguments and give the output shapes, so errors match the CPU's.
"""

from __future__ import annotations

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.ops.nn import pool as core_pool
from ember._src.tensor import new_empty_tensor

from . import _compile
from ._elementwise import HEADER, TL, TRITON, launch
from ._ops_pointwise import fill_values
from ._streams import current_handle

_FORWARD = HEADER + '''
@triton.jit
def k(x, out, idx, total, H, W, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW, divisor, BLOCK: tl.constexpr,
      MAX: tl.constexpr, WITH_IDX: tl.constexpr, INCLUDE_PAD: tl.constexpr):
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = o < total
    ow = o % OW
    oh = (o // OW) % OH
    plane = o // (OW * OH)
    xp = x + plane * H * W
    hs = oh * SH - PH
    ws = ow * SW - PW
    if MAX:
        h0 = tl.where(hs < 0, hs + ((-hs + DH - 1) // DH) * DH, hs)
        w0 = tl.where(ws < 0, ws + ((-ws + DW - 1) // DW) * DW, ws)
        m = tl.full([BLOCK], __LOWEST__, __CT__)
        mi = h0 * W + w0
        for i in range(0, KH):
            h = hs + i * DH
            hok = (h >= 0) & (h < H)
            for j in range(0, KW):
                w = ws + j * DW
                ok = hok & (w >= 0) & (w < W) & mask
                v = tl.load(xp + h * W + w, mask=ok, other=__LOWEST__).to(__CT__)
                take = ok & ((v > m) | (v != v))
                m = tl.where(take, v, m)
                mi = tl.where(take, h * W + w, mi)
        tl.store(out + o, m.to(out.dtype.element_ty), mask=mask)
        if WITH_IDX:
            tl.store(idx + o, mi, mask=mask)
    else:
        he = tl.minimum(hs + KH, H + PH)
        we = tl.minimum(ws + KW, W + PW)
        size = (he - hs) * (we - ws)
        hc0, wc0 = tl.maximum(hs, 0), tl.maximum(ws, 0)
        hc1, wc1 = tl.minimum(he, H), tl.minimum(we, W)
        s = tl.zeros([BLOCK], __CT__)
        for i in range(0, KH):
            h = hs + i
            hok = (h >= hc0) & (h < hc1)
            for j in range(0, KW):
                w = ws + j
                ok = hok & (w >= wc0) & (w < wc1) & mask
                s += tl.load(xp + h * W + w, mask=ok, other=0).to(__CT__)
        if divisor > 0:
            d = tl.zeros([BLOCK], tl.int64) + divisor
        elif INCLUDE_PAD:
            d = size
        else:
            d = (hc1 - hc0) * (wc1 - wc0)
        empty = (hc0 >= hc1) | (wc0 >= wc1)
        r = tl.where(empty, 0.0, s / tl.where(empty, 1, d).to(__CT__))
        tl.store(out + o, r.to(out.dtype.element_ty), mask=mask)
'''

_BACKWARD = HEADER + '''
@triton.jit
def k(g, gi, idx, total, H, W, OH, OW, KH, KW, SH, SW, PH, PW, divisor, BLOCK: tl.constexpr, MAX: tl.constexpr,
      INCLUDE_PAD: tl.constexpr):
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = o < total
    ow = o % OW
    oh = (o // OW) % OH
    plane = o // (OW * OH)
    gp = gi + plane * H * W
    gv = tl.load(g + o, mask=mask, other=0).to(__CT__)
    if MAX:
        i = tl.load(idx + o, mask=mask, other=-1)
        ok = mask & (i >= 0) & (i < H * W)
        tl.atomic_add(gp + i, gv, mask=ok)
    else:
        hs = oh * SH - PH
        ws = ow * SW - PW
        he = tl.minimum(hs + KH, H + PH)
        we = tl.minimum(ws + KW, W + PW)
        size = (he - hs) * (we - ws)
        hc0, wc0 = tl.maximum(hs, 0), tl.maximum(ws, 0)
        hc1, wc1 = tl.minimum(he, H), tl.minimum(we, W)
        if divisor > 0:
            d = tl.zeros([BLOCK], tl.int64) + divisor
        elif INCLUDE_PAD:
            d = size
        else:
            d = (hc1 - hc0) * (wc1 - wc0)
        empty = (hc0 >= hc1) | (wc0 >= wc1)
        share = gv / tl.where(empty, 1, d).to(__CT__)
        for a in range(0, KH):
            h = hs + a
            hok = (h >= hc0) & (h < hc1)
            for b in range(0, KW):
                w = ws + b
                ok = hok & (w >= wc0) & (w < wc1) & mask & (~empty)
                tl.atomic_add(gp + h * W + w, share, mask=ok)
'''

_BLOCK, _WARPS = 256, 4
_INT_LOWEST = "(-9223372036854775807 - 1)"


def _ct(dtype):
    if dtype.is_floating_point:
        return dt.float64 if dtype is dt.float64 else dt.float32
    return dt.int64


def _contiguous(t):
    return t if t.is_contiguous() else t.contiguous()


def _dims(self, shape):
    h, w = self._shape[-2:]
    oh, ow = shape[-2:]
    planes = 1
    for s in self._shape[:-2]:
        planes *= s
    return planes, h, w, oh, ow


def _forward(self, shape, k, s, p, d, is_max, with_idx, include_pad=True, divisor=None):
    dev = self._device
    out = new_empty_tensor(shape, self.dtype, dev)
    idx = new_empty_tensor(shape, dt.int64, dev) if with_idx else None
    planes, h, w, oh, ow = _dims(self, shape)
    total = planes * oh * ow
    if total == 0:
        return (out, idx) if with_idx else out
    x = _contiguous(self)
    ct = _ct(self.dtype)
    lowest = "-float('inf')" if ct.is_floating_point else _INT_LOWEST
    src = _FORWARD.replace("__CT__", TL[ct]).replace("__LOWEST__", lowest)
    ints = ("total", "H", "W", "OH", "OW", "KH", "KW", "SH", "SW", "PH", "PW", "DH", "DW", "divisor")
    sig = {"x": "*" + TRITON[x.dtype], "out": "*" + TRITON[out.dtype], "idx": "*i64", **{n: "i64" for n in ints},
           "BLOCK": "constexpr", "MAX": "constexpr", "WITH_IDX": "constexpr", "INCLUDE_PAD": "constexpr"}
    index = dev.index or 0
    launcher = _compile.kernel(src, "k", sig, {"BLOCK": _BLOCK, "MAX": is_max, "WITH_IDX": with_idx,
                                              "INCLUDE_PAD": bool(include_pad)}, (), _WARPS, 1, index)
    launcher((-(-total // _BLOCK), 1, 1), current_handle(index), x.data_ptr(), out.data_ptr(),
             (idx if idx is not None else out).data_ptr(), total, h, w, oh, ow, k[0], k[1], s[0], s[1], p[0], p[1],
             d[0], d[1], int(divisor or 0))
    return (out, idx) if with_idx else out


def _backward(grad_output, self, shape, k, s, p, indices, include_pad=True, divisor=None):
    if tuple(grad_output._shape) != tuple(shape):
        raise RuntimeError(f"Expected grad_output of size {list(shape)}, but got {list(grad_output._shape)}")
    dev = self._device
    ct = _ct(self.dtype)
    gi = new_empty_tensor(self._shape, ct, dev)
    fill_values(gi, 0)
    planes, h, w, oh, ow = _dims(self, shape)
    total = planes * oh * ow
    if total:
        g = _contiguous(grad_output)
        is_max = indices is not None
        ix = _contiguous(indices) if is_max else None
        sig = {"g": "*" + TRITON[g.dtype], "gi": "*" + TRITON[ct], "idx": "*i64",
               **{n: "i64" for n in ("total", "H", "W", "OH", "OW", "KH", "KW", "SH", "SW", "PH", "PW", "divisor")},
               "BLOCK": "constexpr", "MAX": "constexpr", "INCLUDE_PAD": "constexpr"}
        index = dev.index or 0
        launcher = _compile.kernel(_BACKWARD.replace("__CT__", TL[ct]), "k", sig,
                                   {"BLOCK": _BLOCK, "MAX": is_max, "INCLUDE_PAD": bool(include_pad)}, (), _WARPS, 1,
                                   index)
        launcher((-(-total // _BLOCK), 1, 1), current_handle(index), g.data_ptr(), gi.data_ptr(),
                 (ix if ix is not None else g).data_ptr(), total, h, w, oh, ow, k[0], k[1], s[0], s[1], p[0], p[1],
                 int(divisor or 0))
    if gi.dtype is self.dtype:
        return gi
    out = new_empty_tensor(self._shape, self.dtype, dev)
    launch("{0}", out, [gi], [ct])
    return out


def _max_pool2d(self, kernel_size, stride, padding, dilation, ceil_mode):
    shape = core_pool._max_shape(self, kernel_size, stride, padding, dilation, ceil_mode)
    return _forward(self, shape, kernel_size, stride, padding, dilation, True, False)


def _max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode):
    shape = core_pool._max_shape(self, kernel_size, stride, padding, dilation, ceil_mode)
    return _forward(self, shape, kernel_size, stride, padding, dilation, True, True)


def _max_pool2d_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
    shape = core_pool._max_shape(self, kernel_size, stride, padding, dilation, ceil_mode)
    if tuple(indices._shape) != tuple(shape) or indices.dtype is not dt.int64:
        raise RuntimeError(f"max_pool2d_with_indices_backward: expected int64 indices of size {list(shape)}")
    return _backward(grad_output, self, shape, kernel_size, stride, padding, indices)


def _avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    shape = core_pool._avg_shape(self, kernel_size, stride, padding, ceil_mode, divisor_override)
    return _forward(self, shape, kernel_size, stride, padding, (1, 1), False, False, count_include_pad,
                    divisor_override)


def _avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                         divisor_override):
    shape = core_pool._avg_shape(self, kernel_size, stride, padding, ceil_mode, divisor_override)
    return _backward(grad_output, self, shape, kernel_size, stride, padding, None, count_include_pad,
                     divisor_override)


def register() -> None:
    OPS["max_pool2d"].kernels["cuda"] = _max_pool2d
    OPS["max_pool2d_with_indices"].kernels["cuda"] = _max_pool2d_with_indices
    OPS["max_pool2d_with_indices_backward"].kernels["cuda"] = _max_pool2d_backward
    OPS["avg_pool2d"].kernels["cuda"] = _avg_pool2d
    OPS["avg_pool2d_backward"].kernels["cuda"] = _avg_pool2d_backward
