"""Fused recurrent ops: one LSTM / GRU time step's pointwise part (``_C.lstm_cell_forward``
and friends) and whole layer directions whose time loop runs in C++ (``_C.lstm_layer_forward``).

They are internal (``ember.nn``'s recurrent layers and cells call them). Gate blocks lie side
by side in one (rows, blocks * hidden) tensor, LSTM (i, f, g, o), GRU (r, z, n); the step ops
take the pre-activations in two halves (input side, precomputed for all time steps in one
matmul, and hidden side). ``acts`` are the LSTM gate activations, ``rzn`` the GRU's.

    _lstm_cell_fused(input_gates, hidden_gates, c_prev) -> (acts, c, tanh_c, h)
    _lstm_cell_fused_backward(grad_h, grad_c?, acts, c_prev, tanh_c) -> (grad_gates, grad_c_prev)
    _gru_cell_fused(input_gates, hidden_gates, h_prev) -> (h, rzn)
    _gru_cell_fused_backward(grad_h, rzn, hidden_gates, h_prev)
        -> (grad_input_gates, grad_hidden_gates, grad_h_prev_direct)
    _lstm_layer(xp, h0, c0, w_hh, w_hr?, batch_sizes, reverse)
        -> (out, h_n, c_n, acts, cs, tanh_cs, ms)
    _lstm_layer_backward(grad_out?, grad_h_n?, grad_c_n?, acts, cs, tanh_cs, ms, out, h0, c0, w_hh, w_hr?,
                         batch_sizes, reverse) -> (grad_xp, grad_h0, grad_c0, grad_w_hh, grad_w_hr)
    _gru_layer(xp, h0, w_hh, b_hh?, batch_sizes, reverse) -> (out, h_n, rzn, ghn)
    _gru_layer_backward(grad_out?, grad_h_n?, rzn, ghn, out, h0, w_hh, has_bias, batch_sizes, reverse)
        -> (grad_xp, grad_h0, grad_w_hh, grad_b_hh)

A layer op runs over input projections ``xp`` precomputed for every step, steps of
``batch_sizes`` rows in time order (packed sequences shrink; empty means every step has all
``h0``'s rows, as many steps as ``xp`` holds: see ``step_sizes``), processed last to first when
``reverse``. The LSTM saves ``acts``, ``cs`` (cell states), ``tanh_cs`` and ``ms`` (o * tanh(c),
before the projection ``w_hr``; empty without one) for its backward, the GRU ``rzn`` and ``ghn``
(W_hn h + b_hn); without a bias ``grad_b_hh`` is empty. float16/bfloat16 are computed in
float32 and returned in their own dtype.
"""

from __future__ import annotations

from ..._native import _C
from ...device import META
from ...dispatch import define
from ...tensor import Tensor, new_empty_tensor
from .._common import compute_dtype, convert

__all__ = []


def _rows(t: Tensor, name: str, rows: int, width: int, dtype) -> None:
    if t.ndim != 2 or t._shape[0] != rows or t._shape[1] != width:
        raise RuntimeError(f"{name}: expected shape [{rows}, {width}], got {list(t._shape)}")
    if t.dtype != dtype:
        raise RuntimeError(f"{name}: expected dtype {dtype}, got {t.dtype}")


def _gates_shape(t: Tensor, name: str, blocks: int) -> tuple[int, int]:
    if t.ndim != 2 or t._shape[1] % blocks:
        raise RuntimeError(f"{name}: expected a 2-d tensor of {blocks} gate blocks, got shape {list(t._shape)}")
    if not t.dtype.is_floating_point:
        raise RuntimeError(f"{name}: expected a floating point tensor, got {t.dtype}")
    return t._shape[0], t._shape[1] // blocks


def _native(tensors, dtype):
    """Inputs as contiguous tensors of the compute dtype (None stays None)."""
    out = []
    for t in tensors:
        if t is not None:
            if t.dtype is not dtype:
                t = convert(t, dtype)
            if not t.is_contiguous():
                t = t.contiguous()
        out.append(t)
    return out


def _outputs(shapes, dtype, device):
    return [new_empty_tensor(s, dtype, device) for s in shapes]


def _back(outs, dtype):
    return tuple(o if o.dtype == dtype else convert(o, dtype) for o in outs)


def _lstm_kernel(input_gates: Tensor, hidden_gates: Tensor, c_prev: Tensor):
    rows, hidden = _gates_shape(input_gates, "_lstm_cell_fused", 4)
    _rows(hidden_gates, "_lstm_cell_fused hidden_gates", rows, 4 * hidden, input_gates.dtype)
    _rows(c_prev, "_lstm_cell_fused c_prev", rows, hidden, input_gates.dtype)
    cd, dev = compute_dtype(input_gates.dtype), input_gates._device
    outs = _outputs([(rows, 4 * hidden), (rows, hidden), (rows, hidden), (rows, hidden)], cd, dev)
    if dev is not META and rows:
        _C.lstm_cell_forward(*outs, *_native([input_gates, hidden_gates, c_prev], cd))
    return _back(outs, input_gates.dtype)


def _lstm_backward_kernel(grad_h: Tensor, grad_c, acts: Tensor, c_prev: Tensor, tanh_c: Tensor):
    rows, hidden = _gates_shape(acts, "_lstm_cell_fused_backward", 4)
    for name, t in (("grad_h", grad_h), ("grad_c", grad_c), ("c_prev", c_prev), ("tanh_c", tanh_c)):
        if t is not None:
            _rows(t, f"_lstm_cell_fused_backward {name}", rows, hidden, acts.dtype)
    cd, dev = compute_dtype(acts.dtype), acts._device
    outs = _outputs([(rows, 4 * hidden), (rows, hidden)], cd, dev)
    if dev is not META and rows:
        _C.lstm_cell_backward(*outs, *_native([grad_h, grad_c, acts, c_prev, tanh_c], cd))
    return _back(outs, acts.dtype)


def _gru_kernel(input_gates: Tensor, hidden_gates: Tensor, h_prev: Tensor):
    rows, hidden = _gates_shape(input_gates, "_gru_cell_fused", 3)
    _rows(hidden_gates, "_gru_cell_fused hidden_gates", rows, 3 * hidden, input_gates.dtype)
    _rows(h_prev, "_gru_cell_fused h_prev", rows, hidden, input_gates.dtype)
    cd, dev = compute_dtype(input_gates.dtype), input_gates._device
    outs = _outputs([(rows, hidden), (rows, 3 * hidden)], cd, dev)
    if dev is not META and rows:
        _C.gru_cell_forward(*outs, *_native([input_gates, hidden_gates, h_prev], cd))
    return _back(outs, input_gates.dtype)


def _gru_backward_kernel(grad_h: Tensor, rzn: Tensor, hidden_gates: Tensor, h_prev: Tensor):
    rows, hidden = _gates_shape(rzn, "_gru_cell_fused_backward", 3)
    _rows(grad_h, "_gru_cell_fused_backward grad_h", rows, hidden, rzn.dtype)
    _rows(hidden_gates, "_gru_cell_fused_backward hidden_gates", rows, 3 * hidden, rzn.dtype)
    _rows(h_prev, "_gru_cell_fused_backward h_prev", rows, hidden, rzn.dtype)
    cd, dev = compute_dtype(rzn.dtype), rzn._device
    outs = _outputs([(rows, 3 * hidden), (rows, 3 * hidden), (rows, hidden)], cd, dev)
    if dev is not META and rows:
        _C.gru_cell_backward(*outs, *_native([grad_h, rzn, hidden_gates, h_prev], cd))
    return _back(outs, rzn.dtype)


def _op(schema: str, kernel):
    op = define(schema, ())
    op.kernel("cpu")(kernel)
    op.kernels["meta"] = op.meta = kernel
    return op


lstm_cell_op = _op(
    "_lstm_cell_fused(Tensor input_gates, Tensor hidden_gates, Tensor c_prev) -> (Tensor, Tensor, Tensor, Tensor)",
    _lstm_kernel)
lstm_cell_backward_op = _op(
    "_lstm_cell_fused_backward(Tensor grad_h, Tensor? grad_c, Tensor acts, Tensor c_prev, Tensor tanh_c) "
    "-> (Tensor, Tensor)", _lstm_backward_kernel)
gru_cell_op = _op("_gru_cell_fused(Tensor input_gates, Tensor hidden_gates, Tensor h_prev) -> (Tensor, Tensor)",
                  _gru_kernel)
gru_cell_backward_op = _op(
    "_gru_cell_fused_backward(Tensor grad_h, Tensor rzn, Tensor hidden_gates, Tensor h_prev) "
    "-> (Tensor, Tensor, Tensor)", _gru_backward_kernel)


def step_sizes(batch_sizes, rows: int, batch: int) -> list:
    """The batch size of each time step of a layer op: ``batch_sizes`` as given (a packed
    sequence), or, when it is empty (an unpacked sequence: every step has the whole batch),
    ``rows // batch`` steps of ``batch``. The empty form keeps the number of steps out of the
    op's arguments, so an exported graph takes any sequence length."""
    if len(batch_sizes):
        return [int(s) for s in batch_sizes]
    return [int(batch)] * (int(rows) // int(batch)) if int(batch) > 0 else []


def _check_sizes(name: str, batch_sizes, rows: int, batch: int) -> list:
    if not len(batch_sizes):
        if batch < 1 or rows % batch != 0:
            raise RuntimeError(f"{name}: {rows} input rows do not fill whole steps of batch {batch}")
        return [batch] * (int(rows) // int(batch))
    sizes = [s if isinstance(s, int) else int(s) for s in batch_sizes]  # keeps symbolic sizes (export)
    if sum(sizes) != rows or any(s < 1 or s > batch for s in sizes) or sizes != sorted(sizes, reverse=True):
        raise RuntimeError(f"{name}: batch_sizes {sizes} do not fit {rows} input rows and batch {batch}")
    return sizes


def _lstm_layer_kernel(xp: Tensor, h0: Tensor, c0: Tensor, w_hh: Tensor, w_hr, batch_sizes, reverse: bool):
    rows, hidden = _gates_shape(xp, "_lstm_layer", 4)
    dtype = xp.dtype
    if h0.ndim != 2:
        raise RuntimeError(f"_lstm_layer: expected a 2-d h0, got shape {list(h0._shape)}")
    batch, proj = h0._shape
    _rows(h0, "_lstm_layer h0", batch, hidden if w_hr is None else w_hr._shape[0], dtype)
    _rows(c0, "_lstm_layer c0", batch, hidden, dtype)
    _rows(w_hh, "_lstm_layer w_hh", 4 * hidden, proj, dtype)
    if w_hr is not None:
        _rows(w_hr, "_lstm_layer w_hr", proj, hidden, dtype)
    sizes = _check_sizes("_lstm_layer", batch_sizes, rows, batch)
    cd, dev = compute_dtype(dtype), xp._device
    shapes = [(rows, proj), (batch, proj), (batch, hidden), (rows, 4 * hidden), (rows, hidden), (rows, hidden),
              (rows if w_hr is not None else 0, hidden)]
    outs = _outputs(shapes, cd, dev)
    if dev is not META:
        w_hh_t = w_hh.t()
        w_hr_t = None if w_hr is None else w_hr.t()
        xp_, h0_, c0_, w_hh_t, w_hr_t = _native([xp, h0, c0, w_hh_t, w_hr_t], cd)
        _C.lstm_layer_forward(*outs[:6], outs[6] if w_hr is not None else None, xp_, h0_, c0_, w_hh_t, w_hr_t,
                              sizes, bool(reverse))
    return _back(outs, dtype)


def _lstm_layer_backward_kernel(grad_out, grad_h_n, grad_c_n, acts: Tensor, cs: Tensor, tanh_cs: Tensor, ms: Tensor,
                                out: Tensor, h0: Tensor, c0: Tensor, w_hh: Tensor, w_hr, batch_sizes, reverse: bool):
    rows, hidden = _gates_shape(acts, "_lstm_layer_backward", 4)
    dtype = acts.dtype
    batch, proj = h0._shape
    cd, dev = compute_dtype(dtype), acts._device
    proj_rows = proj if w_hr is not None else 0
    shapes = [(rows, 4 * hidden), (batch, proj), (batch, hidden), (4 * hidden, proj), (proj_rows, hidden)]
    outs = _outputs(shapes, cd, dev)
    if dev is not META:
        ins = _native([grad_out, grad_h_n, grad_c_n, acts, cs, tanh_cs, ms, out, h0, c0, w_hh, w_hr], cd)
        if w_hr is None:
            ins[6] = None
        _C.lstm_layer_backward(*outs[:4], outs[4] if w_hr is not None else None, *ins,
                               step_sizes(batch_sizes, acts._shape[0], batch), bool(reverse))
    return _back(outs, dtype)


lstm_layer_op = _op(
    "_lstm_layer(Tensor xp, Tensor h0, Tensor c0, Tensor w_hh, Tensor? w_hr, int[] batch_sizes, bool reverse) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)", _lstm_layer_kernel)
lstm_layer_backward_op = _op(
    "_lstm_layer_backward(Tensor? grad_out, Tensor? grad_h_n, Tensor? grad_c_n, Tensor acts, Tensor cs, "
    "Tensor tanh_cs, Tensor ms, Tensor out, Tensor h0, Tensor c0, Tensor w_hh, Tensor? w_hr, int[] batch_sizes, "
    "bool reverse) -> (Tensor, Tensor, Tensor, Tensor, Tensor)", _lstm_layer_backward_kernel)


def _gru_layer_kernel(xp: Tensor, h0: Tensor, w_hh: Tensor, b_hh, batch_sizes, reverse: bool):
    rows, hidden = _gates_shape(xp, "_gru_layer", 3)
    dtype = xp.dtype
    batch = h0._shape[0] if h0.ndim == 2 else -1
    _rows(h0, "_gru_layer h0", batch, hidden, dtype)
    _rows(w_hh, "_gru_layer w_hh", 3 * hidden, hidden, dtype)
    if b_hh is not None and (b_hh._shape != (3 * hidden,) or b_hh.dtype != dtype):
        raise RuntimeError(f"_gru_layer: expected b_hh of shape [{3 * hidden}], got {list(b_hh._shape)}")
    sizes = _check_sizes("_gru_layer", batch_sizes, rows, batch)
    cd, dev = compute_dtype(dtype), xp._device
    outs = _outputs([(rows, hidden), (batch, hidden), (rows, 3 * hidden), (rows, hidden)], cd, dev)
    if dev is not META:
        bias = None if b_hh is None else b_hh.reshape(1, 3 * hidden)
        xp_, h0_, w_hh_t, bias = _native([xp, h0, w_hh.t(), bias], cd)
        _C.gru_layer_forward(*outs, xp_, h0_, w_hh_t, bias, sizes, bool(reverse))
    return _back(outs, dtype)


def _gru_layer_backward_kernel(grad_out, grad_h_n, rzn: Tensor, ghn: Tensor, out: Tensor, h0: Tensor, w_hh: Tensor,
                               has_bias: bool, batch_sizes, reverse: bool):
    rows, hidden = _gates_shape(rzn, "_gru_layer_backward", 3)
    dtype = rzn.dtype
    batch = h0._shape[0]
    cd, dev = compute_dtype(dtype), rzn._device
    outs = _outputs([(rows, 3 * hidden), (batch, hidden), (3 * hidden, hidden), (1, 3 * hidden if has_bias else 0)],
                    cd, dev)
    if dev is not META:
        ins = _native([grad_out, grad_h_n, rzn, ghn, out, h0, w_hh], cd)
        _C.gru_layer_backward(*outs[:3], outs[3] if has_bias else None, *ins,
                              step_sizes(batch_sizes, rzn._shape[0], batch), bool(reverse))
    outs[3] = outs[3].reshape(-1)
    return _back(outs, dtype)


gru_layer_op = _op(
    "_gru_layer(Tensor xp, Tensor h0, Tensor w_hh, Tensor? b_hh, int[] batch_sizes, bool reverse) "
    "-> (Tensor, Tensor, Tensor, Tensor)", _gru_layer_kernel)
gru_layer_backward_op = _op(
    "_gru_layer_backward(Tensor? grad_out, Tensor? grad_h_n, Tensor rzn, Tensor ghn, Tensor out, Tensor h0, "
    "Tensor w_hh, bool has_bias, int[] batch_sizes, bool reverse) -> (Tensor, Tensor, Tensor, Tensor)",
    _gru_layer_backward_kernel)
