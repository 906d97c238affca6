"""Derivatives of the fused recurrent ops (``_lstm_cell_fused``, ``_gru_cell_fused``, the whole
layers ``_lstm_layer`` and ``_gru_layer``).

First order, the fast path: their backward ops, the native kernels of ``ops/nn_rnn.py``. Those
have no derivative of their own (they are marked non-differentiable below), so when backward
runs with ``create_graph=True`` (grad mode on inside the formula: double backward, gradient
penalties), or a gradient reaches a saved intermediate output (the layers' ``acts``/``rzn``...,
the GRU cell's ``rzn``), the formula instead recomputes the op's forward from composite ember
ops (mm, sigmoid, tanh, ...; the exact math of the kernels in csrc/cpu/rnn.cpp) and
differentiates that with ``autograd.grad``: its result is differentiable again, to any order.
"""

from __future__ import annotations

import ember

from ._common import is_tensor, register_if_defined
from ._registry import non_differentiable

OPS = ember.ops


# ---- the forwards as composite ops (each returns every output of its fused op) -------------

def _lstm_step(gates, c_prev):
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    c = f * c_prev + i * g
    tanh_c = c.tanh()
    return ember.cat([i, f, g, o], 1), c, tanh_c, o * tanh_c


def _gru_step(input_gates, hidden_gates, h_prev):
    x_r, x_z, x_n = input_gates.chunk(3, 1)
    h_r, h_z, h_n = hidden_gates.chunk(3, 1)
    r, z = (x_r + h_r).sigmoid(), (x_z + h_z).sigmoid()
    n = (x_n + r * h_n).tanh()
    return n + z * (h_prev - n), ember.cat([r, z, n], 1)


def _lstm_cell_composite(input_gates, hidden_gates, c_prev):
    return _lstm_step(input_gates + hidden_gates, c_prev)


def _schedule(batch_sizes, reverse, rows, batch):
    """(time index, row offset, batch) of each step in processing order."""
    from ember._src.ops.nn.rnn import step_sizes

    sizes = step_sizes(batch_sizes, rows, batch)
    offsets = [0] * len(sizes)
    for t in range(1, len(sizes)):
        offsets[t] = offsets[t - 1] + sizes[t - 1]
    steps = list(zip(range(len(sizes)), offsets, sizes, strict=True))
    return steps[::-1] if reverse else steps


def _merge(new, state, b):
    """The full state after a step that updated its first ``b`` rows (the rest pass unchanged)."""
    return new if b == state.shape[0] else ember.cat([new, state[b:]])


def _cat_rows(per_step, width, like):
    parts = [p for p in per_step if p is not None]
    return ember.cat(parts) if parts else ember.zeros((0, width), dtype=like.dtype)


def _lstm_layer_composite(xp, h0, c0, w_hh, w_hr, batch_sizes, reverse):
    steps = _schedule(batch_sizes, reverse, xp.shape[0], h0.shape[0])
    per = {k: [None] * len(steps) for k in ("out", "acts", "cs", "tanh_cs", "ms")}
    h, c = h0, c0
    for t, off, b in steps:
        acts, c_new, tanh_c, m = _lstm_step(xp[off:off + b] + h[:b].mm(w_hh.t()), c[:b])
        h_new = m if w_hr is None else m.mm(w_hr.t())
        for key, v in (("out", h_new), ("acts", acts), ("cs", c_new), ("tanh_cs", tanh_c), ("ms", m)):
            per[key][t] = v
        h, c = _merge(h_new, h, b), _merge(c_new, c, b)
    hidden = c0.shape[1]
    ms = _cat_rows(per["ms"], hidden, xp) if w_hr is not None else ember.zeros((0, hidden), dtype=xp.dtype)
    return (_cat_rows(per["out"], h0.shape[1], xp), h, c, _cat_rows(per["acts"], 4 * hidden, xp),
            _cat_rows(per["cs"], hidden, xp), _cat_rows(per["tanh_cs"], hidden, xp), ms)


def _gru_layer_composite(xp, h0, w_hh, b_hh, batch_sizes, reverse):
    steps = _schedule(batch_sizes, reverse, xp.shape[0], h0.shape[0])
    outs, rzns, ghns = [None] * len(steps), [None] * len(steps), [None] * len(steps)
    h = h0
    hidden = h0.shape[1]
    for t, off, b in steps:
        h_prev = h[:b]
        gh = h_prev.mm(w_hh.t()) if b_hh is None else ember.addmm(b_hh, h_prev, w_hh.t())
        outs[t], rzns[t] = _gru_step(xp[off:off + b], gh, h_prev)
        ghns[t] = gh[:, 2 * hidden:]
        h = _merge(outs[t], h, b)
    return _cat_rows(outs, hidden, xp), h, _cat_rows(rzns, 3 * hidden, xp), _cat_rows(ghns, hidden, xp)


def _through_composite(composite, grads, args):
    """Gradients of the tensor ``args`` (None for the others, and for those that need none) from
    ``composite(*args)``, the op's forward recomputed with differentiable ops."""
    wanted = [i for i, a in enumerate(args) if is_tensor(a)]
    create_graph = ember.is_grad_enabled()
    leaves = list(args)
    with ember.enable_grad():
        for i in wanted:
            a = args[i]
            # With create_graph, each input with history goes behind a fresh view node, where the
            # gradient is captured: it is the partial derivative even when one input depends on
            # another (the GRU cell's hidden gates on h_prev), and its graph leads back to the
            # input for the next derivative. Otherwise (or without history) a detached leaf.
            leaves[i] = a.view_as(a) if create_graph and a.requires_grad else a.detach().requires_grad_()
        outs = composite(*leaves)
    pairs = [(o, g) for o, g in zip(outs, grads, strict=True) if g is not None]
    result = [None] * len(args)
    if not wanted or not pairs:
        return result
    from .._engine import grad  # the engine imports this table: import it when first used

    found = grad([o for o, _ in pairs], [leaves[i] for i in wanted], [g for _, g in pairs],
                 create_graph=create_graph, allow_unused=True)
    for i, g in zip(wanted, found, strict=True):
        result[i] = g
    return result


# ---- the formulas ---------------------------------------------------------------------------

def _lstm_cell(grads, inputs, outputs):
    if ember.is_grad_enabled():
        return _through_composite(_lstm_cell_composite, grads, inputs.args)
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
    if g_rzn is not None or ember.is_grad_enabled():
        return _through_composite(_gru_step, grads, inputs.args)
    _, hidden_gates, h_prev = inputs.args
    return OPS["_gru_cell_fused_backward"](g_h, outputs[1], hidden_gates, h_prev)


def _lstm_layer(grads, inputs, outputs):
    g_out, g_h_n, g_c_n = grads[:3]
    if ember.is_grad_enabled() or any(g is not None for g in grads[3:]):
        return _through_composite(_lstm_layer_composite, grads, inputs.args)
    _, h0, c0, w_hh, w_hr, batch_sizes, reverse = inputs.args
    out, _, _, acts, cs, tanh_cs, ms = outputs
    grad_xp, grad_h0, grad_c0, grad_w_hh, grad_w_hr = OPS["_lstm_layer_backward"](
        g_out, g_h_n, g_c_n, acts, cs, tanh_cs, ms, out, h0, c0, w_hh, w_hr, batch_sizes, reverse)
    return grad_xp, grad_h0, grad_c0, grad_w_hh, (None if w_hr is None else grad_w_hr), None, None


def _gru_layer(grads, inputs, outputs):
    g_out, g_h_n = grads[:2]
    if ember.is_grad_enabled() or any(g is not None for g in grads[2:]):
        return _through_composite(_gru_layer_composite, grads, inputs.args)
    _, h0, w_hh, b_hh, batch_sizes, reverse = inputs.args
    out, _, rzn, ghn = outputs
    grad_xp, grad_h0, grad_w_hh, grad_b_hh = OPS["_gru_layer_backward"](
        g_out, g_h_n, rzn, ghn, out, h0, w_hh, b_hh is not None, batch_sizes, reverse)
    return grad_xp, grad_h0, grad_w_hh, (None if b_hh is None else grad_b_hh), None, None


register_if_defined("_lstm_cell_fused", _lstm_cell, save_output=True)
register_if_defined("_gru_layer", _gru_layer, save_output=True)
register_if_defined("_lstm_layer", _lstm_layer, save_output=True)
register_if_defined("_gru_cell_fused", _gru_cell, save_output=True)
# The backward kernels are only called by the formulas above when grad mode is off; a backward
# that must itself be differentiable goes through the composite recomputation instead.
non_differentiable("_lstm_cell_fused_backward", "_gru_cell_fused_backward", "_lstm_layer_backward",
                   "_gru_layer_backward")
