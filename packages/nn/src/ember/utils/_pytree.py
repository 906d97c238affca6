"""``ember.utils._pytree``: nested containers flattened to leaves and a ``TreeSpec`` (PyTorch's
``torch.utils._pytree``, which many libraries import directly).

Containers ("nodes") are tuple, list, dict, OrderedDict, defaultdict, deque, namedtuples and
the types added with ``register_pytree_node`` / ``register_dataclass``; everything else is a
leaf, ``None`` included (as in PyTorch 2.13). A node flattens to ``(children, context)`` and is
rebuilt from them; dicts keep their insertion order. ``ember.export`` flattens with this module,
so a type registered here is a container for export too.
"""

from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict, defaultdict, deque
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


SUPPORTED_NODES: dict[type, NodeDef] = {}
SUPPORTED_SERIALIZED_TYPES: dict[type, _SerializeNodeDef] = {}
SERIALIZED_TYPE_TO_PYTHON_TYPE: dict[str, type] = {}
NO_SERIALIZED_TYPE_NAME_FOUND = "NO_SERIALIZED_TYPE_NAME_FOUND"


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
    ``treespec_dumps`` (and in saved exported programs)."""
    if cls in SUPPORTED_NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    _private_register_pytree_node(cls, flatten_fn, unflatten_fn, serialized_type_name=serialized_type_name,
                                  to_dumpable_context=to_dumpable_context,
                                  from_dumpable_context=from_dumpable_context,
                                  flatten_with_keys_fn=flatten_with_keys_fn)


def _register_pytree_node(cls, flatten_fn, unflatten_fn, to_str_fn=None, maybe_from_str_fn=None, *,
                          serialized_type_name=None, to_dumpable_context=None, from_dumpable_context=None,
                          flatten_with_keys_fn=None) -> None:
    """The older name (still imported by some libraries); the string functions are ignored, as
    PyTorch ignores them."""
    register_pytree_node(cls, flatten_fn, unflatten_fn, serialized_type_name=serialized_type_name,
                         to_dumpable_context=to_dumpable_context, from_dumpable_context=from_dumpable_context,
                         flatten_with_keys_fn=flatten_with_keys_fn)


def _private_register_pytree_node(cls, flatten_fn, unflatten_fn, *, serialized_type_name=None,
                                  to_dumpable_context=None, from_dumpable_context=None,
                                  flatten_with_keys_fn=None) -> None:
    if (to_dumpable_context is None) != (from_dumpable_context is None):
        raise ValueError(f"Both to_dumpable_context and from_dumpable_context for {cls} must be None or registered.")
    SUPPORTED_NODES[cls] = NodeDef(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)
    name = serialized_type_name if serialized_type_name is not None else NO_SERIALIZED_TYPE_NAME_FOUND
    SUPPORTED_SERIALIZED_TYPES[cls] = _SerializeNodeDef(cls, name, to_dumpable_context, from_dumpable_context)
    if serialized_type_name is not None:
        SERIALIZED_TYPE_TO_PYTHON_TYPE[serialized_type_name] = cls


def _register_namedtuple(cls: type, *, serialized_type_name: str) -> None:
    """Names a namedtuple class for ``treespec_dumps`` (its instances stay ``namedtuple`` nodes)."""
    SUPPORTED_SERIALIZED_TYPES[cls] = _SerializeNodeDef(cls, serialized_type_name, None, None)
    SERIALIZED_TYPE_TO_PYTHON_TYPE[serialized_type_name] = cls


def _deregister_pytree_node(cls: type) -> None:
    SUPPORTED_NODES.pop(cls, None)
    entry = SUPPORTED_SERIALIZED_TYPES.pop(cls, None)
    if entry is not None:
        SERIALIZED_TYPE_TO_PYTHON_TYPE.pop(entry.serialized_type_name, None)


def register_dataclass(cls: type, *, field_names: list[str] | None = None, drop_field_names=None,
                       serialized_type_name: str | None = None) -> None:
    """A dataclass as a container whose children are its init fields (``field_names`` picks them;
    the other fields go in the context, so they must be hashable constants)."""
    if not dataclasses.is_dataclass(cls):
        if field_names is None:
            raise ValueError(f"field_names must be specified with a list of all fields used to initialize {cls}, "
                             "as it is not a dataclass.")
        names, extra = list(field_names), []
    else:
        init = [f.name for f in dataclasses.fields(cls) if f.init]
        dropped = set(drop_field_names or ())
        names = list(field_names) if field_names is not None else [n for n in init if n not in dropped]
        extra = [n for n in init if n not in names and n not in dropped]

    # The context is the child fields' names (JSON, so that exported programs can be saved), with
    # the values of the other init fields after them when there are any.
    def flatten(obj):
        if not extra:
            return [getattr(obj, n) for n in names], list(names)
        return [getattr(obj, n) for n in names], [list(names), [[n, getattr(obj, n)] for n in extra]]

    def unflatten(values, context):
        keys, consts = (context, []) if not extra else context
        return cls(**dict(zip(keys, values)), **dict(consts))

    def flatten_with_keys(obj):
        children, ctx = flatten(obj)
        return [(GetAttrKey(n), c) for n, c in zip(names, children)], ctx

    register_pytree_node(cls, flatten, unflatten, serialized_type_name=serialized_type_name,
                         flatten_with_keys_fn=flatten_with_keys)


# -- the built-in nodes ----------------------------------------------------------------------------


def is_namedtuple_class(cls) -> bool:
    return isinstance(cls, type) and issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple) \
        and all(isinstance(f, str) for f in cls._fields)


def is_namedtuple_instance(obj) -> bool:
    return is_namedtuple_class(type(obj))


def is_namedtuple(obj) -> bool:
    return is_namedtuple_class(obj if isinstance(obj, type) else type(obj))


class _NamedTupleNode:
    """Stands for every namedtuple class in ``SUPPORTED_NODES`` lookups (PyTorch prints it as
    ``namedtuple``); the class itself is the context."""


def _seq(kind):
    return (lambda x: (list(x), None), lambda values, ctx: kind(values),
            lambda x: ([(SequenceKey(i), v) for i, v in enumerate(x)], None))


def _dict_flatten(d):
    return list(d.values()), list(d.keys())


def _dict_keys(d):
    return [(MappingKey(k), v) for k, v in d.items()], list(d.keys())


register_pytree_node(tuple, *_seq(tuple)[:2], serialized_type_name="builtins.tuple",
                     flatten_with_keys_fn=_seq(tuple)[2])
register_pytree_node(list, *_seq(list)[:2], serialized_type_name="builtins.list", flatten_with_keys_fn=_seq(list)[2])
register_pytree_node(dict, _dict_flatten, lambda values, keys: dict(zip(keys, values)),
                     serialized_type_name="builtins.dict", flatten_with_keys_fn=_dict_keys)
register_pytree_node(OrderedDict, _dict_flatten, lambda values, keys: OrderedDict(zip(keys, values)),
                     serialized_type_name="collections.OrderedDict", flatten_with_keys_fn=_dict_keys)
register_pytree_node(
    defaultdict, lambda d: (list(d.values()), [d.default_factory, list(d.keys())]),
    lambda values, ctx: defaultdict(ctx[0], zip(ctx[1], values)), serialized_type_name="collections.defaultdict",
    flatten_with_keys_fn=lambda d: ([(MappingKey(k), v) for k, v in d.items()], [d.default_factory, list(d)]))
register_pytree_node(deque, lambda d: (list(d), d.maxlen), lambda values, maxlen: deque(values, maxlen=maxlen),
                     serialized_type_name="collections.deque",
                     flatten_with_keys_fn=lambda d: ([(SequenceKey(i), v) for i, v in enumerate(d)], d.maxlen))
register_pytree_node(
    _NamedTupleNode, lambda x: (list(x), type(x)), lambda values, cls: cls(*values),
    serialized_type_name="collections.namedtuple",
    flatten_with_keys_fn=lambda x: ([(GetAttrKey(f), v) for f, v in zip(type(x)._fields, x)], type(x)))
BUILTIN_TYPES = frozenset({tuple, list, dict, OrderedDict, defaultdict, deque, _NamedTupleNode})
STANDARD_DICT_TYPES = frozenset({dict, OrderedDict, defaultdict})


def _node_type(tree) -> type:
    """The key of ``tree``'s node in SUPPORTED_NODES (namedtuples share one entry)."""
    cls = type(tree)
    if cls not in SUPPORTED_NODES and is_namedtuple_class(cls):
        if cls.__module__ == "ember.return_types":
            _register_structseq(cls)
            return cls
        return _NamedTupleNode
    return cls


def _register_structseq(cls) -> None:
    # What max/sort/svd... return: PyTorch's structseqs are nodes of their own type (printed
    # ``TreeSpec(max, None, [...])``), not namedtuples.
    _private_register_pytree_node(cls, lambda x: (list(x), None), lambda values, ctx: cls(*values),
                                  flatten_with_keys_fn=lambda x: ([(SequenceKey(i), v) for i, v in enumerate(x)],
                                                                  None))


def _is_leaf(tree, is_leaf=None) -> bool:
    return (is_leaf is not None and is_leaf(tree)) or _node_type(tree) not in SUPPORTED_NODES


def tree_is_leaf(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None) -> bool:
    """Whether ``tree`` is a leaf (not a registered container, or picked by ``is_leaf``)."""
    return _is_leaf(tree, is_leaf)


# -- TreeSpec ---------------------------------------------------------------------------------------


class TreeSpec:
    """The structure of a pytree: its node type, the node's context and the children's specs
    (a leaf has type None). Two specs are equal when the structures are."""

    __slots__ = ("type", "context", "children_specs", "num_leaves", "num_nodes", "num_children")

    def __init__(self, type: Any, context: Context, children_specs: list[TreeSpec]):
        self.type = type
        self.context = context
        self.children_specs = list(children_specs)
        self.num_children = len(self.children_specs)
        if type is None:
            self.num_leaves, self.num_nodes = 1, 1
        else:
            self.num_leaves = sum(c.num_leaves for c in self.children_specs)
            self.num_nodes = 1 + sum(c.num_nodes for c in self.children_specs)

    def is_leaf(self) -> bool:
        return self.num_nodes == 1 and self.num_leaves == 1

    def __eq__(self, other) -> bool:
        if not isinstance(other, TreeSpec):
            return NotImplemented
        return (self.type is other.type and self.context == other.context
                and self.children_specs == other.children_specs)

    def __hash__(self) -> int:
        ctx = self.context
        try:
            hash(ctx)
        except TypeError:
            ctx = repr(ctx)
        return hash((self.type, ctx, tuple(self.children_specs)))

    def __repr__(self, indent: int = 0) -> str:
        if self.type is None:
            return "*"
        name = "namedtuple" if self.type is _NamedTupleNode else self.type.__name__
        indent += 2
        children = [c.__repr__(indent) for c in self.children_specs]
        inner = ",".join([children[0]] + ["\n" + " " * indent + c for c in children[1:]]) if children else ""
        return f"TreeSpec({name}, {self.context}, [{inner}])"

    def _node(self) -> NodeDef:
        return SUPPORTED_NODES[self.type]

    def unflatten(self, leaves: Iterable) -> PyTree:
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers "
                             f"to a pytree that holds {self.num_leaves} items ({self}).")
        it = iter(leaves)
        return self._build(it)

    def _build(self, it):
        if self.type is None:
            return next(it)
        children = [c._build(it) for c in self.children_specs]
        return self._node().unflatten_fn(children, self.context)

    def flatten_up_to(self, tree: PyTree) -> list:
        """The subtrees of ``tree`` at this spec's leaves (``tree`` must have this structure above them)."""
        out: list = []
        self._flatten_up_to(tree, out)
        return out

    def _flatten_up_to(self, tree, out: list) -> None:
        if self.type is None:
            out.append(tree)
            return
        kind = _node_type(tree)
        if kind not in SUPPORTED_NODES:
            raise ValueError(f"Expected {self._type_text()} but got {type(tree)}.")
        if self.type in STANDARD_DICT_TYPES and kind in STANDARD_DICT_TYPES:
            keys = list(tree.keys())
            if set(keys) != set(self.context):
                missing = set(self.context) - set(keys)
                extra = set(keys) - set(self.context)
                raise ValueError(f"Node keys mismatch; missing key(s): {missing or '{}'}; extra key(s): "
                                 f"{extra or '{}'}.")
            children = [tree[k] for k in self.context]
        else:
            if kind is not self.type:
                raise ValueError(f"Node type mismatch; expected {self._type_text()}, but got {type(tree)}.")
            children, context = SUPPORTED_NODES[kind].flatten_fn(tree)
            children = list(children)
            if len(children) != self.num_children:
                raise ValueError(f"Node arity mismatch; expected {self.num_children}, but got {len(children)}.")
            if context != self.context:
                raise ValueError(f"Node context mismatch for custom node type {self._type_text()}.")
        for child, spec in zip(children, self.children_specs):
            spec._flatten_up_to(child, out)

    def _type_text(self):
        return self.context if self.type is _NamedTupleNode else self.type


class LeafSpec(TreeSpec):
    """The spec of a leaf (``*``)."""

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
    """``(leaves, spec)``: the leaves in depth-first order and the structure around them."""
    leaves: list = []
    return leaves, _flatten(tree, is_leaf, leaves)


def _flatten(tree, is_leaf, leaves: list) -> TreeSpec:
    if _is_leaf(tree, is_leaf):
        leaves.append(tree)
        return _LEAF_SPEC
    kind = _node_type(tree)
    children, context = SUPPORTED_NODES[kind].flatten_fn(tree)
    return TreeSpec(kind, context, [_flatten(c, is_leaf, leaves) for c in children])


def tree_unflatten(leaves: Iterable, treespec: TreeSpec) -> PyTree:
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"Expected `treespec` to be an instance of PyTreeSpec but got item of type "
                        f"{type(treespec)}.")
    return treespec.unflatten(leaves)


def tree_iter(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None):
    """The leaves, lazily."""
    if _is_leaf(tree, is_leaf):
        yield tree
        return
    children, _ = SUPPORTED_NODES[_node_type(tree)].flatten_fn(tree)
    for child in children:
        yield from tree_iter(child, is_leaf)


def tree_leaves(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None) -> list:
    return list(tree_iter(tree, is_leaf))


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
    return spec.unflatten(map(func, leaves, *flat_rests))


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


def _only_pred(type_or_types, pred):
    def wrapped(x):
        return pred(x) if isinstance(x, type_or_types) else None

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
    """``tree`` (a prefix of ``treespec``'s structure) flattened to one value per leaf of
    ``treespec``, a leaf of ``tree`` standing for its whole subtree; None when it is no prefix."""
    out: list = []
    return out if _broadcast(tree, treespec, is_leaf, out) else None


def _broadcast(tree, spec: TreeSpec, is_leaf, out: list) -> bool:
    if _is_leaf(tree, is_leaf):
        out.extend([tree] * spec.num_leaves)
        return True
    kind = _node_type(tree)
    if kind is not spec.type:
        return False
    children, context = SUPPORTED_NODES[kind].flatten_fn(tree)
    if len(children) != spec.num_children or context != spec.context:
        return False
    return all(_broadcast(c, s, is_leaf, out) for c, s in zip(children, spec.children_specs))


# -- paths -------------------------------------------------------------------------------------------


def _children_with_keys(tree):
    node = SUPPORTED_NODES[_node_type(tree)]
    if node.flatten_with_keys_fn is not None:
        return node.flatten_with_keys_fn(tree)[0]
    raise ValueError(f"Did not find a flatten_with_keys_fn for type: {type(tree)}. Please pass a "
                     "flatten_with_keys_fn argument to register_pytree_node.")


def tree_flatten_with_path(tree: PyTree, is_leaf=None) -> tuple[list[tuple[KeyPath, Any]], TreeSpec]:
    """``([(key path, leaf), ...], spec)``; ``keystr`` prints a path as source text."""
    spec = tree_structure(tree, is_leaf)
    return list(_with_paths(tree, is_leaf, ())), spec


def tree_leaves_with_path(tree: PyTree, is_leaf=None) -> list[tuple[KeyPath, Any]]:
    return list(_with_paths(tree, is_leaf, ()))


def _with_paths(tree, is_leaf, prefix):
    if _is_leaf(tree, is_leaf):
        yield prefix, tree
        return
    for key, child in _children_with_keys(tree):
        yield from _with_paths(child, is_leaf, prefix + (key,))


def tree_map_with_path(func: Callable, tree: PyTree, *rests: PyTree, is_leaf=None) -> PyTree:
    """``tree_map`` whose ``func`` also receives each leaf's key path first."""
    paths_leaves, spec = tree_flatten_with_path(tree, is_leaf)
    flat_rests = [spec.flatten_up_to(r) for r in rests]
    paths = [p for p, _ in paths_leaves]
    leaves = [x for _, x in paths_leaves]
    return spec.unflatten(func(*xs) for xs in zip(paths, leaves, *flat_rests))


# -- serialized specs -----------------------------------------------------------------------------------

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


def _to_json(spec: TreeSpec) -> dict:
    if spec.type is None:
        return {"type": None, "context": None, "children_spec": []}
    entry = SUPPORTED_SERIALIZED_TYPES.get(spec.type)
    if entry is None or entry.serialized_type_name == NO_SERIALIZED_TYPE_NAME_FOUND:
        raise NotImplementedError(f"No registered serialization name for {spec.type} found. Please update your "
                                  "_register_pytree_node call with a `serialized_type_name` kwarg.")
    # A node with a dumpable-context function (namedtuples, defaultdicts, user nodes that give one)
    # stores what it returns; the others store their context as a JSON string.
    if entry.to_dumpable_context is not None:
        context = entry.to_dumpable_context(spec.context)
    elif spec.type is _NamedTupleNode:
        named = SUPPORTED_SERIALIZED_TYPES.get(spec.context)
        if named is None:
            raise NotImplementedError(
                f"Can't serialize TreeSpec of namedtuple class {spec.context} because we didn't register a "
                "serializated_type_name. Please register using `_register_namedtuple`.")
        context = named.serialized_type_name
    elif spec.type is defaultdict:
        factory = spec.context[0]
        context = {"default_factory_module": factory.__module__, "default_factory_name": factory.__qualname__,
                   "dict_context": spec.context[1]}
    else:
        try:
            context = json.dumps(spec.context)
        except TypeError as e:
            raise TypeError("Unable to serialize context. Please make the context json dump-able, or register a "
                            "custom serializer using _register_pytree_node.") from e
    return {"type": entry.serialized_type_name, "context": context,
            "children_spec": [_to_json(c) for c in spec.children_specs]}


def treespec_loads(serialized: str) -> TreeSpec:
    protocol, data = json.loads(serialized)
    if protocol != _PROTOCOL:
        raise ValueError(f"Unknown protocol {protocol}. Available protocols: [{_PROTOCOL}]")
    return _from_json(data)


def _from_json(data: dict) -> TreeSpec:
    if data["type"] is None:
        return _LEAF_SPEC
    name = data["type"]
    if name not in SERIALIZED_TYPE_TO_PYTHON_TYPE:
        raise NotImplementedError(f"Deserializing {name} in pytree is not registered.")
    typ = SERIALIZED_TYPE_TO_PYTHON_TYPE[name]
    entry = SUPPORTED_SERIALIZED_TYPES[typ]
    context = data["context"]
    if entry.from_dumpable_context is not None:
        context = entry.from_dumpable_context(context)
    elif typ is _NamedTupleNode:
        if context not in SERIALIZED_TYPE_TO_PYTHON_TYPE:
            raise NotImplementedError(f"Can't deserialize TreeSpec of namedtuple class {context} because we couldn't "
                                      "find a serializated name.")
        context = SERIALIZED_TYPE_TO_PYTHON_TYPE[context]
    elif typ is defaultdict:
        import importlib

        factory = importlib.import_module(context["default_factory_module"])
        for part in context["default_factory_name"].split("."):
            factory = getattr(factory, part)
        context = [factory, context["dict_context"]]
    else:
        context = json.loads(context)
    return TreeSpec(typ, context, [_from_json(c) for c in data["children_spec"]])


def treespec_pprint(treespec: TreeSpec) -> str:
    """The structure with leaves shown as ``*``: ``(*, [*, *])``."""
    dummy = treespec.unflatten([_Star()] * treespec.num_leaves)
    return repr(dummy)


class _Star:
    def __repr__(self) -> str:
        return "*"
