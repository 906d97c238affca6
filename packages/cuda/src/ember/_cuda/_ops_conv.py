"""2-d convolution on CUDA: im2col (a Triton gather) + cuBLAS, and its backward.

forward:  cols (N, C*KH*KW, OH*OW) = im2col(x);  out[n] = W (O, C*KH*KW) @ cols[n] (+ bias)
backward: grad_input = col2im(W^T @ g[n]) (a gather over each input pixel's windows, no atomics);
          grad_weight = sum_n g[n] @ cols[n]^T;  grad_bias = g summed over (N, OH, OW).
Transposed and grouped convolutions and other ranks have no CUDA kernel (a clear error).
"""

from __future__ import annotations

from ember._src.dispatch import OPS
from ember._src.ops.nn import conv as cv
from ember._src.tensor import make_view, new_empty_tensor

from . import _compile
from ._elementwise import HEADER, TRITON
from ._ops_matmul import _product
from ._streams import current_handle

_IM2COL = HEADER + '''
@triton.jit
def k(a, b, n, C, H, W, OH, OW, sh, sw, ph, pw, dh, dw, KH: tl.constexpr, KW: tl.constexpr,
      BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    ow = offs % OW
    t = offs // OW
    oh = t % OH
    t = t // OH
    kw = t % KW
    t = t // KW
    kh = t % KH
    t = t // KH
    c = t % C
    bi = t // C
    ih = oh * sh - ph + kh * dh
    iw = ow * sw - pw + kw * dw
    ok = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
    v = tl.load(a + ((bi * C + c) * H + ih) * W + iw, mask=m & ok, other=0)
    tl.store(b + offs, v, mask=m)
'''

_COL2IM = HEADER + '''
@triton.jit
def k(a, b, n, C, H, W, OH, OW, sh, sw, ph, pw, dh, dw, KH: tl.constexpr, KW: tl.constexpr,
      BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    iw = offs % W
    t = offs // W
    ih = t % H
    t = t // H
    c = t % C
    bi = t // C
    acc = tl.zeros([BLOCK], tl.float32)
    for kh in tl.static_range(KH):
        th = ih + ph - kh * dh
        oh = tl.where(th >= 0, th, 0) // sh
        okh = (th >= 0) & (th % sh == 0) & (oh < OH)
        for kw in tl.static_range(KW):
            tw = iw + pw - kw * dw
            ow = tl.where(tw >= 0, tw, 0) // sw
            ok = okh & (tw >= 0) & (tw % sw == 0) & (ow < OW)
            row = (bi * C + c) * (KH * KW) + kh * KW + kw
            acc += tl.load(a + (row * OH + oh) * OW + ow, mask=m & ok, other=0).to(tl.float32)
    tl.store(b + offs, acc.to(b.dtype.element_ty), mask=m)
'''


def _geometry(input, weight, stride, padding, dilation, transposed, groups):
    if transposed or groups != 1 or weight.ndim != 4:
        raise NotImplementedError("ember.ops.convolution on CUDA covers 2-d, non-transposed, ungrouped "
                                  f"convolutions (got {weight.ndim - 2}-d, transposed={transposed}, groups={groups})")
    n, c, h, w = input._shape
    o, _, kh, kw = weight._shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    return n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow


def _run(src, a, b, count, geo, index):
    n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = geo
    sig = {"a": "*" + TRITON[a.dtype], "b": "*" + TRITON[b.dtype], "n": "i64"}
    sig.update({k: "i64" for k in ("C", "H", "W", "OH", "OW", "sh", "sw", "ph", "pw", "dh", "dw")})
    sig.update({"KH": "constexpr", "KW": "constexpr", "BLOCK": "constexpr"})
    launcher = _compile.kernel(src, "k", sig, {"KH": kh, "KW": kw, "BLOCK": 1024}, (), 4, 1, index)
    launcher(((count + 1023) // 1024, 1, 1), current_handle(index), a.data_ptr(), b.data_ptr(), count, c, h, w, oh,
             ow, sh, sw, ph, pw, dh, dw)


def _im2col(x, geo):
    n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = geo
    cols = new_empty_tensor((n, c * kh * kw, oh * ow), x.dtype, x._device)
    if cols.numel():
        _run(_IM2COL, x, cols, cols.numel(), geo, x._device.index or 0)
    return cols


def _weight2d(weight, o, ckk):
    w = weight if weight.is_contiguous() else weight.contiguous()
    return make_view(w, (1, o, ckk), (0, ckk, 1), w._offset)


def _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    shape = cv._conv_check(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    geo = _geometry(input, weight, stride, padding, dilation, transposed, groups)
    n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = geo
    x = input if input.is_contiguous() else input.contiguous()
    cols = _im2col(x, geo)
    out = _product(_weight2d(weight, o, c * kh * kw), cols)
    out = out.view(shape)
    if bias is not None:
        out.add_(bias.view(1, o, 1, 1))
    return out


def _convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                          output_padding, groups, output_mask):
    cv._conv_check(input, weight, None, stride, padding, dilation, transposed, output_padding, groups)
    geo = _geometry(input, weight, stride, padding, dilation, transposed, groups)
    n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = geo
    ckk = c * kh * kw
    g = grad_output if grad_output.is_contiguous() else grad_output.contiguous()
    g3 = g.view(n, o, oh * ow)
    gi = gw = gb = None
    if output_mask[0]:
        w2 = _weight2d(weight, o, ckk)
        gcols = _product(make_view(w2, (1, ckk, o), (0, 1, ckk), w2._offset), g3)
        gi = new_empty_tensor(input._shape, input.dtype, input._device)
        if gi.numel():
            _run(_COL2IM, gcols, gi, gi.numel(), geo, input._device.index or 0)
    if output_mask[1]:
        x = input if input.is_contiguous() else input.contiguous()
        cols = _im2col(x, geo)
        per_image = _product(g3, cols.transpose(1, 2))
        gw = per_image.sum(0).view(weight._shape)
    if output_mask[2] and bias_sizes is not None:
        gb = g.sum((0, 2, 3))
    return gi, gw, gb


def register() -> None:
    OPS["convolution"].kernels["cuda"] = _convolution
    OPS["convolution_backward"].kernels["cuda"] = _convolution_backward
