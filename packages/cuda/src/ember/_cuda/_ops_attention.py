"""scaled_dot_product_attention on CUDA: the math path (cuBLAS products, the fused row softmax).

softmax(q k^T * scale + mask) v with the causal mask built from index comparisons (no tril
kernel needed) and fully masked rows giving zeros, as the CPU kernel. Not a fused
flash-attention kernel: scores are materialized (B*H*L*S elements).
"""

from __future__ import annotations

import math

from ember._src.dispatch import OPS
from ember._src.ops.nn import attention as na


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    import ember

    if dropout_p:
        raise NotImplementedError("ember.ops.scaled_dot_product_attention with dropout has no fused CUDA kernel; "
                                  "ember.nn.functional.scaled_dot_product_attention differentiates it op by op")
    for t in (key, value) + (() if attn_mask is None else (attn_mask,)):
        if t._device is not query._device:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{query._device} and {t._device}!")
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    q, k, v = query, key, value
    if enable_gqa and k.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        rep = q.shape[-3] // k.shape[-3]
        k, v = na._repeat_heads(k, rep), na._repeat_heads(v, rep)
    scores = ember.matmul(q, k.transpose(-2, -1)) * scale
    lq, s = q.shape[-2], k.shape[-2]
    if is_causal:
        dev = q.device
        keep = ember.arange(lq, device=dev).unsqueeze(1) >= ember.arange(s, device=dev).unsqueeze(0)
        scores = ember.where(keep, scores, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype is ember.bool:
            scores = ember.where(attn_mask, scores, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = ember.softmax(scores, -1).nan_to_num(0.0)
    return ember.matmul(weights, v)


def register() -> None:
    OPS["scaled_dot_product_attention"].kernels["cuda"] = _sdpa
