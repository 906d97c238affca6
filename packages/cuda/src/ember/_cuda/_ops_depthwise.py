"""Depthwise 2-d convolutions on CUDA (groups == input channels, any channel multiplier M, stride, padding,
dilation): direct Triton kernels for the forward, the input gradient and the weight gradient, one launch each
(the grouped path of ``_ops_conv`` ran one im2col + GEMM per channel: hundreds of launches for a MobileNet layer).
``_ops_conv`` chooses them; a 1-d depthwise convolution comes here as a 2-d one of height 1.

Output channel ``oc`` reads input channel ``oc // M`` (PyTorch's order of a grouped weight (C * M, 1, KH, KW)).
forward:      out[n, oc, oh, ow] = sum_{kh, kw} x[n, oc // M, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw] w[oc, kh, kw]
input grad:   a gather over each input pixel's windows (as col2im: no atomics), over the M channels it feeds
weight grad:  per (oc, split of the N*OH*OW positions) a [taps, positions] tile of x times g, summed over the
              positions; the splits' partial sums are added by one sum (deterministic, no atomics).
Sums are float32 (float64 for float64 data) and rounded once to the result's dtype.
"""

from __future__ import annotations

from ember._src import dtypes as dt
from ember._src.tensor import new_empty_tensor

from . import _compile
from ._elementwise import HEADER

# Each program of the output and input-gradient kernels takes a [BH, BW] tile of one (image, channel) plane: its
# indices come from the program ids and two aranges, no division per element (64-bit divisions by runtime sizes
# would cost more instructions than the kernel's memory traffic takes time). The input gradient's strides are
# constexprs: its division by the stride is then a shift (or nothing).
_FORWARD = HEADER + '''
@triton.jit
def k(x, w, bias, out, C, H, W, OC, OH, OW, M, sh, sw, ph, pw, dh, dw, KH: tl.constexpr, KW: tl.constexpr,
      HAS_BIAS: tl.constexpr, F64: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr):
    plane = tl.program_id(0).to(tl.int64)  # image * OC + output channel
    oc = plane % OC
    bi = plane // OC
    oh = tl.program_id(1) * BH + tl.arange(0, BH)[:, None]
    ow = tl.program_id(2) * BW + tl.arange(0, BW)[None, :]
    m = (oh < OH) & (ow < OW)
    xp = x + (bi * C + oc // M) * H * W
    wp = w + oc * (KH * KW)
    acc = tl.zeros([BH, BW], tl.float64 if F64 else tl.float32)
    for kh in tl.static_range(KH):
        ih = oh * sh - ph + kh * dh
        okh = m & (ih >= 0) & (ih < H)
        for kw in tl.static_range(KW):
            iw = ow * sw - pw + kw * dw
            v = tl.load(xp + ih * W + iw, mask=okh & (iw >= 0) & (iw < W), other=0).to(acc.dtype)
            acc += v * tl.load(wp + (kh * KW + kw)).to(acc.dtype)
    if HAS_BIAS:
        acc += tl.load(bias + oc).to(acc.dtype)
    tl.store(out + plane * OH * OW + oh * OW + ow, acc.to(out.dtype.element_ty), mask=m)
'''

_INPUT_GRAD = HEADER + '''
@triton.jit
def k(g, w, gi, C, H, W, OC, OH, OW, M, ph, pw, dh, dw, SH: tl.constexpr, SW: tl.constexpr, KH: tl.constexpr,
      KW: tl.constexpr, F64: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr):
    plane = tl.program_id(0).to(tl.int64)  # image * C + input channel
    c = plane % C
    bi = plane // C
    ih = tl.program_id(1) * BH + tl.arange(0, BH)[:, None]
    iw = tl.program_id(2) * BW + tl.arange(0, BW)[None, :]
    m = (ih < H) & (iw < W)
    acc = tl.zeros([BH, BW], tl.float64 if F64 else tl.float32)
    for j in range(M):  # the output channels this input channel feeds
        oc = c * M + j
        gp = g + (bi * OC + oc) * OH * OW
        wp = w + oc * (KH * KW)
        for kh in tl.static_range(KH):
            th = ih + ph - kh * dh
            oh = tl.where(th >= 0, th, 0) // SH
            okh = m & (th >= 0) & (th % SH == 0) & (oh < OH)
            for kw in tl.static_range(KW):
                tw = iw + pw - kw * dw
                ow = tl.where(tw >= 0, tw, 0) // SW
                ok = okh & (tw >= 0) & (tw % SW == 0) & (ow < OW)
                v = tl.load(gp + oh * OW + ow, mask=ok, other=0).to(acc.dtype)
                acc += v * tl.load(wp + (kh * KW + kw)).to(acc.dtype)
    tl.store(gi + plane * H * W + ih * W + iw, acc.to(gi.dtype.element_ty), mask=m)
'''

# The weight gradient: per output channel and split, units of BLOCK positions of one image's plane (unit u: image
# u // SB, block u % SB: one scalar division per unit), a [taps, positions] tile of x times g summed over them.
_WEIGHT_GRAD = HEADER + '''
@triton.jit
def k(g, x, part, UNITS, CHUNK, SB, C, H, W, OC, OH, OW, M, sh, sw, ph, pw, dh, dw, KH: tl.constexpr,
      KW: tl.constexpr, TAPS: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr):
    oc = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1).to(tl.int64)
    tap = tl.arange(0, TAPS)
    tap_ok = tap < KH * KW
    kh = (tap // KW)[:, None]
    kw = (tap % KW)[:, None]
    c = oc // M
    ow32 = OW.to(tl.int32)
    plane = (OH * OW).to(tl.int32)
    lo = split * CHUNK
    hi = tl.minimum(lo + CHUNK, UNITS)
    acc = tl.zeros([TAPS, BLOCK], tl.float64 if F64 else tl.float32)
    for u in range(lo, hi):
        bi = u // SB
        s = (u - bi * SB).to(tl.int32) * BLOCK + tl.arange(0, BLOCK)  # positions in the plane (int32 math)
        ms = s < plane
        oh = s // ow32
        ow = s - oh * ow32
        gv = tl.load(g + (bi * OC + oc) * plane + s, mask=ms, other=0).to(acc.dtype)
        ih = (oh * sh - ph)[None, :] + kh * dh
        iw = (ow * sw - pw)[None, :] + kw * dw
        ok = ms[None, :] & tap_ok[:, None] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        xv = tl.load(x + (bi * C + c) * H * W + ih * W + iw, mask=ok, other=0).to(acc.dtype)
        acc += xv * gv[None, :]
    tl.store(part + (split * OC + oc) * (KH * KW) + tap, tl.sum(acc, 1), mask=tap_ok)
'''


def applies(input, weight, transposed, groups) -> bool:
    """A plain (not transposed) 2-d convolution whose every group is one input channel."""
    return not transposed and weight.ndim == 4 and groups > 1 and groups == input._shape[1]


def _geometry(x, weight, stride, padding, dilation):
    n, c, h, w = x._shape
    oc, _, kh, kw = weight._shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    return n, c, h, w, oc, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw


def _tile(rows, cols):
    """A [BH, BW] tile of a plane: up to 64 wide, ~1024 elements."""
    bw = min(64, 1 << max(0, (cols - 1).bit_length()))
    bh = min(1 << max(0, (rows - 1).bit_length()), max(1, 1024 // bw))
    return bh, bw


def forward(x, weight, bias, stride, padding, dilation, shape):
    """The depthwise convolution of contiguous ``x`` into a fresh ``shape`` (bias added in the kernel)."""
    out = new_empty_tensor(shape, x.dtype, x._device)
    if out.numel():
        n, c, h, w, oc, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw = _geometry(x, weight, stride, padding, dilation)
        bh, bw = _tile(oh, ow)
        args = {"x": x, "w": weight, "bias": x if bias is None else bias, "out": out, "C": c, "H": h, "W": w,
                "OC": oc, "OH": oh, "OW": ow, "M": oc // c, "sh": sh, "sw": sw, "ph": ph, "pw": pw, "dh": dh,
                "dw": dw}
        consts = {"KH": kh, "KW": kw, "HAS_BIAS": bias is not None, "F64": x.dtype is dt.float64, "BH": bh,
                  "BW": bw}
        _compile.launch(_FORWARD, (n * oc, -(-oh // bh), -(-ow // bw)), args, consts, x._device.index or 0)
    return out


def input_grad(g, x, weight, stride, padding, dilation):
    gi = new_empty_tensor(x._shape, x.dtype, x._device)
    if gi.numel():
        n, c, h, w, oc, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw = _geometry(x, weight, stride, padding, dilation)
        if oh * ow == 0:
            return gi.zero_()
        bh, bw = _tile(h, w)
        args = {"g": g, "w": weight, "gi": gi, "C": c, "H": h, "W": w, "OC": oc, "OH": oh, "OW": ow, "M": oc // c,
                "ph": ph, "pw": pw, "dh": dh, "dw": dw}
        consts = {"SH": sh, "SW": sw, "KH": kh, "KW": kw, "F64": x.dtype is dt.float64, "BH": bh, "BW": bw}
        _compile.launch(_INPUT_GRAD, (n * c, -(-h // bh), -(-w // bw)), args, consts, x._device.index or 0)
    return gi


def weight_grad(g, x, weight, stride, padding, dilation):
    n, c, h, w, oc, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw = _geometry(x, weight, stride, padding, dilation)
    if n * oh * ow == 0 or oc == 0:
        return new_empty_tensor(weight._shape, weight.dtype, weight._device).zero_()
    taps = 1 << max(0, (kh * kw - 1).bit_length())
    block = max(16, min(256, 4096 // taps, 1 << (oh * ow - 1).bit_length()))
    blocks = -(-(oh * ow) // block)  # units of a plane
    units = n * blocks
    # enough programs to fill the device (~2048), none with fewer than 4 units
    splits = max(1, min(-(-2048 // oc), -(-units // 4)))
    chunk = -(-units // splits)
    splits = -(-units // chunk)
    acc = dt.float64 if x.dtype is dt.float64 else dt.float32
    part = new_empty_tensor((splits, oc, kh * kw), acc, x._device)
    args = {"g": g, "x": x, "part": part, "UNITS": units, "CHUNK": chunk, "SB": blocks, "C": c, "H": h, "W": w,
            "OC": oc, "OH": oh, "OW": ow, "M": oc // c, "sh": sh, "sw": sw, "ph": ph, "pw": pw, "dh": dh, "dw": dw}
    consts = {"KH": kh, "KW": kw, "TAPS": taps, "F64": acc is dt.float64, "BLOCK": block}
    _compile.launch(_WEIGHT_GRAD, (oc, splits, 1), args, consts, x._device.index or 0,
                    8 if taps * block > 4096 else 4)
    gw = part.sum(0) if splits > 1 else part.view(oc, kh * kw)
    return gw.to(weight.dtype).view(weight._shape)
