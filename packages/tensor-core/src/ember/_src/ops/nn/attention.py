"""scaled_dot_product_attention: a fused native kernel (``_C.sdpa``) per block of query rows of
each (batch, head): BLAS gemms around an in-buffer mask + softmax, parallel over the blocks.

With dropout_p > 0 the attention weights must exist to be dropped, so that case composes
matmul, softmax and dropout instead.
"""

from __future__ import annotations

import math

from ... import dtypes
from ..._native import _C
from ...device import META
from ...dispatch import define
from ...grad_mode import is_grad_enabled
from ...optable import declare
from ...shapes import broadcast_shapes, numel
from ...tensor import Tensor, new_empty_tensor
from .._common import compute_dtype, convert, type_meta_name, type_name
from ..creation.factories import full, ones
from ..pointwise.elementwise import where
from .embedding_dropout import dropout


def _additive_mask(attn_mask: Tensor | None, dtype) -> Tensor | None:
    """Bool masks (True = attend) become 0 / -inf; float masks are added as they are."""

    if attn_mask is None:
        return None
    if attn_mask.dtype is dtypes.bool:
        zero = full((), 0.0, dtype=dtype, device=attn_mask._device)
        return where(attn_mask, zero, zero - math.inf)
    return convert(attn_mask, dtype)


def _as_4d(t: Tensor, batch: tuple) -> Tensor:
    """(*batch, H, L, E) -> (B, H, L, E) with contiguous rows, which is all the native kernels
    need: head-split views of a projection (MultiheadAttention's q, k, v) run without a copy."""
    lead = t.ndim - 3
    if t.ndim < 3:
        t = t.reshape((1,) * (3 - t.ndim) + tuple(t._shape))
    heads, rows, width = t._shape[-3:]
    t = t.expand(*batch, heads, rows, width) if lead >= 0 else t
    t = t.reshape(numel(batch), heads, rows, width)
    return t if _rows_contiguous(t) else t.contiguous()


def _rows_contiguous(t: Tensor) -> bool:
    """Whether the kernels can read ``t`` (4-d) in place: unit stride along the last dim, rows that
    do not overlap, no negative stride (the native check, attention.cpp's rows_4d)."""
    shape, stride = t._shape, t._stride
    width = max(shape[3], 1)
    row = stride[2] if shape[2] > 1 else width
    return (shape[3] <= 1 or stride[3] == 1) and width <= row < 2 ** 31 and min(stride[:3]) >= 0


def _empty_like_rows(like: Tensor, shape: tuple, dtype) -> Tensor:
    """An empty 4-d tensor of ``shape`` whose dims lie in memory in the order of ``like``'s (as
    ``empty_like`` keeps a layout; PyTorch's CPU attention keeps the query's), when that order
    keeps the last dim innermost; else contiguous. MultiheadAttention's head-split views thus get
    an output that its (L, N, E) or (N, L, E) reshape takes as a view."""
    order = sorted(range(4), key=lambda d: (-like._stride[d], d))
    if order[-1] != 3 or order == [0, 1, 2, 3]:
        return new_empty_tensor(shape, dtype, like._device)
    stored = new_empty_tensor(tuple(shape[d] for d in order), dtype, like._device)
    return stored.permute([order.index(d) for d in range(4)])


def _sdpa_kernel(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                 enable_gqa=False):
    out_shape = tuple(query._shape[:-1]) + (value._shape[-1],)
    if query._device is META:
        return new_empty_tensor(out_shape, query.dtype, META)
    cd = compute_dtype(query.dtype)
    e = query._shape[-1]
    scale = 1.0 / math.sqrt(e) if scale is None else float(scale)
    if dropout_p > 0.0:
        return _sdpa_composite(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    batch = broadcast_shapes(tuple(query._shape[:-3]), tuple(key._shape[:-3]), tuple(value._shape[:-3]))
    q = _as_4d(convert(query, cd), batch)
    k = _as_4d(convert(key, cd), batch)
    v = _as_4d(convert(value, cd), batch)
    if k._shape[1] != q._shape[1] and not enable_gqa:
        # Without GQA, heads broadcast like any other batch dim.
        k = k.expand(k._shape[0], q._shape[1], *k._shape[2:]).contiguous()
        v = v.expand(v._shape[0], q._shape[1], *v._shape[2:]).contiguous()
    mask = _additive_mask(attn_mask, cd)
    b, h, lq, s = q._shape[0], q._shape[1], q._shape[2], k._shape[2]
    if mask is not None:
        full_shape = tuple(batch) + (h, lq, s)
        broadcast_shapes(full_shape, tuple(mask._shape))  # a mask that does not fit: PyTorch's RuntimeError
        mask = mask.expand(*full_shape).reshape(b, h, lq, s) if len(batch) != 1 or mask.ndim > 4 else mask
    out = _empty_like_rows(q, (b, h, lq, v._shape[3]), cd)
    if out.numel() == 0 or s == 0:  # no keys: the weighted sum is empty, i.e. zeros
        return out.zero_().reshape(out_shape).to(query.dtype)
    _C.sdpa(out, q, k, v, mask, bool(is_causal), scale)
    out = out.reshape(out_shape)
    return out if out.dtype is query.dtype else convert(out, query.dtype)


def _repeat_heads(t: Tensor, rep: int) -> Tensor:
    """Each head ``rep`` times in a row along dim -3 (repeat_interleave)."""
    lead, (heads, rows, width) = tuple(t._shape[:-3]), t._shape[-3:]
    return t.unsqueeze(-3).expand(*lead, heads, rep, rows, width).reshape(*lead, heads * rep, rows, width)


def _sdpa_composite(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    from ..reduction.composite import softmax

    cd = compute_dtype(query.dtype)
    q, k, v = convert(query, cd), convert(key, cd), convert(value, cd)
    if enable_gqa and k.ndim >= 3 and k._shape[-3] != q._shape[-3]:
        rep = q._shape[-3] // k._shape[-3]
        k, v = _repeat_heads(k, rep), _repeat_heads(v, rep)
    scores = (q @ k.transpose(-2, -1)) * scale
    lq, s = q._shape[-2], k._shape[-2]
    if is_causal:
        keep = ones((lq, s), dtype=dtypes.bool, device=q._device).tril()
        scores = scores + _additive_mask(keep, cd)
    if attn_mask is not None:
        scores = scores + _additive_mask(attn_mask, cd)
    # Fully masked rows (every score -inf): zeros, as the fused kernel and PyTorch's _safe_softmax give.
    # The row's scores are replaced before the softmax so that its backward (and double backward)
    # sees no NaN: a NaN weight zeroed afterwards still made the softmax's gradient NaN.
    dead = (scores == float("-inf")).all(-1, keepdim=True)
    weights = softmax(scores.masked_fill(dead, 0.0), -1).masked_fill(dead, 0.0)
    out = dropout(weights, dropout_p, True) @ v
    return out if out.dtype is query.dtype else convert(out, query.dtype)


sdpa_op = define("scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, "
                 "float dropout_p=0.0, bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor",
                 ())
sdpa_op.kernel("cpu")(_sdpa_kernel)
sdpa_op.kernels["meta"] = sdpa_op.meta = _sdpa_kernel


def _sdpa_backward_kernel(grad_out, query, key, value, attn_mask, is_causal, scale):
    """Gradients of the dropout-free attention for query, key and value of one batch shape
    (*batch, H, L, E), with key/value heads Hk dividing H (grouped heads when fewer)."""
    if query._device is META:
        return tuple(new_empty_tensor(tuple(t._shape), t.dtype, META) for t in (query, key, value))
    if not (query.ndim == key.ndim == value.ndim == grad_out.ndim >= 3):
        raise RuntimeError("_scaled_dot_product_attention_math_backward: query, key, value and grad must be "
                           "at least 3-D and of one rank")
    batch = tuple(query._shape[:-3])
    if tuple(key._shape[:-3]) != batch or tuple(value._shape[:-3]) != batch:
        raise RuntimeError("_scaled_dot_product_attention_math_backward: batch dims must match")
    h, hk = query._shape[-3], key._shape[-3]
    if hk == 0 or h % hk != 0:
        raise RuntimeError("_scaled_dot_product_attention_math_backward: key heads must divide query heads")
    cd = compute_dtype(query.dtype)
    q, k, v = (_as_4d(convert(t, cd), batch) for t in (query, key, value))
    g = _as_4d(convert(grad_out, cd), batch)
    mask = _additive_mask(attn_mask, cd)
    b, lq, s = q._shape[0], q._shape[2], k._shape[2]
    if mask is not None:
        full_shape = batch + (h, lq, s)
        mask = mask.expand(*full_shape).reshape(b, h, lq, s) if len(batch) != 1 or mask.ndim > 4 else mask
    gq, gk, gv = (_empty_like_rows(t, tuple(t._shape), cd) for t in (q, k, v))
    _C.sdpa_backward(gq, gk, gv, g, q, k, v, mask, bool(is_causal), float(scale))
    return tuple(convert(grad.reshape(tuple(t._shape)), t.dtype) for grad, t in ((gq, query), (gk, key), (gv, value)))


# The native backward of the dropout-free op above (probabilities rebuilt per block of query rows,
# never stored); ember-autograd's formula calls it when no graph of the backward is recorded.
sdpa_backward_op = define(
    "_scaled_dot_product_attention_math_backward(Tensor grad_out, Tensor query, Tensor key, Tensor value, "
    "Tensor? attn_mask, bool is_causal, float scale) -> (Tensor, Tensor, Tensor)", (), differentiable=False)
sdpa_backward_op.kernel("cpu")(_sdpa_backward_kernel)
sdpa_backward_op.kernels["meta"] = sdpa_backward_op.meta = _sdpa_backward_kernel


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(query @ key^T * scale + mask) @ value, over (..., L, E) / (..., S, E) / (..., S, Ev)."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"scaled_dot_product_attention(): argument '{name}' must be Tensor, "
                            f"not {type(t).__name__}")
    if not (query.dtype is key.dtype is value.dtype):
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got query.dtype: "
                           f"{type_meta_name(query.dtype)} key.dtype: {type_meta_name(key.dtype)} and value.dtype: "
                           f"{type_meta_name(value.dtype)} instead.")
    if not query.is_floating_point():
        raise RuntimeError(f"Expected query, key and value to be floating point, got {type_name(query.dtype)}")
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise RuntimeError("scaled_dot_product_attention: query, key and value must be at least 2-D")
    if query._shape[-1] != key._shape[-1] or key._shape[-2] != value._shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: shape mismatch: query {list(query._shape)}, "
                           f"key {list(key._shape)}, value {list(value._shape)}")
    # PyTorch's CPU choice: its flash kernel (which takes a mask and is_causal together) for 4-D
    # inputs without dropout, else the math path (which refuses the pair).
    cpu_flash = (ENABLED_BACKENDS["flash"] and query._device.type == "cpu" and not dropout_p
                 and query.ndim == key.ndim == value.ndim == 4 and key._shape[1] == value._shape[1])
    if attn_mask is not None:
        if is_causal and not cpu_flash:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when "
                               "is_causal=True")
        if attn_mask.dtype is not dtypes.bool and attn_mask.dtype is not query.dtype:
            raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                               f"attn_mask.dtype: {type_name(attn_mask.dtype)} and  query.dtype: "
                               f"{type_name(query.dtype)} instead.")
    if enable_gqa and query.ndim >= 3 and key.ndim >= 3 and value.ndim >= 3:
        hq, hk, hv = query._shape[-3], key._shape[-3], value._shape[-3]
        if hk == 0 or hv == 0 or hq % hk != 0 or hq % hv != 0:
            raise RuntimeError("Number of heads in key and value must divide the number of heads in ")  # sic
        if hk != hv:  # each repeated to the query's heads on its own (the kernels take one ratio)
            key = _repeat_heads(key, hq // hk) if hk != hq else key
            value = _repeat_heads(value, hq // hv) if hv != hq else value
    elif not enable_gqa:
        # the batch dims broadcast as the math path's two matmuls do (a head-count mismatch without
        # enable_gqa is PyTorch's broadcasting error, not an expansion)
        broadcast_shapes(broadcast_shapes(tuple(query._shape[:-2]), tuple(key._shape[:-2])),
                         tuple(value._shape[:-2]))
    if not 0.0 <= dropout_p <= 1.0:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    from .attention_flash import flash_op, routes_to_flash

    flash = ENABLED_BACKENDS["flash"] and routes_to_flash(query, key, value, attn_mask, dropout_p, enable_gqa)
    if not flash and not cpu_flash and not ENABLED_BACKENDS["math"]:
        if ENABLED_BACKENDS["flash"]:
            raise RuntimeError("No available kernel.  Aborting execution.")
        raise RuntimeError("No viable backend for scaled_dot_product_attention was found. This is likely due to "
                           "turning off both the math kernel and the fused kernels.")
    if dropout_p > 0.0 and is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad):
        # Recorded op by op (as PyTorch's math path) so that the backward sees the dropout mask.
        scale = 1.0 / math.sqrt(query._shape[-1]) if scale is None else float(scale)
        return _sdpa_composite(query, key, value, attn_mask, float(dropout_p), bool(is_causal), scale,
                               bool(enable_gqa))
    if flash:
        # A device with a fused kernel pair (CUDA): the forward keeps each row's log-sum-exp so that
        # the backward rebuilds the weights tile by tile instead of storing them.
        scale = 1.0 / math.sqrt(query._shape[-1]) if scale is None else float(scale)
        return flash_op(query, key, value, attn_mask, bool(is_causal), scale)[0]
    return sdpa_op(query, key, value, attn_mask, float(dropout_p), bool(is_causal), scale=scale,
                   enable_gqa=bool(enable_gqa))


scaled_dot_product_attention.__module__ = "ember.nn.functional"

# The implementations scaled_dot_product_attention may choose (ember.nn.attention.sdpa_kernel sets
# them): "math" (the composite on every device) and "flash" (the fused pair, where a device has it).
ENABLED_BACKENDS = {"math": True, "flash": True}


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
is_grad_enabled             function
""")
