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

_FORWARD = HEADER + '''
@triton.jit
def k(x, w, bias, out, n, C, H, W, OC, OH, OW, M, sh, sw, ph, pw, dh, dw, KH: tl.constexpr, KW: tl.constexpr,
      HAS_BIAS: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    ow = offs % OW
    t = offs // OW
    oh = t % OH
    t = t // OH
    oc = t % OC
    bi = t // OC
    base = (bi * C + oc // M) * H
    acc = tl.zeros([BLOCK], tl.float64 if F64 else tl.float32)
    for kh in tl.static_range(KH):
        ih = oh * sh - ph + kh * dh
        okh = m & (ih >= 0) & (ih < H)
        for kw in tl.static_range(KW):
            iw = ow * sw - pw + kw * dw
            ok = okh & (iw >= 0) & (iw < W)
            v = tl.load(x + (base + ih) * W + iw, mask=ok, other=0).to(acc.dtype)
            acc += v * tl.load(w + oc * (KH * KW) + (kh * KW + kw), mask=m, other=0).to(acc.dtype)
    if HAS_BIAS:
        acc += tl.load(bias + oc, mask=m, other=0).to(acc.dtype)
    tl.store(out + offs, acc.to(out.dtype.element_ty), mask=m)
'''

_INPUT_GRAD = HEADER + '''
@triton.jit
def k(g, w, gi, n, C, H, W, OC, OH, OW, M, sh, sw, ph, pw, dh, dw, KH: tl.constexpr, KW: tl.constexpr,
      F64: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    iw = offs % W
    t = offs // W
    ih = t % H
    t = t // H
    c = t % C
    bi = t // C
    acc = tl.zeros([BLOCK], tl.float64 if F64 else tl.float32)
    for j in range(M):
        oc = c * M + j
        base = (bi * OC + oc) * OH
        for kh in tl.static_range(KH):
            th = ih + ph - kh * dh
            oh = tl.where(th >= 0, th, 0) // sh
            okh = m & (th >= 0) & (th % sh == 0) & (oh < OH)
            for kw in tl.static_range(KW):
                tw = iw + pw - kw * dw
                ow = tl.where(tw >= 0, tw, 0) // sw
                ok = okh & (tw >= 0) & (tw % sw == 0) & (ow < OW)
                v = tl.load(g + (base + oh) * OW + ow, mask=ok, other=0).to(acc.dtype)
                acc += v * tl.load(w + oc * (KH * KW) + (kh * KW + kw), mask=m, other=0).to(acc.dtype)
    tl.store(gi + offs, acc.to(gi.dtype.element_ty), mask=m)
'''

_WEIGHT_GRAD = HEADER + '''
@triton.jit
def k(g, x, part, P, CHUNK, C, H, W, OC, OH, OW, M, sh, sw, ph, pw, dh, dw, KH: tl.constexpr, KW: tl.constexpr,
      TAPS: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr):
    oc = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1).to(tl.int64)
    tap = tl.arange(0, TAPS)
    tap_ok = tap < KH * KW
    kh = (tap // KW)[:, None]
    kw = (tap % KW)[:, None]
    lo = split * CHUNK
    hi = tl.minimum(lo + CHUNK, P)
    c = oc // M
    acc = tl.zeros([TAPS, BLOCK], tl.float64 if F64 else tl.float32)
    for start in range(lo, hi, BLOCK):
        p = start + tl.arange(0, BLOCK)
        mp = p < hi
        s = p % (OH * OW)
        bi = p // (OH * OW)
        gv = tl.load(g + (bi * OC + oc) * (OH * OW) + s, mask=mp, other=0).to(acc.dtype)
        ih = (s // OW * sh - ph)[None, :] + kh * dh
        iw = (s % OW * sw - pw)[None, :] + kw * dw
        ok = mp[None, :] & tap_ok[:, None] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        xv = tl.load(x + ((bi * C + c)[None, :] * H + ih) * W + iw, mask=ok, other=0).to(acc.dtype)
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
    ints = {"C": c, "H": h, "W": w, "OC": oc, "OH": oh, "OW": ow, "M": oc // c, "sh": sh, "sw": sw, "ph": ph,
            "pw": pw, "dh": dh, "dw": dw}
    return n, oh, ow, kh, kw, ints


def forward(x, weight, bias, stride, padding, dilation, shape):
    """The depthwise convolution of contiguous ``x`` into a fresh ``shape`` (bias added in the kernel)."""
    out = new_empty_tensor(shape, x.dtype, x._device)
    count = out.numel()
    if count:
        n, oh, ow, kh, kw, ints = _geometry(x, weight, stride, padding, dilation)
        args = {"x": x, "w": weight, "bias": x if bias is None else bias, "out": out, "n": count, **ints}
        consts = {"KH": kh, "KW": kw, "HAS_BIAS": bias is not None, "F64": x.dtype is dt.float64, "BLOCK": 512}
        _compile.launch(_FORWARD, ((count + 511) // 512, 1, 1), args, consts, x._device.index or 0)
    return out


def input_grad(g, x, weight, stride, padding, dilation):
    gi = new_empty_tensor(x._shape, x.dtype, x._device)
    count = gi.numel()
    if count:
        n, oh, ow, kh, kw, ints = _geometry(x, weight, stride, padding, dilation)
        if oh * ow == 0:
            return gi.zero_()
        args = {"g": g, "w": weight, "gi": gi, "n": count, **ints}
        consts = {"KH": kh, "KW": kw, "F64": x.dtype is dt.float64, "BLOCK": 512}
        _compile.launch(_INPUT_GRAD, ((count + 511) // 512, 1, 1), args, consts, x._device.index or 0)
    return gi


def weight_grad(g, x, weight, stride, padding, dilation):
    n, oh, ow, kh, kw, ints = _geometry(x, weight, stride, padding, dilation)
    oc, positions = weight._shape[0], n * oh * ow
    if positions == 0 or oc == 0:
        return new_empty_tensor(weight._shape, weight.dtype, weight._device).zero_()
    taps = 1 << max(0, (kh * kw - 1).bit_length())
    block = max(16, min(256, 4096 // taps))
    # enough programs to fill the device (~2048), none with fewer than 4 blocks of positions
    splits = max(1, min(-(-2048 // oc), -(-positions // (4 * block))))
    per_split = (positions + splits - 1) // splits
    chunk = (per_split + block - 1) // block * block
    splits = -(-positions // chunk)
    acc = dt.float64 if x.dtype is dt.float64 else dt.float32
    part = new_empty_tensor((splits, oc, kh * kw), acc, x._device)
    args = {"g": g, "x": x, "part": part, "P": positions, "CHUNK": chunk, **ints}
    consts = {"KH": kh, "KW": kw, "TAPS": taps, "F64": acc is dt.float64, "BLOCK": block}
    _compile.launch(_WEIGHT_GRAD, (oc, splits, 1), args, consts, x._device.index or 0, 8 if taps * block > 4096 else 4)
    gw = part.sum(0) if splits > 1 else part.view(oc, kh * kw)
    return gw.to(weight.dtype).view(weight._shape)
