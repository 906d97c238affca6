"""Batching rules for pointwise ops (every op tagged ``pointwise``): broadcasting does the work.

Batched arguments get size-1 dims inserted after their batch dim until their logical rank is the
largest logical rank among the arguments, so right-aligned broadcasting lines every batch dim
up at physical dim 0 and unbatched arguments broadcast over the batch for free.
"""

from __future__ import annotations

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.tensor import Tensor

from ._common import finish_inplace, inplace_error, logical_dim, pad_to, unwrap, wrap_all


def _max_logical_dim(values) -> int:
    n = 0
    for v, b in values:
        if isinstance(v, Tensor):
            n = max(n, logical_dim(v, b))
    return n


def _unwrap_arg(a, level):
    if isinstance(a, Tensor):
        return unwrap(a, level)
    return a, False


def pointwise_rule(op, level, args, kwargs):
    pos = [_unwrap_arg(a, level) for a in args]
    kw = {k: _unwrap_arg(v, level) for k, v in kwargs.items()}
    n = _max_logical_dim(pos + list(kw.values()))
    if "inplace" in op.tags:
        self_batched = pos[0][1]
        if not self_batched:
            raise inplace_error(op.name)
        # self keeps its own rank: other arguments broadcast into it.
        n = logical_dim(*pos[0])
    if n > 0 and any(b and logical_dim(v, b) == 0 for v, b in pos + list(kw.values())):
        pos, kw = _keep_zero_dim_priority(args, kwargs, pos, kw)
    new_args = [pad_to(v, b, n) if isinstance(v, Tensor) else v for v, b in pos]
    new_kwargs = {k: pad_to(v, b, n) if isinstance(v, Tensor) else v for k, (v, b) in kw.items()}
    out = op(*new_args, **new_kwargs)
    if "inplace" in op.tags:
        finish_inplace(args[0])
        return args[0]
    return wrap_all(out, level)


def _keep_zero_dim_priority(args, kwargs, pos, kw):
    """A batched 0-d argument is 1-d physically, which would let it promote like a dimensioned
    tensor (Note [Type promotion]): cast it to the dtype the logical call promotes to."""
    operands = [a for a in list(args) + list(kwargs.values())
                if (isinstance(a, Tensor) and a.dtype is not dt.bool) or isinstance(a, (int, float, complex))]
    if not operands:
        return pos, kw
    target = dt.result_type_of(*operands)

    def cast(v, b):
        if b and v.dim() == 1 and v.dtype is not dt.bool and v.dtype is not target:
            return v.to(target), b
        return v, b

    return [cast(v, b) if isinstance(v, Tensor) else (v, b) for v, b in pos], {
        k: cast(v, b) if isinstance(v, Tensor) else (v, b) for k, (v, b) in kw.items()}


def inplace_copy_rule(op, level, args, kwargs):
    """copy_/fill_-like in-place ops: self must be batched when anything else is."""
    return pointwise_rule(op, level, args, kwargs)


def _pointwise_names() -> list[str]:
    return sorted(name for name, op in OPS.items() if "pointwise" in op.tags and "random" not in op.tags)


RULES = {name: pointwise_rule for name in _pointwise_names()}
RULES.update({
    "copy_": inplace_copy_rule,
    "fill_": inplace_copy_rule,
    "masked_fill_": pointwise_rule,
    "div_rounding": pointwise_rule,
    "complex": pointwise_rule,
    "polar": pointwise_rule,
    "frexp.Tensor": pointwise_rule,
    "special_i1": pointwise_rule,
    # ember.special's functions of the specfns kernel family (untagged: not top-level functions)
    **{name: pointwise_rule for name in OPS if name.startswith("special_") and name not in ("special_i1",)},
    "conj_physical_": pointwise_rule,
    "sgn_": pointwise_rule,
})
