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
def k(dh, dc, acts, cp, tc, dg, dcp, n, H, HAS_DC: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    g = offs // H * (4 * H) + offs % H
    i = _at(acts, g, m, F64)
    f = _at(acts, g + H, m, F64)
    z = _at(acts, g + 2 * H, m, F64)
    o = _at(acts, g + 3 * H, m, F64)
    d = _at(dh, offs, m, F64)
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
def k(x, hg, hp, h, rzn, n, H, F64: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    g = offs // H * (3 * H) + offs % H  # gate r of this element; z, n follow H apart
    r = _sigmoid(_at(x, g, m, F64) + _at(hg, g, m, F64))
    z = _sigmoid(_at(x, g + H, m, F64) + _at(hg, g + H, m, F64))
    nn = libdevice.tanh(_at(x, g + 2 * H, m, F64) + r * _at(hg, g + 2 * H, m, F64))
    ty = h.dtype.element_ty
    tl.store(h + offs, (nn + z * (_at(hp, offs, m, F64) - nn)).to(ty), mask=m)
    tl.store(rzn + g, r.to(ty), mask=m)
    tl.store(rzn + g + H, z.to(ty), mask=m)
    tl.store(rzn + g + 2 * H, nn.to(ty), mask=m)
'''

_GRU_BACKWARD = _PRELUDE + '''
@triton.jit
def k(dh, rzn, hg, hp, dx, dgh, dhp, n, H, F64: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    g = offs // H * (3 * H) + offs % H
    r = _at(rzn, g, m, F64)
    z = _at(rzn, g + H, m, F64)
    nn = _at(rzn, g + 2 * H, m, F64)
    d = _at(dh, offs, m, F64)
    dn = d * (1 - z) * (1 - nn * nn)
    dr = dn * _at(hg, g + 2 * H, m, F64) * r * (1 - r)
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
    """One launch over the rows * hidden elements; ``outs`` are (name, shape) made in the inputs' dtype."""
    first = next(iter(ins.values()))
    made = {k: new_empty_tensor(shape, first.dtype, first._device) for k, shape in outs.items()}
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
    return _run(_LSTM_BACKWARD, {"dh": grad_h, "dc": grad_h if grad_c is None else grad_c, "acts": acts,
                                 "cp": c_prev, "tc": tanh_c},
                {"dg": (rows, 4 * hidden), "dcp": (rows, hidden)}, rows, hidden, HAS_DC=grad_c is not None)


def gru_cell(input_gates, hidden_gates, h_prev):
    _CHECK["_gru_cell_fused"](*(_meta(t) for t in (input_gates, hidden_gates, h_prev)))
    rows, hidden = h_prev._shape
    return _run(_GRU, {"x": input_gates, "hg": hidden_gates, "hp": h_prev},
                {"h": (rows, hidden), "rzn": (rows, 3 * hidden)}, rows, hidden)


def gru_cell_backward(grad_h, rzn, hidden_gates, h_prev):
    _CHECK["_gru_cell_fused_backward"](*(_meta(t) for t in (grad_h, rzn, hidden_gates, h_prev)))
    rows, hidden = grad_h._shape
    return _run(_GRU_BACKWARD, {"dh": grad_h, "rzn": rzn, "hg": hidden_gates, "hp": h_prev},
                {"dx": (rows, 3 * hidden), "dgh": (rows, 3 * hidden), "dhp": (rows, hidden)}, rows, hidden)


def register() -> None:
    OPS["_lstm_cell_fused"].kernels["cuda"] = lstm_cell
    OPS["_lstm_cell_fused_backward"].kernels["cuda"] = lstm_cell_backward
    OPS["_gru_cell_fused"].kernels["cuda"] = gru_cell
    OPS["_gru_cell_fused_backward"].kernels["cuda"] = gru_cell_backward


_ = core_rnn  # the ops above are declared there
