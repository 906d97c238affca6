"""Derivatives of the fused recurrent ops (``_lstm_cell_fused``, ``_gru_cell_fused``, the whole
layers ``_lstm_layer`` and ``_gru_layer``): their backward ops are the native kernels of ``ops/nn_rnn.py``.

LSTM outputs (acts, c, tanh_c, h): a gradient reaching the saved ``acts`` or ``tanh_c`` is
chained through sigmoid/tanh too, so every output is differentiable. The GRU's saved ``rzn``
is not (ember.nn never differentiates it). The backward kernels have no derivative of their own.
"""

from __future__ import annotations

import ember

from ._common import not_implemented, register_if_defined

OPS = ember.ops


def _lstm_cell(grads, inputs, outputs):
    g_acts, g_c, g_tanh_c, g_h = grads
    gates, c_prev = inputs.args[0], inputs.args[2]
    acts, _, tanh_c, _ = outputs
    if g_tanh_c is not None:
        through = g_tanh_c * (1 - tanh_c * tanh_c)
        g_c = through if g_c is None else g_c + through
    if g_h is None:
        g_h = ember.zeros(tanh_c.shape, dtype=tanh_c.dtype)
    grad_gates, grad_c_prev = OPS["_lstm_cell_fused_backward"](g_h, g_c, acts, c_prev, tanh_c)
    if g_acts is not None:
        hidden = gates.shape[1] // 4
        deriv = acts * (1 - acts)
        g = acts[:, 2 * hidden:3 * hidden]
        deriv[:, 2 * hidden:3 * hidden] = 1 - g * g
        grad_gates = grad_gates + g_acts * deriv
    # gates = input_gates + hidden_gates
    return grad_gates, grad_gates, grad_c_prev


def _gru_cell(grads, inputs, outputs):
    g_h, g_rzn = grads
    if g_rzn is not None:
        return not_implemented("_gru_cell_fused (gradient of rzn)")(grads, inputs, outputs)
    _, hidden_gates, h_prev = inputs.args
    return OPS["_gru_cell_fused_backward"](g_h, outputs[1], hidden_gates, h_prev)


def _lstm_layer(grads, inputs, outputs):
    g_out, g_h_n, g_c_n = grads[:3]
    if any(g is not None for g in grads[3:]):
        return not_implemented("_lstm_layer (gradient of a saved intermediate)")(grads, inputs, outputs)
    _, h0, c0, w_hh, w_hr, batch_sizes, reverse = inputs.args
    out, _, _, acts, cs, tanh_cs, ms = outputs
    grad_xp, grad_h0, grad_c0, grad_w_hh, grad_w_hr = OPS["_lstm_layer_backward"](
        g_out, g_h_n, g_c_n, acts, cs, tanh_cs, ms, out, h0, c0, w_hh, w_hr, batch_sizes, reverse)
    return grad_xp, grad_h0, grad_c0, grad_w_hh, (None if w_hr is None else grad_w_hr), None, None


def _gru_layer(grads, inputs, outputs):
    g_out, g_h_n = grads[:2]
    if any(g is not None for g in grads[2:]):
        return not_implemented("_gru_layer (gradient of a saved intermediate)")(grads, inputs, outputs)
    _, h0, w_hh, b_hh, batch_sizes, reverse = inputs.args
    out, _, rzn, ghn = outputs
    grad_xp, grad_h0, grad_w_hh, grad_b_hh = OPS["_gru_layer_backward"](
        g_out, g_h_n, rzn, ghn, out, h0, w_hh, b_hh is not None, batch_sizes, reverse)
    return grad_xp, grad_h0, grad_w_hh, (None if b_hh is None else grad_b_hh), None, None


register_if_defined("_lstm_cell_fused", _lstm_cell, save_output=True)
register_if_defined("_gru_layer", _gru_layer, save_output=True)
register_if_defined("_lstm_layer", _lstm_layer, save_output=True)
register_if_defined("_gru_cell_fused", _gru_cell, save_output=True)
for _name in ("_lstm_cell_fused_backward", "_gru_cell_fused_backward", "_lstm_layer_backward", "_gru_layer_backward"):
    register_if_defined(_name, not_implemented(_name))
