"""Flattening nested containers into leaves and a ``TreeSpec`` (PyTorch's ``utils._pytree``).

Export flattens a call's ``(args, kwargs)`` into the graph's user inputs and its result
into the graph's outputs; the specs rebuild the structures around the graph. Built in:
tuple, list, dict, OrderedDict and namedtuple; None is a leaf, as in PyTorch 2.13 (an input
``y=None`` is a user input of its own, a ``ConstantArgument``). ``register_pytree_node`` and
``register_dataclass`` add user containers to ``ember.utils._pytree``'s registry (which this
module reads, so a type registered there is a container here); each has a serialized name so
that a saved program can name it without pickling it (loading only resolves names that
are registered in the loading process).
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from typing import Any

from ember.utils import _pytree as _shared


def register_pytree_node(cls: type, flatten_fn, unflatten_fn, *, serialized_type_name: str | None = None,
                         flatten_with_keys_fn=None) -> None:
    """Registers ``cls`` as a container: ``flatten_fn(x) -> (children, context)`` and
    ``unflatten_fn(children, context) -> x``. ``serialized_type_name`` names it in saved files.
    The registry is ``ember.utils._pytree``'s: a type registered there is a container here too."""
    name = serialized_type_name or f"{cls.__module__}.{cls.__qualname__}"
    _shared.register_pytree_node(cls, flatten_fn, unflatten_fn, serialized_type_name=name,
                                 flatten_with_keys_fn=flatten_with_keys_fn)


def register_dataclass(cls: type, *, serialized_type_name: str | None = None) -> None:
    """Makes a dataclass a pytree container whose fields are its children (``torch.export``'s)."""
    if not dataclasses.is_dataclass(cls):
        raise ValueError(f"register_dataclass expects a dataclass, got {cls}")
    _shared.register_dataclass(cls, serialized_type_name=serialized_type_name or f"{cls.__module__}.{cls.__qualname__}")


def _user_node(cls):
    """The registry entry of a container type registered by the user (None for the built-in
    containers, which this module flattens itself, and for leaves)."""
    node = _shared.SUPPORTED_NODES.get(cls)
    if node is None or cls in _shared.BUILTIN_TYPES or cls.__module__ == "ember.return_types":
        return None
    return node


def _serialized_name(cls) -> str | None:
    entry = _shared.SUPPORTED_SERIALIZED_TYPES.get(cls)
    if entry is None or entry.serialized_type_name == _shared.NO_SERIALIZED_TYPE_NAME_FOUND:
        return None
    return entry.serialized_type_name


def _is_namedtuple(obj) -> bool:
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


class TreeSpec:
    """The structure of a flattened value: a node type, its context and its children's specs.
    A leaf is ``TreeSpec(None, None, [])``."""

    __slots__ = ("type", "context", "children_specs", "num_leaves")

    def __init__(self, type, context, children_specs: list[TreeSpec]):
        self.type = type
        self.context = context
        self.children_specs = children_specs
        self.num_leaves = 1 if type is None else sum(c.num_leaves for c in children_specs)

    def is_leaf(self) -> bool:
        return self.type is None

    def __eq__(self, other) -> bool:
        return (isinstance(other, TreeSpec) and self.type is other.type and self.context == other.context
                and self.children_specs == other.children_specs)

    def __repr__(self) -> str:
        return self._text(0)

    def _text(self, indent: int) -> str:
        """PyTorch's layout: the first child inline, each later one on its own line, indented two
        more spaces per level (``TreeSpec(tuple, None, [*,\n  *])``)."""
        if self.is_leaf():
            return "*"
        indent += 2
        children = [c._text(indent) for c in self.children_specs]
        inner = ",".join([children[0]] + ["\n" + " " * indent + c for c in children[1:]]) if children else ""
        if issubclass(self.type, tuple) and hasattr(self.type, "_fields"):  # PyTorch's namedtuple node
            return f"TreeSpec(namedtuple, {self.type}, [{inner}])"
        return f"TreeSpec({self.type.__name__}, {self.context}, [{inner}])"


LEAF = TreeSpec(None, None, [])


def _children(obj) -> tuple[type | None, Any, list] | None:
    """(node type, context, children) of a container, None for a leaf."""
    cls = type(obj)
    node = _user_node(cls)
    if node is not None:
        children, ctx = node.flatten_fn(obj)
        return cls, ctx, list(children)
    if _is_namedtuple(obj):
        return cls, None, list(obj)
    if cls in (tuple, list):
        return cls, None, list(obj)
    if cls in (dict, OrderedDict):
        keys = list(obj.keys())
        return cls, keys, [obj[k] for k in keys]
    return None


def tree_flatten(tree) -> tuple[list, TreeSpec]:
    leaves: list = []

    def walk(obj) -> TreeSpec:
        node = _children(obj)
        if node is None:
            leaves.append(obj)
            return LEAF
        cls, ctx, children = node
        return TreeSpec(cls, ctx, [walk(c) for c in children])

    spec = walk(tree)
    return leaves, spec


def tree_flatten_with_path(tree) -> tuple[list[tuple[str, Any]], TreeSpec]:
    """Like tree_flatten, each leaf paired with its access path (``[0]['x'].y``), for messages."""
    leaves, spec = tree_flatten(tree)
    return list(zip(_paths(spec, ""), leaves)), spec


def _paths(spec: TreeSpec, prefix: str) -> list[str]:
    if spec.is_leaf():
        return [prefix]
    out = []
    for i, child in enumerate(spec.children_specs):
        if spec.type in (dict, OrderedDict):
            key = f"[{spec.context[i]!r}]"
        elif isinstance(spec.context, list) and len(spec.context) == len(spec.children_specs):
            key = f".{spec.context[i]}"
        elif isinstance(spec.type, type) and issubclass(spec.type, tuple) and hasattr(spec.type, "_fields"):
            key = f".{spec.type._fields[i]}"  # a namedtuple's field, as PyTorch's GetAttrKey
        else:
            key = f"[{i}]"
        out.extend(_paths(child, prefix + key))
    return out


def tree_unflatten(leaves, spec: TreeSpec):
    leaves = list(leaves)
    if len(leaves) != spec.num_leaves:
        raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers "
                         f"to a pytree that holds {spec.num_leaves} items ({spec}).")
    it = iter(leaves)

    def build(s: TreeSpec):
        if s.is_leaf():
            return next(it)
        children = [build(c) for c in s.children_specs]
        cls = s.type
        if cls is type(None):
            return None
        node = _user_node(cls)
        if node is not None:
            return node.unflatten_fn(children, s.context)
        if cls in (dict, OrderedDict):
            return cls(zip(s.context, children))
        if issubclass(cls, tuple) and hasattr(cls, "_fields"):
            return cls(*children)
        return cls(children)

    return build(spec)


def tree_map(fn, tree):
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(x) for x in leaves], spec)


def tree_leaves(tree) -> list:
    return tree_flatten(tree)[0]


# ------------------------------------------------------------------ naming types in saved files

_BUILTIN_NAMES = {tuple: "builtins.tuple", list: "builtins.list", dict: "builtins.dict",
                  OrderedDict: "collections.OrderedDict", type(None): "builtins.NoneType"}


def type_name(cls) -> str:
    if cls in _BUILTIN_NAMES:
        return _BUILTIN_NAMES[cls]
    if _user_node(cls) is not None:
        name = _serialized_name(cls)
        if name is None:
            raise TypeError(f"{cls} has no serialized_type_name: register it with one to save the program")
        return name
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return "namedtuple:" + ",".join(cls._fields)
    raise TypeError(f"{cls} is not a pytree node type")


def spec_to_json(spec: TreeSpec):
    if spec.is_leaf():
        return {"leaf": True}
    ctx = spec.context
    node = {"type": type_name(spec.type), "children": [spec_to_json(c) for c in spec.children_specs]}
    if spec.type in (dict, OrderedDict) or _user_node(spec.type) is not None:
        _check_json_context(ctx, spec.type)
        node["context"] = ctx
    return node


def _check_json_context(ctx, cls) -> None:
    ok = ctx is None or isinstance(ctx, (str, int, float, bool)) or (
        isinstance(ctx, (list, tuple)) and all(isinstance(c, (str, int, float, bool)) for c in ctx))
    if not ok:
        raise TypeError(f"the pytree context of {cls} ({ctx!r}) cannot be serialized: only strings, numbers "
                        "and lists of them are")


def spec_from_json(node) -> TreeSpec:
    if node is None or node.get("leaf"):
        return LEAF
    name = node["type"]
    children = [spec_from_json(c) for c in node["children"]]
    inverse = {v: k for k, v in _BUILTIN_NAMES.items()}
    if name in inverse:
        cls = inverse[name]
    elif name in _shared.SERIALIZED_TYPE_TO_PYTHON_TYPE:
        cls = _shared.SERIALIZED_TYPE_TO_PYTHON_TYPE[name]
    elif name.startswith("namedtuple:"):
        from collections import namedtuple

        cls = namedtuple("ExportedNamedTuple", name.split(":", 1)[1].split(","))
    else:
        raise ValueError(f"the saved program names the container type {name!r}, which is not registered in this "
                         "process: call ember.export.register_dataclass (or register_pytree_node) for it first")
    ctx = node.get("context")
    if cls in (dict, OrderedDict) and ctx is not None:
        ctx = list(ctx)
    return TreeSpec(cls, ctx, children)


def tree_flatten_spec(tree, spec: TreeSpec) -> list:
    """The leaves of ``tree`` in the order ``spec`` lays them out (the flattening an exported
    module's code does): dicts are read by the spec's keys, so their order does not matter, and a
    list stands for a tuple."""
    if spec.is_leaf():
        return [tree]
    cls = spec.type
    if cls is type(None):
        return []
    if cls in (dict, OrderedDict):
        children = [tree[key] for key in spec.context]
    elif cls in (tuple, list) or (issubclass(cls, tuple) and hasattr(cls, "_fields")):
        children = list(tree)
    else:
        node = _children(tree)
        children = node[2] if node is not None else [tree]
    if len(children) != len(spec.children_specs):
        raise ValueError(f"the inputs do not match the structure {spec}: got {tree!r}")
    leaves: list = []
    for child, child_spec in zip(children, spec.children_specs):
        leaves.extend(tree_flatten_spec(child, child_spec))
    return leaves
