"""``torch.jit.annotations``: the typing names TorchScript code imports from it (``from
torch.jit.annotations import List``, timm's DenseNet) and the eager checks of annotation forms."""

from __future__ import annotations

import types
import typing
from typing import Any, Dict, List, Optional, Tuple, Union  # noqa: UP035 - the names this module re-exports

from ._surface import _refuse_bare

__all__ = ["Any", "BroadcastingList1", "BroadcastingList2", "BroadcastingList3", "Dict", "List", "Optional",
           "Tuple", "Union", "is_dict", "is_list", "is_optional", "is_tuple", "is_union"]


class _BroadcastingList:
    """``BroadcastingListN[T]``: an int-or-list annotation TorchScript expands; eager Python ignores it."""

    def __getitem__(self, types):
        return None


BroadcastingList1 = _BroadcastingList()
BroadcastingList2 = BroadcastingList1
BroadcastingList3 = BroadcastingList1


def _origin_in(ann, origin, modules=("builtins", "typing")) -> bool:
    if not hasattr(ann, "__module__"):
        return False
    return ann.__module__ in modules and typing.get_origin(ann) is origin


def is_tuple(ann) -> bool:
    if ann is typing.Tuple:  # noqa: UP006 - the bare form is refused, as PyTorch
        _refuse_bare(ann)
    return _origin_in(ann, tuple)


def is_list(ann) -> bool:
    if ann is typing.List:  # noqa: UP006
        _refuse_bare(ann)
    return _origin_in(ann, list)


def is_dict(ann) -> bool:
    if ann is typing.Dict:  # noqa: UP006
        _refuse_bare(ann)
    return _origin_in(ann, dict)


def is_union(ann) -> bool:
    if ann is Union:
        raise RuntimeError("Attempted to use Union without a contained type. Please add a contained type, e.g. "
                           "Union[int]")
    return isinstance(ann, types.UnionType) or _origin_in(ann, Union, ("typing",))


def is_optional(ann) -> bool:
    if ann is Optional:
        _refuse_bare(ann)
    if _origin_in(ann, Optional, ("typing",)):
        return True
    args = typing.get_args(ann)
    return is_union(ann) and len(args) == 2 and (None in args or type(None) in args)
