"""Derivatives of gather and the scatter family (scatter_, scatter_add_, scatter_reduce_,
index_add_, index_copy_, index_fill_, masked_scatter_).

Scatters are written as advanced indexing with full index grids: ``grids(index, dim)``
addresses, for each element of ``index``, the position ``index`` names along ``dim`` and its
own position along every other dim.
"""

from __future__ import annotations

import ember

from ._common import arg, not_implemented, register_if_defined

OPS = ember.ops


def _grids(index, dim: int) -> list:
    grids = []
    for d, n in enumerate(index.shape):
        if d == dim:
            grids.append(index)
        else:
            shape = [1] * index.ndim
            shape[d] = n
            grids.append(ember.arange(n).reshape(shape))
    return grids


def _dim(inputs, x) -> int:
    dim = arg(inputs, 1, "dim")
    return dim % x.ndim if x.ndim else 0


def _gather_from(g, dim, index):
    if g.ndim == 0:
        return g.reshape(index.shape)
    return OPS["index"](g, _grids(index, dim))


def _zero_at(g, dim, index):
    if g.ndim == 0:
        return g * 0
    return ember.index_put(g, _grids(index, dim), ember.zeros((), dtype=g.dtype))


def _gather(grads, inputs, outputs):
    g = grads[0]
    x = inputs.args[0]
    dim, index = _dim(inputs, x), arg(inputs, 2, "index")
    zeros = ember.zeros(x.shape, dtype=g.dtype)
    if x.ndim == 0:
        return (zeros + g.sum(),)
    return (ember.index_put(zeros, _grids(index, dim), g, accumulate=True),)


def _scatter(grads, inputs, outputs):
    if arg(inputs, 4, "reduce", None) is not None:
        return not_implemented("scatter_ with reduce")(grads, inputs, outputs)
    g = grads[0]
    x = inputs.args[0]
    dim, index, src = _dim(inputs, x), arg(inputs, 2, "index"), arg(inputs, 3, "src")
    grad_src = _gather_from(g, dim, index) if isinstance(src, ember.Tensor) else None
    return _zero_at(g, dim, index), None, None, grad_src


def _scatter_add(grads, inputs, outputs):
    g = grads[0]
    x = inputs.args[0]
    dim, index = _dim(inputs, x), arg(inputs, 2, "index")
    return g, None, None, _gather_from(g, dim, index)


def _scatter_reduce(grads, inputs, outputs):
    reduce = arg(inputs, 4, "reduce")
    if reduce != "sum":
        return not_implemented(f"scatter_reduce_ with reduce='{reduce}'")(grads, inputs, outputs)
    g = grads[0]
    x = inputs.args[0]
    dim, index = _dim(inputs, x), arg(inputs, 2, "index")
    include_self = inputs.kwargs.get("include_self", arg(inputs, 5, "include_self", True))
    return (g if include_self else _zero_at(g, dim, index)), None, None, _gather_from(g, dim, index), None


def _moved(t, dim):
    return t.movedim(dim, 0) if t.ndim else t.reshape(1)


def _index_select_grad(g, dim, index):
    return ember.index_select(g, dim, index) if g.ndim else g.reshape(1).index_select(0, index).reshape(())


def _index_zero(g, dim, index):
    """g with zeros at ``index`` along ``dim`` (index_fill(dim, index, 0))."""
    moved = _moved(g, dim)
    filled = ember.index_put(moved, [index.reshape(-1)], ember.zeros((), dtype=g.dtype))
    return filled.movedim(0, dim) if g.ndim else filled.reshape(())


def _index_add(grads, inputs, outputs):
    g = grads[0]
    x = inputs.args[0]
    dim, index = _dim(inputs, x), arg(inputs, 2, "index")
    alpha = inputs.kwargs.get("alpha", 1)
    source = arg(inputs, 3, "source")
    grad_source = _index_select_grad(g, dim, index).reshape(source.shape)
    return g, None, None, grad_source if alpha == 1 else grad_source * alpha


def _index_copy(grads, inputs, outputs):
    g = grads[0]
    x = inputs.args[0]
    dim, index = _dim(inputs, x), arg(inputs, 2, "index")
    source = arg(inputs, 3, "source")
    return _index_zero(g, dim, index), None, None, _index_select_grad(g, dim, index).reshape(source.shape)


def _index_fill(grads, inputs, outputs):
    g = grads[0]
    x = inputs.args[0]
    dim, index = _dim(inputs, x), arg(inputs, 2, "index")
    value = arg(inputs, 3, "value")
    grad_value = _index_select_grad(g, dim, index).sum() if isinstance(value, ember.Tensor) else None
    return _index_zero(g, dim, index), None, None, grad_value


def _masked_scatter(grads, inputs, outputs):
    # source's first count(mask) elements (in order) were written where mask is True.
    g = grads[0]
    mask, source = inputs.args[1], inputs.args[2]
    mask = mask.expand(*g.shape) if tuple(mask.shape) != tuple(g.shape) else mask
    zero = ember.zeros((), dtype=g.dtype)
    picked = OPS["index"](g, [mask]).reshape(-1)
    pad = source.numel() - picked.numel()
    if pad:
        picked = ember.cat([picked, ember.zeros((pad,), dtype=g.dtype)])
    return ember.where(mask, zero, g), None, picked.reshape(source.shape)


register_if_defined("gather", _gather)
register_if_defined("scatter_", _scatter)
register_if_defined("scatter_add_", _scatter_add)
register_if_defined("scatter_reduce_", _scatter_reduce)
register_if_defined("index_add_", _index_add)
register_if_defined("index_copy_", _index_copy)
register_if_defined("index_fill_", _index_fill)
register_if_defined("masked_scatter_", _masked_scatter)
