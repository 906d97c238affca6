"""The time loop of one recurrent layer in one direction, as one autograd node.

LSTM and GRU: the native ``_lstm_layer`` / ``_gru_layer`` ops (ops/nn_rnn.py, C++ loop and
backward). RNN (and an empty batch): ``_Recurrence`` below, a Python loop over native ops.

The input projection ``x W_ih^T + b`` of every time step is computed beforehand in one
matmul (by the caller); this node runs the recurrence ``h_t = cell(xp_t, h_{t-1})`` with one
``addmm`` and one fused pointwise op per step (``_lstm_cell_fused`` / ``_gru_cell_fused``,
ops/nn_rnn.py), and its backward is hand-written back-propagation through time: per step
the fused backward op and one ``mm`` for ``dh_{t-1}``, then ``dW_hh`` (and ``dW_hr``, and the
GRU's ``db_hh``) in one matmul over all steps. Recording every per-step op instead would
build ~20 graph nodes per step, each of whose gate slices back-propagates through a
zero-filled copy of its whole input.

Steps are ``(offset, batch)`` pairs in processing order (reversed for the backward direction
of a bidirectional layer): step rows are ``xp[offset:offset + batch]``. Batches shrink (or,
reversed, grow) for packed sequences; the state rows beyond a step's batch pass it unchanged,
which gives PyTorch's final states for packed input in both directions.
"""

from __future__ import annotations

import contextlib

import ember
from ember import Tensor
from ember.autograd import Function

__all__ = []


_LSTM_CELL = ember.ops["_lstm_cell_fused"]
_LSTM_CELL_BACKWARD = ember.ops["_lstm_cell_fused_backward"]
_GRU_CELL = ember.ops["_gru_cell_fused"]
_GRU_CELL_BACKWARD = ember.ops["_gru_cell_fused_backward"]
_LSTM_LAYER = ember.ops["_lstm_layer"]
_GRU_LAYER = ember.ops["_gru_layer"]

# Above 0 while ``ember.onnx`` traces a model: an unpacked sequence then gives the layer ops no
# per-step sizes, so the time dim stays symbolic (PyTorch's legacy ONNX exporter keeps it dynamic,
# one LSTM/GRU node); elsewhere the sizes are passed and export specializes the time dim, as
# torch.export does.
SYMBOLIC_STEPS = [0]


# Per-step products below this many multiply-adds run on one thread (the core's batched matmul
# draws the same line): splitting them gains little, and every threaded BLAS call must wake its
# workers, which on a loaded machine waits for a scheduler time slice (measured: a 2-layer LSTM
# step 5x slower with 2 threads than with 1 on a busy 2-core machine).
_SERIAL_STEP_MACS = 256 * 256 * 256


@contextlib.contextmanager
def _step_threads(macs: int):
    threads = ember.get_num_threads()
    # int(): under export's symbolic trace the batch is a SymInt; a speed choice must not guard on it.
    if threads == 1 or int(macs) >= _SERIAL_STEP_MACS:
        yield
        return
    ember.set_num_threads(1)
    try:
        yield
    finally:
        ember.set_num_threads(threads)


def _step_macs(w_hh: Tensor, w_hr, steps) -> int:
    """Multiply-adds of the largest per-step product."""
    batch = max((b for _, b in steps), default=0)
    macs = batch * w_hh.size(0) * w_hh.size(1)
    return macs if w_hr is None else max(macs, batch * w_hr.size(0) * w_hr.size(1))


def _rows(state: Tensor, batch: int) -> Tensor:
    return state if batch == state.size(0) else state.narrow(0, 0, batch)


def _merge(new: Tensor, state: Tensor, batch: int) -> Tensor:
    """The full state after a step that updated its first ``batch`` rows."""
    return new if batch == state.size(0) else ember.cat([new, state.narrow(0, batch, state.size(0) - batch)])


class _Recurrence(Function):
    """``(out, h_n, c_n) = recurrence(mode, xp, h0, c0, w_hh, b_hh, w_hr, steps)``.

    mode: "LSTM", "GRU", "RNN_TANH" or "RNN_RELU". For LSTM and RNN both biases are folded
    into ``xp`` by the caller (``b_hh`` is None); GRU needs ``b_hh`` inside the reset gate.
    ``c0``/``c_n`` are only used by LSTM (None otherwise), ``w_hr`` only by projected LSTMs.
    """

    @staticmethod
    def forward(ctx, mode, xp, h0, c0, w_hh, b_hh, w_hr, steps):
        # W_hh^T made contiguous once: BLAS runs the per-step product faster without a transpose.
        w_step = w_hh.t().contiguous()
        w_hr_t = None if w_hr is None else w_hr.t()
        h, c = h0, c0
        n = len(steps)
        outs, saved, h_prevs = [None] * n, [None] * n, [None] * n
        with _step_threads(_step_macs(w_hh, w_hr, steps)):
            for k, (off, b) in enumerate(steps):
                h_prev = _rows(h, b)
                x_k = xp.narrow(0, off, b)
                if mode == "LSTM":
                    c_prev = _rows(c, b)
                    acts, c_new, tanh_c, m = _LSTM_CELL(x_k, ember.mm(h_prev, w_step), c_prev)
                    h_new = m if w_hr_t is None else ember.mm(m, w_hr_t)
                    saved[k] = (acts, c_prev, tanh_c, m)
                    c = _merge(c_new, c, b)
                elif mode == "GRU":
                    gh = ember.mm(h_prev, w_step) if b_hh is None else ember.addmm(b_hh, h_prev, w_step)
                    h_new, rzn = _GRU_CELL(x_k, gh, h_prev)
                    saved[k] = (rzn, gh)
                elif mode == "RNN_TANH":
                    # tanh(x) = 2 sigmoid(2x) - 1, the doubling done by addmm's alpha and beta
                    h_new = ember.addmm(x_k, h_prev, w_step, beta=2, alpha=2).sigmoid_().mul_(2).sub_(1)
                else:
                    h_new = ember.addmm(x_k, h_prev, w_step).relu_()
                h_prevs[k] = h_prev
                outs[k] = h_new
                h = _merge(h_new, h, b)
        ctx.mode, ctx.steps = mode, steps
        # The returned h and c become outputs whose grad_fn is ctx: ctx keeps bare aliases of them,
        # or output -> grad_fn -> ctx -> output would be a reference cycle that only gc frees.
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
        mode, steps = ctx.mode, ctx.steps
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
        with _step_threads(_step_macs(w_hh, w_hr, steps)):
            for k in range(n - 1, -1, -1):
                off, b = steps[k]
                dh_k = _rows(dh, b)
                if grad_out is not None:
                    dh_k = dh_k + grad_out.narrow(0, off, b)
                h_prev = ctx.h_prevs[k]
                if mode == "LSTM":
                    acts, c_prev, tanh_c, _ = ctx.saved_steps[k]
                    if w_hr is not None:
                        d_out_h[k] = dh_k
                        dh_k = ember.mm(dh_k, w_hr)
                    d_pre, dc_prev = _LSTM_CELL_BACKWARD(dh_k, _rows(dc, b), acts, c_prev, tanh_c)
                    d_x[k] = d_pre
                    dh_prev = ember.mm(d_pre, w_hh)
                    dc = _merge(dc_prev, dc, b)
                elif mode == "GRU":
                    rzn, gh = ctx.saved_steps[k]
                    d_x[k], d_gh[k], through = _GRU_CELL_BACKWARD(dh_k, rzn, gh, h_prev)
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
            # Both factors in time order, so that LSTM and RNN reuse grad_xp.
            d_hidden_proj = ember.cat(_time_order(d_gh, steps)) if mode == "GRU" else grad_xp
            if needs[4]:
                grad_w_hh = ember.mm(d_hidden_proj.t(), ember.cat(_time_order(ctx.h_prevs, steps)))
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


def recurrence(mode: str, xp: Tensor, h0: Tensor, c0, w_hh: Tensor, b_hh, w_hr, sizes: list, reverse: bool,
               uniform: bool = False):
    """(out, h_n, c_n) of one layer direction; ``sizes`` are the step batch sizes in time order
    (``uniform``: every step has the whole batch, an unpacked sequence; under ``SYMBOLIC_STEPS``
    the layer op is then given no per-step sizes, so the traced graph keeps the length symbolic).

    LSTM and GRU run as one native op (``_lstm_layer``, ``_gru_layer``: the time loop in C++,
    differentiated by its formula) on a device that has them; RNN, an empty batch and other devices
    run the Python loop of ``_Recurrence``.
    """
    # The layer ops exist for the CPU; other devices (CUDA) run the loop below with their step ops.
    if sizes and sizes[-1] > 0 and xp.device.type in _LSTM_LAYER.kernels:
        op_sizes = [] if uniform and SYMBOLIC_STEPS[0] else sizes
        if mode == "LSTM":
            out, h_n, c_n = _LSTM_LAYER(xp, h0, c0, w_hh, w_hr, op_sizes, reverse)[:3]
            return out, h_n, c_n
        if mode == "GRU":
            out, h_n = _GRU_LAYER(xp, h0, w_hh, b_hh, op_sizes, reverse)[:2]
            return out, h_n, None
    offsets = [0] * len(sizes)
    for t in range(1, len(sizes)):
        offsets[t] = offsets[t - 1] + sizes[t - 1]
    steps = tuple(zip(offsets, sizes, strict=True))
    return _Recurrence.apply(mode, xp, h0, c0, w_hh, b_hh, w_hr, steps[::-1] if reverse else steps)
