"""ember's one pytree: nested containers flattened to leaves and a ``TreeSpec`` (PyTorch 2.13's
``torch.utils._pytree``, which ``ember.utils._pytree`` re-exports under that path).

It lives here, in the lowest package that needs it (``ember.func``'s transforms flatten their
inputs and outputs with it); ``ember.nn``, ``ember.compile`` and ``ember.export`` use it too, so a
type registered once is a container for all of them. What only one of them needs is written on top
of this ``TreeSpec``: vmap's prefix broadcasting is ``_broadcast_to_and_flatten`` below (as in
PyTorch), export's saved form is ``ember.export._pytree.spec_to_json``.

Containers ("nodes") are tuple, list, dict, OrderedDict, defaultdict, deque, namedtuples (all of
them one node type, ``collections.namedtuple``, whose context is the class), ``ember.return_types``
(a node type each, as PyTorch's structseqs) and the types added with ``register_pytree_node`` /
``register_dataclass``. Everything else is a leaf, ``None`` included. A node flattens to
``(children, context)`` and is rebuilt from them; dicts keep their insertion order.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import threading
import warnings
from collections import OrderedDict, defaultdict, deque, namedtuple
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

__all__ = [
    "PyTree", "Context", "FlattenFunc", "UnflattenFunc", "TreeSpec", "LeafSpec", "KeyEntry", "KeyPath",
    "SequenceKey", "MappingKey", "GetAttrKey", "register_pytree_node", "register_dataclass", "tree_flatten",
    "tree_flatten_with_path", "tree_unflatten", "tree_iter", "tree_leaves", "tree_leaves_with_path",
    "tree_structure", "tree_map", "tree_map_", "tree_map_only", "tree_map_only_", "tree_map_with_path", "tree_all",
    "tree_any", "tree_all_only", "tree_any_only", "tree_is_leaf", "treespec_dumps", "treespec_loads",
    "treespec_pprint", "treespec_leaf", "treespec_tuple", "treespec_dict", "keystr", "key_get", "is_namedtuple",
    "is_namedtuple_class", "is_namedtuple_instance", "arg_tree_leaves",
]

PyTree = Any
Context = Any
FlattenFunc = Callable[[PyTree], tuple[list, Context]]
UnflattenFunc = Callable[[Iterable, Context], PyTree]


class NodeDef(NamedTuple):
    type: type
    flatten_fn: FlattenFunc
    unflatten_fn: UnflattenFunc
    flatten_with_keys_fn: Callable | None


class _SerializeNodeDef(NamedTuple):
    typ: type
    serialized_type_name: str
    to_dumpable_context: Callable | None
    from_dumpable_context: Callable | None


SUPPORTED_NODES: dict[Any, NodeDef] = {}
SUPPORTED_SERIALIZED_TYPES: dict[Any, _SerializeNodeDef] = {}
SERIALIZED_TYPE_TO_PYTHON_TYPE: dict[str, Any] = {}
NO_SERIALIZED_TYPE_NAME_FOUND = "NO_SERIALIZED_TYPE_NAME_FOUND"
_REGISTRY_LOCK = threading.Lock()


# -- keys: how a child is reached from its node (tree_flatten_with_path) ---------------------------


@dataclasses.dataclass(frozen=True)
class SequenceKey:
    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"

    def get(self, sequence):
        return sequence[self.idx]


@dataclasses.dataclass(frozen=True)
class MappingKey:
    key: Any

    def __str__(self) -> str:
        return f"[{self.key!r}]"

    def get(self, mapping):
        return mapping[self.key]


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    name: str

    def __str__(self) -> str:
        return f".{self.name}"

    def get(self, obj):
        return getattr(obj, self.name)


KeyEntry = Any
KeyPath = tuple


def keystr(kp: KeyPath) -> str:
    """The path as source text: ``['a'][0].x``."""
    return "".join(str(k) for k in kp)


def key_get(obj, kp: KeyPath):
    for k in kp:
        obj = k.get(obj)
    return obj


# -- registration ----------------------------------------------------------------------------------


def register_pytree_node(cls: type, flatten_fn: FlattenFunc, unflatten_fn: UnflattenFunc, *,
                         serialized_type_name: str | None = None, to_dumpable_context=None,
                         from_dumpable_context=None, flatten_with_keys_fn=None) -> None:
    """Makes ``cls`` a container: ``flatten_fn(x) -> (children, context)``,
    ``unflatten_fn(children, context) -> x``; ``serialized_type_name`` names it in
    ``treespec_dumps`` (and in saved exported programs); ``flatten_with_keys_fn(x) ->
    ([(key, child), ...], context)`` gives its children's key paths.

    Example:
        >>> class Pair:
        ...     def __init__(self, a, b):
        ...         self.a, self.b = a, b
        >>> register_pytree_node(Pair, lambda p: ([p.a, p.b], None), lambda v, c: Pair(*v))
        >>> tree_leaves([Pair(1, 2), 3])
        [1, 2, 3]
        >>> _deregister_pytree_node(Pair)
    """
    with _REGISTRY_LOCK:
        if cls in SUPPORTED_NODES:
            raise ValueError(f"{cls} is already registered as pytree node.")
    _private_register_pytree_node(cls, flatten_fn, unflatten_fn, serialized_type_name=serialized_type_name,
                                  to_dumpable_context=to_dumpable_context,
                                  from_dumpable_context=from_dumpable_context,
                                  flatten_with_keys_fn=flatten_with_keys_fn)


def _register_pytree_node(cls, flatten_fn, unflatten_fn, to_str_fn=None, maybe_from_str_fn=None, *,
                          serialized_type_name=None, to_dumpable_context=None, from_dumpable_context=None,
                          flatten_with_keys_fn=None) -> None:
    """The older name (still imported by some libraries): registers without the duplicate check;
    the string functions are ignored with PyTorch's FutureWarning."""
    if to_str_fn is not None or maybe_from_str_fn is not None:
        warnings.warn("`to_str_fn` and `maybe_from_str_fn` is deprecated. Please use `to_dumpable_context` and "
                      "`from_dumpable_context` instead.", FutureWarning, stacklevel=2)
    _private_register_pytree_node(cls, flatten_fn, unflatten_fn, serialized_type_name=serialized_type_name,
                                  to_dumpable_context=to_dumpable_context,
                                  from_dumpable_context=from_dumpable_context,
                                  flatten_with_keys_fn=flatten_with_keys_fn)


def _private_register_pytree_node(cls, flatten_fn, unflatten_fn, *, serialized_type_name=None,
                                  to_dumpable_context=None, from_dumpable_context=None,
                                  flatten_with_keys_fn=None) -> None:
    with _REGISTRY_LOCK:
        if cls in SUPPORTED_NODES:
            warnings.warn(f"{cls} is already registered as pytree node. Overwriting the previous registration.",
                          stacklevel=2)
        if (to_dumpable_context is None) != (from_dumpable_context is None):
            raise ValueError(f"Both to_dumpable_context and from_dumpable_context for {cls} must be None or "
                             "registered.")
        SUPPORTED_NODES[cls] = NodeDef(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)
        name = serialized_type_name if serialized_type_name is not None else NO_SERIALIZED_TYPE_NAME_FOUND
        SUPPORTED_SERIALIZED_TYPES[cls] = _SerializeNodeDef(cls, name, to_dumpable_context, from_dumpable_context)
        SERIALIZED_TYPE_TO_PYTHON_TYPE[name] = cls


def _register_namedtuple(cls: type, *, serialized_type_name: str) -> None:
    """Names a namedtuple class for ``treespec_dumps`` (its instances stay ``namedtuple`` nodes)."""
    with _REGISTRY_LOCK:
        SUPPORTED_SERIALIZED_TYPES[cls] = _SerializeNodeDef(cls, serialized_type_name, None, None)
        SERIALIZED_TYPE_TO_PYTHON_TYPE[serialized_type_name] = cls


def _deregister_pytree_node(cls: type) -> None:
    """Removes a registration (KeyError for a type that is not registered, as PyTorch)."""
    with _REGISTRY_LOCK:
        del SUPPORTED_NODES[cls]
        entry = SUPPORTED_SERIALIZED_TYPES.pop(cls)
        SERIALIZED_TYPE_TO_PYTHON_TYPE.pop(entry.serialized_type_name, None)


def register_dataclass(cls: type, *, field_names: list[str] | None = None, drop_field_names=None,
                       serialized_type_name: str | None = None) -> None:
    """A dataclass (or a class built from keyword fields, named by ``field_names``) as a container
    whose children are its fields that are not None; ``drop_field_names`` are left out (they take
    their defaults when the object is rebuilt). The context is ``[child field names, None field
    names]``, as PyTorch's."""
    dropped = list(drop_field_names or [])
    if not dataclasses.is_dataclass(cls):
        if field_names is None:
            raise ValueError(f"field_names must be specified with a list of all fields used to initialize {cls}, "
                             "as it is not a dataclass.")
    elif field_names is None:
        field_names = [f.name for f in dataclasses.fields(cls) if f.init]
    else:
        init_fields = {f.name for f in dataclasses.fields(cls) if f.init} - set(dropped)
        if init_fields != set(field_names):
            message = "field_names does not include all dataclass fields.\n"
            missing = init_fields - set(field_names)
            unexpected = set(field_names) - init_fields
            if missing:
                message += (f"Missing fields in `field_names`: {missing}. If you want to include these fields in "
                            "the pytree, please add them to `field_names`, otherwise please add them to "
                            "`drop_field_names`.\n")
            if unexpected:
                message += (f"Unexpected fields in `field_names`: {unexpected}. Please remove these fields, or add "
                            "them to `drop_field_names`.\n")
            raise ValueError(message)
    names = list(field_names)

    def flatten(obj):
        children, child_names, none_names = [], [], []
        for name in names:
            value = getattr(obj, name)
            if value is None:
                none_names.append(name)
            else:
                children.append(value)
                child_names.append(name)
        return children, [child_names, none_names]

    def unflatten(values, context):
        child_names, none_names = context
        return cls(**dict(zip(child_names, values)), **dict.fromkeys(none_names))

    def flatten_with_keys(obj):
        children, (child_names, _) = flatten(obj)
        return [(GetAttrKey(n), c) for n, c in zip(child_names, children)], child_names

    _private_register_pytree_node(cls, flatten, unflatten, serialized_type_name=serialized_type_name,
                                  flatten_with_keys_fn=flatten_with_keys)


# -- the built-in nodes ----------------------------------------------------------------------------


def is_namedtuple_class(cls) -> bool:
    return isinstance(cls, type) and issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple) \
        and all(isinstance(f, str) for f in cls._fields)


def is_namedtuple_instance(obj) -> bool:
    return is_namedtuple_class(type(obj))


def is_namedtuple(obj) -> bool:
    return is_namedtuple_class(obj if isinstance(obj, type) else type(obj))


def _tuple_flatten(t):
    return list(t), None


def _tuple_flatten_with_keys(t):
    return [(SequenceKey(i), v) for i, v in enumerate(t)], None


def _tuple_unflatten(values, context):
    return tuple(values)


def _list_flatten(items):
    return list(items), None


def _list_unflatten(values, context):
    return list(values)


def _dict_flatten(d):
    return list(d.values()), list(d.keys())


def _dict_flatten_with_keys(d):
    return [(MappingKey(k), v) for k, v in d.items()], list(d.keys())


def _dict_unflatten(values, context):
    return dict(zip(context, values))


def _ordereddict_unflatten(values, context):
    return OrderedDict(zip(context, values))


def _namedtuple_flatten(t):
    return list(t), type(t)


def _namedtuple_flatten_with_keys(t):
    return [(GetAttrKey(f), v) for f, v in zip(t._fields, t)], type(t)


def _namedtuple_unflatten(values, context):
    return context(*values)


def _namedtuple_serialize(context) -> str:
    entry = SUPPORTED_SERIALIZED_TYPES.get(context)
    if entry is None:
        raise NotImplementedError(
            f"Can't serialize TreeSpec of namedtuple class {context} because we didn't register a "
            "serializated_type_name. Please register using `_register_namedtuple`.")
    return entry.serialized_type_name


def _namedtuple_deserialize(dumpable):
    if dumpable not in SERIALIZED_TYPE_TO_PYTHON_TYPE:
        raise NotImplementedError(f"Can't deserialize TreeSpec of namedtuple class {dumpable} because we couldn't "
                                  "find a serializated name.")
    return SERIALIZED_TYPE_TO_PYTHON_TYPE[dumpable]


def _defaultdict_flatten(d):
    return list(d.values()), [d.default_factory, list(d.keys())]


def _defaultdict_flatten_with_keys(d):
    return [(MappingKey(k), v) for k, v in d.items()], [d.default_factory, list(d.keys())]


def _defaultdict_unflatten(values, context):
    factory, keys = context
    return defaultdict(factory, zip(keys, values))


def _defaultdict_serialize(context) -> dict:
    factory, keys = context
    return {"default_factory_module": factory.__module__, "default_factory_name": factory.__qualname__,
            "dict_context": keys}


def _defaultdict_deserialize(dumpable) -> list:
    factory = importlib.import_module(dumpable["default_factory_module"])
    for part in dumpable["default_factory_name"].split("."):
        factory = getattr(factory, part)
    return [factory, dumpable["dict_context"]]


def _deque_flatten(d):
    return list(d), d.maxlen


def _deque_flatten_with_keys(d):
    return [(SequenceKey(i), v) for i, v in enumerate(d)], d.maxlen


def _deque_unflatten(values, maxlen):
    return deque(values, maxlen=maxlen)


_private_register_pytree_node(tuple, _tuple_flatten, _tuple_unflatten, serialized_type_name="builtins.tuple",
                              flatten_with_keys_fn=_tuple_flatten_with_keys)
_private_register_pytree_node(list, _list_flatten, _list_unflatten, serialized_type_name="builtins.list",
                              flatten_with_keys_fn=_tuple_flatten_with_keys)
_private_register_pytree_node(dict, _dict_flatten, _dict_unflatten, serialized_type_name="builtins.dict",
                              flatten_with_keys_fn=_dict_flatten_with_keys)
_private_register_pytree_node(namedtuple, _namedtuple_flatten, _namedtuple_unflatten,
                              serialized_type_name="collections.namedtuple",
                              to_dumpable_context=_namedtuple_serialize,
                              from_dumpable_context=_namedtuple_deserialize,
                              flatten_with_keys_fn=_namedtuple_flatten_with_keys)
_private_register_pytree_node(OrderedDict, _dict_flatten, _ordereddict_unflatten,
                              serialized_type_name="collections.OrderedDict",
                              flatten_with_keys_fn=_dict_flatten_with_keys)
_private_register_pytree_node(defaultdict, _defaultdict_flatten, _defaultdict_unflatten,
                              serialized_type_name="collections.defaultdict",
                              to_dumpable_context=_defaultdict_serialize,
                              from_dumpable_context=_defaultdict_deserialize,
                              flatten_with_keys_fn=_defaultdict_flatten_with_keys)
_private_register_pytree_node(deque, _deque_flatten, _deque_unflatten, serialized_type_name="collections.deque",
                              flatten_with_keys_fn=_deque_flatten_with_keys)
BUILTIN_TYPES = frozenset({tuple, list, dict, namedtuple, OrderedDict, defaultdict, deque})
STANDARD_DICT_TYPES = frozenset({dict, OrderedDict, defaultdict})


def _get_node_type(tree) -> Any:
    """The key of ``tree``'s node in SUPPORTED_NODES: its type, or ``namedtuple`` for every
    namedtuple class (``ember.return_types`` classes are registered on first sight instead)."""
    cls = type(tree)
    if issubclass(cls, tuple) and cls is not tuple and is_namedtuple_class(cls):
        if cls.__module__ == "ember.return_types":
            if cls not in SUPPORTED_NODES:
                _register_structseq(cls)
            return cls
        return namedtuple
    return cls


def _register_structseq(cls) -> None:
    # What max/sort/svd... return: PyTorch's structseqs are nodes of their own type (printed
    # ``TreeSpec(max, None, [...])``), not namedtuples. Registered once, whichever thread sees one first.
    with _REGISTRY_LOCK:
        if cls not in SUPPORTED_NODES:
            SUPPORTED_NODES[cls] = NodeDef(cls, _tuple_flatten, lambda values, ctx: cls(*values),
                                           _tuple_flatten_with_keys)
            SUPPORTED_SERIALIZED_TYPES[cls] = _SerializeNodeDef(cls, NO_SERIALIZED_TYPE_NAME_FOUND, None, None)


def tree_is_leaf(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None) -> bool:
    """Whether ``tree`` is a leaf (not a registered container, or picked by ``is_leaf``)."""
    if is_leaf is not None and is_leaf(tree):
        return True
    return _get_node_type(tree) not in SUPPORTED_NODES


# -- TreeSpec ---------------------------------------------------------------------------------------


class TreeSpec:
    """The structure of a pytree: its node type, the node's context and the children's specs
    (a leaf has type None). Two specs are equal when the structures are (types compared by
    name, contexts and children by equality)."""

    __slots__ = ("type", "_context", "_children", "num_leaves", "num_nodes", "num_children")

    def __init__(self, type: Any, context: Context, children_specs: list[TreeSpec]):
        children = children_specs if isinstance(children_specs, list) else list(children_specs)
        self.type = type
        self._context = context
        self._children = children
        self.num_children = len(children)
        if type is None:
            if context is not None:
                raise AssertionError("leaf node should not have a context")
            if children:
                raise AssertionError("leaf node should not have children")
            self.num_leaves = self.num_nodes = 1
        else:
            leaves, nodes = 0, 1
            for child in children:  # a loop, not two sums over generators: every flatten builds specs
                leaves += child.num_leaves
                nodes += child.num_nodes
            self.num_leaves, self.num_nodes = leaves, nodes

    @property
    def context(self) -> Context:
        return self._context

    @property
    def children_specs(self) -> list[TreeSpec]:
        warnings.warn("`treespec.children_specs` is deprecated. Use `treespec.child(index)` to access a single "
                      "child, or `treespec.children()` to get all children.", FutureWarning, stacklevel=2)
        return self._children

    def children(self) -> list[TreeSpec]:
        return self._children.copy()

    def child(self, index: int) -> TreeSpec:
        return self._children[index]

    def is_leaf(self) -> bool:
        return self.num_nodes == 1 and self.num_leaves == 1

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if other.__class__ is not self.__class__:
            return NotImplemented
        # by name, as PyTorch: a class reloaded (or rebuilt from a saved program) still matches
        return (str(self.type) == str(other.type) and self._context == other._context
                and self._children == other._children)

    def __hash__(self) -> int:
        kind, ctx = self.type, self._context
        if kind is defaultdict:
            ctx = (ctx[0], tuple(ctx[1]))
        elif kind in (dict, OrderedDict):
            ctx = tuple(ctx)
        elif kind is not None and kind not in BUILTIN_TYPES:
            ctx = None  # a user node's context may be unhashable; equal specs still hash equal
        return hash((kind, ctx, tuple(self._children)))

    def __repr__(self, indent: int = 0) -> str:
        if self.type is None:
            return "*"
        indent += 2
        children = [c.__repr__(indent) for c in self._children]
        inner = ",".join(children[:1] + ["\n" + " " * indent + c for c in children[1:]])
        return f"TreeSpec({self.type.__name__}, {self._context}, [{inner}])"

    def unflatten(self, leaves: Iterable) -> PyTree:
        if not isinstance(leaves, (list, tuple)):
            leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers "
                             f"to a pytree that holds {self.num_leaves} items ({self}).")
        return self._build(iter(leaves))

    def _build(self, it):
        if self.type is None:
            return next(it)
        children = [c._build(it) for c in self._children]
        return SUPPORTED_NODES[self.type].unflatten_fn(children, self._context)

    def flatten_up_to(self, tree: PyTree) -> list:
        """The subtrees of ``tree`` at this spec's leaves (``tree`` must have this structure above
        them; dicts may list their keys in another order, and dict kinds stand for each other)."""
        out: list = []
        self._flatten_up_to(tree, out)
        return out

    def _flatten_up_to(self, tree, out: list) -> None:
        if self.type is None:
            out.append(tree)
            return
        for child, spec in zip(self._matched_children(tree), self._children):
            spec._flatten_up_to(child, out)

    def _matched_children(self, node) -> list:
        """``node``'s children in this spec's order; ValueError (PyTorch's texts) where ``node``
        is no instance of this spec's top node."""
        kind = _get_node_type(node)
        if self.type not in BUILTIN_TYPES:
            if kind != self.type:
                raise ValueError(f"Type mismatch; expected {self.type!r}, but got {kind!r}.")
            children, context = SUPPORTED_NODES[kind].flatten_fn(node)
            if len(children) != self.num_children:
                raise ValueError(f"Node arity mismatch; expected {self.num_children}, but got {len(children)}.")
            if context != self._context:
                raise ValueError(f"Node context mismatch for custom node type {self.type!r}.")
            return list(children)
        both_dicts = self.type in STANDARD_DICT_TYPES and kind in STANDARD_DICT_TYPES
        if not both_dicts and kind != self.type:
            raise ValueError(f"Node type mismatch; expected {self.type!r}, but got {kind!r}.")
        if len(node) != self.num_children:
            raise ValueError(f"Node arity mismatch; expected {self.num_children}, but got {len(node)}.")
        if both_dicts:
            keys = self._context if self.type is not defaultdict else self._context[1]
            if set(node) != set(keys):
                missing, extra = set(keys) - set(node), set(node) - set(keys)
                message = ""
                if missing:
                    message += f"; missing key(s): {missing}"
                if extra:
                    message += f"; extra key(s): {extra}"
                raise ValueError(f"Node keys mismatch{message}.")
            return [node[k] for k in keys]
        children, context = SUPPORTED_NODES[kind].flatten_fn(node)
        if kind is not deque and context != self._context:  # a deque's maxlen may differ
            raise ValueError(f"Node context mismatch for node type {self.type!r}; expected {self._context!r}, "
                             f"but got {context!r}.")
        return list(children)


PyTreeSpec = TreeSpec


class LeafSpec(TreeSpec):
    """The spec of a leaf (``*``)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(None, None, [])


_LEAF_SPEC = LeafSpec()


def treespec_leaf() -> LeafSpec:
    return _LEAF_SPEC


def treespec_tuple(iterable: Iterable[TreeSpec] = ()) -> TreeSpec:
    return TreeSpec(tuple, None, list(iterable))


def treespec_dict(mapping=(), **kwargs) -> TreeSpec:
    d = dict(mapping, **kwargs)
    return TreeSpec(dict, list(d.keys()), list(d.values()))


# -- flatten / unflatten / map ------------------------------------------------------------------------


def tree_flatten(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None) -> tuple[list, TreeSpec]:
    """``(leaves, spec)``: the leaves in depth-first order and the structure around them.

    Example:
        >>> leaves, spec = tree_flatten({"b": 1, "a": (2, [3, None])})
        >>> leaves
        [1, 2, 3, None]
        >>> tree_unflatten([x * 10 for x in leaves[:3]] + [None], spec)
        {'b': 10, 'a': (20, [30, None])}
    """
    leaves: list = []
    return leaves, _flatten(tree, is_leaf, leaves)


def _flatten(tree, is_leaf, leaves: list) -> TreeSpec:
    if is_leaf is not None and is_leaf(tree):
        leaves.append(tree)
        return _LEAF_SPEC
    kind = _get_node_type(tree)
    node = SUPPORTED_NODES.get(kind)
    if node is None:
        leaves.append(tree)
        return _LEAF_SPEC
    children, context = node.flatten_fn(tree)
    return TreeSpec(kind, context, [_flatten(c, is_leaf, leaves) for c in children])


def tree_unflatten(leaves: Iterable, treespec: TreeSpec) -> PyTree:
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"Expected `treespec` to be an instance of PyTreeSpec but got item of type "
                        f"{type(treespec)}.")
    return treespec.unflatten(leaves)


def tree_iter(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None):
    """The leaves, lazily."""
    if tree_is_leaf(tree, is_leaf):
        yield tree
        return
    children, _ = SUPPORTED_NODES[_get_node_type(tree)].flatten_fn(tree)
    for child in children:
        yield from tree_iter(child, is_leaf)


def tree_leaves(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None) -> list:
    leaves: list = []
    _flatten(tree, is_leaf, leaves)
    return leaves


def arg_tree_leaves(*args, **kwargs) -> list:
    """The leaves of ``(args, kwargs)``."""
    return tree_leaves((args, kwargs))


def tree_structure(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None) -> TreeSpec:
    return tree_flatten(tree, is_leaf)[1]


def tree_map(func: Callable, tree: PyTree, *rests: PyTree, is_leaf: Callable[[PyTree], bool] | None = None) -> PyTree:
    """``tree`` with each leaf replaced by ``func(leaf, *matching leaves of rests)``; the ``rests``
    must have ``tree``'s structure (or be deeper below its leaves)."""
    leaves, spec = tree_flatten(tree, is_leaf)
    flat_rests = [spec.flatten_up_to(r) for r in rests]
    return spec.unflatten(list(map(func, leaves, *flat_rests)))


def tree_map_(func: Callable, tree: PyTree, *rests: PyTree, is_leaf: Callable[[PyTree], bool] | None = None) -> PyTree:
    """Calls ``func`` on the leaves for its side effects; returns ``tree`` itself."""
    leaves, spec = tree_flatten(tree, is_leaf)
    flat_rests = [spec.flatten_up_to(r) for r in rests]
    for args in zip(leaves, *flat_rests):
        func(*args)
    return tree


def _only(type_or_types, func):
    if isinstance(type_or_types, dict):
        raise TypeError("`type_or_types` must be a type or a tuple of types")

    def wrapped(x):
        return func(x) if isinstance(x, type_or_types) else x

    return wrapped


def tree_map_only(type_or_types, func: Callable, tree: PyTree, is_leaf=None) -> PyTree:
    """``tree_map`` applied only to the leaves of the given type(s); the others stay as they are."""
    return tree_map(_only(type_or_types, func), tree, is_leaf=is_leaf)


def tree_map_only_(type_or_types, func: Callable, tree: PyTree, is_leaf=None) -> PyTree:
    return tree_map_(_only(type_or_types, func), tree, is_leaf=is_leaf)


def tree_all(pred: Callable[[Any], bool], tree: PyTree, is_leaf=None) -> bool:
    return all(map(pred, tree_iter(tree, is_leaf)))


def tree_any(pred: Callable[[Any], bool], tree: PyTree, is_leaf=None) -> bool:
    return any(map(pred, tree_iter(tree, is_leaf)))


def tree_all_only(type_or_types, pred: Callable[[Any], bool], tree: PyTree, is_leaf=None) -> bool:
    return all(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


def tree_any_only(type_or_types, pred: Callable[[Any], bool], tree: PyTree, is_leaf=None) -> bool:
    return any(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


def _broadcast_to_and_flatten(tree: PyTree, treespec: TreeSpec, is_leaf=None) -> list | None:
    """``tree``, a prefix of ``treespec``'s structure (vmap's ``in_dims``/``out_dims``), flattened
    to one value per leaf of ``treespec``: a leaf of ``tree`` stands for its whole subtree. None
    where ``tree`` is no prefix (the structures above its leaves differ as ``flatten_up_to`` sees
    them). A dict prefix may list its keys in another order; its values are matched by key (see
    docs/deviations.md: PyTorch 2.13 hands them out in the prefix's order)."""
    out: list = []
    try:
        _broadcast(tree, treespec, is_leaf, out)
    except ValueError:
        return None
    return out


def _broadcast(tree, spec: TreeSpec, is_leaf, out: list) -> None:
    if tree_is_leaf(tree, is_leaf):
        out.extend([tree] * spec.num_leaves)
        return
    if spec.type is None:
        raise ValueError("a node of the prefix stands at a leaf of the structure")
    # Walked from the spec's side, so the values come out in the spec's order.
    kind = _get_node_type(tree)
    if spec.type in STANDARD_DICT_TYPES and kind in STANDARD_DICT_TYPES:
        keys = spec._context if spec.type is not defaultdict else spec._context[1]
        if set(tree) != set(keys) or len(tree) != len(keys):
            raise ValueError("Node keys mismatch.")
        children = [tree[k] for k in keys]
    else:
        if kind != spec.type:
            raise ValueError("Node type mismatch.")
        children, context = SUPPORTED_NODES[kind].flatten_fn(tree)
        if len(children) != spec.num_children:
            raise ValueError("Node arity mismatch.")
        if kind is not deque and context != spec._context:
            raise ValueError("Node context mismatch.")
    for child, child_spec in zip(children, spec._children):
        _broadcast(child, child_spec, is_leaf, out)


# -- paths -------------------------------------------------------------------------------------------


def tree_flatten_with_path(tree: PyTree, is_leaf=None) -> tuple[list[tuple[KeyPath, Any]], TreeSpec]:
    """``([(key path, leaf), ...], spec)``; ``keystr`` prints a path as source text.

    Example:
        >>> pairs, _ = tree_flatten_with_path({"a": [1, (2,)]})
        >>> [(keystr(path), leaf) for path, leaf in pairs]
        [("['a'][0]", 1), ("['a'][1][0]", 2)]
    """
    spec = tree_structure(tree, is_leaf)
    return list(_key_paths((), tree, is_leaf)), spec


def tree_leaves_with_path(tree: PyTree, is_leaf=None) -> list[tuple[KeyPath, Any]]:
    return list(_key_paths((), tree, is_leaf))


def _key_paths(prefix: KeyPath, tree, is_leaf):
    if tree_is_leaf(tree, is_leaf):
        yield prefix, tree
        return
    kind = _get_node_type(tree)
    with_keys = SUPPORTED_NODES[kind].flatten_with_keys_fn
    if with_keys is None:
        raise ValueError(f"Did not find a flatten_with_keys_fn for type: {kind}. Please pass a "
                         "flatten_with_keys_fn argument to register_pytree_node.")
    for key, child in with_keys(tree)[0]:
        yield from _key_paths((*prefix, key), child, is_leaf)


def tree_map_with_path(func: Callable, tree: PyTree, *rests: PyTree, is_leaf=None) -> PyTree:
    """``tree_map`` whose ``func`` also receives each leaf's key path first."""
    paths_leaves, spec = tree_flatten_with_path(tree, is_leaf)
    flat_rests = [spec.flatten_up_to(r) for r in rests]
    paths = [p for p, _ in paths_leaves]
    leaves = [x for _, x in paths_leaves]
    return spec.unflatten([func(*xs) for xs in zip(paths, leaves, *flat_rests)])


# -- serialized specs (PyTorch's protocol 1) -------------------------------------------------------------

_PROTOCOL = 1


def treespec_dumps(treespec: TreeSpec, protocol: int | None = None) -> str:
    """The spec as JSON (PyTorch's protocol 1 layout); custom nodes need a serialized name."""
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"treespec_dumps(treespec, protocol): Expected `treespec` to be instance of TreeSpec but "
                        f"got item of type {type(treespec)}.")
    protocol = _PROTOCOL if protocol is None else protocol
    if protocol != _PROTOCOL:
        raise ValueError(f"Unknown protocol {protocol}. Available protocols: [{_PROTOCOL}]")
    return json.dumps([protocol, _to_json(treespec)])


def serialized_node(spec: TreeSpec) -> tuple[str, Any]:
    """``(serialized type name, JSON-able context)`` of a node spec, as ``treespec_dumps`` writes
    them: the registered ``to_dumpable_context`` result, else the context as a JSON string."""
    entry = SUPPORTED_SERIALIZED_TYPES.get(spec.type)
    if entry is None:
        raise NotImplementedError(f"Serializing {spec.type} in pytree is not registered.")
    if entry.serialized_type_name == NO_SERIALIZED_TYPE_NAME_FOUND:
        raise NotImplementedError(f"No registered serialization name for {spec.type} found. Please update your "
                                  "_register_pytree_node call with a `serialized_type_name` kwarg.")
    if entry.to_dumpable_context is not None:
        return entry.serialized_type_name, entry.to_dumpable_context(spec._context)
    try:
        return entry.serialized_type_name, json.dumps(spec._context)
    except TypeError as e:
        raise TypeError("Unable to serialize context. Please make the context json dump-able, or register a "
                        "custom serializer using _register_pytree_node.") from e


def deserialized_node(name: str, dumpable) -> tuple[Any, Context]:
    """The inverse of ``serialized_node``: ``(node type, context)``."""
    if name not in SERIALIZED_TYPE_TO_PYTHON_TYPE:
        raise NotImplementedError(f"Deserializing {name} in pytree is not registered.")
    typ = SERIALIZED_TYPE_TO_PYTHON_TYPE[name]
    entry = SUPPORTED_SERIALIZED_TYPES[typ]
    if entry.from_dumpable_context is not None:
        return typ, entry.from_dumpable_context(dumpable)
    try:
        return typ, json.loads(dumpable)
    except TypeError as e:
        raise TypeError("Unable to deserialize context. Please make the context json load-able, or register a "
                        "custom serializer using _register_pytree_node.") from e


def _to_json(spec: TreeSpec) -> dict:
    if spec.type is None:
        return {"type": None, "context": None, "children_spec": []}
    name, context = serialized_node(spec)
    return {"type": name, "context": context, "children_spec": [_to_json(c) for c in spec._children]}


def treespec_loads(serialized: str) -> TreeSpec:
    protocol, data = json.loads(serialized)
    if protocol != _PROTOCOL:
        raise ValueError(f"Unknown protocol {protocol}. Available protocols: [{_PROTOCOL}]")
    return _from_json(data)


def _from_json(data: dict) -> TreeSpec:
    if data["type"] is None and data["context"] is None and not data["children_spec"]:
        return _LEAF_SPEC
    typ, context = deserialized_node(data["type"], data["context"])
    return TreeSpec(typ, context, [_from_json(c) for c in data["children_spec"]])


def treespec_pprint(treespec: TreeSpec) -> str:
    """The structure with leaves shown as ``*``: ``(*, [*, *])``."""
    dummy = treespec.unflatten([_Star()] * treespec.num_leaves)
    return repr(dummy)


class _Star:
    def __repr__(self) -> str:
        return "*"
