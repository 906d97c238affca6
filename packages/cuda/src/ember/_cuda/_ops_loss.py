"""Cross-entropy on CUDA: ``_class_nll`` (log-softmax fused with the target pick, the smoothing
term and the weights) and its one-pass backward ``_class_nll_backward``.

One program per row. The forward reads a row once (an online max/sum over tiles) and stores the
row's log-sum-exp beside the loss (``_class_nll``'s fourth output); the backward takes it back
and writes each element's gradient exp(x - lse) * scale - ... in one pass (one read, one write).
Without a saved lse (a caller that has none) the backward recomputes it first (a second read of
the row). Nothing of size rows x classes is materialised besides the result. Statistics are
computed in float32 (float64 for float64 inputs); a row whose max is infinite has a NaN lse (its
loss and gradient are NaN, as PyTorch's log_softmax makes them).
"""

from __future__ import annotations

from ember._src.dispatch import OPS

from . import _compile
from ._elementwise import HEADER, TL, TRITON
from ._ops_rows import ONLINE_SOFTMAX, _aligned, _ct, _or
from ._storage import new_empty as new_empty_tensor  # one frame per CUDA result
from ._streams import current_handle

_CLASS_NLL = HEADER + ONLINE_SOFTMAX + '''
@triton.jit
def k(x, t, w, nll, sm, wt, lse_out, C, ignore, BLOCK: tl.constexpr, LOGP: tl.constexpr, HAS_W: tl.constexpr,
      SMOOTH: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x + row * C
    tgt = tl.load(t + row)
    valid = tgt != ignore
    inb = (tgt >= 0) & (tgt < C)
    mx = tl.full([BLOCK], -float('inf'), __CT__)
    s = tl.zeros([BLOCK], __CT__)
    tot = tl.zeros([BLOCK], __CT__)
    wsum = tl.zeros([BLOCK], __CT__)
    # the smoothing sum is taken relative to the row's first score (finite, else 0): for huge scores
    # sum(w x) - sum(w) lse cancels to nothing in float
    x0 = tl.load(xr).to(__CT__)
    ref = tl.where((x0 == x0) & (tl.abs(x0) < float('inf')), x0, 0.0)
    for n0 in range(0, C, BLOCK):
        cols = n0 + tl.arange(0, BLOCK)
        cm = cols < C
        v = tl.load(xr + cols, mask=cm, other=-float('inf')).to(__CT__)
        if not LOGP:
            mx, s = _online_step(mx, s, v)
        if SMOOTH:
            if HAS_W:
                wv = tl.load(w + cols, mask=cm, other=0).to(__CT__)
            else:
                wv = tl.where(cm, 1.0, 0.0)
            tot += tl.where(cm, wv * (v - ref), 0.0)
            wsum += wv
    if LOGP:
        lse = 0.0
        lrel = -ref
    else:
        gm, total = _online_total(mx, s)
        lse = tl.where((gm == float('inf')) | (gm == -float('inf')), float('nan'), gm + tl.log(total))
        lrel = tl.where(lse != lse, float('nan'), (gm - ref) + tl.log(total))  # lse - ref from its parts
        tl.store(lse_out + row, lse.to(lse_out.dtype.element_ty))  # ignored rows too (their gradient)
    safe = tl.where(valid & inb, tgt, 0)
    xt = tl.load(xr + safe).to(__CT__)
    if HAS_W:
        wgt = tl.load(w + safe).to(__CT__)
    else:
        wgt = 1.0
    if LOGP:
        loss = -wgt * xt
    else:
        # (x[t] - max) - log(total), not x[t] - lse: for huge scores lse rounds to the max and the
        # loss to 0 (eager's loss.cpp forms it from the same parts); NaN where lse is
        loss = tl.where(lse != lse, float('nan'), -wgt * ((xt - gm) - tl.log(total)))
    loss = tl.where(inb, loss, float('nan'))
    tl.store(nll + row, tl.where(valid, loss, 0.0).to(nll.dtype.element_ty))
    tl.store(wt + row, tl.where(valid, wgt, 0.0).to(wt.dtype.element_ty))
    if SMOOTH:
        sv = -(tl.sum(tot, axis=0) - tl.sum(wsum, axis=0) * lrel)
        tl.store(sm + row, tl.where(valid, sv, 0.0).to(sm.dtype.element_ty))
'''


def _as_rows(input):
    """(N, C, d1, ...) scores (the op's layout, classes on dim 1) as contiguous (rows, C) rows."""
    return input.movedim(1, -1).reshape(-1, input._shape[1])


def _class_nll(input, target, weight, ignore_index, log_probs, smooth):
    if input.ndim > 2:
        nll, sm, wt, lse = _class_nll(_as_rows(input), target.reshape(-1), weight, ignore_index, log_probs, smooth)
        shape = tuple(target._shape)
        return (nll.reshape(shape), (sm.reshape(shape) if smooth else sm), wt.reshape(shape),
                (lse if log_probs else lse.reshape(shape)))
    rows, c = input._shape[0], input._shape[1]
    dev = input._device
    cd = _ct(input.dtype)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"ember.ops._class_nll has no CUDA kernel for {input.dtype}")
    nll = new_empty_tensor((rows,), cd, dev)
    sm = new_empty_tensor((rows,) if smooth else (0,), cd, dev)
    wt = new_empty_tensor((rows,), cd, dev)
    lse = new_empty_tensor((0,) if log_probs else (rows,), cd, dev)
    if target._device is not dev or (weight is not None and weight._device is not dev):
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{dev} and {target._device if target._device is not dev else weight._device}!")
    if rows == 0:
        return nll, sm, wt, lse
    x = input if input.is_contiguous() else input.contiguous()
    t = target if target.is_contiguous() else target.contiguous()
    w = None if weight is None else (weight if weight.is_contiguous() else weight.contiguous())
    block = min(4096, max(16, 1 << (max(c, 1) - 1).bit_length()))
    warps = 8 if block >= 4096 else 4 if block >= 1024 else 1
    index = dev.index or 0
    sig = {"x": "*" + TRITON[x.dtype], "t": "*i64", "w": "*" + TRITON[_or(w, x).dtype], "nll": "*" + TRITON[cd],
           "sm": "*" + TRITON[cd], "wt": "*" + TRITON[cd], "lse_out": "*" + TRITON[cd], "C": "i64", "ignore": "i64",
           "BLOCK": "constexpr",
           "LOGP": "constexpr", "HAS_W": "constexpr", "SMOOTH": "constexpr"}
    al = tuple(a for a in _aligned(c, ("x", x), ("w", w)) if a != "N") + (("C",) if c % 16 == 0 else ())
    launcher = _compile.kernel(_CLASS_NLL.replace("__CT__", TL[cd]), "k", sig,
                               {"BLOCK": block, "LOGP": bool(log_probs), "HAS_W": w is not None,
                                "SMOOTH": bool(smooth)}, al, warps, 1, index)
    launcher((rows, 1, 1), current_handle(index), x.data_ptr(), t.data_ptr(), _or(w, x).data_ptr(), nll.data_ptr(),
             (sm if smooth else nll).data_ptr(), wt.data_ptr(), (nll if log_probs else lse).data_ptr(), c,
             int(ignore_index))
    return nll, sm, wt, lse


_CLASS_NLL_BACKWARD = HEADER + ONLINE_SOFTMAX + '''
@triton.jit
def k(x, t, w, gn, gs, out, saved, C, ignore, gn_stride, gs_stride, BLOCK: tl.constexpr, LOGP: tl.constexpr,
      HAS_W: tl.constexpr, HAS_N: tl.constexpr, HAS_S: tl.constexpr, HAS_LSE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x + row * C
    orow = out + row * C
    tgt = tl.load(t + row)
    valid = tgt != ignore
    inb = (tgt >= 0) & (tgt < C)
    safe = tl.where(valid & inb, tgt, 0)
    if HAS_W:
        wt = tl.load(w + safe).to(__CT__)
    else:
        wt = 1.0
    # an ignored row's gradient is 0 * softmax: 0, or NaN where its lse is (PyTorch's)
    if HAS_N:
        a = tl.where(valid, tl.load(gn + row * gn_stride).to(__CT__) * wt, 0.0)
    else:
        a = 0.0
    if HAS_S:
        b = tl.where(valid, tl.load(gs + row * gs_stride).to(__CT__), 0.0)
    else:
        b = 0.0
    mx = tl.full([BLOCK], -float('inf'), __CT__)
    s = tl.zeros([BLOCK], __CT__)
    wsum = tl.zeros([BLOCK], __CT__)
    if HAS_S and HAS_W:  # the weight sum: a pass over the weights (not the row)
        for n0 in range(0, C, BLOCK):
            cols = n0 + tl.arange(0, BLOCK)
            wsum += tl.load(w + cols, mask=cols < C, other=0).to(__CT__)
    # The softmax is exp((x - shift) - lt): from the forward's saved lse (shift = lse, lt = 0) where
    # it is exact enough, else from the row's max and exp sum recomputed here (shift = max, lt =
    # log(sum)), never from max + log(sum) rounded to one float. Beyond |lse| = 256 a saved lse's
    # rounding (|lse| * 2^-24 in the exponent) costs the gradient more than ~1.5e-5 relative (eager's
    # lse_exact_enough); for |lse| ~ 1e30 it is the max itself and every probability came out 1.
    shift = 0.0
    lt = 0.0
    if not LOGP:
        if HAS_LSE:
            shift = tl.load(saved + row).to(__CT__)
            # a runtime trip count (0 or the row): no branch, and the loop runs only for such rows
            stop = tl.where(tl.abs(shift) > 256.0, C, 0)
        else:
            stop = C
        for n0 in range(0, stop, BLOCK):
            cols = n0 + tl.arange(0, BLOCK)
            v = tl.load(xr + cols, mask=cols < C, other=-float('inf')).to(__CT__)
            mx, s = _online_step(mx, s, v)
        gm, total = _online_total(mx, s)
        # NaN for an infinite max (the row's loss and gradient are NaN, as the forward's lse)
        lrow = tl.where((gm == float('inf')) | (gm == -float('inf')), float('nan'), tl.log(total))
        shift = tl.where(stop > 0, gm, shift)
        lt = tl.where(stop > 0, lrow, 0.0)
    if HAS_S:
        if HAS_W:
            ws = tl.sum(wsum, axis=0)
        else:
            ws = C.to(__CT__)
        coef = a + b * ws
    else:
        coef = a
    bad = valid & ((tgt < 0) | (tgt >= C))
    for n0 in range(0, C, BLOCK):
        cols = n0 + tl.arange(0, BLOCK)
        cm = cols < C
        g = tl.where(cols == tgt, -a, 0.0)
        if not LOGP:
            v = tl.load(xr + cols, mask=cm, other=0.0).to(__CT__)
            g += coef * tl.exp((v - shift) - lt)
        if HAS_S:
            if HAS_W:
                wv = tl.load(w + cols, mask=cm, other=0).to(__CT__)
            else:
                wv = 1.0
            g -= b * wv
        g = tl.where(bad, float('nan'), g)
        tl.store(orow + cols, g.to(out.dtype.element_ty), mask=cm)
'''


def _row_vector(g, cd, rows):
    """An optional per-row gradient as (tensor of dtype cd, row stride): expanded grads (the mean's
    backward) keep their 0 stride, so no copy is made."""
    if g is None:
        return None, 0
    if g.dtype is not cd:
        g = g.to(cd)
    if g.ndim == 0:
        return g, 0
    return g, (g._stride[0] if g._shape[0] == rows and g._shape[0] > 1 else 0)


def _class_nll_backward(grad_nll, grad_smooth, input, target, weight, ignore_index, log_probs, lse=None):
    """The input gradient of ``_class_nll`` in one kernel: from the forward's saved log-sum-exp
    ``lse`` each element's gradient is written in one pass (one read, one write); without it the
    row's lse is recomputed first (a read more). Nothing of size rows x classes is materialised
    besides the result (the composite wrote five such)."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"ember.ops._class_nll_backward has no CUDA kernel for {input.dtype}")
    if input.ndim > 2:
        def flat(g):  # a 0-d gradient broadcasts over the rows (_row_vector), as in the 2-d case
            return g if g is None or g.ndim == 0 else g.reshape(-1)
        rows_grad = _class_nll_backward(flat(grad_nll), flat(grad_smooth), _as_rows(input), target.reshape(-1), weight,
                                        ignore_index, log_probs, None if lse is None else lse.reshape(-1))
        moved = (input._shape[0],) + tuple(input._shape[2:]) + (input._shape[1],)
        return rows_grad.reshape(moved).movedim(-1, 1).contiguous()
    rows, c = input._shape[0], input._shape[1]
    dev = input._device
    if log_probs:
        lse = None  # log-probabilities have no lse (the forward's fourth output is empty)
    for other in (target, weight, grad_nll, grad_smooth, lse):
        if other is not None and other._device is not dev:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{dev} and {other._device}!")
    out = new_empty_tensor((rows, c), input.dtype, dev)
    if rows == 0 or c == 0:
        return out
    cd = _ct(input.dtype)
    x = input if input.is_contiguous() else input.contiguous()
    t = target if target.is_contiguous() else target.contiguous()
    w = None if weight is None else (weight if weight.is_contiguous() else weight.contiguous())
    gn, gn_stride = _row_vector(grad_nll, cd, rows)
    gs, gs_stride = _row_vector(grad_smooth, cd, rows)
    if lse is not None:
        if tuple(lse._shape) != (rows,):
            raise RuntimeError(f"_class_nll_backward: lse must have one entry per row ({rows}), got {list(lse._shape)}")
        lse = lse.to(cd).contiguous()
    block = min(4096, max(16, 1 << (max(c, 1) - 1).bit_length()))
    warps = 8 if block >= 4096 else 4 if block >= 1024 else 1
    index = dev.index or 0
    sig = {"x": "*" + TRITON[x.dtype], "t": "*i64", "w": "*" + TRITON[_or(w, x).dtype],
           "gn": "*" + TRITON[_or(gn, x).dtype], "gs": "*" + TRITON[_or(gs, x).dtype], "out": "*" + TRITON[out.dtype],
           "saved": "*" + TRITON[_or(lse, x).dtype], "C": "i64", "ignore": "i64", "gn_stride": "i64",
           "gs_stride": "i64", "BLOCK": "constexpr", "LOGP": "constexpr", "HAS_W": "constexpr", "HAS_N": "constexpr",
           "HAS_S": "constexpr", "HAS_LSE": "constexpr"}
    al = tuple(a for a in _aligned(c, ("x", x), ("w", w), ("out", out)) if a != "N") + (("C",) if c % 16 == 0 else ())
    launcher = _compile.kernel(_CLASS_NLL_BACKWARD.replace("__CT__", TL[cd]), "k", sig,
                               {"BLOCK": block, "LOGP": bool(log_probs), "HAS_W": w is not None,
                                "HAS_N": gn is not None, "HAS_S": gs is not None, "HAS_LSE": lse is not None}, al,
                               warps, 1, index)
    launcher((rows, 1, 1), current_handle(index), x.data_ptr(), t.data_ptr(), _or(w, x).data_ptr(),
             _or(gn, x).data_ptr(), _or(gs, x).data_ptr(), out.data_ptr(), _or(lse, x).data_ptr(), c,
             int(ignore_index), gn_stride, gs_stride)
    return out


def register() -> None:
    OPS["_class_nll"].kernels["cuda"] = _class_nll
    OPS["_class_nll_backward"].kernels["cuda"] = _class_nll_backward
