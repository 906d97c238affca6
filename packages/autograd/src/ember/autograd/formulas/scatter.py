"""Derivatives of gather and the scatter family (scatter_, scatter_add_, scatter_reduce_,
index_add_, index_copy_, index_fill_, masked_scatter_).

Scatters are written as advanced indexing with full index grids: ``grids(index, dim)``
addresses, for each element of ``index``, the position ``index`` names along ``dim`` and its
own position along every other dim.
"""

from __future__ import annotations

import ember

from ._common import arg, register_if_defined

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
    zeros = g.new_zeros(x.shape)
    if x.ndim == 0:
        return (zeros + g.sum(),)
    return (ember.index_put(zeros, _grids(index, dim), g, accumulate=True),)


def _scatter(grads, inputs, outputs):
    if arg(inputs, 4, "reduce", None) is not None:
        raise RuntimeError("derivative for aten::scatter is not implemented")  # PyTorch has none either
    g = grads[0]
    x = inputs.args[0]
    dim, index, src = _dim(inputs, x), arg(inputs, 2, "index"), arg(inputs, 3, "src")
    grad_src = _to_src(_gather_from(g, dim, index), src) if isinstance(src, ember.Tensor) else None
    return _zero_at(g, dim, index), None, None, grad_src


def _scatter_add(grads, inputs, outputs):
    g = grads[0]
    x = inputs.args[0]
    dim, index = _dim(inputs, x), arg(inputs, 2, "index")
    return g, None, None, _to_src(_gather_from(g, dim, index), arg(inputs, 3, "src"))


def _to_src(grad, src):
    """A gradient of index's shape, zero-padded to src's (scatter reads only src[:index.shape])."""
    if tuple(grad.shape) == tuple(src.shape):
        return grad
    pad = [p for n, m in zip(reversed(grad.shape), reversed(src.shape)) for p in (0, m - n)]
    return OPS["constant_pad_nd"](grad, pad, 0)


def _head(src, index):
    """The part of src a scatter reads: src[:index.shape]."""
    if tuple(src.shape) == tuple(index.shape):
        return src
    return src[tuple(slice(0, n) for n in index.shape)]


def _scatter_reduce(grads, inputs, outputs):
    # PyTorch's scatter_reduce_backward; self is the value before the op (saved by clone_self).
    reduce = arg(inputs, 4, "reduce")
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):  # the forward's "max"/"min" aliases
        raise RuntimeError(f"Expected 'reduce' to be one of 'sum', 'prod', 'mean', 'amax', 'amin' but got {reduce}.")
    g = grads[0]
    x = inputs.args[0]
    dim, index, full_src = _dim(inputs, x), arg(inputs, 2, "index"), arg(inputs, 3, "src")
    include_self = inputs.kwargs.get("include_self", arg(inputs, 5, "include_self", True))
    src = _head(full_src, index)
    if reduce == "sum":
        grad_self, grad_src = g, _gather_from(g, dim, index)
    elif reduce == "prod":
        grad_self, grad_src = _prod_grads(g, x, dim, index, src, include_self, outputs[0])
    elif reduce == "mean":
        counts = ember.ones(x.shape, dtype=g.dtype) if include_self else ember.zeros(x.shape, dtype=g.dtype)
        counts = ember.scatter_add(counts, dim, index, ember.ones(tuple(index.shape), dtype=g.dtype))
        counts = ember.where(ember.eq(counts, 0), ember.ones((), dtype=g.dtype), counts)
        grad_self = g / counts
        grad_src = _gather_from(grad_self, dim, index)
    else:  # amax / amin: the gradient is split evenly among the elements equal to the result
        result = outputs[0]
        value = _gather_from(result, dim, index)
        self_hit = ember.eq(x, result)
        src_hit = ember.eq(src, value)
        count = ember.scatter_add(self_hit.to(g.dtype), dim, index, src_hit.to(g.dtype))
        share = g / count
        grad_self = ember.where(self_hit, share, ember.zeros((), dtype=g.dtype))
        grad_src = ember.where(src_hit, _gather_from(share, dim, index), ember.zeros((), dtype=g.dtype))
    if not include_self:
        grad_self = _zero_at(grad_self, dim, index)
    return grad_self, None, None, _to_src(grad_src, full_src), None


def _prod_grads(g, x, dim, index, src, include_self, result):
    # The product without one factor, computed without dividing by zeros: a zero self is replaced by
    # one; a src that is the only zero at its position is replaced by one for its own gradient.
    one = ember.ones((), dtype=g.dtype)
    masked_self = ember.where(ember.eq(x, 0), one, x)
    grad_self = g * ember.scatter_reduce(masked_self, dim, index, src, "prod", include_self=include_self) / masked_self
    src_zero = ember.eq(src, 0)
    zeros_at = ember.scatter_add(ember.zeros(x.shape, dtype=g.dtype), dim, index, src_zero.to(g.dtype))
    single_zero = ember.logical_and(src_zero, ember.eq(_gather_from(zeros_at, dim, index), 1))
    masked_src = ember.where(single_zero, one, src)
    masked_result = ember.scatter_reduce(x, dim, index, masked_src, "prod", include_self=include_self)
    grad_src = ember.where(single_zero, _gather_from(g * masked_result, dim, index),
                           _gather_from(g * result, dim, index) / ember.where(src_zero, one, src))
    return grad_self, grad_src


def _reads_self(args, kwargs) -> bool:
    reduce = args[4] if len(args) > 4 else kwargs.get("reduce")
    return reduce in ("prod", "amax", "amin")


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
    mask = mask.expand(tuple(g.shape)) if tuple(mask.shape) != tuple(g.shape) else mask
    zero = ember.zeros((), dtype=g.dtype)
    picked = OPS["index"](g, [mask]).reshape(-1)
    pad = source.numel() - picked.numel()
    if pad:
        picked = ember.cat([picked, ember.zeros((pad,), dtype=g.dtype)])
    return ember.where(mask, zero, g), None, picked.reshape(source.shape)


register_if_defined("gather", _gather)
register_if_defined("scatter_", _scatter)
register_if_defined("scatter_add_", _scatter_add)
register_if_defined("scatter_reduce_", _scatter_reduce, save_output=True, clone_self=_reads_self)
register_if_defined("index_add_", _index_add)
register_if_defined("index_copy_", _index_copy)
register_if_defined("index_fill_", _index_fill)
register_if_defined("masked_scatter_", _masked_scatter)
