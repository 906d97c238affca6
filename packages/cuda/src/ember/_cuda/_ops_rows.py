"""Row kernels: softmax/log_softmax and layer_norm (forward and backward); cross-entropy's row
kernels are in ``_ops_loss.py``.

One program per row. A row of up to 16384 elements is read once into registers and written
once (the minimum traffic: PyTorch's softmax reads the row three times); longer rows loop
with an online max/sum. Statistics are computed in float32 (float64 for float64 inputs).
"""

from __future__ import annotations

import ember
from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.ops.nn import norm as nn_norm

from . import _compile
from ._elementwise import HEADER, TL, TRITON
from ._reduce import accumulator, reduce_new
from ._storage import new_empty as new_empty_tensor  # one frame per CUDA result
from ._streams import current_handle

_SINGLE_MAX = 16384

# The online max / exp-sum of a row read in tiles (softmax's long rows, the cross-entropy kernels of _ops_loss):
# per lane the running max and the sum of exp(x - max), rescaled when the max grows; -inf entries add 0, a lane
# of only -inf keeps max -inf and sum 0. Triton inlines the helpers: the kernels' machine code is what it was
# when each wrote the loop out (session 19, compared on sm_90 SASS).
ONLINE_SOFTMAX = '''
@triton.jit
def _online_step(mx, s, v):
    nm = tl.maximum(mx, v)
    s = s * tl.where(nm == -float('inf'), 1.0, tl.exp(mx - nm)) + tl.where(v == -float('inf'), 0.0, tl.exp(v - nm))
    return nm, s


@triton.jit
def _online_total(mx, s):
    gm = tl.max(mx, axis=0)
    return gm, tl.sum(s * tl.where(mx == -float('inf'), 0.0, tl.exp(mx - gm)), axis=0)
'''

_SOFTMAX = HEADER + ONLINE_SOFTMAX + '''
@triton.jit
def k(x, out, N, BLOCK: tl.constexpr, LOG: tl.constexpr, SINGLE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x + row * N
    orow = out + row * N
    if SINGLE:
        cols = tl.arange(0, BLOCK)
        m = cols < N
        v = tl.load(xr + cols, mask=m, other=-float('inf')).to(__CT__)
        mx = tl.max(v, axis=0)
        e = tl.exp(v - mx)
        s = tl.sum(e, axis=0)
        if LOG:
            r = v - mx - tl.log(s)
        else:
            r = e / s
        tl.store(orow + cols, r.to(out.dtype.element_ty), mask=m)
    else:
        mx = tl.full([BLOCK], -float('inf'), __CT__)
        s = tl.zeros([BLOCK], __CT__)
        for n0 in range(0, N, BLOCK):
            cols = n0 + tl.arange(0, BLOCK)
            v = tl.load(xr + cols, mask=cols < N, other=-float('inf')).to(__CT__)
            mx, s = _online_step(mx, s, v)
        gm, total = _online_total(mx, s)
        for n0 in range(0, N, BLOCK):
            cols = n0 + tl.arange(0, BLOCK)
            m = cols < N
            v = tl.load(xr + cols, mask=m, other=-float('inf')).to(__CT__)
            if LOG:
                r = v - gm - tl.log(total)
            else:
                r = tl.exp(v - gm) / total
            tl.store(orow + cols, r.to(out.dtype.element_ty), mask=m)
'''


def _or(t, fallback):
    """``t``, or ``fallback`` where an optional tensor is absent (its pointer is then never read)."""
    return fallback if t is None else t


def _aligned(n: int, *named) -> tuple:
    """Divisibility hints (16) for the row length ``N`` and the named pointers, when they all hold: they
    let Triton issue 16-byte loads and stores. Absent tensors are left out."""
    if n % 16:
        return ()
    names = []
    for name, t in named:  # a plain loop: this runs for every row kernel's launch
        if t is not None:
            if t.data_ptr() % 16:
                return ()
            names.append(name)
    names.append("N")
    return tuple(names)


def _ct(d):
    return dt.float64 if d is dt.float64 else dt.float32


# Launchers memoized by a short key (the kernel, its operands' dtypes, constexprs, alignment, device): the
# kernel cache's own key holds the whole source, which these kernels build per call (a ``replace``), so
# looking it up hashed a few KB of text on every call.
_LAUNCHERS: dict = {}


def _memo(key, build):
    launcher = _LAUNCHERS.get(key)
    if launcher is None:
        launcher = _LAUNCHERS[key] = build()
    return launcher


def _block(n: int):
    if n <= _SINGLE_MAX:
        b = max(16, 1 << (max(n, 1) - 1).bit_length())
        return b, True, (16 if b >= 8192 else 8 if b >= 2048 else 4 if b >= 512 else 1)
    return 4096, False, 8


def _softmax_kernel(log: bool):
    name = "log_softmax" if log else "softmax"
    op = OPS[name]

    def kernel(x, dim, dtype=None):
        m = op.meta(x, dim, dtype)
        rd = m.dtype
        d = dim % x.ndim if x.ndim else 0
        if x.dtype.is_complex:
            raise NotImplementedError(f"ember.ops.{name} has no CUDA kernel for complex inputs")
        src = x if x.dtype is rd else x.to(rd)
        moved = src.movedim(d, -1) if x.ndim > 1 and d != x.ndim - 1 else src
        dense = moved if moved.is_contiguous() else moved.contiguous()
        n = dense._shape[-1] if dense.ndim else 1
        out = new_empty_tensor(dense._shape, rd, x._device)
        rows = dense.numel() // max(n, 1)
        if rows and n:
            block, single, warps = _block(n)
            index = x._device.index or 0
            al = _aligned(n, ("x", dense), ("out", out))

            def build():
                sig = {"x": "*" + TRITON[dense.dtype], "out": "*" + TRITON[rd], "N": "i64", "BLOCK": "constexpr",
                       "LOG": "constexpr", "SINGLE": "constexpr"}
                return _compile.kernel(_SOFTMAX.replace("__CT__", TL[_ct(rd)]), "k", sig,
                                       {"BLOCK": block, "LOG": log, "SINGLE": single}, al, warps, 1, index)

            launcher = _memo(("softmax", dense.dtype, rd, block, log, single, al, warps, index), build)
            launcher((rows, 1, 1), current_handle(index), dense.data_ptr(), out.data_ptr(), n)
        if x.ndim > 1 and d != x.ndim - 1:
            out = out.movedim(-1, d).contiguous()
        return out

    return kernel


_LAYER_NORM = HEADER + '''
@triton.jit
def k(x, w, b, out, mean, rstd, N, eps, BLOCK: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    v = tl.load(x + row * N + cols, mask=m, other=0).to(__CT__)
    mu = tl.sum(v, axis=0) / N
    dv = tl.where(m, v - mu, 0.0)
    var = tl.sum(dv * dv, axis=0) / N
    rs = _div(1.0, libdevice.sqrt(var + eps))
    y = dv * rs
    if HAS_W:
        y = y * tl.load(w + cols, mask=m, other=0).to(__CT__)
    if HAS_B:
        y = y + tl.load(b + cols, mask=m, other=0).to(__CT__)
    tl.store(out + row * N + cols, y.to(out.dtype.element_ty), mask=m)
    tl.store(mean + row, mu.to(mean.dtype.element_ty))
    tl.store(rstd + row, rs.to(rstd.dtype.element_ty))
'''

_LAYER_NORM_BWD = HEADER + '''
@triton.jit
def k(g, x, w, mean, rstd, dx, gxhat, N, BLOCK: tl.constexpr, HAS_W: tl.constexpr, WANT_DX: tl.constexpr,
      WANT_GX: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    gv = tl.load(g + row * N + cols, mask=m, other=0).to(__CT__)
    xv = tl.load(x + row * N + cols, mask=m, other=0).to(__CT__)
    mu = tl.load(mean + row).to(__CT__)
    rs = tl.load(rstd + row).to(__CT__)
    xhat = tl.where(m, (xv - mu) * rs, 0.0)
    if WANT_GX:
        tl.store(gxhat + row * N + cols, (gv * xhat).to(gxhat.dtype.element_ty), mask=m)
    if WANT_DX:
        if HAS_W:
            gw = gv * tl.load(w + cols, mask=m, other=0).to(__CT__)
        else:
            gw = gv
        c1 = tl.sum(gw * xhat, axis=0) / N
        c2 = tl.sum(gw, axis=0) / N
        d = (gw - c2 - xhat * c1) * rs
        tl.store(dx + row * N + cols, d.to(dx.dtype.element_ty), mask=m)
'''


def _layer_norm(input, normalized_shape, weight, bias, eps):
    axis = input.ndim - len(normalized_shape)
    n = 1
    for s in input._shape[axis:]:
        n *= s
    rows = input.numel() // max(n, 1)
    stat_shape = tuple(input._shape[:axis]) + (1,) * len(normalized_shape)
    if input.dtype.is_complex or not input.dtype.is_floating_point:
        raise NotImplementedError(f"ember.ops.native_layer_norm on CUDA covers floating rows (got {input.dtype})")
    if n > _SINGLE_MAX:
        return _layer_norm_long_rows(input, axis, weight, bias, eps)
    dev = input._device
    x = input if input.is_contiguous() else input.contiguous()
    w = None if weight is None else (weight if weight.is_contiguous() else weight.contiguous())
    b = None if bias is None else (bias if bias.is_contiguous() else bias.contiguous())
    out = new_empty_tensor(input._shape, input.dtype, dev)
    mean = new_empty_tensor(stat_shape, input.dtype, dev)
    rstd = new_empty_tensor(stat_shape, input.dtype, dev)
    if rows and n:
        block, _, warps = _block(n)
        index = dev.index or 0
        al = _aligned(n, ("x", x), ("w", w), ("b", b), ("out", out))
        wx = x if w is None else w  # an absent weight/bias: x's pointer stands in (never read)
        bx = x if b is None else b

        def build():
            sig = {"x": "*" + TRITON[x.dtype], "w": "*" + TRITON[wx.dtype],
                   "b": "*" + TRITON[bx.dtype], "out": "*" + TRITON[out.dtype],
                   "mean": "*" + TRITON[mean.dtype], "rstd": "*" + TRITON[rstd.dtype], "N": "i64", "eps": "fp32",
                   "BLOCK": "constexpr", "HAS_W": "constexpr", "HAS_B": "constexpr"}
            return _compile.kernel(_LAYER_NORM.replace("__CT__", TL[_ct(input.dtype)]), "k", sig,
                                   {"BLOCK": block, "HAS_W": w is not None, "HAS_B": b is not None}, al, warps, 1,
                                   index)

        launcher = _memo(("layer_norm", x.dtype, wx.dtype, bx.dtype, out.dtype, mean.dtype, rstd.dtype,
                          block, w is not None, b is not None, al, warps, index), build)
        launcher((rows, 1, 1), current_handle(index), x.data_ptr(), wx.data_ptr(), bx.data_ptr(),
                 out.data_ptr(), mean.data_ptr(), rstd.data_ptr(), n, float(eps))
    return out, mean, rstd


def _layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    axis = input.ndim - len(normalized_shape)
    nshape = tuple(input._shape[axis:])
    n = 1
    for s in nshape:
        n *= s
    rows = input.numel() // max(n, 1)
    dev = input._device
    if n > _SINGLE_MAX:
        return _layer_norm_backward_long_rows(grad_out, input, axis, mean, rstd, weight, bias, output_mask)
    want_dx = bool(output_mask[0])
    want_dw = bool(output_mask[1]) and weight is not None
    want_db = bool(output_mask[2]) and bias is not None
    g = grad_out if grad_out.is_contiguous() else grad_out.contiguous()
    x = input if input.is_contiguous() else input.contiguous()
    w = None if weight is None else (weight if weight.is_contiguous() else weight.contiguous())
    mu = mean if mean.is_contiguous() else mean.contiguous()
    rs = rstd if rstd.is_contiguous() else rstd.contiguous()
    dx = new_empty_tensor(input._shape, input.dtype, dev) if want_dx else None
    gx = new_empty_tensor((rows, n), _ct(input.dtype), dev) if want_dw else None
    # The kernel writes dx and/or gxhat (the weight's gradient is summed from gxhat below): it runs when
    # either is wanted (it was skipped when only the weight's was: dw then summed unwritten memory).
    if rows and n and (want_dx or want_dw):
        block, _, warps = _block(n)
        index = dev.index or 0
        al = _aligned(n, ("g", g), ("x", x), ("w", w), ("dx", dx), ("gxhat", gx))
        wx = x if w is None else w  # absent operands: x's pointer stands in (never read or written)
        dxx = x if dx is None else dx
        gxx = x if gx is None else gx

        def build():
            sig = {"g": "*" + TRITON[g.dtype], "x": "*" + TRITON[x.dtype], "w": "*" + TRITON[wx.dtype],
                   "mean": "*" + TRITON[mu.dtype], "rstd": "*" + TRITON[rs.dtype],
                   "dx": "*" + TRITON[dxx.dtype], "gxhat": "*" + TRITON[gxx.dtype], "N": "i64",
                   "BLOCK": "constexpr", "HAS_W": "constexpr", "WANT_DX": "constexpr", "WANT_GX": "constexpr"}
            return _compile.kernel(_LAYER_NORM_BWD.replace("__CT__", TL[_ct(input.dtype)]), "k", sig,
                                   {"BLOCK": block, "HAS_W": w is not None, "WANT_DX": want_dx, "WANT_GX": want_dw},
                                   al, warps, 1, index)

        launcher = _memo(("layer_norm_bwd", g.dtype, x.dtype, wx.dtype, mu.dtype, rs.dtype, dxx.dtype,
                          gxx.dtype, input.dtype, block, w is not None, want_dx, want_dw, al, warps, index),
                         build)
        launcher((rows, 1, 1), current_handle(index), g.data_ptr(), x.data_ptr(), wx.data_ptr(),
                 mu.data_ptr(), rs.data_ptr(), dxx.data_ptr(), gxx.data_ptr(), n)
    dw = db = None
    if rows and n and axis:
        # The column sums straight into the gradients' shape (and the weight's in input's dtype, summed
        # in gxhat's float32): what sum(0), reshape and the cast gave, without their fronts and checks.
        if want_dw:
            dw = reduce_new("sum", gx, (0,), nshape, input.dtype, accumulator("sum", gx.dtype))
        if want_db:
            db = reduce_new("sum", g, tuple(range(axis)), nshape, g.dtype, accumulator("sum", g.dtype))
            db = db if db.dtype is input.dtype else db.to(input.dtype)
        return dx, dw, db
    if want_dw:
        dw = OPS["sum"].kernels["cuda"](gx, (0,), False, None).reshape(nshape).to(input.dtype)
    if want_db:
        db = OPS["sum"].kernels["cuda"](g.reshape(rows, n), (0,), False, None).reshape(nshape)
        db = db if db.dtype is input.dtype else db.to(input.dtype)
    return dx, dw, db


# Rows longer than one block (> _SINGLE_MAX elements): the same statistics and formulas composed of
# dispatched CUDA ops (reductions and elementwise kernels, a few passes over the row instead of one),
# computed in float32 for float16/bfloat16 as the row kernels are.
def _layer_norm_long_rows(input, axis, weight, bias, eps):
    ct = _ct(input.dtype)
    dims = tuple(range(axis, input.ndim))
    x = input.to(ct)
    var, mean = ember.var_mean(x, dims, correction=0, keepdim=True)
    rstd = (var + eps).rsqrt()
    out = (x - mean) * rstd
    if weight is not None:
        out = out * weight.to(ct)
    if bias is not None:
        out = out + bias.to(ct)
    return out.to(input.dtype), mean.to(input.dtype), rstd.to(input.dtype)


def _layer_norm_backward_long_rows(grad_out, input, axis, mean, rstd, weight, bias, output_mask):
    ct = _ct(input.dtype)
    dims = tuple(range(axis, input.ndim))
    lead = tuple(range(axis))
    g = grad_out.to(ct)
    xhat = (input.to(ct) - mean.to(ct)) * rstd.to(ct)
    dx = dw = db = None
    if output_mask[0]:
        gw = g * weight.to(ct) if weight is not None else g
        c1 = (gw * xhat).mean(dims, keepdim=True)
        c2 = gw.mean(dims, keepdim=True)
        dx = ((gw - c2 - xhat * c1) * rstd.to(ct)).to(input.dtype)
    if output_mask[1] and weight is not None:
        dw = (g * xhat).sum(lead).to(input.dtype) if lead else (g * xhat).to(input.dtype)
    if output_mask[2] and bias is not None:
        db = g.sum(lead).to(input.dtype) if lead else g.to(input.dtype)
    return dx, dw, db


def register() -> None:
    OPS["softmax"].kernels["cuda"] = _softmax_kernel(False)
    OPS["log_softmax"].kernels["cuda"] = _softmax_kernel(True)
    OPS["native_layer_norm"].kernels["cuda"] = _layer_norm
    OPS["native_layer_norm_backward"].kernels["cuda"] = _layer_norm_backward


_ = nn_norm  # the ops above are declared there
