"""Batching rules for indexing, gathering, scattering and joining.

Advanced indexing gets a leading ``arange(B)`` index when any index is batched (each sample indexes
its own slice); dim-based gather/scatter ops take every tensor argument with a batch dim and the
dim shifted by one. Ops whose output size depends on the data (nonzero, unique, ...) cannot be
batched at all and raise PyTorch's error.
"""

from __future__ import annotations

from ember._src.dispatch import OPS
from ember._src.tensor import Tensor

from ._common import (
    batch_size,
    bind,
    call_bound,
    ensure_batched,
    finish_inplace,
    inplace_error,
    unwrap,
    wrap,
    wrap_dim,
)

index_op = OPS["index"]


def _batch_index(size, ndim, like):
    """arange(B) shaped (B, 1, ..., 1) to broadcast against indices of logical rank ``ndim``."""
    r = OPS["arange_affine"](size, 0, 1, dtype=_long(), device=like.device)
    return r.reshape((size,) + (1,) * ndim)


def _bool():
    from ember._src import dtypes

    return dtypes.bool


def _long():
    from ember._src import dtypes

    return dtypes.int64


def _physical_indices(indices, level, size, self_value):
    """The index list for the physical self (batch dim first)."""
    unwrapped = [None if i is None else unwrap(i, level) for i in indices]
    any_batched = any(u is not None and u[1] for u in unwrapped)
    if not any_batched:
        return [None] + [None if u is None else u[0] for u in unwrapped], False
    ranks = [u[0].dim() - (1 if u[1] else 0) for u in unwrapped if u is not None]
    # Boolean masks index like their nonzero() positions: one index per mask dim.
    if any(u is not None and u[0].dtype.is_floating_point is False and str(u[0].dtype).endswith("bool")
           for u in unwrapped):
        raise RuntimeError("vmap: We do not support batching operators that can output dynamic shape. Attempted "
                           "to vmap over aten::index with a boolean mask. Please voice your support in "
                           "https://github.com/pytorch/functorch/issues/256")
    n = max(ranks)
    out = [_batch_index(size, n, self_value)]
    for u in unwrapped:
        if u is None:
            out.append(None)
            continue
        value, batched = u
        if batched:
            for _ in range(n - (value.dim() - 1)):
                value = value.unsqueeze(1)
        out.append(value)
    return out, True


def _normalize_indices(indices):
    return list(indices) if isinstance(indices, (list, tuple)) else [indices]


def index_rule(op, level, args, kwargs):
    size = batch_size(level)
    bound = bind(op, args, kwargs)
    value, batched = unwrap(bound["self"], level)
    value = ensure_batched(value, batched, size)
    indices = _normalize_indices(bound["indices"])
    phys, with_arange = _physical_indices(indices, level, size, value)
    out = index_op(value, phys)
    if not with_arange:
        present = [i for i, x in enumerate(indices) if x is not None]
        adjacent = present == list(range(present[0], present[-1] + 1)) if present else True
        if not adjacent:
            # Non-adjacent advanced indices put the index dims first, the batch dim right after.
            index_rank = len(_broadcast_shape([indices[i] for i in present]))
            out = out.movedim(index_rank, 0)
    return wrap(out, level)


def _broadcast_shape(tensors):
    from ember._src.shapes import broadcast_shapes

    return broadcast_shapes(*[tuple(t.shape) for t in tensors])


def index_put_rule(op, level, args, kwargs):
    size = batch_size(level)
    bound = bind(op, args, kwargs)
    value, batched = unwrap(bound["self"], level)
    values, vb = unwrap(bound["values"], level)
    indices = _normalize_indices(bound["indices"])
    index_batched = any(i is not None and unwrap(i, level)[1] for i in indices)
    if not batched and (vb or index_batched):
        raise inplace_error(op.name)
    phys, with_arange = _physical_indices(indices, level, size, value)
    if vb:
        # values broadcast against the indexed result, whose leading dim is the batch.
        target_rank = index_op(value, phys).dim() - 1
        for _ in range(target_rank - (values.dim() - 1)):
            values = values.unsqueeze(1)
        if not with_arange:
            present = [i for i, x in enumerate(indices) if x is not None]
            adjacent = present == list(range(present[0], present[-1] + 1)) if present else True
            if not adjacent:
                values = values.movedim(0, len(_broadcast_shape([indices[i] for i in present])))
    op(value, phys, values, bound.get("accumulate", False))
    finish_inplace(bound["self"])
    return bound["self"]


def index_select_rule(op, level, args, kwargs):
    size = batch_size(level)
    bound = bind(op, args, kwargs)
    value, batched = unwrap(bound["self"], level)
    index, ib = unwrap(bound["index"], level)
    value = ensure_batched(value, batched, size)
    n = value.dim() - 1
    dim = wrap_dim(bound["dim"], n) + 1 if n else 1
    if n == 0:
        value = value.unsqueeze(-1)
    if not ib:
        out = op(value, dim, index.reshape(-1) if index.dim() == 0 else index)
    else:
        moved = value.movedim(dim, 1)
        out = index_op(moved, [_batch_index(size, 1, value), index.reshape(size, -1)]).movedim(1, dim)
    if n == 0:
        out = out.reshape(size)
    return wrap(out, level)


def dim_index_rule(tensor_names: tuple[str, ...], inplace: bool):
    """gather / scatter*: every tensor argument batched, the dim shifted."""

    def rule(op, level, args, kwargs):
        size = batch_size(level)
        bound = bind(op, args, kwargs)
        self_batched = unwrap(bound["self"], level)[1]
        if inplace and not self_batched:
            raise inplace_error(op.name)
        n = None
        for name in tensor_names:
            t = bound.get(name)
            if not isinstance(t, Tensor):
                continue
            value, batched = unwrap(t, level)
            if n is None:
                n = value.dim() - (1 if batched else 0)
            bound[name] = ensure_batched(value, batched, size)
        bound["dim"] = wrap_dim(bound["dim"], n) + 1
        if n == 0:
            for name in tensor_names:
                if isinstance(bound.get(name), Tensor) and bound[name].dim() == 1:
                    bound[name] = bound[name].unsqueeze(-1)
        out = call_bound(op, bound)
        if inplace:
            finish_inplace(bound_self(args, kwargs))
            return bound_self(args, kwargs)
        if n == 0:
            out = out.reshape(size)
        return wrap(out, level)

    return rule


def bound_self(args, kwargs):
    return args[0] if args else kwargs["self"]


def index_dim_inplace_rule(op, level, args, kwargs):
    """index_add_ / index_copy_ / index_fill_: a 1-d index along ``dim``; a batched index becomes
    an index into the samples laid end to end along that dim."""
    size = batch_size(level)
    bound = bind(op, args, kwargs)
    # The wrapper the op returns (bound["self"] is rebound to physical values below: returning that
    # gave the physical tensor, seen as one sample's value, so index_add's result gained a dim).
    wrapper = bound["self"]
    self_value, sb = unwrap(wrapper, level)
    if not sb:
        raise inplace_error(op.name)
    n = self_value.dim() - 1
    dim = wrap_dim(bound["dim"], n) + 1 if n else 1
    index, ib = unwrap(bound["index"], level)
    other_name = "source" if "source" in bound else "value"
    other, ob = unwrap(bound[other_name], level)
    if other_name == "value" and ob:
        other = other.reshape((size,) + (1,) * n) if n else other
    if not ib:
        bound.update(self=self_value, dim=dim, index=index)
        if other_name == "source":
            bound["source"] = ensure_batched(other, ob, size)
        elif ob:
            # A per-sample fill value: fill a mask of the same rows, then blend.
            mask = OPS["full"](tuple(self_value.shape), False, dtype=_bool(), device=self_value.device)
            op(mask, dim, index, OPS["full"]((), True, dtype=_bool(), device=self_value.device))
            self_value.copy_(OPS["where"](mask, other, self_value))
            finish_inplace(wrapper)
            return wrapper
        call_bound(op, bound)
        finish_inplace(wrapper)
        return wrapper
    # Batched index: move dim next to the batch, lay samples end to end, offset each sample's index.
    moved = self_value.movedim(dim, 1)
    length = moved.shape[1]
    flat = moved.reshape((size * length,) + tuple(moved.shape[2:]))
    offsets = OPS["arange_affine"](size, 0, length, dtype=index.dtype, device=index.device).reshape(size, 1)
    flat_index = (index.reshape(size, -1) + offsets).reshape(-1)
    bound.update(self=flat, dim=0, index=flat_index)
    if other_name == "source":
        src = ensure_batched(other, ob, size).movedim(dim, 1)
        bound["source"] = src.reshape((size * src.shape[1],) + tuple(src.shape[2:]))
    elif ob:
        # A per-sample fill value: copy it, broadcast over each sample's selected slices.
        k = index.reshape(size, -1).shape[1]
        rest = tuple(flat.shape[1:])
        fill = other.reshape((size, 1) + (1,) * len(rest)).expand((size, k) + rest).reshape((size * k,) + rest)
        OPS["index_copy_"](flat, 0, flat_index, fill.to(flat.dtype))
        moved.copy_(flat.reshape(moved.shape))
        finish_inplace(wrapper)
        return wrapper
    call_bound(op, bound)
    moved.copy_(flat.reshape(moved.shape))
    finish_inplace(wrapper)
    return wrapper


def masked_fill_rule(op, level, args, kwargs):
    size = batch_size(level)
    self_value, sb = unwrap(args[0], level)
    mask, mb = unwrap(args[1], level)
    value, vb = unwrap(args[2], level) if isinstance(args[2], Tensor) else (args[2], False)
    if not sb:
        raise inplace_error(op.name)
    n = self_value.dim() - 1
    if mb:
        for _ in range(n - (mask.dim() - 1)):
            mask = mask.unsqueeze(1)
    if vb:
        value = value.reshape((size,) + (1,) * n)
        self_value.copy_(OPS["where"](mask, value, self_value))
    else:
        op(self_value, mask, value)
    finish_inplace(args[0])
    return args[0]


def cat_rule(op, level, args, kwargs):
    size = batch_size(level)
    tensors = list(args[0]) if args else list(kwargs["tensors"])
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    unwrapped = [unwrap(t, level) for t in tensors]
    # Legacy: 1-d empty tensors are skipped by cat whatever the other ranks are.
    ranks = [v.dim() - (1 if b else 0) for v, b in unwrapped]
    n = max(ranks) if ranks else 1
    physical = []
    for (v, b), r in zip(unwrapped, ranks):
        if r == 1 and v.shape[-1] == 0 and n != 1:
            continue
        physical.append(ensure_batched(v, b, size))
    return wrap(op(physical, wrap_dim(dim, n) + 1), level)


def dynamic_shape_rule(op, level, args, kwargs):
    raise RuntimeError(
        "vmap: We do not support batching operators that can output dynamic shape. Attempted to vmap over "
        f"aten::{op.name}. Please file an issue at https://github.com/pytorch/pytorch/issues if you need this "
        "feature.")


RULES = {
    "index": index_rule,
    "index_put_": index_put_rule,
    "index_select": index_select_rule,
    "gather": dim_index_rule(("self", "index"), inplace=False),
    "scatter_": dim_index_rule(("self", "index", "src"), inplace=True),
    "scatter_add_": dim_index_rule(("self", "index", "src"), inplace=True),
    "scatter_reduce_": dim_index_rule(("self", "index", "src"), inplace=True),
    "index_add_": index_dim_inplace_rule,
    "index_copy_": index_dim_inplace_rule,
    "index_fill_": index_dim_inplace_rule,
    "masked_fill_": masked_fill_rule,
    "cat": cat_rule,
    "nonzero": dynamic_shape_rule,
    "_unique2": dynamic_shape_rule,
    "bincount": dynamic_shape_rule,
}
