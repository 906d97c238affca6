"""Batching rules for the neural-network ops: convolution, pooling, resampling, padding,
normalization, embedding, the class-index loss kernel and attention.

Two tricks cover most of them. *Folding*: ops whose input has a leading N dim take the vmap batch
folded into N (``(B, N, ...) -> (B*N, ...)``); an input in its unbatched form (no N) uses the
batch as N. *Grouping*: when per-sample weights are involved (a batched weight, or the weight
gradient of per-sample gradients) a convolution over B samples is one grouped convolution with
B times the groups, and a batch norm over B samples is one batch norm with B times the channels.
"""

from __future__ import annotations

from ember._src.dispatch import OPS

from ._common import batch_size, bind, call_bound, ensure_batched, pad_to, unwrap, wrap, wrap_all
from .views import all_batched_on_value_rule, on_value_rule


def _fold(value, full_rank: int):
    """(physical with the batch folded into N, whether it had an N dim) for a batched value."""
    if value.dim() - 1 == full_rank:
        size, n = value.shape[0], value.shape[1]
        return value.reshape((size * n,) + tuple(value.shape[2:])), True
    return value, False


def _unfold(out, size: int, had_n: bool):
    if not had_n:
        return out
    return out.reshape((size, out.shape[0] // size) + tuple(out.shape[1:]))


def fold_rule(tensor_args: tuple[str, ...], full_rank, fixed_args: tuple[str, ...] = ()):
    """A rule for ops whose ``tensor_args`` share a leading N dim (rank ``full_rank(bound)`` with it);
    ``fixed_args`` (per-channel weights) must be unbatched."""

    def rule(op, level, args, kwargs):
        size = batch_size(level)
        bound = bind(op, args, kwargs)
        for name in fixed_args:
            if unwrap(bound.get(name), level)[1]:
                from . import loop_fallback

                return loop_fallback(op, level, args, kwargs)
        rank = full_rank(bound) if callable(full_rank) else full_rank
        first, first_batched = unwrap(bound[tensor_args[0]], level)
        had_n = first.dim() - (1 if first_batched else 0) == rank
        for name in tensor_args:
            t = bound.get(name)
            if t is None:
                continue
            value, batched = unwrap(t, level)
            value = ensure_batched(value, batched, size)
            if had_n:
                value = value.reshape((size * value.shape[1],) + tuple(value.shape[2:]))
            bound[name] = value
        out = call_bound(op, bound)
        if isinstance(out, tuple):
            return tuple(wrap(_unfold(o, size, had_n), level) for o in out)
        return wrap(_unfold(out, size, had_n), level)

    return rule


def binary_cross_entropy_rule(op, level, args, kwargs):
    """The unreduced loss of the batched values, then each sample's own mean or sum."""
    size = batch_size(level)
    bound = bind(op, args, kwargs)
    x, x_batched = unwrap(bound["self"], level)
    shape = tuple(x.shape[1:] if x_batched else x.shape)
    for name in ("self", "target", "weight"):
        if bound.get(name) is None:
            continue
        value, batched = unwrap(bound[name], level)
        value = ensure_batched(pad_to(value, batched, len(shape)), batched, size)
        bound[name] = value.expand((size,) + shape)
    reduction = bound.get("reduction", 1)
    bound["reduction"] = 0
    out = call_bound(op, bound)
    if reduction != 0:
        out = out.reshape(size, -1)
        out = out.mean(1) if reduction == 1 else out.sum(1)
    return wrap(out, level)


def _spatial_rank(name: str):
    return lambda bound: len(bound[name]) + 2


# -- convolution ----------------------------------------------------------------------------------

def _grouped_input(x, xb, size, had_n):
    """(B, N, C, *sp) -> (N, B*C, *sp) (the batch becomes channel groups)."""
    x = ensure_batched(x, xb, size)
    if not had_n:
        x = x.unsqueeze(1)
    x = x.movedim(0, 1)
    return x.reshape((x.shape[0], size * x.shape[2]) + tuple(x.shape[3:]))


def _ungroup(out, size, had_n):
    """(N, B*O, *sp) -> (B, N, O, *sp) (or (B, O, *sp) without N)."""
    out = out.reshape((out.shape[0], size, out.shape[1] // size) + tuple(out.shape[2:])).movedim(1, 0)
    return out if had_n else out.squeeze(1)


def convolution_rule(op, level, args, kwargs):
    size = batch_size(level)
    bound = bind(op, args, kwargs)
    x, xb = unwrap(bound["input"], level)
    w, wb = unwrap(bound["weight"], level)
    b, bb = unwrap(bound["bias"], level) if bound.get("bias") is not None else (None, False)
    full = w.dim() - (1 if wb else 0)  # weight rank == input rank with N
    had_n = x.dim() - (1 if xb else 0) == full
    if not wb and not bb:
        folded, had_n = _fold(x, full)
        bound["input"] = folded
        return wrap(_unfold(call_bound(op, bound), size, had_n), level)
    bound["input"] = _grouped_input(x, xb, size, had_n)
    w = ensure_batched(w, wb, size)
    bound["weight"] = w.reshape((size * w.shape[1],) + tuple(w.shape[2:]))
    if b is not None:
        bound["bias"] = ensure_batched(b, bb, size).reshape(-1)
    bound["groups"] = bound["groups"] * size
    return wrap(_ungroup(call_bound(op, bound), size, had_n), level)


def convolution_backward_rule(op, level, args, kwargs):
    """Per-sample gradients of a convolution: one grouped convolution backward over the batch."""
    size = batch_size(level)
    bound = bind(op, args, kwargs)
    g, gb = unwrap(bound["grad_output"], level)
    x, xb = unwrap(bound["input"], level)
    w, wb = unwrap(bound["weight"], level)
    full = w.dim() - (1 if wb else 0)
    had_n = x.dim() - (1 if xb else 0) == full
    bound["grad_output"] = _grouped_input(g, gb, size, had_n)
    bound["input"] = _grouped_input(x, xb, size, had_n)
    w = ensure_batched(w, wb, size)
    bound["weight"] = w.reshape((size * w.shape[1],) + tuple(w.shape[2:]))
    if bound.get("bias_sizes") is not None:
        bound["bias_sizes"] = [size * s for s in bound["bias_sizes"]]
    bound["groups"] = bound["groups"] * size
    gi, gw, gbias = call_bound(op, bound)
    out_gi = None if gi is None else wrap(_ungroup(gi, size, had_n), level)
    out_gw = None if gw is None else wrap(gw.reshape((size, gw.shape[0] // size) + tuple(gw.shape[1:])), level)
    out_gb = None if gbias is None else wrap(gbias.reshape(size, -1), level)
    return out_gi, out_gw, out_gb


# -- normalization ----------------------------------------------------------------------------------

def _pad_trailing(value, batched, rank):
    """A batched per-feature value (B, *f) viewed as (B, 1.., *f) against a sample of ``rank`` dims."""
    for _ in range(rank - (value.dim() - 1)):
        value = value.unsqueeze(1)
    return value


def layer_norm_rule(op, level, args, kwargs):
    bound = bind(op, args, kwargs)
    size = batch_size(level)
    x, xb = unwrap(bound["input"], level)
    x = ensure_batched(x, xb, size)
    w, wb = unwrap(bound["weight"], level) if bound.get("weight") is not None else (None, False)
    b, bb = unwrap(bound["bias"], level) if bound.get("bias") is not None else (None, False)
    if not wb and not bb:
        bound["input"] = x
        return wrap_all(call_bound(op, bound), level)
    bound.update(input=x, weight=None, bias=None)
    out, mean, rstd = call_bound(op, bound)
    rank = x.dim() - 1
    if w is not None:
        out = out * (_pad_trailing(w, wb, rank) if wb else w)
    if b is not None:
        out = out + (_pad_trailing(b, bb, rank) if bb else b)
    return wrap(out, level), wrap(mean, level), wrap(rstd, level)


def layer_norm_backward_rule(op, level, args, kwargs):
    """Input gradient from the native backward; weight and bias gradients summed per sample."""
    bound = bind(op, args, kwargs)
    size = batch_size(level)
    g, gb = unwrap(bound["grad_out"], level)
    x, xb = unwrap(bound["input"], level)
    mean, mb = unwrap(bound["mean"], level)
    rstd, rb = unwrap(bound["rstd"], level)
    g, x = ensure_batched(g, gb, size), ensure_batched(x, xb, size)
    mean, rstd = ensure_batched(mean, mb, size), ensure_batched(rstd, rb, size)
    w, wb = unwrap(bound["weight"], level) if bound.get("weight") is not None else (None, False)
    mask = list(bound["output_mask"])
    rank = x.dim() - 1
    lead = rank - len(bound["normalized_shape"])
    grad_in = None
    if mask[0]:
        scaled = g if w is None else g * (_pad_trailing(w, wb, rank) if wb else w)
        grad_in = op(scaled, x, bound["normalized_shape"], mean, rstd, None, None, [True, False, False])[0]
        grad_in = wrap(grad_in, level)
    dims = list(range(1, lead + 1))
    grad_w = grad_b = None
    if mask[1] and w is not None:
        xhat = (x - mean) * rstd
        grad_w = wrap((g * xhat).sum(dims) if dims else g * xhat, level)
    if mask[2] and bound.get("bias") is not None:
        grad_b = wrap(g.sum(dims) if dims else g.clone(), level)
    return grad_in, grad_w, grad_b


def rms_norm_rule(op, level, args, kwargs):
    bound = bind(op, args, kwargs)
    size = batch_size(level)
    x, xb = unwrap(bound["input"], level)
    w, wb = unwrap(bound["weight"], level) if bound.get("weight") is not None else (None, False)
    bound["input"] = ensure_batched(x, xb, size)
    if wb:
        bound["weight"] = None
        out, rstd = call_bound(op, bound)
        return wrap(out * _pad_trailing(w, wb, x.dim() - (1 if xb else 0)), level), wrap(rstd, level)
    return wrap_all(call_bound(op, bound), level)


def _channels(value, batched, size, had_n):
    """(B, N, C, *sp) -> (N, B*C, *sp): per-sample statistics become per-channel ones."""
    return _grouped_input(value, batched, size, had_n)


def _per_channel(value, level, size):
    if value is None:
        return None
    v, b = unwrap(value, level)
    return ensure_batched(v, b, size).reshape(-1)


def batch_norm_rule(op, level, args, kwargs):
    bound = bind(op, args, kwargs)
    size = batch_size(level)
    x, xb = unwrap(bound["input"], level)
    training = bound["training"]
    stats = [bound.get("running_mean"), bound.get("running_var")]
    if training and any(s is not None and not unwrap(s, level)[1] for s in stats):
        raise RuntimeError(
            "vmap: batch norm got a batched input while its running_mean or running_var, which it updates in "
            "place, are not batched. Use track_running_stats=False (ember.func.replace_all_batch_norm_modules_) "
            "or batched running stats.")
    had_n = x.dim() - (1 if xb else 0) >= 2
    bound["input"] = _channels(x, xb, size, True) if had_n else _channels(x.unsqueeze(-1), xb, size, True)
    for name in ("weight", "bias", "running_mean", "running_var"):
        bound[name] = _per_channel(bound.get(name), level, size)
    out, save_mean, save_invstd = call_bound(op, bound)
    out = _ungroup(out, size, True)
    if not had_n:
        out = out.squeeze(-1)
    return wrap(out, level), wrap(save_mean.reshape(size, -1), level), wrap(save_invstd.reshape(size, -1), level)


def batch_norm_backward_rule(op, level, args, kwargs):
    bound = bind(op, args, kwargs)
    size = batch_size(level)
    g, gb = unwrap(bound["grad_out"], level)
    x, xb = unwrap(bound["input"], level)
    bound["grad_out"] = _channels(g, gb, size, True)
    bound["input"] = _channels(x, xb, size, True)
    for name in ("weight", "running_mean", "running_var", "save_mean", "save_invstd"):
        bound[name] = _per_channel(bound.get(name), level, size)
    gi, gw, gbias = call_bound(op, bound)
    return (None if gi is None else wrap(_ungroup(gi, size, True), level),
            None if gw is None else wrap(gw.reshape(size, -1), level),
            None if gbias is None else wrap(gbias.reshape(size, -1), level))


def group_norm_rule(op, level, args, kwargs):
    bound = bind(op, args, kwargs)
    size = batch_size(level)
    x, xb = unwrap(bound["input"], level)
    x = ensure_batched(x, xb, size)
    w, wb = unwrap(bound["weight"], level) if bound.get("weight") is not None else (None, False)
    b, bb = unwrap(bound["bias"], level) if bound.get("bias") is not None else (None, False)
    bound["input"] = x.reshape((size * x.shape[1],) + tuple(x.shape[2:]))
    bound["N"] = size * bound["N"]
    if wb or bb:
        bound["weight"] = bound["bias"] = None
    out, mean, rstd = call_bound(op, bound)
    out = out.reshape(x.shape)
    if wb or bb:
        channel_shape = (1,) * (x.dim() - 3)
        if w is not None:
            wv = w.reshape((size, 1, w.shape[-1]) + channel_shape) if wb else w.reshape((w.shape[0],) + channel_shape)
            out = out * wv
        if b is not None:
            bv = b.reshape((size, 1, b.shape[-1]) + channel_shape) if bb else b.reshape((b.shape[0],) + channel_shape)
            out = out + bv
    return wrap(out, level), wrap(mean.reshape(size, -1, mean.shape[-1]), level), wrap(
        rstd.reshape(size, -1, rstd.shape[-1]), level)


def group_norm_backward_rule(op, level, args, kwargs):
    """Input gradient from the native backward over the batch folded into N; weight and bias
    gradients summed per sample."""
    bound = bind(op, args, kwargs)
    size = batch_size(level)
    g, gb = unwrap(bound["grad_out"], level)
    x, xb = unwrap(bound["input"], level)
    mean, mb = unwrap(bound["mean"], level)
    rstd, rb = unwrap(bound["rstd"], level)
    g, x = ensure_batched(g, gb, size), ensure_batched(x, xb, size)
    mean, rstd = ensure_batched(mean, mb, size), ensure_batched(rstd, rb, size)
    w, wb = unwrap(bound["weight"], level) if bound.get("weight") is not None else (None, False)
    n, c, hxw, group = bound["N"], bound["C"], bound["HxW"], bound["group"]
    mask = list(bound["output_mask"])
    channel_shape = (1,) * (x.dim() - 3)
    grad_in = grad_w = grad_b = None
    if mask[0]:
        scaled, weight = g, w
        if wb:
            scaled, weight = g * w.reshape((size, 1, c) + channel_shape), None
        folded = lambda t: t.reshape((size * t.shape[1],) + tuple(t.shape[2:]))  # noqa: E731
        gi = op(folded(scaled), folded(x), folded(mean), folded(rstd), weight, size * n, c, hxw, group,
                [True, False, False])[0]
        grad_in = wrap(gi.reshape(x.shape), level)
    if mask[1] or mask[2]:
        g_flat = g.reshape(size, n, c, hxw)
        if mask[1]:
            x_groups = x.reshape(size, n, group, c // group, hxw)
            xhat = ((x_groups - mean.reshape(size, n, group, 1, 1)) * rstd.reshape(size, n, group, 1, 1))
            grad_w = wrap((g_flat * xhat.reshape(size, n, c, hxw)).sum([1, 3]), level)
        if mask[2]:
            grad_b = wrap(g_flat.sum([1, 3]), level)
    return grad_in, grad_w, grad_b


def upsample_backward_rule(op, level, args, kwargs):
    bound = bind(op, args, kwargs)
    size = batch_size(level)
    g, gb = unwrap(bound["grad_output"], level)
    g = ensure_batched(g, gb, size)
    input_size = list(bound["input_size"])
    had_n = g.dim() - 1 == len(input_size)
    if had_n:
        g = g.reshape((size * g.shape[1],) + tuple(g.shape[2:]))
        bound["input_size"] = [size * input_size[0]] + input_size[1:]
    else:
        bound["input_size"] = [size] + input_size
    bound["grad_output"] = g
    return wrap(_unfold(call_bound(op, bound), size, had_n), level)


# -- embedding and the class-index loss ----------------------------------------------------------------

def embedding_rule(op, level, args, kwargs):
    bound = bind(op, args, kwargs)
    size = batch_size(level)
    w, wb = unwrap(bound["weight"], level)
    idx, ib = unwrap(bound["indices"], level)
    if not wb:
        bound["indices"] = idx
        return wrap(call_bound(op, bound), level)
    # Per-sample tables: one table of B*V rows, each sample's indices offset into its own block.
    rows = w.shape[1]
    idx = ensure_batched(idx, ib, size)
    offsets = OPS["arange_affine"](size, 0, rows, dtype=idx.dtype, device=idx.device)
    bound["indices"] = idx + offsets.reshape((size,) + (1,) * (idx.dim() - 1))
    bound["weight"] = w.reshape((size * rows,) + tuple(w.shape[2:]))
    if bound.get("padding_idx", -1) >= 0:
        raise NotImplementedError("vmap: embedding with batched weights and padding_idx is not supported")
    return wrap(call_bound(op, bound), level)


def embedding_backward_rule(op, level, args, kwargs):
    bound = bind(op, args, kwargs)
    size = batch_size(level)
    g, gb = unwrap(bound["grad_output"], level)
    idx, ib = unwrap(bound["indices"], level)
    rows = bound["num_weights"]
    g = ensure_batched(g, gb, size)
    idx = ensure_batched(idx, ib, size)
    offsets = OPS["arange_affine"](size, 0, rows, dtype=idx.dtype, device=idx.device)
    bound["indices"] = idx + offsets.reshape((size,) + (1,) * (idx.dim() - 1))
    bound["grad_output"] = g
    bound["num_weights"] = size * rows
    pad = bound.get("padding_idx", -1)
    if pad is not None and pad >= 0:
        raise NotImplementedError("vmap: per-sample embedding gradients with padding_idx are not supported")
    out = call_bound(op, bound)
    return wrap(out.reshape((size, rows) + tuple(out.shape[1:])), level)


RULES = {
    "convolution": convolution_rule,
    "convolution_backward": convolution_backward_rule,
    "max_pool2d": fold_rule(("self",), 4),
    "max_pool2d_with_indices": fold_rule(("self",), 4),
    "max_pool2d_with_indices_backward": fold_rule(("grad_output", "self", "indices"), 4),
    "avg_pool2d": fold_rule(("self",), 4),
    "avg_pool2d_backward": fold_rule(("grad_output", "self"), 4),
    "adaptive_max_pool2d": fold_rule(("self",), 4),
    "adaptive_max_pool2d_backward": fold_rule(("grad_output", "self", "indices"), 4),
    "_adaptive_avg_pool2d": fold_rule(("self",), 4),
    "_adaptive_avg_pool2d_backward": fold_rule(("grad_output", "self"), 4),
    "im2col": fold_rule(("self",), 4),
    "col2im": fold_rule(("self",), 3),
    "_upsample": fold_rule(("self",), _spatial_rank("output_size")),
    "_pad_enum": fold_rule(("self",), lambda bound: len(bound["pad"]) // 2 + 2),
    "_pad_enum_backward": fold_rule(("grad_output", "self"), lambda bound: len(bound["pad"]) // 2 + 2),
    "constant_pad_nd": on_value_rule,
    "native_layer_norm": layer_norm_rule,
    "native_layer_norm_backward": layer_norm_backward_rule,
    "_fused_rms_norm": rms_norm_rule,
    "native_batch_norm": batch_norm_rule,
    "native_batch_norm_backward": batch_norm_backward_rule,
    "native_group_norm": group_norm_rule,
    "native_group_norm_backward": group_norm_backward_rule,
    "_upsample_backward": upsample_backward_rule,
    "embedding": embedding_rule,
    "embedding_dense_backward": embedding_backward_rule,
    # (N, C, d1, ...) scores: the batch always folds into N (their rank is the logical one).
    "_class_nll": fold_rule(("input", "target"), lambda bound: bound["input"].dim(), fixed_args=("weight",)),
    "binary_cross_entropy": binary_cross_entropy_rule,
    "scaled_dot_product_attention": all_batched_on_value_rule,
    "_scaled_dot_product_flash_attention": all_batched_on_value_rule,
    "_scaled_dot_product_flash_attention_backward": all_batched_on_value_rule,
}
