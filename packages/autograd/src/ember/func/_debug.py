"""``ember.func.debug_unwrap``: the tensor a function transform wrapped, for printing in a debugger."""

from __future__ import annotations

import sys

from ember import Tensor


def debug_unwrap(tensor: Tensor, *, recurse: bool = True) -> Tensor:
    """The physical value under a vmap's BatchedTensor (batch dim first; every level's with ``recurse``);
    any other tensor unchanged. grad transforms do not wrap tensors in ember, so there is nothing to
    remove for them."""
    # Not imported here: defining BatchedTensor (a __torch_dispatch__ subclass) switches the dispatcher's
    # subclass path on for the process; until vmap loaded it, no tensor can be batched.
    batched = sys.modules.get("ember.func._batched")
    if batched is None or not isinstance(tensor, batched.BatchedTensor):
        return tensor
    value = tensor._value
    return debug_unwrap(value) if recurse else value
