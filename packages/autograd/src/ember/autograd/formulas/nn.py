"""Derivatives of the fused nn kernels (embedding, norms, pooling, padding, upsampling,
attention), computed by their native backward ops. Those backward ops have no derivative
of their own yet: differentiating them again raises. Registered when the op exists.
"""

from __future__ import annotations

import math

import ember

from ._common import arg, not_implemented, register_if_defined

OPS = ember.ops


def _needs(x) -> bool:
    return isinstance(x, ember.Tensor) and x.requires_grad


def _embedding(grads, inputs, outputs):
    weight, indices = inputs.args[0], inputs.args[1]
    padding_idx = arg(inputs, 2, "padding_idx", -1)
    scale = arg(inputs, 3, "scale_grad_by_freq", False)
    if arg(inputs, 4, "sparse", False):
        return _embedding_sparse_grad(grads[0], indices, weight, padding_idx, scale), None
    return OPS["embedding_dense_backward"](grads[0], indices, weight.shape[0], padding_idx, scale), None


def _embedding_sparse_grad(g, indices, weight, padding_idx, scale):
    """PyTorch's embedding_sparse_backward: one uncoalesced COO row per looked-up index (the rows
    of padding_idx dropped)."""
    if scale:
        raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with sparse gradients")
    flat = indices.reshape(-1).long()
    rows = g.reshape(-1, weight.shape[1])
    if padding_idx is not None and padding_idx >= 0:
        keep = (flat != padding_idx).nonzero().reshape(-1)
        flat, rows = flat.index_select(0, keep), rows.index_select(0, keep)
    return ember.sparse_coo_tensor(flat.unsqueeze(0), rows, tuple(weight.shape))


def _layer_norm(grads, inputs, outputs):
    g = grads[0]
    x, shape, weight, bias = (inputs.args[i] for i in range(4))
    grad_x = _stats_grad(x, len(shape), outputs[1], outputs[2], grads[1:])
    if g is None:
        return grad_x, None, None, None
    want_w, want_b = weight is not None and _needs(weight), bias is not None and _needs(bias)
    if not ember.is_grad_enabled() and grad_x is None:
        # A first-order backward: the kernel gives the weight and bias gradients in the same pass
        # (its per-row g * x_hat and the column sums), not four dispatched ops more.
        gx, gw, gb = OPS["native_layer_norm_backward"](g, x, shape, outputs[1], outputs[2], weight, bias,
                                                       [_needs(x), want_w, want_b])
        return gx, None, gw, gb
    if _needs(x):
        gx = OPS["native_layer_norm_backward"](g, x, shape, outputs[1], outputs[2], weight, bias,
                                               [True, False, False])[0]
        grad_x = gx if grad_x is None else grad_x + gx
    # weight/bias: sums over the leading (non-normalized) dims, from the saved statistics.
    lead = tuple(range(x.ndim - len(shape)))
    grad_w = grad_b = None
    if _needs(weight):
        x_hat = (x - outputs[1]) * outputs[2]
        grad_w = (g * x_hat).sum(lead) if lead else g * x_hat
    if _needs(bias):
        grad_b = g.sum(lead) if lead else g
    return grad_x, None, grad_w, grad_b


def _rms_norm(grads, inputs, outputs):
    # y = x r w with r = rsqrt(mean(x^2) + eps) over the normalized dims:
    # gx = r (g w - x_hat mean(g w x_hat)) - g_r r^3 x / N, gw = sum over the leading dims of g x_hat.
    g, g_rstd = grads[0], grads[1] if len(grads) > 1 else None
    x, shape, weight = inputs.args[0], inputs.args[1], inputs.args[2]
    rstd = outputs[1]
    dims = tuple(range(x.ndim - len(shape), x.ndim))
    lead = tuple(range(x.ndim - len(shape)))
    half = x.dtype in (ember.bfloat16, ember.float16)
    if half and not ember.is_grad_enabled():
        # gw - x_hat * mean(gw * x_hat) cancels: computed in float32, as PyTorch does for half
        # types (in bfloat16 a 1-element row's gradient came out 0.47 instead of ~0).
        def up(t):
            return None if t is None else t.float()

        gx, gw = _rms_norm_core(up(g), up(g_rstd), up(x), shape, up(weight), up(rstd), dims, lead)
        return (None if gx is None else gx.to(x.dtype)), None, (None if gw is None else gw.to(weight.dtype))
    if ember.is_grad_enabled():  # create_graph: rstd must be a differentiable function of x
        rstd = ((x * x).mean(dims, keepdim=True) + inputs.args[3]).rsqrt()
    grad_x, grad_w = _rms_norm_core(g, g_rstd, x, shape, weight, rstd, dims, lead)
    return grad_x, None, grad_w


def _rms_norm_core(g, g_rstd, x, shape, weight, rstd, dims, lead):
    grad_x = grad_w = None
    if g is not None:
        x_hat = x * rstd
        gw = g * weight if weight is not None else g
        grad_x = rstd * (gw - x_hat * (gw * x_hat).mean(dims, keepdim=True))
        if weight is not None:
            grad_w = (g * x_hat).sum(lead) if lead else g * x_hat
    if g_rstd is not None:
        n = 1
        for d in dims:
            n *= x.shape[d]
        extra = -(g_rstd * rstd * rstd * rstd) * x / n
        grad_x = extra if grad_x is None else grad_x + extra
    return grad_x, grad_w


def _stats_grad(x, ndims, mean, rstd, grads):
    """x's gradient through the saved statistics (mean, rstd) over its last ``ndims`` dims: they are
    outputs too, and the weight gradient reads them, so a double backward reaches them."""
    g_mean, g_rstd = (tuple(grads) + (None, None))[:2]
    if g_mean is None and g_rstd is None:
        return None
    n = 1
    for d in x.shape[x.ndim - ndims:]:
        n *= d
    grad = ember.zeros(tuple(x.shape), dtype=x.dtype)
    if g_mean is not None:
        grad = grad + g_mean / n
    if g_rstd is not None:
        grad = grad - (g_rstd * rstd * rstd * rstd) * (x - mean) / n
    return grad


def _batch_norm(grads, inputs, outputs):
    g = grads[0]
    if g is None:
        return (None,)
    x, weight, bias = inputs.args[0], inputs.args[1], inputs.args[2]
    training, eps = arg(inputs, 5, "training"), arg(inputs, 7, "eps")
    # Training normalizes with the batch's own statistics (outputs 1 and 2): the running ones are
    # not read, and not unpacked, since a second forward of the same module updates them in place
    # before this backward runs (a siamese network's shared BatchNorm), which is no error in PyTorch.
    running_mean, running_var = (None, None) if training else (inputs.args[3], inputs.args[4])
    mask = [_needs(x), _needs(weight), _needs(bias)]
    return tuple(OPS["native_batch_norm_backward"](g, x, weight, running_mean, running_var, outputs[1], outputs[2],
                                                   training, eps, mask))


def _group_norm(grads, inputs, outputs):
    g = grads[0]
    if g is None:
        return (None,)
    x, weight, bias = inputs.args[0], inputs.args[1], inputs.args[2]
    n, c, hw, group = (arg(inputs, i, name) for i, name in ((3, "N"), (4, "C"), (5, "HxW"), (6, "group")))
    mask = [_needs(x), _needs(weight), _needs(bias)]
    return tuple(OPS["native_group_norm_backward"](g, x, outputs[1], outputs[2], weight, n, c, hw, group, mask))


def _max_pool2d(grads, inputs, outputs):
    x = inputs.args[0]
    params = list(inputs.args[1:6])
    indices = OPS["max_pool2d_with_indices"](x.detach(), *params)[1]
    return (OPS["max_pool2d_with_indices_backward"](grads[0], x, *params, indices),)


def _max_pool2d_with_indices(grads, inputs, outputs):
    if grads[0] is None:
        return (None,)
    x = inputs.args[0]
    return (OPS["max_pool2d_with_indices_backward"](grads[0], x, *inputs.args[1:6], outputs[1]),)


def _avg_pool2d(grads, inputs, outputs):
    return (OPS["avg_pool2d_backward"](grads[0], *inputs.args),)


def _adaptive_avg_pool2d(grads, inputs, outputs):
    return (OPS["_adaptive_avg_pool2d_backward"](grads[0], inputs.args[0]),)


def _adaptive_max_pool2d(grads, inputs, outputs):
    if grads[0] is None:
        return (None,)
    return (OPS["adaptive_max_pool2d_backward"](grads[0], inputs.args[0], outputs[1]),)


def _constant_pad(grads, inputs, outputs):
    # Padding is undone by the opposite padding (negative pads crop).
    pad = arg(inputs, 1, "pad")
    return (OPS["constant_pad_nd"](grads[0], [-p for p in pad], 0),)


def _pad_enum(grads, inputs, outputs):
    x, pad, mode = inputs.args[0], arg(inputs, 1, "pad"), arg(inputs, 2, "mode")
    return (OPS["_pad_enum_backward"](grads[0], x, pad, mode),)


def _upsample(grads, inputs, outputs):
    x = inputs.args[0]
    mode, align, scales = arg(inputs, 2, "mode"), arg(inputs, 3, "align_corners"), arg(inputs, 4, "scales")
    return (OPS["_upsample_backward"](grads[0], list(x.shape), mode, align, scales),)


def _attention(grads, inputs, outputs):
    # Recomputes softmax(q k^T * scale + mask) with ember ops (differentiable again).
    g = grads[0]
    q, k, v = inputs.args[0], inputs.args[1], inputs.args[2]
    mask = arg(inputs, 3, "attn_mask", None)
    dropout_p, is_causal = arg(inputs, 4, "dropout_p", 0.0), arg(inputs, 5, "is_causal", False)
    scale = inputs.kwargs.get("scale")
    if dropout_p:
        # The public function differentiates this case through its parts (softmax, dropout, matmul),
        # as PyTorch's math path: the op itself does not keep its dropout mask.
        raise RuntimeError("scaled_dot_product_attention: the op's dropout mask is not saved; call "
                           "ember.nn.functional.scaled_dot_product_attention to differentiate it")
    rep = 1
    if inputs.kwargs.get("enable_gqa", False) and q.ndim >= 3 and k.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        rep = q.shape[-3] // k.shape[-3]  # grouped heads: each key/value head serves rep query heads
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if _native_attention_backward(g, q, k, v, mask, rep, inputs.kwargs.get("enable_gqa", False)):
        return OPS["_scaled_dot_product_attention_math_backward"](g, q, k, v, mask, bool(is_causal), float(scale))
    if rep > 1:
        k, v = _repeat_heads(k, rep), _repeat_heads(v, rep)
    scores = ember.matmul(q, k.transpose(-2, -1)) * scale
    if is_causal:
        dev = q.device  # index comparisons (the same mask as tril) on q's device
        keep = ember.arange(q.shape[-2], device=dev).unsqueeze(1) >= ember.arange(k.shape[-2], device=dev).unsqueeze(0)
        scores = scores.masked_fill(keep.logical_not(), float("-inf"))
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), float("-inf")) if mask.dtype is ember.bool else scores + mask
    # A row whose every key is hidden (all -inf) has zero probabilities, as PyTorch's _safe_softmax:
    # its scores are replaced before the softmax so that no NaN enters this graph (a NaN there turns
    # the masked_fill's zeros back into NaN under double backward).
    dead = (scores == float("-inf")).all(-1, keepdim=True)
    p = ember.softmax(scores.masked_fill(dead, 0.0), -1).masked_fill(dead, 0.0)
    grad_v = ember.matmul(p.transpose(-2, -1), g)
    grad_p = ember.matmul(g, v.transpose(-2, -1))
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True)) * scale
    grad_k = ember.matmul(grad_s.transpose(-2, -1), q)
    if rep > 1:
        grad_k, grad_v = _sum_heads(grad_k, rep), _sum_heads(grad_v, rep)
    return ember.matmul(grad_s, k), grad_k, grad_v


def _native_attention_backward(g, q, k, v, mask, rep, enable_gqa) -> bool:
    """Whether the one native pass (``_scaled_dot_product_attention_math_backward``) applies: no graph
    of the backward is recorded, plain tensors of a device with the kernel, one batch shape, and
    key/value heads equal to the query's or grouped; broadcast batch or head dims take the composite."""
    if ember.is_grad_enabled() or g is None:
        return False
    if any(type(t) is not ember.Tensor for t in (g, q, k, v)) or (mask is not None and type(mask) is not ember.Tensor):
        return False
    if q.device.type not in OPS["_scaled_dot_product_attention_math_backward"].kernels:
        return False
    if not (q.ndim == k.ndim == v.ndim == g.ndim >= 3) or not q.is_floating_point():
        return False
    if not (tuple(q.shape[:-3]) == tuple(k.shape[:-3]) == tuple(v.shape[:-3])) or k.shape[-3] != v.shape[-3]:
        return False
    return k.shape[-3] == q.shape[-3] or (enable_gqa and rep > 1)


def _flash_attention(grads, inputs, outputs):
    # The fused pair's backward rebuilds the probabilities from the saved log-sum-exp; the
    # log-sum-exp output itself is a statistic without a gradient of its own.
    g = grads[0]
    q, k, v, mask, is_causal, scale = inputs.args[:6]
    out, lse = outputs[0], outputs[1]
    if g is None:
        return None, None, None
    # No .contiguous(): the kernels read strided gradients (one arriving through the usual
    # transpose(1, 2) of the output is laid out like it, and copying it would cost a pass).
    grad_q, grad_k, grad_v = OPS["_scaled_dot_product_flash_attention_backward"](
        g, q, k, v, out, lse, mask, is_causal, scale)
    return grad_q, grad_k, grad_v


def _repeat_heads(t, rep):
    lead, (heads, rows, width) = tuple(t.shape[:-3]), tuple(t.shape[-3:])
    return t.unsqueeze(-3).expand(*lead, heads, rep, rows, width).reshape(*lead, heads * rep, rows, width)


def _sum_heads(t, rep):
    lead, (heads, rows, width) = tuple(t.shape[:-3]), tuple(t.shape[-3:])
    return t.reshape(*lead, heads // rep, rep, rows, width).sum(-3)


def _binary_cross_entropy(grads, inputs, outputs):
    # PyTorch's formulas: d/dx = w (x - t) / max(x (1 - x), 1e-12) (finite where x is 0 or 1),
    # d/dt = -w logit(x); the weight gets no gradient.
    x, target = inputs.args[0], inputs.args[1]
    weight, reduction = arg(inputs, 2, "weight"), arg(inputs, 3, "reduction", 1)
    g = grads[0]
    if reduction == 1:
        g = g / x.numel()
    if weight is not None:
        g = g * weight
    grad_x = grad_t = None
    if _needs(x):
        grad_x = g * (x - target) / ember.clamp_min((1 - x) * x, 1e-12)
    if _needs(target):
        grad_t = g * ember.neg(ember.logit(x))
    return grad_x, grad_t


def _class_nll(grads, inputs, outputs):
    # nll[r] = -w[t] (x[r, t] - lse[r]); smooth[r] = -(sum_i w[i] x[r, i] - sum(w) lse[r]) for each
    # sample and position r of x (N, C, d1, ...), the classes on dim 1; lse is 0 for
    # log-probability inputs; positions whose target is ignore_index give 0. The forward's lse
    # (its fourth output, saved) lets the one-pass kernel read x once: softmax = exp(x - lse).
    g_nll = grads[0]
    g_smooth = grads[1] if len(grads) > 1 and inputs.args[5] else None
    x, target, weight = inputs.args[0], inputs.args[1], inputs.args[2]
    ignore_index, log_probs = inputs.args[3], inputs.args[4]
    if (not ember.is_grad_enabled() and type(x) is ember.Tensor and (g_nll is None or type(g_nll) is ember.Tensor)
            and x.device.type in OPS["_class_nll_backward"].kernels):
        # One native pass on plain tensors of a device that has the kernel; the composite below
        # stays for double backward (create_graph=True), for ember.func's wrapped tensors (vmap of
        # grad) and for devices without it (CUDA runs the composite's ops).
        lse = None if log_probs or len(outputs) < 4 else outputs[3]
        return (OPS["_class_nll_backward"](g_nll, g_smooth, x, target, weight, ignore_index, log_probs, lse),)
    classes = x.shape[1]
    # x is (N, C, d1, ...): per-class values broadcast as (1, C, 1, ...), per-sample ones as (N, 1, d1, ...).
    class_shape = (1, classes) + (1,) * (x.dim() - 2)
    valid = ember.ne(target, ignore_index)
    safe_target = ember.where(valid, target, ember.zeros((), dtype=target.dtype))
    weights = weight if weight is not None else ember.ones((classes,), dtype=x.dtype, device=x.device)
    probs = None if log_probs else ember.softmax(x, 1)
    grad = ember.zeros(x.shape, dtype=x.dtype, device=x.device)
    if g_nll is not None:
        scaled = (g_nll * OPS["index"](weights, [safe_target])).unsqueeze(1)
        onehot = ember.eq(ember.arange(classes, device=x.device).reshape(class_shape), safe_target.unsqueeze(1))
        grad = grad - scaled * onehot.to(x.dtype)
        if probs is not None:
            grad = grad + scaled * probs
    if g_smooth is not None:
        grad = grad - g_smooth.unsqueeze(1) * weights.reshape(class_shape)
        if probs is not None:
            grad = grad + (g_smooth * weights.sum()).unsqueeze(1) * probs
    return (grad * valid.unsqueeze(1).to(x.dtype),)


register_if_defined("_class_nll", _class_nll, save_output=(3,), nondiff_outputs=(3,))
register_if_defined("binary_cross_entropy", _binary_cross_entropy)
register_if_defined("embedding", _embedding, meta_args=(0,))  # the weight: only its shape is read
register_if_defined("native_layer_norm", _layer_norm, save_output=(1, 2))
register_if_defined("_fused_rms_norm", _rms_norm, save_output=(1, 2))
register_if_defined("native_batch_norm", _batch_norm, save_output=(1, 2))
register_if_defined("native_group_norm", _group_norm, save_output=(1, 2))
register_if_defined("max_pool2d", _max_pool2d)
register_if_defined("max_pool2d_with_indices", _max_pool2d_with_indices, save_output=(1, 2))
register_if_defined("avg_pool2d", _avg_pool2d)
register_if_defined("_adaptive_avg_pool2d", _adaptive_avg_pool2d)
register_if_defined("adaptive_max_pool2d", _adaptive_max_pool2d, save_output=(1, 2))
register_if_defined("constant_pad_nd", _constant_pad)
register_if_defined("_pad_enum", _pad_enum)
register_if_defined("_upsample", _upsample)
register_if_defined("scaled_dot_product_attention", _attention)
register_if_defined("_scaled_dot_product_flash_attention", _flash_attention, save_output=True)
# PyTorch has no derivative of the fused backward either (double backward through it raises).
register_if_defined("_scaled_dot_product_flash_attention_backward",
                    not_implemented("_scaled_dot_product_flash_attention_backward", NotImplementedError))
