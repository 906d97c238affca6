"""Derivative of cat: each input gets its slice of the gradient."""

from __future__ import annotations

import ember

from ._common import arg
from ._registry import derivative


@derivative("cat", meta_only=True)
def _cat(grads, inputs, outputs):
    g = grads[0]
    tensors = arg(inputs, 0, "tensors")
    dim = arg(inputs, 1, "dim", 0)
    dim = dim % g.ndim
    pieces = []
    start = 0
    for t in tensors:
        if t.ndim == 1 and t.shape[0] == 0 and g.ndim != 1:
            # cat skips legacy empty 1-d inputs; their gradient is empty too.
            pieces.append(ember.zeros(t.shape, dtype=g.dtype))
            continue
        length = t.shape[dim]
        pieces.append(g.narrow(dim, start, length))
        start += length
    return (pieces,)
