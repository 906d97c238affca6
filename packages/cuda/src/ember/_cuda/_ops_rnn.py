"""CUDA kernels of the fused recurrent step ops (``_lstm_cell_fused``, ``_gru_cell_fused`` and
their backward ops; the core's ``ops/nn/rnn.py`` states the contracts): one Triton launch each, an
element per (row, hidden unit) reading its gate pre-activations, the CPU's C++ loops' arithmetic in
float32 (float64 for float64), each output rounded once to the input's dtype.

``nn.LSTM``/``nn.GRU`` run their whole-layer ops (``_lstm_layer``, ``_gru_layer``: a C++ time
loop) on the CPU only; on CUDA ``ember.nn``'s recurrence runs its Python time loop of ``mm`` and
these step ops (cuBLAS for the products): per step forward one product and one cell launch, backward
the cell's backward launch, one product (and the addition of the output's gradient, where it has one).
(Session 18's composites of dispatched ops took 11 launches a forward LSTM step, 26 a backward one.)
"""

from __future__ import annotations

from ember._src import dtypes as dt
from ember._src.device import META
from ember._src.dispatch import OPS
from ember._src.ops._common import compute_dtype
from ember._src.ops.nn import rnn as core_rnn
from ember._src.tensor import new_empty_tensor

from . import _compile
from ._elementwise import HEADER

_CHECK = {name: OPS[name].meta for name in ("_lstm_cell_fused", "_lstm_cell_fused_backward", "_gru_cell_fused",
                                            "_gru_cell_fused_backward")}

_PRELUDE = HEADER + '''
@triton.jit
def _sigmoid(x):
    return 1.0 / (1.0 + libdevice.exp(-x))


@triton.jit
def _at(p, i, m, F64: tl.constexpr):
    return tl.load(p + i, mask=m, other=0).to(tl.float64 if F64 else tl.float32)
'''

_LSTM = _PRELUDE + '''
@triton.jit
def k(x, hg, cp, acts, c, tc, h, n, H, F64: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    g = offs // H * (4 * H) + offs % H  # gate i of this element; f, g, o follow H apart
    i = _sigmoid(_at(x, g, m, F64) + _at(hg, g, m, F64))
    f = _sigmoid(_at(x, g + H, m, F64) + _at(hg, g + H, m, F64))
    z = libdevice.tanh(_at(x, g + 2 * H, m, F64) + _at(hg, g + 2 * H, m, F64))
    o = _sigmoid(_at(x, g + 3 * H, m, F64) + _at(hg, g + 3 * H, m, F64))
    cn = f * _at(cp, offs, m, F64) + i * z
    t = libdevice.tanh(cn)
    ty = acts.dtype.element_ty
    tl.store(acts + g, i.to(ty), mask=m)
    tl.store(acts + g + H, f.to(ty), mask=m)
    tl.store(acts + g + 2 * H, z.to(ty), mask=m)
    tl.store(acts + g + 3 * H, o.to(ty), mask=m)
    tl.store(c + offs, cn.to(ty), mask=m)
    tl.store(tc + offs, t.to(ty), mask=m)
    tl.store(h + offs, (o * t).to(ty), mask=m)
'''

_LSTM_BACKWARD = _PRELUDE + '''
@triton.jit
def k(dh, go, dc, acts, cp, tc, dg, dcp, n, H, HAS_GO: tl.constexpr, HAS_DC: tl.constexpr, F64: tl.constexpr,
      BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    g = offs // H * (4 * H) + offs % H
    i = _at(acts, g, m, F64)
    f = _at(acts, g + H, m, F64)
    z = _at(acts, g + 2 * H, m, F64)
    o = _at(acts, g + 3 * H, m, F64)
    d = _at(dh, offs, m, F64)
    if HAS_GO:  # the layer op's output gradient of these rows, added to the state's here (no launch of its own)
        d += _at(go, offs, m, F64)
    t = _at(tc, offs, m, F64)
    dct = d * o * (1 - t * t)
    if HAS_DC:
        dct = _at(dc, offs, m, F64) + dct
    ty = dg.dtype.element_ty
    tl.store(dg + g, (dct * z * i * (1 - i)).to(ty), mask=m)
    tl.store(dg + g + H, (dct * _at(cp, offs, m, F64) * f * (1 - f)).to(ty), mask=m)
    tl.store(dg + g + 2 * H, (dct * i * (1 - z * z)).to(ty), mask=m)
    tl.store(dg + g + 3 * H, (d * t * o * (1 - o)).to(ty), mask=m)
    tl.store(dcp + offs, (dct * f).to(ty), mask=m)
'''

_GRU = _PRELUDE + '''
@triton.jit
def k(x, hg, hp, h, rzn, ghn, n, H, GHN: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    g = offs // H * (3 * H) + offs % H  # gate r of this element; z, n follow H apart
    r = _sigmoid(_at(x, g, m, F64) + _at(hg, g, m, F64))
    z = _sigmoid(_at(x, g + H, m, F64) + _at(hg, g + H, m, F64))
    hn = _at(hg, g + 2 * H, m, F64)
    nn = libdevice.tanh(_at(x, g + 2 * H, m, F64) + r * hn)
    ty = h.dtype.element_ty
    if GHN:  # the layer op's saved W_hn h + b_hn
        tl.store(ghn + offs, hn.to(ty), mask=m)
    tl.store(h + offs, (nn + z * (_at(hp, offs, m, F64) - nn)).to(ty), mask=m)
    tl.store(rzn + g, r.to(ty), mask=m)
    tl.store(rzn + g + H, z.to(ty), mask=m)
    tl.store(rzn + g + 2 * H, nn.to(ty), mask=m)
'''

_GRU_BACKWARD = _PRELUDE + '''
@triton.jit
def k(dh, go, rzn, hg, hp, dx, dgh, dhp, n, H, HAS_GO: tl.constexpr, GHN: tl.constexpr, F64: tl.constexpr,
      BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    g = offs // H * (3 * H) + offs % H
    r = _at(rzn, g, m, F64)
    z = _at(rzn, g + H, m, F64)
    nn = _at(rzn, g + 2 * H, m, F64)
    d = _at(dh, offs, m, F64)
    if HAS_GO:
        d += _at(go, offs, m, F64)
    dn = d * (1 - z) * (1 - nn * nn)
    # hg: the hidden gates (rows, 3H), or only their n block (rows, H) as the layer op saves it
    dr = dn * _at(hg, offs if GHN else g + 2 * H, m, F64) * r * (1 - r)
    dz = d * (_at(hp, offs, m, F64) - nn) * z * (1 - z)
    ty = dx.dtype.element_ty
    tl.store(dx + g, dr.to(ty), mask=m)
    tl.store(dx + g + H, dz.to(ty), mask=m)
    tl.store(dx + g + 2 * H, dn.to(ty), mask=m)
    tl.store(dgh + g, dr.to(ty), mask=m)
    tl.store(dgh + g + H, dz.to(ty), mask=m)
    tl.store(dgh + g + 2 * H, (dn * r).to(ty), mask=m)
    tl.store(dhp + offs, (d * z).to(ty), mask=m)
'''

_BLOCK = 512


def _meta(t):
    return None if t is None else new_empty_tensor(tuple(t._shape), t.dtype, META)


def _contig(t):
    return t if t is None or t.is_contiguous() else t.contiguous()


def _run(src, ins: dict, outs: dict, rows: int, hidden: int, **flags):
    """One launch over the rows * hidden elements; ``outs``: name -> a shape (made in the inputs' dtype) or a
    contiguous tensor to write (the layer ops' rows of their whole-sequence outputs)."""
    first = next(iter(ins.values()))
    made = {k: v if hasattr(v, "data_ptr") else new_empty_tensor(v, first.dtype, first._device)
            for k, v in outs.items()}
    n = rows * hidden
    if n:
        args = {**{k: _contig(v) for k, v in ins.items()}, **made, "n": n, "H": hidden}
        consts = {**flags, "F64": first.dtype is dt.float64, "BLOCK": _BLOCK}
        _compile.launch(src, ((n + _BLOCK - 1) // _BLOCK, 1, 1), args, consts, first._device.index or 0)
    return tuple(made.values())


def lstm_cell(input_gates, hidden_gates, c_prev):
    _CHECK["_lstm_cell_fused"](*(_meta(t) for t in (input_gates, hidden_gates, c_prev)))  # the CPU's errors
    rows, hidden = c_prev._shape
    return _run(_LSTM, {"x": input_gates, "hg": hidden_gates, "cp": c_prev},
                {"acts": (rows, 4 * hidden), "c": (rows, hidden), "tc": (rows, hidden), "h": (rows, hidden)},
                rows, hidden)


def lstm_cell_backward(grad_h, grad_c, acts, c_prev, tanh_c):
    _CHECK["_lstm_cell_fused_backward"](*(_meta(t) for t in (grad_h, grad_c, acts, c_prev, tanh_c)))
    rows, hidden = acts._shape[0], acts._shape[1] // 4
    return _run(_LSTM_BACKWARD, {"dh": grad_h, "go": grad_h, "dc": grad_h if grad_c is None else grad_c,
                                 "acts": acts, "cp": c_prev, "tc": tanh_c},
                {"dg": (rows, 4 * hidden), "dcp": (rows, hidden)}, rows, hidden, HAS_GO=False,
                HAS_DC=grad_c is not None)


def gru_cell(input_gates, hidden_gates, h_prev):
    _CHECK["_gru_cell_fused"](*(_meta(t) for t in (input_gates, hidden_gates, h_prev)))
    rows, hidden = h_prev._shape
    return _run(_GRU, {"x": input_gates, "hg": hidden_gates, "hp": h_prev},
                {"h": (rows, hidden), "rzn": (rows, 3 * hidden), "ghn": h_prev}, rows, hidden, GHN=False)[:2]


def gru_cell_backward(grad_h, rzn, hidden_gates, h_prev):
    _CHECK["_gru_cell_fused_backward"](*(_meta(t) for t in (grad_h, rzn, hidden_gates, h_prev)))
    rows, hidden = grad_h._shape
    return _run(_GRU_BACKWARD, {"dh": grad_h, "go": grad_h, "rzn": rzn, "hg": hidden_gates, "hp": h_prev},
                {"dx": (rows, 3 * hidden), "dgh": (rows, 3 * hidden), "dhp": (rows, hidden)}, rows, hidden,
                HAS_GO=False, GHN=False)


# -- whole layer directions: _lstm_layer / _gru_layer and their backward ------------------------------------
# The CPU's C++ time loops as Python loops of cuBLAS products and the cell kernels above, the cells writing their
# rows of the whole-sequence outputs in place (no per-step copies). Steps are (offset, batch) in processing order
# (reversed for ``reverse``); the state rows beyond a step's batch pass it unchanged (packed sequences), as the
# CPU's. float16/bfloat16 run in float32 and return their own dtype, as the CPU's.


def _steps(name, batch_sizes, rows, batch, reverse):
    sizes = core_rnn._check_sizes(name, batch_sizes, rows, batch)
    offsets = [0] * len(sizes)
    for t in range(1, len(sizes)):
        offsets[t] = offsets[t - 1] + sizes[t - 1]
    steps = list(zip(offsets, sizes))
    return steps[::-1] if reverse else steps


def _rows(state, b):
    return state if b == state._shape[0] else state.narrow(0, 0, b)


def _merge(new, state, b):
    """The full state after a step that updated its first ``b`` rows."""
    import ember

    return new if b == state._shape[0] else ember.cat([new, state.narrow(0, b, state._shape[0] - b)])


def _previous(seq, init, steps):
    """Per step (processing order) the state it started from: ``init``'s rows, then the rows the steps wrote
    into ``seq`` (a step's batch may grow when reversed: rows not yet written are ``init``'s)."""
    state, prevs = init, []
    for off, b in steps:
        prevs.append(_rows(state, b))
        state = _merge(seq.narrow(0, off, b), state, b)
    return prevs


def _time_rows(per_step, steps):
    """Per-step row blocks (processing order) as one tensor in time order."""
    import ember

    ordered = [t for _, t in sorted(zip((off for off, _ in steps), per_step), key=lambda p: p[0])]
    return ordered[0] if len(ordered) == 1 else ember.cat(ordered)


def _in(ts, cd):
    return [None if t is None else _contig(t if t.dtype is cd else t.to(cd)) for t in ts]


def _out(ts, dtype):
    return tuple(t if t.dtype is dtype else t.to(dtype) for t in ts)


def lstm_layer(xp, h0, c0, w_hh, w_hr, batch_sizes, reverse):
    import ember

    metas = OPS["_lstm_layer"].meta(*(_meta(t) for t in (xp, h0, c0, w_hh, w_hr)), batch_sizes, reverse)
    rows, hidden = xp._shape[0], xp._shape[1] // 4
    batch, proj = h0._shape
    steps = _steps("_lstm_layer", batch_sizes, rows, batch, reverse)
    dtype, cd = xp.dtype, compute_dtype(xp.dtype)
    xp, h0, c0, w_hh, w_hr = _in((xp, h0, c0, w_hh, w_hr), cd)
    out, acts, cs, tanh_cs = (new_empty_tensor(tuple(m._shape), cd, xp._device) for m in (metas[0], *metas[3:6]))
    ms = new_empty_tensor((rows if w_hr is not None else 0, hidden), cd, xp._device)
    w_t = w_hh.t().contiguous()  # (cuBLAS runs the per-step product faster without a transpose)
    w_hr_t = None if w_hr is None else w_hr.t()
    h, c = h0, c0
    for off, b in steps:
        rows_of = (lambda t, off=off, b=b: t.narrow(0, off, b))
        cells = {"acts": rows_of(acts), "c": rows_of(cs), "tc": rows_of(tanh_cs),
                 "h": rows_of(out) if w_hr is None else rows_of(ms)}
        h_prev, c_prev = _rows(h, b), _rows(c, b)
        _run(_LSTM, {"x": rows_of(xp), "hg": ember.mm(h_prev, w_t), "cp": c_prev}, cells, b, hidden)
        if w_hr is not None:
            rows_of(out).copy_(ember.mm(rows_of(ms), w_hr_t))
        h, c = _merge(rows_of(out), h, b), _merge(rows_of(cs), c, b)
    # (the final states as tensors of their own: the last step's are views of out and cs)
    return _out((out, h.clone(), c.clone(), acts, cs, tanh_cs, ms), dtype)


def lstm_layer_backward(grad_out, grad_h_n, grad_c_n, acts, cs, tanh_cs, ms, out, h0, c0, w_hh, w_hr, batch_sizes,
                        reverse):
    import ember

    rows, hidden = acts._shape[0], acts._shape[1] // 4
    batch, proj = h0._shape
    steps = _steps("_lstm_layer_backward", batch_sizes, rows, batch, reverse)
    dtype, cd = acts.dtype, compute_dtype(acts.dtype)
    grad_out, grad_h_n, grad_c_n, acts, cs, tanh_cs, ms, out, h0, c0, w_hh, w_hr = _in(
        (grad_out, grad_h_n, grad_c_n, acts, cs, tanh_cs, ms, out, h0, c0, w_hh, w_hr), cd)
    h_prevs, c_prevs = _previous(out, h0, steps), _previous(cs, c0, steps)
    dh = grad_h_n if grad_h_n is not None else ember.zeros((batch, proj), dtype=cd, device=acts.device)
    dc = grad_c_n if grad_c_n is not None else ember.zeros((batch, hidden), dtype=cd, device=acts.device)
    d_gates = new_empty_tensor((rows, 4 * hidden), cd, acts._device)
    d_out_h = [None] * len(steps)
    for k in range(len(steps) - 1, -1, -1):
        off, b = steps[k]
        dh_k = _rows(dh, b)
        go = None if grad_out is None else grad_out.narrow(0, off, b)
        if w_hr is not None:  # (the output gradient joins before the projection's product)
            d_out_h[k] = dh_k = dh_k if go is None else dh_k + go
            dh_k, go = ember.mm(dh_k, w_hr), None
        _, dc_prev = _run(_LSTM_BACKWARD, {"dh": dh_k, "go": dh_k if go is None else go, "dc": _rows(dc, b),
                                           "acts": acts.narrow(0, off, b), "cp": c_prevs[k],
                                           "tc": tanh_cs.narrow(0, off, b)},
                          {"dg": d_gates.narrow(0, off, b), "dcp": (b, hidden)}, b, hidden, HAS_GO=go is not None,
                          HAS_DC=True)
        dh = _merge(ember.mm(d_gates.narrow(0, off, b), w_hh), dh, b)
        dc = _merge(dc_prev, dc, b)
    if steps:
        grad_w_hh = ember.mm(d_gates.t(), _time_rows(h_prevs, steps))
    else:
        grad_w_hh = ember.zeros((4 * hidden, proj), dtype=cd, device=acts.device)
    if w_hr is None:
        grad_w_hr = new_empty_tensor((0, hidden), cd, acts._device)
    elif steps:
        grad_w_hr = ember.mm(_time_rows(d_out_h, steps).t(), ms)
    else:
        grad_w_hr = ember.zeros((proj, hidden), dtype=cd, device=acts.device)
    return _out((d_gates, dh.clone() if dh is grad_h_n else dh, dc.clone() if dc is grad_c_n else dc, grad_w_hh,
                 grad_w_hr), dtype)


def gru_layer(xp, h0, w_hh, b_hh, batch_sizes, reverse):
    import ember

    metas = OPS["_gru_layer"].meta(*(_meta(t) for t in (xp, h0, w_hh, b_hh)), batch_sizes, reverse)
    rows, hidden = xp._shape[0], xp._shape[1] // 3
    batch = h0._shape[0]
    steps = _steps("_gru_layer", batch_sizes, rows, batch, reverse)
    dtype, cd = xp.dtype, compute_dtype(xp.dtype)
    xp, h0, w_hh, b_hh = _in((xp, h0, w_hh, b_hh), cd)
    out, _, rzn, ghn = (new_empty_tensor(tuple(m._shape), cd, xp._device) for m in metas)
    w_t = w_hh.t().contiguous()
    h = h0
    for off, b in steps:
        h_prev = _rows(h, b)
        gh = ember.mm(h_prev, w_t) if b_hh is None else ember.addmm(b_hh, h_prev, w_t)
        _run(_GRU, {"x": xp.narrow(0, off, b), "hg": gh, "hp": h_prev},
             {"h": out.narrow(0, off, b), "rzn": rzn.narrow(0, off, b), "ghn": ghn.narrow(0, off, b)}, b, hidden,
             GHN=True)
        h = _merge(out.narrow(0, off, b), h, b)
    return _out((out, h.clone(), rzn, ghn), dtype)


def gru_layer_backward(grad_out, grad_h_n, rzn, ghn, out, h0, w_hh, has_bias, batch_sizes, reverse):
    import ember

    rows, hidden = rzn._shape[0], rzn._shape[1] // 3
    batch = h0._shape[0]
    steps = _steps("_gru_layer_backward", batch_sizes, rows, batch, reverse)
    dtype, cd = rzn.dtype, compute_dtype(rzn.dtype)
    grad_out, grad_h_n, rzn, ghn, out, h0, w_hh = _in((grad_out, grad_h_n, rzn, ghn, out, h0, w_hh), cd)
    h_prevs = _previous(out, h0, steps)
    dh = grad_h_n if grad_h_n is not None else ember.zeros((batch, hidden), dtype=cd, device=rzn.device)
    d_x = new_empty_tensor((rows, 3 * hidden), cd, rzn._device)
    d_gh = new_empty_tensor((rows, 3 * hidden), cd, rzn._device)
    for k in range(len(steps) - 1, -1, -1):
        off, b = steps[k]
        dh_k = _rows(dh, b)
        go = dh_k if grad_out is None else grad_out.narrow(0, off, b)
        _, _, through = _run(_GRU_BACKWARD, {"dh": dh_k, "go": go, "rzn": rzn.narrow(0, off, b),
                                             "hg": ghn.narrow(0, off, b), "hp": h_prevs[k]},
                             {"dx": d_x.narrow(0, off, b), "dgh": d_gh.narrow(0, off, b), "dhp": (b, hidden)},
                             b, hidden, HAS_GO=grad_out is not None, GHN=True)
        dh = _merge(ember.addmm(through, d_gh.narrow(0, off, b), w_hh), dh, b)
    if steps:
        grad_w_hh = ember.mm(d_gh.t(), _time_rows(h_prevs, steps))
    else:
        grad_w_hh = ember.zeros((3 * hidden, hidden), dtype=cd, device=rzn.device)
    grad_b_hh = d_gh.sum(0) if has_bias else new_empty_tensor((0,), cd, rzn._device)
    return _out((d_x, dh.clone() if dh is grad_h_n else dh, grad_w_hh, grad_b_hh), dtype)


def register() -> None:
    OPS["_lstm_cell_fused"].kernels["cuda"] = lstm_cell
    OPS["_lstm_cell_fused_backward"].kernels["cuda"] = lstm_cell_backward
    OPS["_gru_cell_fused"].kernels["cuda"] = gru_cell
    OPS["_gru_cell_fused_backward"].kernels["cuda"] = gru_cell_backward
    OPS["_lstm_layer"].kernels["cuda"] = lstm_layer
    OPS["_lstm_layer_backward"].kernels["cuda"] = lstm_layer_backward
    OPS["_gru_layer"].kernels["cuda"] = gru_layer
    OPS["_gru_layer_backward"].kernels["cuda"] = gru_layer_backward

