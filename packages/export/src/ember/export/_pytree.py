"""What export adds to ember's one pytree (``ember.autograd._pytree``, re-exported as
``ember.utils._pytree``).

Export flattens a call's ``(args, kwargs)`` into the graph's user inputs and its result into the
graph's outputs; the specs rebuild the structures around the graph. The containers, the
``TreeSpec`` and the registry are the shared ones: a type registered through
``ember.utils._pytree`` (or ``ember.export.register_dataclass``) is a container here. What is
export's own: default serialized names for the types it registers, the saved form of a spec
(``spec_to_json`` / ``spec_from_json``, JSON inside the program file, which names types and never
pickles them: loading resolves only names registered in the loading process), leaf key paths for
placeholder names, and ``tree_flatten_spec``, the flattening the exported module's code does.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections import OrderedDict, defaultdict, namedtuple

from ember.autograd._pytree import (
    BUILTIN_TYPES,
    NO_SERIALIZED_TYPE_NAME_FOUND,
    SERIALIZED_TYPE_TO_PYTHON_TYPE,
    STANDARD_DICT_TYPES,
    SUPPORTED_NODES,
    SUPPORTED_SERIALIZED_TYPES,
    SequenceKey,
    TreeSpec,
    _get_node_type,
    _register_structseq,
    tree_flatten,
    tree_is_leaf,
    tree_leaves,
    tree_map,
    tree_unflatten,
    treespec_leaf,
)
from ember.autograd._pytree import register_dataclass as _register_dataclass
from ember.autograd._pytree import register_pytree_node as _register_pytree_node

__all__ = ["TreeSpec", "leaf_key_paths", "node_children", "register_dataclass", "register_pytree_node",
           "spec_from_json", "spec_to_json", "tree_flatten", "tree_flatten_spec", "tree_leaves", "tree_map",
           "tree_unflatten"]

LEAF = treespec_leaf()


def register_pytree_node(cls: type, flatten_fn, unflatten_fn, *, serialized_type_name: str | None = None,
                         flatten_with_keys_fn=None) -> None:
    """Registers ``cls`` as a container: ``flatten_fn(x) -> (children, context)`` and
    ``unflatten_fn(children, context) -> x``. ``serialized_type_name`` names it in saved files
    (``module.qualname`` when not given). The registry is the shared one: a type registered here is a
    container for ``ember.utils._pytree`` too."""
    name = serialized_type_name or f"{cls.__module__}.{cls.__qualname__}"
    _register_pytree_node(cls, flatten_fn, unflatten_fn, serialized_type_name=name,
                          flatten_with_keys_fn=flatten_with_keys_fn)


def register_dataclass(cls: type, *, serialized_type_name: str | None = None) -> None:
    """Makes a dataclass a pytree container whose fields are its children (``torch.export``'s),
    named ``module.qualname`` in saved files unless ``serialized_type_name`` says otherwise."""
    if not dataclasses.is_dataclass(cls):
        raise ValueError(f"register_dataclass expects a dataclass, got {cls}")
    _register_dataclass(cls, serialized_type_name=serialized_type_name or f"{cls.__module__}.{cls.__qualname__}")


def node_children(tree) -> list:
    """The children of a node (a value ``tree_is_leaf`` says is no leaf)."""
    return list(SUPPORTED_NODES[_get_node_type(tree)].flatten_fn(tree)[0])


# ------------------------------------------------------------------ key paths, for placeholder names


def leaf_key_paths(tree) -> list[tuple]:
    """The key path of each leaf of ``tree`` (``tree_leaves_with_path``'s), a node registered
    without ``flatten_with_keys_fn`` giving its children ``SequenceKey``s (PyTorch refuses those)."""
    out: list[tuple] = []
    _collect_paths(tree, (), out)
    return out


def _collect_paths(tree, prefix: tuple, out: list) -> None:
    if tree_is_leaf(tree):
        out.append(prefix)
        return
    node = SUPPORTED_NODES[_get_node_type(tree)]
    if node.flatten_with_keys_fn is not None:
        keyed = node.flatten_with_keys_fn(tree)[0]
    else:
        keyed = [(SequenceKey(i), c) for i, c in enumerate(node_children(tree))]
    for key, child in keyed:
        _collect_paths(child, (*prefix, key), out)


# ------------------------------------------------------------------ the saved form of a spec

_BUILTIN_NAMES = {tuple: "builtins.tuple", list: "builtins.list", dict: "builtins.dict",
                  OrderedDict: "collections.OrderedDict"}
_STRUCTSEQ_PREFIX = "ember.return_types."


def _is_structseq(typ) -> bool:
    return isinstance(typ, type) and typ.__module__ == "ember.return_types"


def spec_to_json(spec: TreeSpec):
    """``spec`` as JSON-able data: ``{"leaf": true}`` for a leaf, else ``{"type": name, "children":
    [...]}`` with the node's ``"context"`` where it has one. Namedtuples are saved by their fields
    (``namedtuple:a,b``), other nodes by their serialized name."""
    if spec.is_leaf():
        return {"leaf": True}
    node = {"type": _type_name(spec), "children": [spec_to_json(c) for c in spec.children()]}
    if spec.type is not namedtuple and not _is_structseq(spec.type) and spec.type not in (tuple, list):
        node["context"] = _dumpable_context(spec)
    return node


def _type_name(spec: TreeSpec) -> str:
    typ = spec.type
    if typ in _BUILTIN_NAMES:
        return _BUILTIN_NAMES[typ]
    if typ is namedtuple:
        return "namedtuple:" + ",".join(spec.context._fields)
    if _is_structseq(typ):
        return _STRUCTSEQ_PREFIX + typ.__name__
    entry = SUPPORTED_SERIALIZED_TYPES.get(typ)
    if entry is None or entry.serialized_type_name == NO_SERIALIZED_TYPE_NAME_FOUND:
        raise TypeError(f"{typ} has no serialized_type_name: register it with one to save the program")
    return entry.serialized_type_name


def _dumpable_context(spec: TreeSpec):
    entry = SUPPORTED_SERIALIZED_TYPES[spec.type]
    if entry.to_dumpable_context is not None:
        return entry.to_dumpable_context(spec.context)
    try:
        json.dumps(spec.context)
    except (TypeError, ValueError) as e:
        raise TypeError(f"the pytree context of {spec.type} ({spec.context!r}) cannot be serialized: it must be "
                        "JSON data, or the type registered with to_dumpable_context") from e
    return spec.context


def spec_from_json(node) -> TreeSpec:
    """The inverse of ``spec_to_json``."""
    if node is None or node.get("leaf"):
        return LEAF
    name = node["type"]
    children = [spec_from_json(c) for c in node["children"]]
    if name.startswith("namedtuple:"):
        return TreeSpec(namedtuple, namedtuple("ExportedNamedTuple", name.split(":", 1)[1].split(",")), children)
    if name.startswith(_STRUCTSEQ_PREFIX):
        typ = getattr(importlib.import_module("ember.return_types"), name[len(_STRUCTSEQ_PREFIX):])
        if typ not in SUPPORTED_NODES:
            _register_structseq(typ)
        return TreeSpec(typ, None, children)
    inverse = {v: k for k, v in _BUILTIN_NAMES.items()}
    if name in inverse:
        typ = inverse[name]
    elif name in SERIALIZED_TYPE_TO_PYTHON_TYPE and name != NO_SERIALIZED_TYPE_NAME_FOUND:
        typ = SERIALIZED_TYPE_TO_PYTHON_TYPE[name]
    else:
        raise ValueError(f"the saved program names the container type {name!r}, which is not registered in this "
                         "process: call ember.export.register_dataclass (or register_pytree_node) for it first")
    if typ in (tuple, list):
        return TreeSpec(typ, None, children)
    entry = SUPPORTED_SERIALIZED_TYPES[typ]
    context = node.get("context")
    if entry.from_dumpable_context is not None:
        context = entry.from_dumpable_context(context)
    elif typ in BUILTIN_TYPES and context is not None:
        context = list(context)
    return TreeSpec(typ, context, children)


# ------------------------------------------------------------------ the exported module's flattening


def tree_flatten_spec(tree, spec: TreeSpec) -> list:
    """The leaves of ``tree`` in the order ``spec`` lays them out (the flattening an exported
    module's code does, ``torch.fx._pytree.tree_flatten_spec``): dicts are read by the spec's keys,
    so their order does not matter, and any sequence stands for a tuple, list or namedtuple."""
    if spec.is_leaf():
        return [tree]
    typ = spec.type
    if typ in STANDARD_DICT_TYPES:
        keys = spec.context if typ is not defaultdict else spec.context[1]
        children = [tree[key] for key in keys]
    elif typ in (tuple, list, namedtuple) or _is_structseq(typ):
        children = list(tree)
    elif tree_is_leaf(tree):
        children = [tree]
    else:
        children = node_children(tree)
    if len(children) != spec.num_children:
        raise ValueError(f"the inputs do not match the structure {spec}: got {tree!r}")
    leaves: list = []
    for child, child_spec in zip(children, spec.children()):
        leaves.extend(tree_flatten_spec(child, child_spec))
    return leaves

