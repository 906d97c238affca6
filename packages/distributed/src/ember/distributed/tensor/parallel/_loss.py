"""``loss_parallel()``: cross-entropy on logits sharded over the class dimension."""

from __future__ import annotations

import contextlib

from .._dispatch import LOSS_PARALLEL


@contextlib.contextmanager
def loss_parallel():
    """Within it, ``cross_entropy``/``nll_loss`` take logits sharded on the class dimension (a
    ``ColwiseParallel(use_local_output=False)`` output) with plain targets, which count as
    replicated; the loss is a replicated DTensor, and its ``backward()`` belongs inside too (as
    PyTorch's). ember's DTensor rules compute the loss from the sharded logits (softmax and
    reductions by sharding propagation) rather than PyTorch's dedicated kernel: same values."""
    LOSS_PARALLEL[0] += 1
    try:
        yield
    finally:
        LOSS_PARALLEL[0] -= 1
