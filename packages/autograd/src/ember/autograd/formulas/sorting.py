"""Derivatives of the selection ops that return (values, indices): sort, topk, kthvalue,
median, nanmedian, mode. The values' gradient goes to the indices they were taken from;
the indices get none. Registered when the op exists in this tensor-core build."""

from __future__ import annotations

from ._common import arg, not_implemented, register_if_defined
from .reduction import _restore, _scatter_add


def _selected(dim_pos: int, default_dim, keepdim_pos: int | None):
    def backward(grads, inputs, outputs):
        g = grads[0]
        if g is None:
            return (None,)
        x = inputs.args[0]
        dim = arg(inputs, dim_pos, "dim", default_dim)
        dim = dim % x.ndim if x.ndim else 0
        indices = outputs[1]
        if keepdim_pos is not None and not arg(inputs, keepdim_pos, "keepdim", False):
            indices = _restore(indices, x.shape, (dim,), False)
            g = _restore(g, x.shape, (dim,), False)
        return (_scatter_add(x.shape, dim, indices, g),)

    return backward


register_if_defined("sort", _selected(-1, -1, None), save_output=True)  # dim is keyword-only
register_if_defined("topk", _selected(2, -1, None), save_output=True)
register_if_defined("kthvalue", _selected(2, -1, 3), save_output=True)
register_if_defined("median", _selected(1, None, 2), save_output=True)
register_if_defined("nanmedian", _selected(1, None, 2), save_output=True)
register_if_defined("mode", _selected(1, -1, 2), save_output=True)
# PyTorch records unique's output but has no derivative for it.
register_if_defined("_unique2", not_implemented("_unique2"))
