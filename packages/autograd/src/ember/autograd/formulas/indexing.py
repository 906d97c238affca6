"""Derivatives of the indexing ops: advanced indexing, index_select, index_put_, masked_fill_.

Gathering ops scatter their gradient back with ``index_put(..., accumulate=True)``, so an
index repeated in the gather accumulates the gradient of each of its uses.
"""

from __future__ import annotations

import ember
from ember._src.ops.indexing.subscripts import index_put_op as _index_put_op

from ._common import arg, is_tensor, where_zero
from ._registry import derivative, forward_derivative

OPS = ember.ops


@derivative("index")
def _index(grads, inputs, outputs):
    g = grads[0]
    x = inputs.args[0]
    indices = list(arg(inputs, 1, "indices"))
    zeros = g.new_zeros(x.shape)
    # The op itself, not ember.index_put: its indices may hold None (the `...` and `:` of x[..., idx]),
    # which the public function refuses as PyTorch's does.
    return (_index_put_op(zeros, indices, g, True),)


@derivative("index_select")
def _index_select(grads, inputs, outputs):
    # Scatter-add along ``dim``: move it to the front so the index addresses dim 0.
    g = grads[0]
    x = inputs.args[0]
    dim, index = arg(inputs, 1, "dim"), arg(inputs, 2, "index")
    index = index.reshape(-1)
    if x.ndim == 0:
        zeros = g.new_zeros((1,))
        return (ember.index_put(zeros, [index], g.reshape(-1), accumulate=True).reshape(()),)
    dim = dim % x.ndim
    zeros = g.new_zeros(x.shape).movedim(dim, 0)
    result = ember.index_put(zeros, [index], g.movedim(dim, 0), accumulate=True)
    return (result.movedim(0, dim),)


@derivative("index_put_")
def _index_put(grads, inputs, outputs):
    g = grads[0]
    indices = list(arg(inputs, 1, "indices"))
    values = arg(inputs, 2, "values")
    accumulate = arg(inputs, 3, "accumulate", False)
    # Overwritten elements lose their gradient; accumulated ones keep it.
    # The op itself (not the public index_put): indices may hold None, as `x[..., i, j] = v` records them.
    grad_self = g if accumulate else OPS["index_put_"](g.clone(), tuple(indices), g.new_zeros(()), False)
    grad_values = OPS["index"](g, indices) if is_tensor(values) and values.requires_grad else None
    return grad_self, None, grad_values


@forward_derivative("index_put_")
def _index_put_jvp(tangents, inputs, outputs):
    # index_put_ is linear in (self, values): its tangent is the same put applied to the tangents, so a
    # repeated index without accumulate keeps one value's tangent (a double backward would add them all).
    t_self, t_values = tangents[0], tangents[2]
    out = outputs[0]
    values = arg(inputs, 2, "values")
    if t_self is None and t_values is None:
        return None
    base = out.new_zeros(out.shape) if t_self is None else t_self.to(out.dtype).clone()
    if t_values is None:
        t_values = base.new_zeros(values.shape if is_tensor(values) else ())
    indices = list(arg(inputs, 1, "indices"))
    return _index_put_op(base, indices, t_values.to(base.dtype), arg(inputs, 3, "accumulate", False))


@derivative("masked_fill_")
def _masked_fill(grads, inputs, outputs):
    g = grads[0]
    mask, value = inputs.args[1], inputs.args[2]
    grad_value = None
    if is_tensor(value) and value.requires_grad:
        # The engine sums this down to the 0-d value.
        grad_value = where_zero(ember.logical_not(mask), g)
    return where_zero(mask, g), None, grad_value
