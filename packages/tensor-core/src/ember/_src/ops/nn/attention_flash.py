"""The fused-attention op pair a device may implement (PyTorch's ``_scaled_dot_product_flash_attention``
and its backward): the forward returns the output and each query row's log-sum-exp, which the
backward uses to rebuild the probabilities tile by tile instead of keeping the L x S weights.

``scaled_dot_product_attention`` routes here only on devices that register a kernel for the
forward (CUDA's Triton flash attention); the CPU and meta kernels below are the math
definition (also what tests compare a device kernel with). Shapes: query (..., H, L, E), key
(..., Hk, S, E), value (..., Hk, S, Ev) with H a multiple of Hk (grouped heads), an optional
additive or boolean mask broadcastable to (..., H, L, S); the log-sum-exp is (..., H, L) in float32
(float64 for float64 inputs), -inf on rows that see no key (whose output is zero).
"""

from __future__ import annotations

import math

from ... import dtypes as dt
from ...device import META
from ...dispatch import define
from ...tensor import new_empty_tensor
from .._common import compute_dtype, convert

__all__: list = []


def _scores(q, k, attn_mask, is_causal, scale):
    """float32/float64 scores (B, H, L, S) with the mask applied, keys repeated for grouped heads."""
    from ..creation.factories import ones
    from .attention import _additive_mask, _repeat_heads

    cd = compute_dtype(q.dtype)
    q, k = convert(q, cd), convert(k, cd)
    if k._shape[-3] != q._shape[-3]:
        k = _repeat_heads(k, q._shape[-3] // k._shape[-3])
    s = (q @ k.transpose(-2, -1)) * scale
    if is_causal:
        keep = ones((q._shape[-2], k._shape[-2]), dtype=dt.bool, device=q._device).tril()
        s = s + _additive_mask(keep, cd)
    if attn_mask is not None:
        s = s + _additive_mask(attn_mask, cd)
    return s


def _probs(s, lse):
    from ..pointwise.elementwise import exp, where

    lse = lse.unsqueeze(-1)
    finite = lse > -math.inf
    return where(finite, exp(s - where(finite, lse, lse.new_zeros(()))), s.new_zeros(()))


def _lse_dtype(d):
    return dt.float64 if d is dt.float64 else dt.float32


def _meta_in_order_of(t, shape, dtype, query, value):
    """A meta result laid out as the device kernels lay theirs out (a compiled graph keeps an
    extern result's layout and reads it by stride): the (B, H, L, E) output and gradients in the
    order of their input's dims when the head widths need no padding to a power of two (>= 16) and
    the input steps by one along them; heads split off a (B, L, H*E) projection give (B, L, H, E)."""
    d, e = query._shape[-1], value._shape[-1]
    if len(shape) != 4 or t.ndim != 4 or t._shape[3] <= 1 or t._stride[3] != 1 \
            or any(n < 16 or n & (n - 1) for n in (d, e)):
        return new_empty_tensor(shape, dtype, META)
    order = sorted(range(4), key=lambda i: (-t._stride[i], i))
    if order == [0, 1, 2, 3] or order[-1] != 3:
        return new_empty_tensor(shape, dtype, META)
    strides, step = [0] * 4, 1
    for dim in reversed(order):
        strides[dim] = step
        step *= shape[dim]
    from ...tensor import make_tensor

    base = new_empty_tensor((step,), dtype, META)
    return make_tensor(base._storage, tuple(shape), tuple(strides), 0, dtype, META)


def _flash_kernel(query, key, value, attn_mask, is_causal, scale):
    from ..reduction.composite import logsumexp
    from .attention import _repeat_heads

    lead, h = tuple(query._shape[:-1]), query._shape[-3]
    if query._device is META:
        return (_meta_in_order_of(query, lead + (value._shape[-1],), query.dtype, query, value),
                new_empty_tensor(lead, _lse_dtype(query.dtype), META))
    s = _scores(query, key, attn_mask, is_causal, scale)
    lse = logsumexp(s, -1)
    v = convert(value, s.dtype)
    if v._shape[-3] != h:
        v = _repeat_heads(v, h // v._shape[-3])
    out = _probs(s, lse) @ v
    return convert(out, query.dtype), convert(lse, _lse_dtype(query.dtype))


def _flash_backward_kernel(grad_out, query, key, value, out, logsumexp, attn_mask, is_causal, scale):
    from .attention import _repeat_heads

    if query._device is META:
        grouped = key._shape[-3] != query._shape[-3]
        return tuple(new_empty_tensor(t._shape, t.dtype, META) if grouped and t is not query
                     else _meta_in_order_of(t, tuple(t._shape), t.dtype, query, value) for t in (query, key, value))
    s = _scores(query, key, attn_mask, is_causal, scale)
    cd = s.dtype
    h, hk = query._shape[-3], key._shape[-3]
    rep = h // hk
    q, k, v = convert(query, cd), convert(key, cd), convert(value, cd)
    g, o = convert(grad_out, cd), convert(out, cd)
    if rep > 1:
        k, v = _repeat_heads(k, rep), _repeat_heads(v, rep)
    p = _probs(s, convert(logsumexp, cd))
    grad_v = p.transpose(-2, -1) @ g
    grad_p = g @ v.transpose(-2, -1)
    delta = (g * o).sum(-1, keepdim=True)  # = rowsum(P * dP): the softmax backward's row term
    grad_s = p * (grad_p - delta) * scale
    grad_q, grad_k = grad_s @ k, grad_s.transpose(-2, -1) @ q
    if rep > 1:
        lead = tuple(grad_k._shape[:-3])
        grad_k = grad_k.reshape(*lead, hk, rep, *grad_k._shape[-2:]).sum(-3)
        grad_v = grad_v.reshape(*lead, hk, rep, *grad_v._shape[-2:]).sum(-3)
    return convert(grad_q, query.dtype), convert(grad_k, key.dtype), convert(grad_v, value.dtype)


flash_op = define("_scaled_dot_product_flash_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask, "
                  "bool is_causal, float scale) -> (Tensor, Tensor)")
flash_op.kernel("cpu")(_flash_kernel)
flash_op.kernels["meta"] = flash_op.meta = _flash_kernel

flash_backward_op = define(
    "_scaled_dot_product_flash_attention_backward(Tensor grad_out, Tensor query, Tensor key, Tensor value, "
    "Tensor out, Tensor logsumexp, Tensor? attn_mask, bool is_causal, float scale) -> (Tensor, Tensor, Tensor)")
flash_backward_op.kernel("cpu")(_flash_backward_kernel)
flash_backward_op.kernels["meta"] = flash_backward_op.meta = _flash_backward_kernel


def routes_to_flash(query, key, value, attn_mask, dropout_p, enable_gqa) -> bool:
    """Whether ``scaled_dot_product_attention`` takes the fused pair on this device: a device kernel
    exists, no dropout, 4-D inputs of one floating dtype (float64 stays on the math path) with heads
    equal or grouped, and no mask that itself needs a gradient (the pair returns none for it)."""
    dev = query._device.type
    if dev == "cpu" or dev not in flash_op.kernels or dropout_p:
        return False
    if query.ndim != 4 or key.ndim != 4 or value.ndim != 4 or query.dtype is dt.float64:
        return False
    if key._device is not query._device or value._device is not query._device:
        return False
    if tuple(key._shape[:1]) != tuple(query._shape[:1]) or tuple(value._shape[:2]) != tuple(key._shape[:2]):
        return False
    h, hk = query._shape[1], key._shape[1]
    if h != hk and not (enable_gqa and hk and h % hk == 0):
        return False
    if attn_mask is not None and (attn_mask._requires_grad or attn_mask._device is not query._device):
        return False
    return query._shape[3] <= 256 and value._shape[3] <= 256
