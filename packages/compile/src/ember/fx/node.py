"""``Node``: one operation of a ``Graph``, and ``map_arg``/``map_aggregate`` over arguments.

A node is one of six ops (torch.fx's vocabulary):

- ``placeholder``: a function input; ``target`` is the parameter name, ``args`` holds its default.
- ``get_attr``: fetches a parameter, buffer or attribute of the owning module (dotted path).
- ``call_function``: calls ``target`` (a Python callable or an ember op) on ``args``/``kwargs``.
- ``call_method``: calls method ``target`` (a string) on ``args[0]``.
- ``call_module``: calls the submodule at path ``target``.
- ``output``: returns ``args[0]``.

Every node keeps ``_input_nodes`` (nodes its arguments name) and ``users`` (nodes naming it)
in step; all argument edits go through the ``args``/``kwargs`` setters for that reason.
"""

from __future__ import annotations

import operator
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import _naming
from .immutable_collections import immutable_dict, immutable_list

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["Argument", "Node", "Target", "has_side_effect", "map_aggregate", "map_arg"]

Target = Any  # a callable for call_function, a string for every other op
Argument = Any  # a Node, a constant, or a (nested) tuple/list/dict/slice of them

_VALID_OPS = frozenset(
    ["placeholder", "call_method", "call_module", "call_function", "get_attr", "output", "root"]
)

# Calls that must survive dead-code elimination although their result is unused.
_side_effectful_functions: set[Callable] = {operator.setitem}


def has_side_effect(fn: Callable) -> Callable:
    """Marks ``fn`` as side-effectful, so ``eliminate_dead_code`` keeps calls to it."""
    _side_effectful_functions.add(fn)
    return fn


def map_aggregate(a: Argument, fn: Callable[[Argument], Argument]) -> Argument:
    """Applies ``fn`` to every leaf of ``a``, rebuilding tuples, lists, dicts and slices."""
    if isinstance(a, tuple):
        mapped = tuple(map_aggregate(elem, fn) for elem in a)
        # A NamedTuple is rebuilt as its own type, field by field.
        return mapped if not hasattr(a, "_fields") else type(a)(*mapped)
    if isinstance(a, list):
        return immutable_list(map_aggregate(elem, fn) for elem in a)
    if isinstance(a, dict):
        return immutable_dict((key, map_aggregate(value, fn)) for key, value in a.items())
    if isinstance(a, slice):
        return slice(map_aggregate(a.start, fn), map_aggregate(a.stop, fn), map_aggregate(a.step, fn))
    return fn(a)


def map_arg(a: Argument, fn: Callable[[Node], Argument]) -> Argument:
    """Applies ``fn`` to every Node inside ``a`` (other leaves are kept as they are)."""
    if not callable(fn):
        raise AssertionError("ember.fx.map_arg(a, fn): fn must be a callable")
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, Node) else x)


def _key_between(before: tuple[int, ...], after: tuple[int, ...] | None) -> tuple[int, ...]:
    """A sort key strictly between ``before`` and ``after`` (None: the end of the graph).

    Keys are tuples compared lexicographically; a prefix sorts first, and negative entries let
    a key always fit in front of an extension of ``before``.
    """
    if after is None:
        return (before[0] + 1,) if before else (0,)
    if after[: len(before)] == before:
        return before + (after[len(before)] - 1,)
    return before + (0,)


def _format_arg(arg: Any, max_list_len: float = float("inf")) -> str:
    if hasattr(arg, "_custom_fx_repr_fn"):
        return arg._custom_fx_repr_fn()
    if isinstance(arg, list):
        items = ", ".join(_format_arg(a) for idx, a in enumerate(arg) if idx < max_list_len)
        more = "" if len(arg) < max_list_len + 1 else f", ...[total_len={len(arg)}]"
        return f"[{items}{more}]"
    if isinstance(arg, tuple):
        items = ", ".join(_format_arg(a) for idx, a in enumerate(arg) if idx < max_list_len)
        more = "" if len(arg) < max_list_len + 1 else f", ...[total_len={len(arg)}]"
        maybe_comma = "," if len(arg) == 1 else ""
        return f"({items}{maybe_comma}{more})"
    if isinstance(arg, dict):
        items = ", ".join(f"{k}: {_format_arg(v)}" for k, v in arg.items())
        return f"{{{items}}}"
    if isinstance(arg, Node):
        return "%" + str(arg)
    return str(arg)


def _type_repr(obj: Any) -> str:
    if isinstance(obj, type):
        if obj.__module__ == "builtins":
            return obj.__qualname__
        return f"{obj.__module__}.{obj.__qualname__}"
    if obj is ...:
        return "..."
    if isinstance(obj, types.FunctionType):
        return obj.__name__
    return repr(obj)


def _pretty_print_target(target: Any) -> str:
    """How a target reads in ``format_node`` (``operator.add``, ``ember.relu``, ``ember.ops.mm``)."""
    if isinstance(target, str):
        return target
    from ._naming import qualified_name

    if getattr(target, "__module__", None) == "builtins" and isinstance(getattr(target, "__name__", None), str):
        return f"builtins.{target.__name__}"  # as torch.fx prints them (the code says `getattr`)
    return qualified_name(target)


class Node:
    """One operation in a Graph; see the module docstring for the six ops."""

    def __init__(self, graph: Graph, name: str, op: str, target: Target, args: tuple, kwargs: dict,
                 return_type: Any | None = None) -> None:
        if op not in _VALID_OPS:
            raise AssertionError(f"op '{op}' is not in _legal_ops")
        if op == "call_function":
            if not callable(target):
                raise ValueError(f"Node [graph = {graph}, name = '{name}'] target {target} has type "
                                 f"{type(target)} but a Callable is expected")
        elif op != "root" and not isinstance(target, str):
            raise ValueError(f"Node [graph = {graph}, name = '{name}'] target {target} has type "
                             f"{type(target)} but a str is expected")
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self._input_nodes: dict[Node, None] = {}
        self.users: dict[Node, None] = {}
        self.type = return_type
        self._prev = self
        self._next = self
        self._sort_key: tuple[int, ...] = ()  # orders nodes of one graph (see _key_between)
        self._erased = False
        self.meta: dict[str, Any] = {}
        self._args: tuple = ()
        self._kwargs: dict = {}
        self._update_args_kwargs(args, kwargs)

    # op and target are properties: changing either moves the node between find_nodes buckets.
    @property
    def op(self) -> str:
        return self._op

    @op.setter
    def op(self, value: str) -> None:
        self._relocate("_op", value)

    @property
    def target(self) -> Target:
        return self._target

    @target.setter
    def target(self, value: Target) -> None:
        from ember._ops import unwrap

        self._relocate("_target", unwrap(value))  # torch.ops.aten.relu.default is ember's relu op

    def _relocate(self, field: str, value: Any) -> None:
        if "_target" not in self.__dict__ or self._op == "root":
            self.__dict__[field] = value
            return
        from .graph import _lookup_key

        lookup = self.graph._find_nodes_lookup
        lookup.get((self._op, _lookup_key(self._target)), {}).pop(self, None)
        self.__dict__[field] = value
        if not self._erased:
            lookup.setdefault((self._op, _lookup_key(self._target)), {})[self] = None

    # -- the linked list ------------------------------------------------------------------
    @property
    def next(self) -> Node:
        """The node after this one (the graph's root sentinel after the last node)."""
        return self._next

    @property
    def prev(self) -> Node:
        """The node before this one (the graph's root sentinel before the first node)."""
        return self._prev

    def prepend(self, x: Node) -> None:
        """Moves ``x`` (a node of the same graph) to just before this node."""
        if self.graph is not x.graph:
            raise AssertionError("Attempting to move a Node into a different Graph")
        if self is x:
            return
        x._remove_from_list()
        p = self._prev
        p._next, x._prev = x, p
        x._next, self._prev = self, x
        x._sort_key = _key_between(p._sort_key if p.op != "root" else (),
                                   self._sort_key if self.op != "root" else None)

    # Nodes of one graph compare by position, so passes can sort them (torch.fx does the same).
    def __lt__(self, other: Node) -> bool:
        return self._sort_key < other._sort_key

    def __gt__(self, other: Node) -> bool:
        return self._sort_key > other._sort_key

    def __le__(self, other: Node) -> bool:
        return self._sort_key <= other._sort_key

    def __ge__(self, other: Node) -> bool:
        return self._sort_key >= other._sort_key

    def append(self, x: Node) -> None:
        """Moves ``x`` (a node of the same graph) to just after this node."""
        self._next.prepend(x)

    def _remove_from_list(self) -> None:
        # The node keeps its own links: a loop standing on it (just erased) still finds the rest.
        p, n = self._prev, self._next
        p._next, n._prev = n, p

    # -- arguments and uses ---------------------------------------------------------------
    @property
    def args(self) -> tuple:
        """Positional arguments; assigning replaces them and updates the use lists."""
        return self._args

    @args.setter
    def args(self, a: tuple) -> None:
        self._update_args_kwargs(a, self._kwargs)

    @property
    def kwargs(self) -> dict:
        """Keyword arguments; assigning replaces them and updates the use lists."""
        return self._kwargs

    @kwargs.setter
    def kwargs(self, k: dict) -> None:
        self._update_args_kwargs(self._args, k)

    @property
    def all_input_nodes(self) -> list[Node]:
        """The distinct nodes named anywhere in ``args``/``kwargs``, in order of appearance."""
        return list(self._input_nodes)

    def _update_args_kwargs(self, new_args: Any, new_kwargs: Any) -> None:
        new_args = map_aggregate(tuple(new_args), lambda x: x)
        new_kwargs = map_aggregate(dict(new_kwargs), lambda x: x)
        for old_use in self._input_nodes:
            old_use.users.pop(self)
        inputs: dict[Node, None] = {}

        def collect(n: Node) -> Node:
            inputs.setdefault(n, None)
            return n

        map_arg(new_args, collect)
        map_arg(new_kwargs, collect)
        self._args, self._kwargs = new_args, new_kwargs
        self._input_nodes = inputs
        for new_use in inputs:
            new_use.users.setdefault(self)

    def update_arg(self, idx: int, arg: Argument) -> None:
        """Sets ``args[idx]`` to ``arg``."""
        args = list(self.args)
        args[idx] = arg
        self.args = tuple(args)

    def insert_arg(self, idx: int, arg: Argument) -> None:
        """Inserts ``arg`` at position ``idx`` of ``args``."""
        if not 0 <= idx <= len(self.args):
            raise AssertionError(f"insert_args index must be between 0 and {len(self.args)}")
        self.args = self.args[:idx] + (arg,) + self.args[idx:]

    def update_kwarg(self, key: str, arg: Argument) -> None:
        """Sets ``kwargs[key]`` to ``arg``."""
        self.kwargs = {**self.kwargs, key: arg}

    def replace_all_uses_with(self, replace_with: Node, delete_user_cb: Callable[[Node], bool] | None = None,
                              *, propagate_meta: bool = False) -> list[Node]:
        """Makes every user of this node use ``replace_with`` instead.

        Args:
            replace_with: the node to use in its place.
            delete_user_cb: called per user; only users it returns True for are rewritten.
            propagate_meta: copy this node's ``meta`` onto ``replace_with`` (which must have none).

        Returns:
            The users that were rewritten.
        """
        if propagate_meta:
            if replace_with.meta:
                raise AssertionError("Called node.replace_all_uses_with(replace_with, propagate_meta=True), "
                                     "but replace_with already has .meta keys")
            replace_with.meta.update(self.meta)
        to_process = [u for u in self.users if delete_user_cb is None or delete_user_cb(u)]
        for use_node in to_process:
            use_node._replace_input(self, replace_with)
        return to_process

    def replace_input_with(self, old_input: Node, new_input: Node) -> None:
        """Replaces every occurrence of ``old_input`` in this node's arguments by ``new_input``."""
        self._replace_input(old_input, new_input)

    def _replace_input(self, old: Node, new: Node) -> None:
        def swap(n: Node) -> Node:
            return new if n is old else n

        self._update_args_kwargs(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    # -- properties -----------------------------------------------------------------------
    @property
    def stack_trace(self) -> str | None:
        """The user source location that produced this node, where the tracer recorded it."""
        return self.meta.get("stack_trace")

    @stack_trace.setter
    def stack_trace(self, trace: str | None) -> None:
        self.meta["stack_trace"] = trace

    def is_impure(self, impure_random: bool = True) -> bool:
        """Whether removing this node (when unused) would change the program's behaviour."""
        if self.op in ("placeholder", "output"):
            return True
        if self.op == "call_function":
            if self.target in _side_effectful_functions:
                return True
            tags = getattr(self.target, "tags", None)
            if isinstance(tags, (set, frozenset)) and getattr(self.target, "schema", None) is not None:
                # An ember op that writes to an input, or draws random numbers, has an effect.
                # Tag "side_effect": a marker op whose place in the graph is its meaning (_pipe_split).
                return ("inplace" in tags or (impure_random and "random" in tags) or "out" in tags
                        or "side_effect" in tags)
            return False
        if self.op == "call_module":
            owner = self.graph.owning_module
            if owner is None:
                raise AssertionError("self.graph.owning_module not set for purity check")
            target_mod = owner.get_submodule(self.target)
            return getattr(target_mod, "_is_impure", False)
        return False

    def normalized_arguments(self, root: Any, arg_types: Any = None, kwarg_types: Any = None,
                             normalize_to_only_use_kwargs: bool = False):
        """This call's arguments bound to its target's signature (defaults filled in), as an
        ``ArgsKwargsPair``; None when the target has no usable signature."""
        from .operator_schemas import normalize_function, normalize_module

        if self.op == "call_function":
            return normalize_function(self.target, self.args, self.kwargs, arg_types, kwarg_types,
                                      normalize_to_only_use_kwargs)
        if self.op == "call_module":
            return normalize_module(root, self.target, self.args, self.kwargs, normalize_to_only_use_kwargs)
        return None

    # -- printing -------------------------------------------------------------------------
    def __repr__(self) -> str:
        return self.name

    def _rename(self, candidate: str) -> None:
        if candidate == self.name:
            return
        name = self.graph._graph_namespace.create_name(candidate, None)
        self.name = name
        self.graph._graph_namespace._rename_object(self, name)

    def format_node(self, placeholder_names: list[str] | None = None,
                    maybe_return_typename: list[str] | None = None, *,
                    include_tensor_metadata: bool = False) -> str | None:
        """One line describing this node, as ``str(graph)`` prints it.

        A ``placeholder`` node with ``placeholder_names`` given adds its name there and returns
        None; an ``output`` node sets ``maybe_return_typename[0]`` when it has a type.
        """
        if self.op == "placeholder":
            if not isinstance(self.target, str):
                raise AssertionError("placeholder target must be a str")
            arg_str = self.target
            if self.type:
                arg_str += ": " + _type_repr(self.type)
            if self.args:
                arg_str += " = " + repr(self.args[0])
            if placeholder_names is not None:
                placeholder_names.append(arg_str)
                return None
            maybe_typename = f"{_type_repr(self.type)} " if self.type else ""
            default_val = "(default=" + str(self.args[0]) + ")" if self.args else ""
            return (f"%{self.name} : {maybe_typename}[num_users={len(self.users)}] = "
                    f"{self.op}[target={self.target}]{default_val}")
        if self.op == "get_attr":
            maybe_typename = f"{_type_repr(self.type)} " if self.type is not None else ""
            return (f"%{self.name} : {maybe_typename}[num_users={len(self.users)}] = "
                    f"{self.op}[target={_pretty_print_target(self.target)}]")
        if self.op == "output":
            if self.type and maybe_return_typename is not None:
                maybe_return_typename[0] = f" -> {_type_repr(self.type)}"
            return f"return {self.args[0]}"
        maybe_typename = f"{_type_repr(self.type)} " if self.type is not None else ""
        extra = ""
        if include_tensor_metadata and "tensor_meta" in self.meta:
            extra = f" (tensor_meta={self.meta['tensor_meta']})"
        args, kwargs = self.args, self.kwargs
        if self.op == "call_function":
            args, kwargs = _naming.without_defaults(self.target, args, kwargs)
        return (f"%{self.name} : {maybe_typename}[num_users={len(self.users)}] = "
                f"{self.op}[target={_pretty_print_target(self.target)}](args = {_format_arg(args)}, "
                f"kwargs = {_format_arg(kwargs)}){extra}")
