"""The time loop of one recurrent layer in one direction, as one autograd node.

The input projection ``x W_ih^T + b`` of every time step is computed beforehand in one
matmul (by the caller); this node runs the recurrence ``h_t = cell(xp_t, h_{t-1})`` with one
``addmm`` and a few fused-in-place pointwise ops per step, and its backward is hand-written
back-propagation through time: per step the gate gradients and one ``mm`` for ``dh_{t-1}``,
then ``dW_hh`` (and ``dW_hr``) in one matmul over all steps. Recording every per-step op
instead would build ~20 graph nodes per step, each of whose gate slices back-propagates
through a zero-filled copy of its whole input.

Steps are ``(offset, batch)`` pairs in processing order (reversed for the backward direction
of a bidirectional layer): step rows are ``xp[offset:offset + batch]``. Batches shrink (or,
reversed, grow) for packed sequences; the state rows beyond a step's batch pass it unchanged,
which gives PyTorch's final states for packed input in both directions.

tanh is computed as ``2 sigmoid(2x) - 1`` (the doubling folded into the weights where it can
be): the vectorized sigmoid kernel is far faster than the scalar ``std::tanh`` loop.
"""

from __future__ import annotations

import ember
from ember import Tensor
from ember.autograd import Function

__all__ = []


def _tanh_from_doubled(x2: Tensor) -> Tensor:
    """tanh(x) from x2 = 2x, in place: 2 sigmoid(2x) - 1."""
    return x2.sigmoid_().mul_(2).sub_(1)


def _tanh(x: Tensor) -> Tensor:
    return _tanh_from_doubled(x * 2)


def _rows(state: Tensor, batch: int) -> Tensor:
    return state if batch == state.size(0) else state[:batch]


def _merge(new: Tensor, state: Tensor, batch: int) -> Tensor:
    """The full state after a step that updated its first ``batch`` rows."""
    return new if batch == state.size(0) else ember.cat([new, state[batch:]])


class _Recurrence(Function):
    """``(out, h_n, c_n) = recurrence(mode, xp, h0, c0, w_hh, b_hh, w_hr, steps)``.

    mode: "LSTM", "GRU", "RNN_TANH" or "RNN_RELU". For LSTM and RNN both biases are folded
    into ``xp`` by the caller (``b_hh`` is None); GRU needs ``b_hh`` inside the reset gate.
    ``c0``/``c_n`` are only used by LSTM (None otherwise), ``w_hr`` only by projected LSTMs.
    """

    @staticmethod
    def forward(ctx, mode, xp, h0, c0, w_hh, b_hh, w_hr, steps):
        hidden = w_hh.size(1) if w_hr is None else w_hr.size(1)
        if mode == "LSTM":
            # Double the g-gate pre-activations once so tanh(g) comes out of the same sigmoid.
            xp = xp.clone()
            xp[:, 2 * hidden:3 * hidden].mul_(2)
            w_step = w_hh.clone()
            w_step[2 * hidden:3 * hidden].mul_(2)
            w_step = w_step.t()
        else:
            w_step = w_hh.t()
        w_hr_t = None if w_hr is None else w_hr.t()
        h, c = h0, c0
        n = len(steps)
        outs, saved, h_prevs = [None] * n, [None] * n, [None] * n
        for k, (off, b) in enumerate(steps):
            h_prev = _rows(h, b)
            x_k = xp[off:off + b]
            if mode == "LSTM":
                c_prev = _rows(c, b)
                acts = ember.addmm(x_k, h_prev, w_step).sigmoid_()
                i, f = acts[:, :hidden], acts[:, hidden:2 * hidden]
                g, o = acts[:, 2 * hidden:3 * hidden], acts[:, 3 * hidden:]
                g.mul_(2).sub_(1)
                c_new = ember.addcmul(f * c_prev, i, g)
                tanh_c = _tanh(c_new)
                m = o * tanh_c
                h_new = m if w_hr_t is None else ember.mm(m, w_hr_t)
                saved[k] = (acts, c_prev, tanh_c, m)
                c = _merge(c_new, c, b)
            elif mode == "GRU":
                gh = ember.mm(h_prev, w_step) if b_hh is None else ember.addmm(b_hh, h_prev, w_step)
                rz = ember.add(x_k[:, :2 * hidden], gh[:, :2 * hidden]).sigmoid_()
                r, z = rz[:, :hidden], rz[:, hidden:]
                hn = gh[:, 2 * hidden:]
                new = _tanh_from_doubled(ember.addcmul(x_k[:, 2 * hidden:], r, hn, value=1).mul_(2))
                h_new = ember.addcmul(new, z, h_prev - new)
                saved[k] = (rz, new, hn)
            elif mode == "RNN_TANH":
                h_new = _tanh_from_doubled(ember.addmm(x_k, h_prev, w_step, beta=2, alpha=2))
            else:
                h_new = ember.addmm(x_k, h_prev, w_step).relu_()
            h_prevs[k] = h_prev
            outs[k] = h_new
            h = _merge(h_new, h, b)
        ctx.mode, ctx.steps, ctx.hidden = mode, steps, hidden
        # The returned h becomes an output whose grad_fn is ctx: ctx keeps a bare alias of it, or
        # output -> grad_fn -> ctx -> output would be a reference cycle that only gc frees.
        def bare(t):
            return t.detach() if t is h or t is c else t

        ctx.h_prevs, ctx.outs = h_prevs, [bare(o) for o in outs]
        ctx.saved_steps = [s if s is None else tuple(bare(t) for t in s) for s in saved]
        ctx.save_for_backward(w_hh, w_hr)
        ctx.state_shapes = (h0.shape, None if c0 is None else c0.shape)
        out = ember.cat(_time_order(outs, steps)) if n else xp.new_zeros((0, h0.size(1)))
        return out, h, c

    @staticmethod
    def backward(ctx, grad_out, grad_h, grad_c):
        mode, steps, hidden = ctx.mode, ctx.steps, ctx.hidden
        w_hh, w_hr = ctx.saved_tensors
        h_shape, c_shape = ctx.state_shapes
        dh = grad_h if grad_h is not None else w_hh.new_zeros(h_shape)
        dc = None
        if mode == "LSTM":
            dc = grad_c if grad_c is not None else w_hh.new_zeros(c_shape)
        n = len(steps)
        d_x = [None] * n  # gradient of the step's xp rows
        d_gh = [None] * n  # GRU: gradient of the step's hidden projection (it differs from d_x)
        d_out_h = [None] * n  # projected LSTM: gradient of the step's output h
        for k in range(n - 1, -1, -1):
            off, b = steps[k]
            dh_k = _rows(dh, b)
            if grad_out is not None:
                dh_k = dh_k + grad_out[off:off + b]
            h_prev = ctx.h_prevs[k]
            if mode == "LSTM":
                acts, c_prev, tanh_c, m = ctx.saved_steps[k]
                i, f = acts[:, :hidden], acts[:, hidden:2 * hidden]
                g, o = acts[:, 2 * hidden:3 * hidden], acts[:, 3 * hidden:]
                if w_hr is not None:
                    d_out_h[k] = dh_k
                    dh_k = ember.mm(dh_k, w_hr)
                # dc_t = dc_{t+1} + dh o (1 - tanh(c)^2)
                t = dh_k * o
                dc_k = ember.addcmul(_rows(dc, b) + t, t * tanh_c, tanh_c, value=-1)
                d_act = ember.cat([dc_k * g, dc_k * c_prev, dc_k * i, dh_k * tanh_c], 1)
                deriv = acts - acts * acts
                deriv[:, 2 * hidden:3 * hidden] = 1 - g * g
                d_pre = d_act.mul_(deriv)
                d_x[k] = d_pre
                dh_prev = ember.mm(d_pre, w_hh)
                dc = _merge(dc_k * f, dc, b)
            elif mode == "GRU":
                rz, new, hn = ctx.saved_steps[k]
                r, z = rz[:, :hidden], rz[:, hidden:]
                through = dh_k * z
                d_new = dh_k - through
                d_z = dh_k * (h_prev - new)
                d_new_pre = ember.addcmul(d_new, d_new * new, new, value=-1)
                d_rz = ember.cat([d_new_pre * hn, d_z], 1).mul_(rz - rz * rz)
                d_x[k] = ember.cat([d_rz, d_new_pre], 1)
                d_gh[k] = ember.cat([d_rz, d_new_pre * r], 1)
                dh_prev = ember.addmm(through, d_gh[k], w_hh)
            else:
                h_new = ctx.outs[k]
                if mode == "RNN_TANH":
                    d_pre = ember.addcmul(dh_k, dh_k * h_new, h_new, value=-1)
                else:
                    d_pre = dh_k * (h_new > 0)
                d_x[k] = d_pre
                dh_prev = ember.mm(d_pre, w_hh)
            dh = _merge(dh_prev, dh, b)
        needs = ctx.needs_input_grad
        grad_xp = ember.cat(_time_order(d_x, steps)) if n else None
        grad_w_hh = grad_b_hh = grad_w_hr = None
        if n and (needs[4] or needs[5]):
            d_hidden_proj = ember.cat(d_gh if mode == "GRU" else d_x)
            if needs[4]:
                grad_w_hh = ember.mm(d_hidden_proj.t(), ember.cat(ctx.h_prevs))
            if needs[5]:
                grad_b_hh = d_hidden_proj.sum(0)
        if n and w_hr is not None and needs[6]:
            ms = ember.cat([s[3] for s in ctx.saved_steps])
            grad_w_hr = ember.mm(ember.cat(d_out_h).t(), ms)
        return None, grad_xp, dh, dc, grad_w_hh, grad_b_hh, grad_w_hr, None


def _time_order(per_step: list, steps) -> list:
    """Per-step tensors sorted by their rows' offset (processing order may be reversed)."""
    if len(steps) > 1 and steps[0][0] > steps[-1][0]:
        return per_step[::-1]
    return per_step


def recurrence(mode: str, xp: Tensor, h0: Tensor, c0, w_hh: Tensor, b_hh, w_hr, steps):
    return _Recurrence.apply(mode, xp, h0, c0, w_hh, b_hh, w_hr, tuple(steps))
