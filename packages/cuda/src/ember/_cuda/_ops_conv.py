"""1-d, 2-d and 3-d convolutions on CUDA, plain and transposed, grouped or not: im2col (a Triton gather) +
cuBLAS, and their backward.

forward:  cols (N, C*KH*KW, OH*OW) = im2col(x);  out[n] = W (O, C*KH*KW) @ cols[n] (+ bias)
backward: grad_input = col2im(W^T @ g[n]) (a gather over each input pixel's windows, no atomics);
          grad_weight = sum_n g[n] @ cols[n]^T;  grad_bias = g summed over (N, OH, OW).
A transposed convolution is the plain one's input gradient (out = col2im(W^T @ x[n])), its
backward the plain forward's products (grad_input = W @ im2col(g), grad_weight = x @ im2col(g)^T).
A 1-d convolution runs as a 2-d one of height 1; a depthwise one (groups == input channels, not transposed,
1-d or 2-d) has direct kernels (``_ops_depthwise``); other groups run one after another (a launch or two per
group); a 3-d one has its own im2col/col2im kernels (depth as one more window dimension).
"""

from __future__ import annotations

from ember._src import dtypes as dt
from ember._src._native import _C
from ember._src.dispatch import OPS
from ember._src.ops.nn import conv as cv
from ember._src.tensor import make_view, new_empty_tensor

from . import _compile
from . import _ops_depthwise as depthwise
from ._elementwise import HEADER
from ._ops_matmul import _product

# im2col/col2im: one generator for 2-d and 3-d (session 18 wrote each rank out; the generated kernels are token for
# token those, so as fast): the 3-d ones have depth as one more dim of every index.


def _dims(rank):
    """Per spatial dim, outermost first: (input index, output index, window index, size, output size, stride,
    padding, dilation, window size) names."""
    return [("i_d" if x == "d" else "i" + x, "o" + x, "k" + x, x.upper(), "O" + x.upper(), "s" + x, "p" + x,
             "d" + x, "K" + x.upper()) for x in ("d", "h", "w")[3 - rank:]]


def _horner(first, terms):
    """first * s0 + i0, then (...) * s1 + i1, ...: a row-major address."""
    s = first
    for size, index in terms:
        s = f"({s} * {size} + {index})"
    return s[1:-1] if terms else s


def _split(dims, first):
    """Lines splitting the flat index ``first`` into the dims (innermost first), the rest left in t."""
    lines, src = [], first
    for name, size in dims:
        lines += [f"{name} = {src} % {size}", f"t = {src} // {size}"]
        src = "t"
    return lines


def _kernel(rank, body, f64):
    d = _dims(rank)
    params = ["a", "b", "n", "C"] + [x[3] for x in d] + [x[4] for x in d] + [x[j] for j in (5, 6, 7) for x in d]
    consts = [f"{x[8]}: tl.constexpr" for x in d] + ["BLOCK: tl.constexpr"] + (["F64: tl.constexpr"] if f64 else [])
    head = ["offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)", "m = offs < n"]
    return (HEADER + "\n@triton.jit\ndef k(" + ", ".join(params + consts) + "):\n"
            + "".join("    " + line + "\n" for line in head + body))


def im2col_source(rank):
    """cols (N, C * window, output positions) <- the input values each output position's window covers."""
    d = _dims(rank)
    body = _split([(x[1], x[4]) for x in reversed(d)], "offs")
    body += _split([(x[2], x[8]) for x in reversed(d)], "t")
    body += ["c = t % C", "bi = t // C"]
    body += [f"{x[0]} = {x[1]} * {x[5]} - {x[6]} + {x[2]} * {x[7]}" for x in d]
    body.append("ok = " + " & ".join(f"({x[0]} >= 0) & ({x[0]} < {x[3]})" for x in d))
    body += [f"v = tl.load(a + {_horner('(bi * C + c)', [(x[3], x[0]) for x in d])}, mask=m & ok, other=0)",
             "tl.store(b + offs, v, mask=m)"]
    return _kernel(rank, body, False)


def col2im_source(rank):
    """input (N, C, *sizes) <- the sum over the columns of every window each input position lies in (a gather,
    no atomics); float64 data sums in float64 (a float32 sum lost its digits, 1e-7 off on an H100, session 18)."""
    d = _dims(rank)
    body = _split([(x[0], x[3]) for x in reversed(d)], "offs")
    body += ["c = t % C", "bi = t // C", "acc = tl.zeros([BLOCK], tl.float64 if F64 else tl.float32)"]
    prev = None
    for j, x in enumerate(d):
        pad = "    " * j
        tv, ok = "t" + x[0][-1], "ok" if j == rank - 1 else "ok" + x[0][-1]
        body += [f"{pad}for {x[2]} in tl.static_range({x[8]}):",
                 f"{pad}    {tv} = {x[0]} + {x[6]} - {x[2]} * {x[7]}",
                 f"{pad}    {x[1]} = tl.where({tv} >= 0, {tv}, 0) // {x[5]}",
                 f"{pad}    {ok} = {prev + ' & ' if prev else ''}({tv} >= 0) & ({tv} % {x[5]} == 0) & "
                 f"({x[1]} < {x[4]})"]
        prev = ok
    pad = "    " * rank
    window = _horner(d[0][2], [(x[8], x[2]) for x in d[1:]])
    body += [f"{pad}row = (bi * C + c) * ({' * '.join(x[8] for x in d)}) + {window}",
             f"{pad}acc += tl.load(a + {_horner('row', [(x[4], x[1]) for x in d])}, mask=m & ok, other=0)"
             ".to(acc.dtype)",
             "tl.store(b + offs, acc.to(b.dtype.element_ty), mask=m)"]
    return _kernel(rank, body, True)


_IM2COL, _IM2COL3 = im2col_source(2), im2col_source(3)
_COL2IM, _COL2IM3 = col2im_source(2), col2im_source(3)


def _geometry3(input, weight, stride, padding, dilation):
    """_geometry's 3-d sizes: (n, c, d, h, w, o, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, od, oh, ow)."""
    n, c, d, h, w = input._shape
    o, _, kd, kh, kw = weight._shape
    (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = stride, padding, dilation
    od = (d + 2 * pd - dd * (kd - 1) - 1) // sd + 1
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    return n, c, d, h, w, o, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, od, oh, ow


def _sizes(geo):
    """(n, c, o, c * kernel volume, output positions) of a 2-d or 3-d geometry."""
    if len(geo) == 15:
        n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = geo
        return n, c, o, c * kh * kw, oh * ow
    n, c, d, h, w, o, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, od, oh, ow = geo
    return n, c, o, c * kd * kh * kw, od * oh * ow


def _col2im(gcols, out, geo):
    if out.numel():
        _run(_COL2IM if len(geo) == 15 else _COL2IM3, gcols, out, out.numel(), geo, out._device.index or 0)


def _geometry(input, weight, stride, padding, dilation):
    """A plain 2-d convolution's sizes; for a transposed one, ``input`` is its output and ``weight`` is
    (its input channels, its output channels, KH, KW): the plain convolution whose input gradient it is."""
    if weight.ndim == 5:
        return _geometry3(input, weight, stride, padding, dilation)
    n, c, h, w = input._shape
    o, _, kh, kw = weight._shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    return n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow


def _run(src, a, b, count, geo, index):
    """One im2col/col2im launch over ``count`` elements of ``b``, a 2-d or 3-d geometry."""
    r = 2 if len(geo) == 15 else 3
    sizes, o = geo[2:2 + r], 3 + r
    window, stride, padding, dilation, out = (geo[o + j * r:o + (j + 1) * r] for j in range(5))
    names = ("D", "H", "W")[3 - r:]
    args = {"a": a, "b": b, "n": count, "C": geo[1], **dict(zip(names, sizes)),
            **dict(zip(("O" + x for x in names), out)), **dict(zip(("s" + x.lower() for x in names), stride)),
            **dict(zip(("p" + x.lower() for x in names), padding)),
            **dict(zip(("d" + x.lower() for x in names), dilation))}
    consts = {**dict(zip(("K" + x for x in names), window)), "BLOCK": 1024}
    if src is _COL2IM or src is _COL2IM3:
        consts["F64"] = b.dtype is dt.float64
    _compile.launch(src, ((count + 1023) // 1024, 1, 1), args, consts, index)


def _im2col(x, geo):
    n, c, o, ckk, positions = _sizes(geo)
    cols = new_empty_tensor((n, ckk, positions), x.dtype, x._device)
    if cols.numel():
        _run(_IM2COL if len(geo) == 15 else _IM2COL3, x, cols, cols.numel(), geo, x._device.index or 0)
    return cols


def _weight2d(weight, o, ckk):
    w = weight if weight.is_contiguous() else weight.contiguous()
    return make_view(w, (1, o, ckk), (0, ckk, 1), w._offset)


def _contig(t):
    return t if t.is_contiguous() else t.contiguous()


def _forward(x, weight, bias, stride, padding, dilation, transposed, shape):
    """One group of a 2-d or 3-d convolution (x contiguous (N, C, [D,] H, W)) into a fresh ``shape``."""
    if not transposed:
        geo = _geometry(x, weight, stride, padding, dilation)
        n, c, o, ckk, positions = _sizes(geo)
        out = _product(_weight2d(weight, o, ckk), _im2col(x, geo)).view(shape)
    else:
        # the plain convolution of an input of the output's shape whose output is x: out = col2im(W^T @ x)
        out = new_empty_tensor(shape, x.dtype, x._device)
        geo = _geometry(out, weight, stride, padding, dilation)
        n, c, o, ckk, positions = _sizes(geo)
        w2 = _weight2d(weight, o, ckk)
        gcols = _product(make_view(w2, (1, ckk, o), (0, 1, ckk), w2._offset), x.view(n, o, positions))
        _col2im(gcols, out, geo)
    if bias is not None:
        out.add_(bias.view((1, -1) + (1,) * (len(shape) - 2)))
        _C._new_version_counter(out)  # a fresh result (torch's starts at _version 0)
    return out


def _backward(g, x, weight, stride, padding, dilation, transposed, mask):
    """One group's (grad_input, grad_weight) of a 2-d or 3-d convolution (g and x contiguous)."""
    gi = gw = None
    if not transposed:
        geo = _geometry(x, weight, stride, padding, dilation)
        n, c, o, ckk, positions = _sizes(geo)
        g3 = g.view(n, o, positions)
        if mask[0]:
            w2 = _weight2d(weight, o, ckk)
            gcols = _product(make_view(w2, (1, ckk, o), (0, 1, ckk), w2._offset), g3)
            gi = new_empty_tensor(x._shape, x.dtype, x._device)
            _col2im(gcols, gi, geo)
        if mask[1]:
            gw = _product(g3, _im2col(x, geo).transpose(1, 2)).sum(0).view(weight._shape)
        return gi, gw
    # transposed: the plain convolution's forward products, with g as its input and x as its output
    geo = _geometry(g, weight, stride, padding, dilation)
    n, c, o, ckk, positions = _sizes(geo)
    cols = _im2col(g, geo)
    if mask[0]:
        gi = _product(_weight2d(weight, o, ckk), cols).view(x._shape)
    if mask[1]:
        gw = _product(x.view(n, o, positions), cols.transpose(1, 2)).sum(0).view(weight._shape)
    return gi, gw


def _as2d(input, weight, stride, padding, dilation, output_padding):
    """A 1-d convolution's arguments as a 2-d one's of height 1."""
    return (input.unsqueeze(2), weight.unsqueeze(2), (1, stride[0]), (0, padding[0]), (1, dilation[0]),
            (0, output_padding[0]))


def _check_rank(weight, transposed, groups):
    if weight.ndim not in (3, 4, 5):
        raise NotImplementedError("ember.ops.convolution on CUDA covers 1-d, 2-d and 3-d convolutions "
                                  f"(got {weight.ndim - 2}-d, transposed={transposed}, groups={groups})")


def _group_slices(input, weight, transposed, groups):
    """Per group: (the input's channels, the weight's rows) of that group."""
    ci = input._shape[1] // groups
    wo = weight._shape[0] // groups
    return [(input.narrow(1, i * ci, ci), weight.narrow(0, i * wo, wo)) for i in range(groups)]


def _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    shape = cv._conv_check(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    _check_rank(weight, transposed, groups)
    if weight.ndim == 3:
        x2, w2, s2, p2, d2, op2 = _as2d(input, weight, stride, padding, dilation, output_padding)
        return _convolution(x2, w2, bias, s2, p2, d2, transposed, op2, groups).squeeze(2)
    if groups == 1:
        return _forward(_contig(input), weight, bias, stride, padding, dilation, transposed, shape)
    if depthwise.applies(input, weight, transposed, groups):
        return depthwise.forward(_contig(input), _contig(weight), None if bias is None else _contig(bias), stride,
                                 padding, dilation, shape)
    oc = shape[1] // groups
    part = (shape[0], oc) + tuple(shape[2:])
    out = new_empty_tensor(shape, input.dtype, input._device)
    for i, (x, w) in enumerate(_group_slices(input, weight, transposed, groups)):
        b = None if bias is None else bias.narrow(0, i * oc, oc)
        out.narrow(1, i * oc, oc).copy_(_forward(_contig(x), w, b, stride, padding, dilation, transposed, part))
    _C._new_version_counter(out)
    return out


def _convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                          output_padding, groups, output_mask):
    cv._conv_check(input, weight, None, stride, padding, dilation, transposed, output_padding, groups)
    _check_rank(weight, transposed, groups)
    if weight.ndim == 3:
        x2, w2, s2, p2, d2, op2 = _as2d(input, weight, stride, padding, dilation, output_padding)
        gi, gw, gb = _convolution_backward(grad_output.unsqueeze(2), x2, w2, bias_sizes, s2, p2, d2, transposed,
                                           op2, groups, output_mask)
        return (None if gi is None else gi.squeeze(2)), (None if gw is None else gw.squeeze(2)), gb
    g = _contig(grad_output)
    mask = (bool(output_mask[0]), bool(output_mask[1]))
    if groups == 1:
        gi, gw = _backward(g, _contig(input), weight, stride, padding, dilation, transposed, mask)
    elif depthwise.applies(input, weight, transposed, groups):
        x, w = _contig(input), _contig(weight)
        gi = depthwise.input_grad(g, x, w, stride, padding, dilation) if mask[0] else None
        gw = depthwise.weight_grad(g, x, w, stride, padding, dilation) if mask[1] else None
    else:
        oc = g._shape[1] // groups
        gi = new_empty_tensor(input._shape, input.dtype, input._device) if mask[0] else None
        gw = new_empty_tensor(weight._shape, weight.dtype, weight._device) if mask[1] else None
        ci, wo = input._shape[1] // groups, weight._shape[0] // groups
        for i, (x, w) in enumerate(_group_slices(input, weight, transposed, groups)):
            a, b = _backward(_contig(g.narrow(1, i * oc, oc)), _contig(x), w, stride, padding, dilation, transposed,
                             mask)
            if a is not None:
                gi.narrow(1, i * ci, ci).copy_(a)
            if b is not None:
                gw.narrow(0, i * wo, wo).copy_(b)
    gb = g.sum((0,) + tuple(range(2, g.ndim))) if output_mask[2] and bias_sizes is not None else None
    return gi, gw, gb


def register() -> None:
    OPS["convolution"].kernels["cuda"] = _convolution
    OPS["convolution_backward"].kernels["cuda"] = _convolution_backward
