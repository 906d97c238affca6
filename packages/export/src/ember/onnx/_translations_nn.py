"""Translations of the nn ops: convolution, pooling, normalization, attention."""

from __future__ import annotations

import math

import numpy as np

from ._builder import UnsupportedOp
from ._translations import arg, dtype_of, register, shape_of


def _pair(v, n):
    return list(v) * n if len(v) == 1 else list(v)


@register("convolution")
def _convolution(b, node):
    x, w, bias, stride, padding, dilation, transposed, output_padding, groups = node.args[:9]
    spatial = len(shape_of(x)) - 2
    pads = _pair(padding, spatial)
    attrs = dict(strides=_pair(stride, spatial), pads=pads + pads, dilations=_pair(dilation, spatial),
                 group=int(groups), kernel_shape=[int(k) for k in shape_of(w)[2:]])
    inputs = [b.value(x), b.value(w)] + ([b.value(bias)] if bias is not None else [])
    if transposed:
        return b.emit("ConvTranspose", inputs, output_padding=_pair(output_padding, spatial), **attrs)
    return b.emit("Conv", inputs, **attrs)


def _pool_attrs(node, spatial):
    kernel, stride, padding = node.args[1], node.args[2], node.args[3]
    stride = stride if stride else kernel
    pads = _pair(padding, spatial)
    return dict(kernel_shape=_pair(kernel, spatial), strides=_pair(stride, spatial), pads=pads + pads)


@register("max_pool2d", "max_pool2d_with_indices")
def _max_pool(b, node):
    x = node.args[0]
    dilation, ceil_mode = node.args[4], node.args[5]
    attrs = _pool_attrs(node, 2)
    out = b.emit("MaxPool", [b.value(x)], dilations=_pair(dilation, 2), ceil_mode=int(bool(ceil_mode)), **attrs)
    if node.target.name == "max_pool2d":
        return out
    # ONNX numbers MaxPool indices over the whole tensor, ember over each plane: offer only the values.
    return [out, None]


@register("avg_pool2d")
def _avg_pool(b, node):
    x = node.args[0]
    ceil_mode, count_include_pad, divisor = node.args[4], node.args[5], arg(node, 6, "divisor_override")
    if divisor is not None:
        raise UnsupportedOp("avg_pool2d with divisor_override")
    return b.emit("AveragePool", [b.value(x)], ceil_mode=int(bool(ceil_mode)),
                  count_include_pad=int(bool(count_include_pad)), **_pool_attrs(node, 2))


@register("_adaptive_avg_pool2d")
def _adaptive_avg_pool(b, node):
    x, out_size = node.args[0], node.args[1]
    if all(int(s) == 1 for s in out_size):
        return b.emit("GlobalAveragePool", [b.value(x)])
    in_h, in_w = shape_of(x)[2:]
    if not all(isinstance(s, int) for s in (in_h, in_w)) or in_h % out_size[0] or in_w % out_size[1]:
        raise UnsupportedOp("_adaptive_avg_pool2d to a size that does not divide the (static) input size")
    kernel = [in_h // out_size[0], in_w // out_size[1]]
    return b.emit("AveragePool", [b.value(x)], kernel_shape=kernel, strides=kernel)


def _per_channel(b, t, c, fill, dt):
    return b.value(t) if t is not None else b.const(np.full((c,), fill), dt)


@register("native_batch_norm")
def _batch_norm(b, node):
    x, w, bias, rm, rv, training, momentum, eps = node.args[:8]
    if training and rm is None and rv is None:
        return [_batch_statistics_norm(b, x, w, bias, float(eps)), None, None]
    if training:
        raise UnsupportedOp("native_batch_norm in training mode (export the model in eval mode)")
    c = shape_of(x)[1]
    dt = dtype_of(x)
    out = b.emit("BatchNormalization", [b.value(x), _per_channel(b, w, c, 1.0, dt), _per_channel(b, bias, c, 0.0, dt),
                                        b.value(rm), b.value(rv)], epsilon=float(eps), momentum=1 - float(momentum))
    return [out, None, None]


def _batch_statistics_norm(b, x, w, bias, eps):
    """Normalization by the batch's own statistics (InstanceNorm, BatchNorm without running
    stats): mean and biased variance over every axis but the channels."""
    shape = shape_of(x)
    rank, dt = len(shape), dtype_of(x)
    axes = b.const(np.array([0, *range(2, rank)], dtype=np.int64))
    xv = b.value(x)
    centered = b.emit("Sub", [xv, b.emit("ReduceMean", [xv, axes], keepdims=1)])
    var = b.emit("ReduceMean", [b.emit("Mul", [centered, centered]), axes], keepdims=1)
    inv = b.emit("Reciprocal", [b.emit("Sqrt", [b.emit("Add", [var, b.const(eps, dt)])])])
    y = b.emit("Mul", [centered, inv])
    channel_shape = b.const(np.array([1, -1] + [1] * (rank - 2), dtype=np.int64))  # channels may be symbolic
    if w is not None:
        y = b.emit("Mul", [y, b.emit("Reshape", [b.value(w), channel_shape])])
    if bias is not None:
        y = b.emit("Add", [y, b.emit("Reshape", [b.value(bias), channel_shape])])
    return y


@register("native_layer_norm")
def _layer_norm(b, node):
    x, normalized_shape, w, bias, eps = node.args[:5]
    dt = dtype_of(x)
    axis = -len(normalized_shape)
    scale = b.value(w) if w is not None else b.const(np.ones(tuple(normalized_shape)), dt)
    inputs = [b.value(x), scale] + ([b.value(bias)] if bias is not None else [])
    y, mean, inv = b.emit("LayerNormalization", inputs, n_out=3, axis=axis, epsilon=float(eps))
    return [y, mean, inv]


@register("native_group_norm")
def _group_norm(b, node):
    x, w, bias, n, c, hw, group, eps = node.args[:8]
    dt = dtype_of(x)
    xs = b.value(x)
    # Normalize each group as one row, then apply the per-channel affine transform.
    grouped = b.emit("Reshape", [xs, b.ints([n, group, -1])])
    axes = b.const(np.array([2], dtype=np.int64))
    mean = b.emit("ReduceMean", [grouped, axes], keepdims=1)
    centered = b.emit("Sub", [grouped, mean])
    var = b.emit("ReduceMean", [b.emit("Mul", [centered, centered]), axes], keepdims=1)
    normed = b.emit("Div", [centered, b.emit("Sqrt", [b.emit("Add", [var, b.const(eps, dt)])])])
    out = b.emit("Reshape", [normed, b.emit("Shape", [xs])])
    rank = len(shape_of(x))
    chan_shape = b.const(np.array([c] + [1] * (rank - 2), dtype=np.int64))
    if w is not None:
        out = b.emit("Mul", [out, b.emit("Reshape", [b.value(w), chan_shape])])
    if bias is not None:
        out = b.emit("Add", [out, b.emit("Reshape", [b.value(bias), chan_shape])])
    return [out, None, None]


def _causal_bias(b, lq, lk, dt, zero, neg_inf) -> str:
    """The [lq, lk] additive causal mask (0 on and below the diagonal, -inf above), built once per size."""
    key = ("causal", str(lq), str(lk), str(dt))
    if key not in b._consts:
        from onnx import numpy_helper

        ones = b.emit("ConstantOfShape", [b.ints([lq, lk])],
                      value=numpy_helper.from_array(np.array([1], dtype=np.int64), "value"))
        keep = b.emit("Cast", [b.emit("Trilu", [ones], upper=0)], to=9)
        b._consts[key] = b.emit("Where", [keep, zero, neg_inf])
    return b._consts[key]


@register("scaled_dot_product_attention")
def _sdpa(b, node):
    q, k, v = node.args[:3]
    mask = arg(node, 3, "attn_mask")
    dropout, causal = arg(node, 4, "dropout_p", 0.0), arg(node, 5, "is_causal", False)
    scale, gqa = node.kwargs.get("scale"), node.kwargs.get("enable_gqa", False)
    if dropout:
        raise UnsupportedOp("scaled_dot_product_attention with dropout_p > 0")
    qs, ks = shape_of(q), shape_of(k)
    if gqa and len(qs) >= 3 and qs[-3] != ks[-3]:
        raise UnsupportedOp("scaled_dot_product_attention with enable_gqa and fewer key/value heads")
    dt = dtype_of(q)
    scale = 1 / math.sqrt(qs[-1]) if scale is None else scale
    if not isinstance(scale, (int, float)):
        raise UnsupportedOp("scaled_dot_product_attention with a symbolic head size")
    rank = len(ks)
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    kt = b.emit("Transpose", [b.value(k)], perm=perm)
    scores = b.emit("Mul", [b.emit("MatMul", [b.value(q), kt]), b.const(scale, dt)])
    neg_inf = b.const(-np.inf, dt)
    zero = b.const(0.0, dt)
    if causal:
        scores = b.emit("Add", [scores, _causal_bias(b, qs[-2], ks[-2], dt, zero, neg_inf)])
    if mask is not None:
        if dtype_of(mask) is not None and not dtype_of(mask).is_floating_point:
            scores = b.emit("Add", [scores, b.emit("Where", [b.value(mask), zero, neg_inf])])
        else:
            scores = b.emit("Add", [scores, b.value(mask)])
    probs = b.emit("Softmax", [scores], axis=-1)
    return b.emit("MatMul", [probs, b.value(v)])


def _time_major(b, batch_sizes, h0, width: int) -> str:
    """The shape [steps, batch, width] of a layer op's projections as ONNX's X: ``batch_sizes``
    counts the steps; empty (an unpacked sequence), the steps are what ``h0``'s batch leaves."""
    if batch_sizes:
        return b.const(np.array([len(batch_sizes), -1, width], dtype=np.int64))
    return b.ints([-1, shape_of(h0)[0], width])


# ONNX orders LSTM gates (input, output, forget, cell); ember (as PyTorch) (input, forget, cell, output).
_ONNX_GATE_FROM_EMBER = [0, 3, 1, 2]


@register("_lstm_layer")
def _lstm_layer(b, node):
    """One LSTM layer over precomputed input projections ``xp`` ([T*B, 4H], time-major rows) as
    ONNX ``LSTM``: X is ``xp`` viewed [T, B, 4H] and W a gate-reordering permutation, so the
    projections pass through unchanged; R is ``w_hh`` with its gate blocks reordered."""
    xp, h0, c0, w_hh, w_hr, batch_sizes, reverse = node.args[:7]
    from ember.export._ranges import as_expr

    if w_hr is not None:
        raise UnsupportedOp("LSTM with proj_size")
    if batch_sizes and len({as_expr(s) for s in batch_sizes}) != 1:
        raise UnsupportedOp("a packed sequence (PackedSequence) through an LSTM")
    hidden = int(shape_of(w_hh)[0]) // 4
    dt = dtype_of(xp)
    rows = np.concatenate([np.arange(k * hidden, (k + 1) * hidden) for k in _ONNX_GATE_FROM_EMBER])
    perm = np.zeros((1, 4 * hidden, 4 * hidden))
    perm[0, np.arange(4 * hidden), rows] = 1.0
    x = b.emit("Reshape", [b.value(xp), _time_major(b, batch_sizes, h0, 4 * hidden)])
    r = b.emit("Unsqueeze", [b.emit("Gather", [b.value(w_hh), b.const(rows.astype(np.int64))], axis=0),
                             b.const(np.array([0], dtype=np.int64))])
    axis0 = b.const(np.array([0], dtype=np.int64))
    h = b.emit("Unsqueeze", [b.value(h0), axis0])
    c = b.emit("Unsqueeze", [b.value(c0), axis0])
    y, y_h, y_c = b.emit("LSTM", [x, b.const(perm, dt), r, None, None, h, c], n_out=3, hidden_size=hidden,
                         direction="reverse" if reverse else "forward")
    out = b.emit("Reshape", [y, b.const(np.array([-1, hidden], dtype=np.int64))])
    return [out, b.emit("Squeeze", [y_h, axis0]), b.emit("Squeeze", [y_c, axis0]), None, None, None, None]


# ONNX orders GRU gates (update z, reset r, hidden h); ember (as PyTorch) (reset, update, new).
_ONNX_GRU_GATE_FROM_EMBER = [1, 0, 2]


@register("_gru_layer")
def _gru_layer(b, node):
    """One GRU layer over precomputed input projections as ONNX ``GRU`` (``linear_before_reset=1``,
    PyTorch's formula): W a gate-reordering permutation, R and the recurrence bias reordered."""
    xp, h0, w_hh, b_hh, batch_sizes, reverse = node.args[:6]
    from ember.export._ranges import as_expr

    if batch_sizes and len({as_expr(s) for s in batch_sizes}) != 1:
        raise UnsupportedOp("a packed sequence (PackedSequence) through a GRU")
    hidden = int(shape_of(w_hh)[0]) // 3
    dt = dtype_of(xp)
    rows = np.concatenate([np.arange(k * hidden, (k + 1) * hidden) for k in _ONNX_GRU_GATE_FROM_EMBER])
    perm = np.zeros((1, 3 * hidden, 3 * hidden))
    perm[0, np.arange(3 * hidden), rows] = 1.0
    index = b.const(rows.astype(np.int64))
    axis0 = b.const(np.array([0], dtype=np.int64))
    x = b.emit("Reshape", [b.value(xp), _time_major(b, batch_sizes, h0, 3 * hidden)])
    r = b.emit("Unsqueeze", [b.emit("Gather", [b.value(w_hh), index], axis=0), axis0])
    bias = None
    if b_hh is not None:
        rb = b.emit("Gather", [b.value(b_hh), index], axis=0)
        bias = b.emit("Unsqueeze", [b.emit("Concat", [b.const(np.zeros(3 * hidden), dt), rb], axis=0), axis0])
    h = b.emit("Unsqueeze", [b.value(h0), axis0])
    y, y_h = b.emit("GRU", [x, b.const(perm, dt), r, bias, None, h], n_out=2, hidden_size=hidden,
                    linear_before_reset=1, direction="reverse" if reverse else "forward")
    out = b.emit("Reshape", [y, b.const(np.array([-1, hidden], dtype=np.int64))])
    return [out, b.emit("Squeeze", [y_h, axis0]), None, None]
