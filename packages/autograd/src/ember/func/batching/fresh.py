"""Tensors a vmap call made itself (Note [Fresh tensors]), which may become batched in place."""

from __future__ import annotations

import weakref

from ember._src.tensor import Tensor

# Note [Fresh tensors]: vmap level number -> the plain tensors that factories (and clones of such
# tensors) made inside that vmap call. Only the function under vmap has seen them, so one that an
# op fills with batched values can become batched in place (a per-sample buffer, as autograd
# formulas allocate with zeros() and then write into); PyTorch would raise there instead.
# (Keyed by id with weak references: a WeakSet would compare tensors with ==, elementwise.)
_FRESH: dict[int, dict[int, weakref.ref]] = {}


def track_fresh(level, tensor) -> None:
    if type(tensor) is Tensor:
        _FRESH.setdefault(level.number, {})[id(tensor)] = weakref.ref(tensor)


def forget_level(level) -> None:
    _FRESH.pop(level.number, None)


def is_fresh(level_number: int, tensor) -> bool:
    fresh = _FRESH.get(level_number)
    if fresh is None or type(tensor) is not Tensor:
        return False
    ref = fresh.get(id(tensor))
    return ref is not None and ref() is tensor
