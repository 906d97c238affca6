"""``immutable_list`` and ``immutable_dict``: the containers a Node keeps its arguments in.

A node's ``args``/``kwargs`` must change only through the Node API (``node.args = ...``,
``update_arg``), which keeps the use lists in step; editing a nested list in place would
leave ``users`` stale, so these containers refuse mutation, as torch.fx's do.
"""

from __future__ import annotations

__all__ = ["immutable_dict", "immutable_list"]

_LIST_MUTATORS = (
    "__delitem__", "__iadd__", "__imul__", "__setitem__", "append", "clear", "extend", "insert",
    "pop", "remove", "reverse", "sort",
)
_DICT_MUTATORS = ("__delitem__", "__ior__", "__setitem__", "clear", "pop", "popitem", "setdefault", "update")


def _refuse(self, *args, **kwargs):
    raise NotImplementedError(f"'{type(self).__name__}' object is immutable")


class immutable_list(list):  # noqa: N801 - PyTorch's name
    """A list that cannot be changed after construction (hashable, as in torch.fx)."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self))

    def __reduce__(self):
        return (immutable_list, (tuple(iter(self)),))


class immutable_dict(dict):  # noqa: N801 - PyTorch's name
    """A dict that cannot be changed after construction (hashable, as in torch.fx)."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self.items()))

    def __reduce__(self):
        return (immutable_dict, (dict(self),))


for _name in _LIST_MUTATORS:
    setattr(immutable_list, _name, _refuse)
for _name in _DICT_MUTATORS:
    setattr(immutable_dict, _name, _refuse)
