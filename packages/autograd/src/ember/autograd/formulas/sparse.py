"""Derivatives of the layout conversions (issue 19): the gradient of a conversion is the
incoming gradient converted back, restricted to the stored pattern where the input is sparse."""

from __future__ import annotations

import ember
from ember._src.sparse._convert import compressed_to_coo, values_at

from ._registry import derivative


def _like(g, x):
    """``g`` in ``x``'s layout: dense for a strided ``x``, masked to ``x``'s (coalesced) pattern
    otherwise."""
    if x.layout is ember.strided:
        return g.to_dense() if g.layout is not ember.strided else g
    if x.layout is ember.sparse_coo:
        x = x.detach().coalesce()
    return g.sparse_mask(x) if g.layout is ember.strided else g.to_dense().sparse_mask(x)


@derivative("_to_dense")
def _to_dense(grads, inputs, outputs):
    return (_like(grads[0], inputs.args[0]),)


@derivative("_to_sparse")
def _to_sparse(grads, inputs, outputs):
    return (_like(grads[0], inputs.args[0]),)


@derivative("coalesce")
def _coalesce(grads, inputs, outputs):
    # Each stored entry of the input (duplicates included) gets the gradient of its position.
    return (_like(grads[0], inputs.args[0]),)


@derivative("sparse_mask")
def _sparse_mask(grads, inputs, outputs):
    return (_like(grads[0], inputs.args[0]), None)


@derivative("_sparse_mm")
def _sparse_mm(grads, inputs, outputs):
    """torch.sparse.mm: a sparse operand's gradient is masked to its pattern (unlike mm's)."""
    g = grads[0]
    a, b = inputs.args[0], inputs.args[1]
    grad_a = _like(ember.mm(g, b.t()), a) if a.requires_grad else None
    grad_b = _like(ember.mm(a.t(), g), b) if b.requires_grad else None
    return grad_a, grad_b


@derivative("_sparse_coo_tensor_unsafe")
def _coo_from_members(grads, inputs, outputs):
    indices, size = inputs.args[0], tuple(inputs.args[2])
    return None, values_at(grads[0], indices, size)


@derivative("_sparse_compressed_tensor_unsafe", save_output=True)
def _compressed_from_members(grads, inputs, outputs):
    coo = compressed_to_coo(outputs[0])
    g = grads[0]
    if outputs[0].layout in (ember.sparse_bsr, ember.sparse_bsc):
        rows, cols, bh, bw = coo.shape[:4]
        dense = g.to_dense() if g.layout is not ember.strided else g
        nd = dense.ndim - 2
        g = dense.reshape((rows, bh, cols, bw) + tuple(dense.shape[2:])).permute(
            (0, 2, 1, 3) + tuple(range(4, 4 + nd)))
    return None, None, values_at(g, coo._sp_indices, tuple(coo.shape))
