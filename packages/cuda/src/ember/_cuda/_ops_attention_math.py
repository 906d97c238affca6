"""``_scaled_dot_product_attention_math_backward`` on CUDA: the dropout-free attention's gradients where the
flash kernels do not apply (float64, odd shapes, the math forward's graphs), composed of dispatched ops (cuBLAS
products, the fused row softmax, pointwise kernels). As the CPU kernel (``ops/nn/attention.py``): sums in the
compute dtype (float32 for float16/bfloat16), a row whose every key is hidden has zero probabilities (zero
gradients, no NaN), key/value heads may divide the query heads (grouped), and the probabilities are rebuilt per
block of query rows, never all stored: each block adds its share to the key and value gradients.

Without this kernel the engine's composite ran instead (``formulas/nn._attention``), which needs every
probability and several score-sized temporaries at once; the compiled backward's extern needs the op itself.
Composed of dispatched ops only, so it runs on CPU tensors too, where the tests compare it with the CPU kernel.
"""

from __future__ import annotations

from ember._src.dispatch import OPS
from ember._src.ops._common import compute_dtype, convert
from ember._src.ops.nn import attention as na

# query rows per block: at most this many scores (B * H * rows * S) alive at once
_BLOCK_SCORES = 1 << 26


def _check(grad_out, query, key, value):
    name = "_scaled_dot_product_attention_math_backward"
    if not (query.ndim == key.ndim == value.ndim == grad_out.ndim >= 3):
        raise RuntimeError(f"{name}: query, key, value and grad must be at least 3-D and of one rank")
    batch = tuple(query._shape[:-3])
    if tuple(key._shape[:-3]) != batch or tuple(value._shape[:-3]) != batch:
        raise RuntimeError(f"{name}: batch dims must match")
    h, hk = query._shape[-3], key._shape[-3]
    if hk == 0 or h % hk != 0:
        raise RuntimeError(f"{name}: key heads must divide query heads")
    return batch, h // hk


def sdpa_math_backward(grad_out, query, key, value, attn_mask, is_causal, scale):
    import ember

    batch, rep = _check(grad_out, query, key, value)
    cd = compute_dtype(query.dtype)
    q, k, v, g = (na._as_4d(convert(t, cd), batch) for t in (query, key, value, grad_out))
    b, h, lq, e = q._shape
    s = k._shape[2]
    mask = na._additive_mask(attn_mask, cd)
    if mask is not None:
        mask = mask.expand(*(batch + (h, lq, s))).reshape(b, h, lq, s)
    if rep > 1:  # each key/value head serves rep query heads in a row (repeat_interleave)
        k, v = na._repeat_heads(k, rep), na._repeat_heads(v, rep)
    kt, vt = k.transpose(-2, -1), v.transpose(-2, -1)
    gq = ember.empty(tuple(q._shape), dtype=cd, device=q.device)
    gk = ember.zeros(tuple(k._shape), dtype=cd, device=q.device)
    gv = ember.zeros(tuple(v._shape), dtype=cd, device=q.device)
    rows = max(1, min(lq, _BLOCK_SCORES // max(1, b * h * s)))
    for r0 in range(0, lq, rows):
        n = min(rows, lq - r0)
        qs, gs = q.narrow(2, r0, n), g.narrow(2, r0, n)
        scores = ember.matmul(qs, kt) * scale
        if is_causal:  # PyTorch's top-left causal mask: query row i sees keys j <= i
            keep = ember.arange(r0, r0 + n, device=q.device).unsqueeze(1) >= ember.arange(s, device=q.device)
            scores = scores.masked_fill(keep.logical_not(), float("-inf"))
        if mask is not None:
            scores = scores + mask.narrow(2, r0, n)
        dead = (scores == float("-inf")).all(-1, keepdim=True)
        p = ember.softmax(scores.masked_fill(dead, 0.0), -1).masked_fill(dead, 0.0)
        gv.add_(ember.matmul(p.transpose(-2, -1), gs))
        gp = ember.matmul(gs, vt)
        gsc = p * (gp - (gp * p).sum(-1, keepdim=True)) * scale
        gq.narrow(2, r0, n).copy_(ember.matmul(gsc, k))
        gk.add_(ember.matmul(gsc.transpose(-2, -1), qs))
    if rep > 1:
        gk = gk.reshape(b, h // rep, rep, s, e).sum(2)
        gv = gv.reshape(b, h // rep, rep, s, v._shape[-1]).sum(2)
    return tuple(convert(grad.reshape(tuple(t._shape)), t.dtype) for grad, t in ((gq, query), (gk, key), (gv, value)))


def register() -> None:
    OPS["_scaled_dot_product_attention_math_backward"].kernels["cuda"] = sdpa_math_backward
