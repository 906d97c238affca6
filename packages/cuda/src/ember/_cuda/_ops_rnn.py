"""CUDA kernels of the fused recurrent step ops (``_lstm_cell_fused``, ``_gru_cell_fused`` and
their backward ops; the core's ``ops/nn/rnn.py`` states the contracts), composed of dispatched
elementwise ops on gate slices: the same arithmetic as the CPU's C++ loops, a few kernels a step.

``nn.LSTM``/``nn.GRU`` run their whole-layer ops (``_lstm_layer``, ``_gru_layer``: a C++ time
loop) on the CPU only; on CUDA ``ember.nn``'s recurrence runs its Python time loop of ``mm`` and
these step ops (cuBLAS for the products). Being composed of dispatched ops, the functions also
run on CPU tensors, where the tests compare them with the native kernels.
"""

from __future__ import annotations

import ember
from ember._src.dispatch import OPS
from ember._src.ops._common import compute_dtype
from ember._src.ops.nn import rnn as core_rnn

_CHECK = {name: OPS[name].meta for name in ("_lstm_cell_fused", "_lstm_cell_fused_backward", "_gru_cell_fused",
                                            "_gru_cell_fused_backward")}


def _meta(t):
    return None if t is None else ember.empty(t.shape, dtype=t.dtype, device="meta")


def _compute(ts, cd):
    return [None if t is None else (t if t.dtype is cd else t.to(cd)) for t in ts]


def _back(outs, dtype):
    return tuple(o if o.dtype is dtype else o.to(dtype) for o in outs)


def lstm_cell(input_gates, hidden_gates, c_prev):
    _CHECK["_lstm_cell_fused"](*(_meta(t) for t in (input_gates, hidden_gates, c_prev)))  # the CPU's errors
    dtype = input_gates.dtype
    x, h, cp = _compute((input_gates, hidden_gates, c_prev), compute_dtype(dtype))
    hidden = x.shape[1] // 4
    a = x + h
    acts = ember.cat([a.narrow(1, 0, 2 * hidden).sigmoid(), a.narrow(1, 2 * hidden, hidden).tanh(),
                      a.narrow(1, 3 * hidden, hidden).sigmoid()], 1)
    i, f, g, o = (acts.narrow(1, k * hidden, hidden) for k in range(4))
    c = ember.addcmul(f * cp, i, g)
    tanh_c = c.tanh()
    return _back((acts, c, tanh_c, o * tanh_c), dtype)


def lstm_cell_backward(grad_h, grad_c, acts, c_prev, tanh_c):
    _CHECK["_lstm_cell_fused_backward"](*(_meta(t) for t in (grad_h, grad_c, acts, c_prev, tanh_c)))
    dtype = acts.dtype
    dh, dc, a, cp, tc = _compute((grad_h, grad_c, acts, c_prev, tanh_c), compute_dtype(dtype))
    hidden = a.shape[1] // 4
    i, f, g, o = (a.narrow(1, k * hidden, hidden) for k in range(4))
    dct = dh * o * (1 - tc * tc)
    if dc is not None:
        dct = dc + dct
    d_gates = ember.cat([dct * g * i * (1 - i), dct * cp * f * (1 - f), dct * i * (1 - g * g),
                         dh * tc * o * (1 - o)], 1)
    return _back((d_gates, dct * f), dtype)


def gru_cell(input_gates, hidden_gates, h_prev):
    _CHECK["_gru_cell_fused"](*(_meta(t) for t in (input_gates, hidden_gates, h_prev)))
    dtype = input_gates.dtype
    x, hg, hp = _compute((input_gates, hidden_gates, h_prev), compute_dtype(dtype))
    hidden = x.shape[1] // 3
    rz = (x.narrow(1, 0, 2 * hidden) + hg.narrow(1, 0, 2 * hidden)).sigmoid()
    r, z = rz.narrow(1, 0, hidden), rz.narrow(1, hidden, hidden)
    n = ember.addcmul(x.narrow(1, 2 * hidden, hidden), r, hg.narrow(1, 2 * hidden, hidden)).tanh()
    h = ember.addcmul(n, z, hp - n)
    return _back((h, ember.cat([rz, n], 1)), dtype)


def gru_cell_backward(grad_h, rzn, hidden_gates, h_prev):
    _CHECK["_gru_cell_fused_backward"](*(_meta(t) for t in (grad_h, rzn, hidden_gates, h_prev)))
    dtype = rzn.dtype
    d, s, hg, hp = _compute((grad_h, rzn, hidden_gates, h_prev), compute_dtype(dtype))
    hidden = s.shape[1] // 3
    r, z, n = (s.narrow(1, k * hidden, hidden) for k in range(3))
    hn = hg.narrow(1, 2 * hidden, hidden)
    dn = d * (1 - z) * (1 - n * n)
    dr = dn * hn * r * (1 - r)
    dz = d * (hp - n) * z * (1 - z)
    return _back((ember.cat([dr, dz, dn], 1), ember.cat([dr, dz, dn * r], 1), d * z), dtype)


def register() -> None:
    OPS["_lstm_cell_fused"].kernels["cuda"] = lstm_cell
    OPS["_lstm_cell_fused_backward"].kernels["cuda"] = lstm_cell_backward
    OPS["_gru_cell_fused"].kernels["cuda"] = gru_cell
    OPS["_gru_cell_fused_backward"].kernels["cuda"] = gru_cell_backward


_ = core_rnn  # the ops above are declared there
