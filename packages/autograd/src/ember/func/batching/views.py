"""Batching rules for views and reshapes, and for ops that act on each element or on the trailing
dims only (casts, copies, linear algebra on the last two dims), which run on the physical value.
"""

from __future__ import annotations

from ember._src.shapes import infer_size

from ._common import batch_size, ensure_batched, unwrap, wrap, wrap_all, wrap_dim
from .dims import dim_rule


def _self(args, level):
    value, batched = unwrap(args[0], level)
    return ensure_batched(value, batched, batch_size(level) if not batched else 0)


def on_value_rule(op, level, args, kwargs):
    """The op runs on the physical value as it is: it never looks at the leading dims."""
    value = _self(args, level)
    return wrap_all(op(value, *args[1:], **kwargs), level)


def all_batched_on_value_rule(op, level, args, kwargs):
    """Every tensor argument gets the batch dim; the op broadcasts over leading (batch) dims."""
    size = batch_size(level)
    new_args = []
    for a in args:
        value, batched = unwrap(a, level) if hasattr(a, "_shape") else (a, True)
        new_args.append(ensure_batched(value, batched, size) if hasattr(a, "_shape") else a)
    return wrap_all(op(*new_args, **kwargs), level)


def view_rule(op, level, args, kwargs):
    value = _self(args, level)
    size = args[1] if len(args) > 1 else kwargs["size"]
    logical = value.shape[1:]
    shape = infer_size(tuple(size), _numel(logical))
    return wrap(value.reshape((value.shape[0],) + tuple(shape)), level)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def expand_rule(op, level, args, kwargs):
    value = _self(args, level)
    size = tuple(args[1] if len(args) > 1 else kwargs["size"])
    n = value.dim() - 1
    if len(size) < n:
        raise RuntimeError(f"expand: the number of sizes provided ({len(size)}) must be greater or equal to the "
                           f"number of dimensions in the tensor ({n})")
    for _ in range(len(size) - n):
        value = value.unsqueeze(1)
    return wrap(op(value, (value.shape[0],) + size), level)


def permute_rule(op, level, args, kwargs):
    value = _self(args, level)
    dims = args[1] if len(args) > 1 else kwargs["dims"]
    n = value.dim() - 1
    if len(dims) != n:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
                           f"length of the desired ordering of dimensions i.e. input.dim() = {n} is not equal "
                           f"to len(dims) = {len(dims)}")
    return wrap(op(value, [0] + [wrap_dim(d, n) + 1 for d in dims]), level)


def squeeze_rule(op, level, args, kwargs):
    value = _self(args, level)
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    logical = value.shape[1:]
    n = len(logical)
    if dim is None:
        dims = [i + 1 for i, s in enumerate(logical) if s == 1]
    else:
        dims = [wrap_dim(d, n) + 1 for d in (dim if isinstance(dim, (list, tuple)) else [dim])]
        dims = [d for d in dims if n and value.shape[d] == 1]
    return wrap(op(value, dims), level)


def unsqueeze_rule(op, level, args, kwargs):
    value = _self(args, level)
    dim = args[1] if len(args) > 1 else kwargs["dim"]
    return wrap(op(value, wrap_dim(dim, value.dim()) + 1), level)


def as_strided_rule(op, level, args, kwargs):
    """Sizes and strides refer to a contiguous sample (what the logical tensor reports)."""
    value = _self(args, level).contiguous()
    size = tuple(args[1] if len(args) > 1 else kwargs["size"])
    stride = tuple(args[2] if len(args) > 2 else kwargs["stride"])
    offset = args[3] if len(args) > 3 else kwargs.get("storage_offset")
    per_sample = _numel(value.shape[1:])
    base = value.storage_offset() + (offset or 0)
    return wrap(op(value, (value.shape[0],) + size, (per_sample,) + stride, base), level)


RULES = {
    "view": view_rule,
    "expand": expand_rule,
    "permute": permute_rule,
    "squeeze": squeeze_rule,
    "unsqueeze": unsqueeze_rule,
    "as_strided": as_strided_rule,
    "transpose": dim_rule("dim0", "dim1"),
    "narrow": dim_rule("dim"),
    "select": dim_rule("dim"),
    "slice": dim_rule("dim"),
    "diagonal": dim_rule("dim1", "dim2"),
    "unfold": dim_rule("dimension"),
    "alias": on_value_rule,
    "view_as_real": on_value_rule,
    "view_as_complex": on_value_rule,
    "view_dtype": on_value_rule,
    "clone": on_value_rule,
    "_to_copy": on_value_rule,
    "conj_physical": on_value_rule,
}
