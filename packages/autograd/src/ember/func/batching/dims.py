"""Batching rules for ops that take dims: reductions, scans, softmax, sorting, flips, FFTs.

The tensor ``self`` gets its batch dim (expanded if it had none) and every dim argument is
wrapped against the logical rank and shifted by one. ``dim=None`` of a reduction names every
logical dim (never the batch dim); a single optional ``int? dim`` set to None flattens the sample
first (argmax, argmin). A logical 0-d input gets a trailing size-1 dim for the op to work on.
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
    signature,
    unwrap,
    wrap_all,
    wrap_dim,
)


def _is_list_arg(op, name: str) -> bool:
    schema = op.schema
    i = schema.find(" " + name)
    return i > 0 and "[]" in schema[max(0, i - 10):i]


def _shift(d, n: int):
    if isinstance(d, (list, tuple)):
        return [wrap_dim(int(x), n) + 1 for x in d]
    return wrap_dim(int(d), n) + 1


def dim_rule(*dim_names: str, reduction: bool = False, self_name: str | None = None):
    """A rule for an op on one tensor (``self``) whose ``dim_names`` arguments name its dims."""

    def rule(op, level, args, kwargs):
        bound = bind(op, args, kwargs)
        first = self_name or signature(op.schema)[0][0]
        value, batched = unwrap(bound[first], level)
        inplace = "inplace" in op.tags
        if inplace and not batched:
            raise inplace_error(op.name)
        value = ensure_batched(value, batched, batch_size(level))
        n = value.dim() - 1
        scalar = n == 0
        flatten_keepdim = None
        if scalar:
            value = value.unsqueeze(-1)
            for name in dim_names:
                if name in bound:
                    bound[name] = [1] if _is_list_arg(op, name) else 1
        else:
            for name in dim_names:
                if name not in bound:
                    continue
                d = bound[name]
                if d is None or (reduction and isinstance(d, (list, tuple)) and len(d) == 0):
                    if not reduction:
                        continue
                    if _is_list_arg(op, name):
                        bound[name] = list(range(1, n + 1))
                    else:  # one optional dim: None reduces the flattened sample
                        value = value.reshape(value.shape[0], -1)
                        bound[name] = 1
                        flatten_keepdim = bool(bound.get("keepdim", False))
                else:
                    bound[name] = _shift(d, n)
        bound[first] = value
        out = call_bound(op, bound)
        if inplace:
            finish_inplace(args[0])
            return args[0]
        if scalar:
            out = _map(out, lambda o: o.reshape(o.shape[:1]) if o.dim() > 1 else o)
        elif flatten_keepdim:
            out = _map(out, lambda o: o.reshape((o.shape[0],) + (1,) * n))
        return wrap_all(out, level)

    return rule


def _map(out, fn):
    if isinstance(out, Tensor):
        return fn(out)
    return type(out)(fn(o) if isinstance(o, Tensor) else o for o in out)


def _reduction_names() -> list[str]:
    return sorted(name for name, op in OPS.items() if "reduction" in op.tags)


RULES = {name: dim_rule("dim", reduction=True) for name in _reduction_names()}
RULES.update({
    "sort": dim_rule("dim"),
    "topk": dim_rule("dim"),
    "kthvalue": dim_rule("dim"),
    "median": dim_rule("dim"),
    "nanmedian": dim_rule("dim"),
    "mode": dim_rule("dim"),
    "logcumsumexp": dim_rule("dim"),
    "flip": dim_rule("dims"),
    "cumsum_": dim_rule("dim"),
    "cumprod_": dim_rule("dim"),
    "_fft_c2c": dim_rule("dim"),
    "_fft_r2c": dim_rule("dim"),
    "_fft_c2r": dim_rule("dim"),
})
