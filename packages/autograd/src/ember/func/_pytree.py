"""Nested containers of tensors (pytrees): flatten to leaves and rebuild, as the transforms need.

Containers are tuples, lists, dicts (keys kept in insertion order) and namedtuples; anything
else is a leaf. ``None`` is a leaf here too, which is how ``in_dims=None`` reads naturally.
"""

from __future__ import annotations

from typing import Any


class TreeSpec:
    """The shape of a pytree: its container kind, keys (dicts), and child specs (``None`` for a leaf)."""

    __slots__ = ("kind", "context", "children")

    def __init__(self, kind, context, children):
        self.kind = kind
        self.context = context
        self.children = children

    @property
    def num_leaves(self) -> int:
        if self.kind is None:
            return 1
        return sum(c.num_leaves for c in self.children)

    def __eq__(self, other) -> bool:
        return (isinstance(other, TreeSpec) and self.kind == other.kind and self.context == other.context
                and self.children == other.children)

    def __repr__(self, indent: int = 0) -> str:
        # PyTorch's layout (vmap's messages print specs): the first child inline, each later one on
        # its own line, two more spaces per level.
        if self.kind is None:
            return "*"
        indent += 2
        children = [c.__repr__(indent) for c in self.children]
        inner = ",".join(children[:1] + ["\n" + " " * indent + c for c in children[1:]])
        if self.kind is dict:
            cls, keys = self.context
            return f"TreeSpec({cls.__name__}, {list(keys)}, [{inner}])"
        if self.kind == "namedtuple":
            return f"TreeSpec(namedtuple, {self.context}, [{inner}])"
        return f"TreeSpec({self.kind.__name__}, None, [{inner}])"


LEAF = TreeSpec(None, None, ())


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _children(tree):
    """(kind, context, children) of a container, or None for a leaf."""
    if isinstance(tree, dict):
        return dict, (type(tree), tuple(tree)), list(tree.values())
    if _is_namedtuple(tree):
        return "namedtuple", type(tree), list(tree)
    if isinstance(tree, tuple):
        return tuple, None, list(tree)
    if isinstance(tree, list):
        return list, None, list(tree)
    return None


def tree_flatten(tree) -> tuple[list, TreeSpec]:
    leaves: list = []
    spec = _flatten_into(tree, leaves)
    return leaves, spec


def _flatten_into(tree, leaves: list) -> TreeSpec:
    found = _children(tree)
    if found is None:
        leaves.append(tree)
        return LEAF
    kind, context, children = found
    return TreeSpec(kind, context, [_flatten_into(c, leaves) for c in children])


def tree_unflatten(leaves, spec: TreeSpec):
    it = iter(leaves)
    result = _build(it, spec)
    return result


def _build(it, spec: TreeSpec):
    if spec.kind is None:
        return next(it)
    children = [_build(it, c) for c in spec.children]
    if spec.kind is dict:
        cls, keys = spec.context
        out = cls() if cls is not dict else {}
        for k, v in zip(keys, children):
            out[k] = v
        return out
    if spec.kind == "namedtuple":
        return spec.context(*children)
    return spec.kind(children)


def tree_map(fn, tree):
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(x) for x in leaves], spec)


def broadcast_prefix(prefix, spec: TreeSpec) -> list[Any] | None:
    """Flattens ``prefix`` (a tree whose leaves stand for whole subtrees of ``spec``) to one
    value per leaf of ``spec``; None when the structures do not match."""
    out: list = []
    return out if _broadcast(prefix, spec, out) else None


def _broadcast(prefix, spec: TreeSpec, out: list) -> bool:
    found = _children(prefix)
    if found is None:
        out.extend([prefix] * spec.num_leaves)
        return True
    kind, context, children = found
    if spec.kind is None or len(children) != len(spec.children):
        return False
    if kind is dict:
        if spec.kind is not dict or set(context[1]) != set(spec.context[1]):
            return False
        by_key = dict(zip(context[1], children))
        children = [by_key[k] for k in spec.context[1]]
    elif (kind in (tuple, "namedtuple")) != (spec.kind in (tuple, "namedtuple")) or (kind is list) != (
            spec.kind is list):
        return False
    return all(_broadcast(c, s, out) for c, s in zip(children, spec.children))
