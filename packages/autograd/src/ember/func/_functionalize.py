"""``ember.func.functionalize``: PyTorch's transform that removes mutation (and, optionally, aliasing)
from a function while keeping its meaning.

ember runs transforms eagerly and traces with its own recorder (compile, export), which already
records the functional form of in-place ops; so the transform keeps the function's observable
behaviour: the same outputs and the same mutations of its inputs, which is what PyTorch's
guarantees (it copies input mutations back). The one difference, docs/deviations.md: an output
that is a view of an input stays one (PyTorch regenerates some such outputs as fresh tensors).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

_REMOVE = ("mutations", "mutations_and_views")


def functionalize(func: Callable[..., Any], *, remove: str = "mutations") -> Callable[..., Any]:
    if remove not in _REMOVE:
        raise RuntimeError(
            f"functionalize(f, remove='mutations'): received invalid argument for remove={remove}. Valid options "
            "are:\n     remove='mutations': all inplace and out= operators will be removed from the program, and "
            "replaced with their out-of-place equivalents.\n     remove='mutations_and_views': In addition to the "
            "above, all aliasing operators {view} will be replaced with their non-aliasing counterparts, "
            "{view}_copy.\n")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapped
