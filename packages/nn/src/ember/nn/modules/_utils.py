"""Argument normalizers shared by the layers (PyTorch's ``torch.nn.modules.utils``).

Private by name: ``ember.nn`` star-imports ``ember.nn.modules``, so a public ``utils`` here would
replace ``ember.nn.utils``.
"""

from __future__ import annotations

import collections.abc
from itertools import repeat

__all__: list[str] = []


def _ntuple(n: int, name: str = "parse"):
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t, n: int) -> tuple:
    """(a, b) -> (b, b, a, a) for n=2: a layer's per-dim padding in F.pad's last-dim-first order."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size, defaults) -> list:
    """Adaptive pooling sizes: ``None`` entries take the input's size."""
    if isinstance(out_size, int):
        return [out_size]
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d for v, d in zip(out_size, defaults[-len(out_size):])]
