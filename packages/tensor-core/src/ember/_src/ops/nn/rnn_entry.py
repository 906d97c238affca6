"""ATen's flat-parameter recurrent functions at top level: ``torch.rnn_tanh``, ``rnn_relu``,
``lstm`` and ``gru`` (input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
batch_first). Composed from the single-step cells of aten_entry_points (one step per frame and
direction), so autograd comes with them; ``nn.RNN/LSTM/GRU`` keep their fused layers. The
packed-sequence form (data, batch_sizes, ...) is not provided (docs/deviations.md)."""

from __future__ import annotations

from ...optable import declare
from ...tensor import Tensor
from . import aten_entry_points as _cells
from . import embedding_dropout as _dropout


def _run(kind: str, input: Tensor, hx, params, has_biases: bool, num_layers: int, dropout: float, train: bool,
         bidirectional: bool, batch_first: bool):
    import ember

    if not isinstance(input, Tensor):
        raise TypeError(f"{kind}(): argument 'input' must be Tensor, not {type(input).__name__}")
    if isinstance(hx, Tensor) and hx.ndim == 1 and hx.dtype is ember.int64:
        raise RuntimeError(f"ember.{kind}: the packed-sequence form (data, batch_sizes, ...) is not supported; use "
                           f"nn.{ {'lstm': 'LSTM', 'gru': 'GRU'}.get(kind, 'RNN') } with a PackedSequence")
    params = list(params)
    dirs = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    if len(params) != num_layers * dirs * per:
        raise RuntimeError(f"{kind}: expected {num_layers * dirs * per} parameter tensors for {num_layers} layer(s), "
                           f"{dirs} direction(s) {'with' if has_biases else 'without'} biases, got {len(params)} "
                           "(projections are not supported)")
    unbatched = input.ndim == 2
    x = input.unsqueeze(1) if unbatched else (input.transpose(0, 1) if batch_first else input)
    if kind == "lstm":
        h0, c0 = hx
        if unbatched:
            h0, c0 = h0.unsqueeze(1), c0.unsqueeze(1)
    else:
        h0, c0 = (hx.unsqueeze(1) if unbatched else hx), None
    cell = {"rnn_tanh": _cells.rnn_tanh_cell, "rnn_relu": _cells.rnn_relu_cell, "lstm": _cells.lstm_cell,
            "gru": _cells.gru_cell}[kind]
    h_n, c_n = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            k = (layer * dirs + d) * per
            w_ih, w_hh = params[k], params[k + 1]
            b_ih, b_hh = (params[k + 2], params[k + 3]) if has_biases else (None, None)
            h = h0[layer * dirs + d]
            c = c0[layer * dirs + d] if c0 is not None else None
            steps = range(x.shape[0]) if d == 0 else range(x.shape[0] - 1, -1, -1)
            seq = [None] * x.shape[0]
            for t in steps:
                if c is not None:
                    h, c = cell(x[t], (h, c), w_ih, w_hh, b_ih, b_hh)
                else:
                    h = cell(x[t], h, w_ih, w_hh, b_ih, b_hh)
                seq[t] = h
            outs.append(ember.stack(seq) if seq else x.new_zeros((0,) + tuple(h.shape)))
            h_n.append(h)
            if c is not None:
                c_n.append(c)
        x = outs[0] if dirs == 1 else ember.cat(outs, -1)
        if dropout and train and layer < num_layers - 1:
            x = _dropout.dropout(x, dropout, True)
    out = x.squeeze(1) if unbatched else (x.transpose(0, 1) if batch_first else x)
    h_n = ember.stack(h_n)
    if unbatched:
        h_n = h_n.squeeze(1)
    if kind != "lstm":
        return out, h_n
    c_n = ember.stack(c_n)
    return out, h_n, c_n.squeeze(1) if unbatched else c_n


def rnn_tanh(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    return _run("rnn_tanh", input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)


def rnn_relu(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    return _run("rnn_relu", input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)


def lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    return _run("lstm", input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)


def gru(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    return _run("gru", input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)


declare(__name__, """
rnn_tanh    function
rnn_relu    function
lstm        function
gru         function
""")
