"""``F.multi_head_attention_forward``: the computation behind ``nn.MultiheadAttention``.

Sequence-first layout (L, N, E) as PyTorch's functional form takes it. Masks of either kind
(bool: True = masked out; float: added to the scores) are merged into one additive mask.
Without attention weights to return, the product runs through the fused
``scaled_dot_product_attention`` kernel.
"""

from __future__ import annotations

import math
import warnings

import ember
from ember import Tensor

from .. import functional as F


def _canonical_mask(mask: Tensor | None, name: str, target_dtype) -> Tensor | None:
    if mask is None:
        return None
    if mask.dtype == ember.bool:
        return ember.zeros_like(mask, dtype=target_dtype).masked_fill_(mask, float("-inf"))
    if not mask.is_floating_point():
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return mask


def _padding_mask_matching(key_padding_mask: Tensor | None, name: str, other: Tensor | None, other_name: str,
                           target_dtype) -> Tensor | None:
    """PyTorch's deprecation warning for a padding mask whose type differs from the attention
    mask's; such a padding mask is returned in its additive float form, so layers further in
    (which see two float masks) do not warn again."""
    if key_padding_mask is None or other is None or key_padding_mask.dtype == other.dtype:
        return key_padding_mask
    warnings.warn(f"Support for mismatched {name} and {other_name} is deprecated. Use same type for both instead.",
                  stacklevel=3)
    return _canonical_mask(key_padding_mask, name, target_dtype)


def _batch_first_storage(x: Tensor) -> bool:
    """Whether (L, N, E) ``x`` is the transposed view of a contiguous (N, L, E) tensor (what
    ``MultiheadAttention(batch_first=True)`` passes here)."""
    return x.ndim == 3 and not x.is_contiguous() and x.transpose(0, 1).is_contiguous()


def _project(x: Tensor, weight: Tensor, bias: Tensor | None, chunks: int = 1) -> tuple:
    """``F.linear`` of an (L, N, E) input in the layout it is stored in, split into ``chunks``
    along the features: a batch-first input is projected as the contiguous (N, L, E) it is (a view
    to (N * L, E), no copy) and split there, so each piece is an (L, N, E') view of that layout
    and the gradients the pieces send back (zeros around each) have the product's layout too."""
    if _batch_first_storage(x):
        pieces = F.linear(x.transpose(0, 1), weight, bias).chunk(chunks, dim=-1)
        return tuple(p.transpose(0, 1) for p in pieces)
    return F.linear(x, weight, bias).chunk(chunks, dim=-1)


def _in_projection(query, key, value, in_proj_weight, in_proj_bias, q_w, k_w, v_w, embed_dim):
    if in_proj_weight is not None and key is value and query is key:
        # Self-attention: one product for the three projections, split into views.
        return _project(query, in_proj_weight, in_proj_bias, 3)
    if in_proj_weight is not None and key is value:
        # Encoder-decoder attention: one product for the key and value projections of the memory, as
        # PyTorch's _in_projection_packed does (a width mismatch then names that (E, 2E) product).
        w_q, w_kv = in_proj_weight.split([embed_dim, 2 * embed_dim])
        b_q = b_kv = None
        if in_proj_bias is not None:
            b_q, b_kv = in_proj_bias.split([embed_dim, 2 * embed_dim])
        return (_project(query, w_q, b_q)[0], *_project(key, w_kv, b_kv, 2))
    if in_proj_weight is not None:
        q_w, k_w, v_w = in_proj_weight.chunk(3)
    b_q = b_k = b_v = None
    if in_proj_bias is not None:
        b_q, b_k, b_v = in_proj_bias.chunk(3)
    return _project(query, q_w, b_q)[0], _project(key, k_w, b_k)[0], _project(value, v_w, b_v)[0]


def _split_heads(x: Tensor, num_heads: int) -> Tensor:
    """(L, N, E) -> (N, H, L, E / H): a view whenever the last dim is contiguous (attention's
    kernels read such views in place)."""
    length, batch, embed = x.shape
    return x.reshape(length, batch, num_heads, embed // num_heads).permute(1, 2, 0, 3)


def multi_head_attention_forward(
    query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
    in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None, bias_v: Tensor | None,
    add_zero_attn: bool, dropout_p: float, out_proj_weight: Tensor, out_proj_bias: Tensor | None,
    training: bool = True, key_padding_mask: Tensor | None = None, need_weights: bool = True,
    attn_mask: Tensor | None = None, use_separate_proj_weight: bool = False, q_proj_weight: Tensor | None = None,
    k_proj_weight: Tensor | None = None, v_proj_weight: Tensor | None = None, static_k: Tensor | None = None,
    static_v: Tensor | None = None, average_attn_weights: bool = True, is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:
    return _mha_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias, bias_k,
                        bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, training, key_padding_mask,
                        need_weights, attn_mask, use_separate_proj_weight, q_proj_weight, k_proj_weight,
                        v_proj_weight, static_k, static_v, average_attn_weights, is_causal)


def _mha_forward(
    query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
    in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None, bias_v: Tensor | None,
    add_zero_attn: bool, dropout_p: float, out_proj_weight: Tensor, out_proj_bias: Tensor | None,
    training: bool = True, key_padding_mask: Tensor | None = None, need_weights: bool = True,
    attn_mask: Tensor | None = None, use_separate_proj_weight: bool = False, q_proj_weight: Tensor | None = None,
    k_proj_weight: Tensor | None = None, v_proj_weight: Tensor | None = None, static_k: Tensor | None = None,
    static_v: Tensor | None = None, average_attn_weights: bool = True, is_causal: bool = False,
    batch_major_out: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """``multi_head_attention_forward``; ``batch_major_out``: the (L, N, E) result is the transposed view of a
    contiguous (N, L, E) one, as PyTorch's fused path for ``MultiheadAttention(batch_first=True)`` lays it out."""
    unbatched = query.ndim == 2
    if query.ndim not in (2, 3):
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received {query.ndim}-D "
                             "query tensor")
    if key.ndim != query.ndim or value.ndim != query.ndim:
        raise AssertionError(f"For {'unbatched (2-D)' if unbatched else 'batched (3-D)'} `query`, expected `key` "
                             f"and `value` to be {query.ndim}-D but found {key.ndim}-D and {value.ndim}-D tensors "
                             "respectively")
    if unbatched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if key.shape[:2] != value.shape[:2]:
        raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")

    key_padding_mask = _padding_mask_matching(key_padding_mask, "key_padding_mask", attn_mask, "attn_mask", query.dtype)
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # the fused kernel builds the causal mask itself
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", query.dtype)
        is_causal = False if key_padding_mask is not None else is_causal

    if use_separate_proj_weight:
        # PyTorch's _in_projection asserts each weight's shape against its input
        e_q, e_k, e_v = query.shape[-1], key.shape[-1], value.shape[-1]
        for kind, w in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
            if w is None:
                raise AssertionError(f"use_separate_proj_weight is True but {kind}_proj_weight is None")
        for kind, w, shp in (("query", q_proj_weight, (e_q, e_q)), ("key", k_proj_weight, (e_q, e_k)),
                             ("value", v_proj_weight, (e_q, e_v))):
            if tuple(w.shape) != shp:
                raise AssertionError(f"expecting {kind} weights shape of {shp}, but got {w.shape}")
        q, k, v = _in_projection(query, key, value, None, in_proj_bias, q_proj_weight, k_proj_weight,
                                 v_proj_weight, embed_dim)
    else:
        q, k, v = _in_projection(query, key, value, in_proj_weight, in_proj_bias, None, None, None, embed_dim)

    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be "
                                   f"{(tgt_len, src_len)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                                   f"{(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")

    if bias_k is not None and bias_v is not None:
        k = ember.cat([k, bias_k.repeat(1, bsz, 1)])
        v = ember.cat([v, bias_v.repeat(1, bsz, 1)])
        if attn_mask is not None:
            attn_mask = F.pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = F.pad(key_padding_mask, (0, 1))

    # (L, N, E) -> (N, H, L, head_dim): views of the projections, no copy.
    q = _split_heads(q, num_heads)
    k = static_k.reshape(bsz, num_heads, -1, head_dim) if static_k is not None else _split_heads(k, num_heads)
    v = static_v.reshape(bsz, num_heads, -1, head_dim) if static_v is not None else _split_heads(v, num_heads)
    if add_zero_attn:
        k = ember.cat([k, ember.zeros((bsz, num_heads, 1, head_dim), dtype=k.dtype)], dim=2)
        v = ember.cat([v, ember.zeros((bsz, num_heads, 1, head_dim), dtype=v.dtype)], dim=2)
        if attn_mask is not None:
            attn_mask = F.pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = F.pad(key_padding_mask, (0, 1))
    src_len = k.shape[2]

    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            # PyTorch's checks, dim by dim (its text says key_padded_mask)
            for dim, want in enumerate((bsz, src_len)):
                if key_padding_mask.ndim > dim and key_padding_mask.shape[dim] != want:
                    raise AssertionError(f"Expected key_padded_mask.shape[{dim}] to be {want}, but got "
                                         f"{key_padding_mask.shape[dim]}")
            raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                                 f"{key_padding_mask.shape}")
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(-1, num_heads, -1, -1)
        kpm = kpm.reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm

    if not training:
        dropout_p = 0.0

    weights = None
    if need_weights:
        q3 = q.reshape(bsz * num_heads, tgt_len, head_dim) * (1.0 / math.sqrt(head_dim))
        k3t = k.reshape(bsz * num_heads, src_len, head_dim).transpose(-2, -1)
        if attn_mask is not None:
            scores = ember.baddbmm(attn_mask, q3, k3t)
        else:
            scores = ember.bmm(q3, k3t)
        weights = ember.softmax(scores, dim=-1)
        if dropout_p > 0.0:
            weights = F.dropout(weights, p=dropout_p)
        out = ember.bmm(weights, v.reshape(bsz * num_heads, src_len, head_dim))
        out = out.view(bsz, num_heads, tgt_len, head_dim)
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if unbatched:
            weights = weights.squeeze(0)
    else:
        if attn_mask is not None:
            attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len) if attn_mask.shape[0] != 1 \
                else attn_mask.unsqueeze(0)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)

    # (N, H, L, head_dim) -> (L * N, E) rows, the output projection, (L, N, E) contiguous, as
    # PyTorch lays it out whatever the input's layout: MultiheadAttention(batch_first=True) then
    # returns the (N, L, E) transposed view of it, and a dropout after attention (Transformer
    # layers' dropout1) draws its mask in that memory order, so seeded runs match PyTorch's. The output
    # projection may change the width (CLIP's AttentionPool2d projects to output_dim).
    out_width = out_proj_weight.shape[0]
    if batch_major_out and _batch_first_storage(query):
        out = out.transpose(1, 2).reshape(bsz * tgt_len, embed_dim)
        out = F.linear(out, out_proj_weight, out_proj_bias).view(bsz, tgt_len, out_width).transpose(0, 1)
    else:
        out = out.permute(2, 0, 1, 3).reshape(tgt_len * bsz, embed_dim)
        out = F.linear(out, out_proj_weight, out_proj_bias).view(tgt_len, bsz, out_width)
    if unbatched:
        out = out.squeeze(1)
    return out, weights
