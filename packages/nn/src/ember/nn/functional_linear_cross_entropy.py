"""``F.linear_cross_entropy``: ``cross_entropy(linear(input, linear_weight, linear_bias), target)``,
K-dimensional weights included, and its chunked form (``options``): the batch is processed in
chunks whose logits are recomputed in the backward (activation checkpointing), so the
``(num_batches, num_classes)`` logits of an LLM head never exist at once. Both give the same loss
and gradients (up to rounding); the chunked form computes in ``options.acc_dtype``."""

from __future__ import annotations

import math
import warnings

import ember
from ember import Tensor


def _chunk_losses(x, linear_weight, linear_bias, target, weight, ignore_index, acc_dtype):
    from . import functional as F

    logits = F.linear(x, linear_weight, linear_bias).to(acc_dtype)
    return F.cross_entropy(logits, target, weight=None if weight is None else weight.to(acc_dtype),
                           reduction="none", ignore_index=ignore_index)


def _chunked(input, linear_weight, target, linear_bias, weight, reduction, ignore_index, options):
    from ember.utils.checkpoint import checkpoint

    batched = input.dim() == 2
    if not batched:
        input, target = input.unsqueeze(0), target.unsqueeze(0)
    n, in_features = input.shape
    options = options._adjust(num_batches=n, in_features=in_features, num_classes=linear_weight.shape[0],
                              dtype=input.dtype, device=input.device)
    step = options.batch_chunk_size
    need_grad = ember.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (input, linear_weight, linear_bias, weight))
    pieces = []
    for start in range(0, n, step):
        args = (input[start:start + step], linear_weight, linear_bias, target[start:start + step], weight,
                ignore_index, options.acc_dtype)
        pieces.append(checkpoint(_chunk_losses, *args, use_reentrant=False) if need_grad else _chunk_losses(*args))
    losses = ember.cat(pieces) if pieces else input.new_zeros((0,), dtype=options.acc_dtype)
    if reduction == "none":
        out = losses if batched else losses.squeeze(0)
    elif reduction == "sum":
        out = losses.sum()
    else:  # mean: over the kept targets, each counted with its class weight (cross_entropy's rule)
        kept = target != ignore_index
        share = kept.to(losses.dtype) if weight is None else \
            ember.where(kept, weight.to(losses.dtype)[target.clamp(0, weight.shape[0] - 1)], 0.0)
        out = losses.sum() / share.sum()
    return out.to(input.dtype)


def linear_cross_entropy(input: Tensor, linear_weight: Tensor, target: Tensor, *, linear_bias: Tensor | None = None,
                         weight: Tensor | None = None, reduction: str = "mean", ignore_index: int | None = None,
                         label_smoothing: float = 0.0, options=None) -> Tensor:
    from . import functional as F

    if input.dim() < 1 or input.dim() > 2:
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError(f"expected linear_weight with dimensionality at least 2, got {linear_weight.dim()}")
    batches, in_features = tuple(input.shape[:-1]), input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError("expected equal input and linear_weight last dimensions (in_features), "
                           f"got {input.shape[-1]} and {linear_weight.shape[-1]}, respectively")
    num_classes, out_features = linear_weight.shape[0], tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (num_classes, *out_features):
        raise RuntimeError(f"expected linear_bias shape {(num_classes, *out_features)}, got "
                           f"{tuple(linear_bias.shape)}")
    if out_features and not batches:
        raise RuntimeError(f"K-dimensional loss defined by linear_weight shape {tuple(linear_weight.shape)} requires"
                           f" batched input, (N, {in_features}), got unbatched input with shape {tuple(input.shape)}")
    logits_shape = (*batches, num_classes, *out_features)
    if tuple(target.shape) == logits_shape and ignore_index is not None:  # probabilities, as cross_entropy tells
        raise RuntimeError("ignore_index cannot be specified when target contains probabilities")
    ignore_index = -100 if ignore_index is None else ignore_index
    if options is not None:
        chunkable = not out_features and reduction in ("mean", "sum", "none") and label_smoothing == 0.0 \
            and target.dtype == ember.int64
        if chunkable:
            return _chunked(input, linear_weight, target, linear_bias, weight, reduction, ignore_index, options)
        warnings.warn("linear_cross_entropy: ``options`` ignored; chunked path needs reduction in "
                      "{'mean','sum','none'}, label_smoothing == 0, target.dtype == int64, out_features == (). Got "
                      f"reduction={reduction!r}, label_smoothing={label_smoothing}, target.dtype={target.dtype}, "
                      f"out_features={out_features}, tracing=False, linear_bias.shape="
                      f"{tuple(linear_bias.shape) if linear_bias is not None else None}.", stacklevel=2)
    if out_features:
        rows = math.prod(out_features, start=num_classes)
        linear_weight = linear_weight.reshape(rows, in_features)
        linear_bias = None if linear_bias is None else linear_bias.reshape(rows)
    logits = F.linear(input, linear_weight, linear_bias).reshape(logits_shape)
    return F.cross_entropy(logits, target, weight=weight, reduction=reduction, ignore_index=ignore_index,
                           label_smoothing=label_smoothing)
