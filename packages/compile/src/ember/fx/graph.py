"""``Graph``: the nodes of one function, an ordered doubly linked list around a root sentinel.

Nodes are created at the current insert point (the end of the graph unless
``inserting_before``/``inserting_after`` say otherwise), named uniquely, and can be copied
from another graph (``node_copy``/``graph_copy``), erased once unused, and checked by
``lint``. ``python_code`` turns the graph into the source a GraphModule runs.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ember._ops import unwrap as unwrap_aten

from . import _naming
from ._codegen import CodeGen, PythonCode
from .node import Argument, Node, Target, map_arg

if TYPE_CHECKING:
    from .graph_module import GraphModule

__all__ = ["CodeGen", "Graph", "PythonCode"]


class _NodeList:
    """A live view of a graph's nodes (iterating tolerates erasing the current node)."""

    def __init__(self, graph: Graph, direction: str = "_next") -> None:
        self._graph = graph
        self._direction = direction

    def __len__(self) -> int:
        return self._graph._len

    def __iter__(self) -> Iterator[Node]:
        root = self._graph._root
        cur = getattr(root, self._direction)
        while cur is not root:
            following = getattr(cur, self._direction)
            if not cur._erased:
                yield cur
            cur = following

    def __reversed__(self) -> Iterator[Node]:
        return iter(_NodeList(self._graph, "_prev" if self._direction == "_next" else "_next"))

    def __repr__(self) -> str:
        return repr(list(self))


class _InsertPoint:
    """Context manager that restores the previous insert point on exit."""

    def __init__(self, graph: Graph, new_insert: Callable[[Node], None]) -> None:
        self.graph = graph
        self.orig_insert, graph._insert = graph._insert, new_insert

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        self.graph._insert = self.orig_insert


class Graph:
    """The IR of ember.fx: a list of Nodes (see ``ember.fx.node`` for the six ops).

    Args:
        owning_module: the GraphModule this graph belongs to (set by GraphModule).
        tracer_cls: the Tracer class that built it, if any.
        tracer_extras: extra state the tracer recorded.
    """

    def __init__(self, owning_module: GraphModule | None = None, tracer_cls: type | None = None,
                 tracer_extras: dict[str, Any] | None = None) -> None:
        self._root = Node(self, "", "root", "", (), {})
        self._insert = self._root.prepend
        self._len = 0
        self._graph_namespace = _naming.Namespace()
        self._owning_module = owning_module
        self._tracer_cls = tracer_cls
        self._tracer_extras = tracer_extras
        self._codegen = CodeGen()
        self._co_fields: dict[str, Any] = {}
        self._find_nodes_lookup: dict[tuple[str, Any], dict[Node, None]] = {}

    @property
    def owning_module(self):
        return self._owning_module

    @owning_module.setter
    def owning_module(self, mod) -> None:
        self._owning_module = mod

    @property
    def nodes(self) -> _NodeList:
        """The nodes in order; supports ``len`` and ``reversed``."""
        return _NodeList(self)

    def output_node(self) -> Node:
        """The graph's output node (the last node)."""
        last = next(iter(reversed(self.nodes)), None)
        if last is None or last.op != "output":
            raise RuntimeError("the graph has no output node")
        return last

    def find_nodes(self, *, op: str, target: Target | None = None, sort: bool = True) -> list[Node]:
        """Nodes with ``op`` (and ``target``, when given), in graph order unless ``sort=False``."""
        if target is None:
            found = [n for (o, _), nodes in self._find_nodes_lookup.items() if o == op for n in nodes]
        else:
            found = list(self._find_nodes_lookup.get((op, _lookup_key(target)), ()))
        if sort:
            found.sort(key=lambda n: n._sort_key)
        return found

    # -- building -------------------------------------------------------------------------
    def create_node(self, op: str, target: Target, args: tuple | None = None, kwargs: dict | None = None,
                    name: str | None = None, type_expr: Any | None = None) -> Node:
        """Creates a node at the insert point; the lower-level form of ``call_function`` etc."""
        args = () if args is None else args
        kwargs = {} if kwargs is None else kwargs
        if not isinstance(args, tuple):
            raise AssertionError("args must be a tuple")
        if not isinstance(kwargs, dict):
            raise AssertionError("kwargs must be a dict")
        if getattr(type(target), "_fx_recording_stand_in", False):
            # A pass that read `ember.relu` while a trace's patches were active got the stand-in.
            target = target.__wrapped__
        target = unwrap_aten(target)  # torch.ops.aten.relu.default is ember's relu op
        candidate = name if name is not None else _naming.target_name_hint(target)
        name = self._graph_namespace.create_name(candidate, None)
        n = Node(self, name, op, target, args, kwargs, type_expr)
        self._graph_namespace.associate_name_with_obj(name, n)
        self._insert(n)
        self._find_nodes_lookup.setdefault((op, _lookup_key(target)), {})[n] = None
        self._len += 1
        return n

    def placeholder(self, name: str, type_expr: Any | None = None,
                    default_value: Any = inspect.Signature.empty) -> Node:
        """An input of the function; ``default_value`` makes it optional."""
        args = () if default_value is inspect.Signature.empty else (default_value,)
        return self.create_node("placeholder", name, args=args, type_expr=type_expr)

    def get_attr(self, qualified_name: str, type_expr: Any | None = None) -> Node:
        """Fetches ``qualified_name`` (a dotted path) from the owning module."""
        owner = self.owning_module
        if owner is not None and not _has_path(owner, qualified_name):
            import warnings

            warnings.warn(f"Attempted to insert a get_attr Node with no underlying reference in the "
                          f"owning GraphModule! Call GraphModule.add_submodule to add the necessary "
                          f"submodule, GraphModule.add_parameter to add the necessary Parameter, or "
                          f"nn.Module.register_buffer to add the necessary buffer ({qualified_name})",
                          stacklevel=2)
        return self.create_node("get_attr", qualified_name, type_expr=type_expr)

    def call_module(self, module_name: str, args: tuple | None = None, kwargs: dict | None = None,
                    type_expr: Any | None = None) -> Node:
        """Calls the submodule at path ``module_name``."""
        owner = self.owning_module
        if owner is not None and not _has_path(owner, module_name):
            import warnings

            warnings.warn("Attempted to insert a call_module Node with no underlying reference in the "
                          "owning GraphModule! Call GraphModule.add_submodule to add the necessary "
                          "submodule", stacklevel=2)
        return self.create_node("call_module", module_name, args, kwargs, type_expr=type_expr)

    def call_method(self, method_name: str, args: tuple | None = None, kwargs: dict | None = None,
                    type_expr: Any | None = None) -> Node:
        """Calls method ``method_name`` of ``args[0]``."""
        return self.create_node("call_method", method_name, args, kwargs, type_expr=type_expr)

    def call_function(self, the_function: Callable, args: tuple | None = None, kwargs: dict | None = None,
                      type_expr: Any | None = None, name: str | None = None) -> Node:
        """Calls ``the_function`` (a Python callable or an ember op)."""
        return self.create_node("call_function", the_function, args, kwargs, name=name, type_expr=type_expr)

    def output(self, result: Argument, type_expr: Any | None = None) -> Node:
        """The graph's return value."""
        return self.create_node("output", "output", (result,), type_expr=type_expr)

    def inserting_before(self, n: Node | None = None) -> _InsertPoint:
        """Context manager: new nodes go just before ``n`` (the start of the graph if None)."""
        if n is None:
            return self.inserting_after(self._root)
        if n.graph is not self:
            raise AssertionError("Node to insert before is not in graph.")
        return _InsertPoint(self, n.prepend)

    def inserting_after(self, n: Node | None = None) -> _InsertPoint:
        """Context manager: new nodes go just after ``n`` (the end of the graph if None)."""
        if n is None:
            return self.inserting_before(self._root)
        if n.graph is not self:
            raise AssertionError("Node to insert after is not in graph.")
        return _InsertPoint(self, n.append)

    def node_copy(self, node: Node, arg_transform: Callable[[Node], Argument] = lambda x: x) -> Node:
        """Copies ``node`` (of any graph) into this one, mapping its input nodes by ``arg_transform``."""
        args = map_arg(node.args, arg_transform)
        kwargs = map_arg(node.kwargs, arg_transform)
        result = self.create_node(node.op, node.target, args, kwargs, node.name, node.type)
        result.meta = copy.copy(node.meta)
        return result

    def graph_copy(self, g: Graph, val_map: dict[Node, Node], return_output_node: bool = False):
        """Copies every node of ``g`` except its output into this graph.

        ``val_map`` maps ``g``'s nodes to this graph's (pre-filled entries are used as they
        are, e.g. to bind placeholders) and is filled in. Returns the copied output value.
        """
        for node in g.nodes:
            if node in val_map:
                continue
            if node.op == "output":
                rv = map_arg(node.args[0], lambda n: val_map[n])
                return (rv, node) if return_output_node else rv
            val_map[node] = self.node_copy(node, lambda n: val_map[n])
        return None

    def __deepcopy__(self, memo: dict | None = None) -> Graph:
        memo = {} if memo is None else memo
        g = Graph(tracer_cls=self._tracer_cls)
        output_vals = g.graph_copy(self, val_map=memo, return_output_node=True)
        g._codegen = copy.deepcopy(self._codegen)
        if output_vals is not None:
            output_val, old_output = output_vals
            new_output = g.output(output_val, type_expr=old_output.type)
            new_output.meta = copy.copy(old_output.meta)
        return g

    # -- removing -------------------------------------------------------------------------
    def erase_node(self, to_erase: Node) -> None:
        """Removes an unused node from the graph."""
        if to_erase.users:
            raise RuntimeError(f"Tried to erase Node {to_erase} but it still had {len(to_erase.users)} "
                               f"users in the graph: {to_erase.users}!")
        if to_erase.graph is not self:
            raise RuntimeError(f"Attempting to remove {to_erase} from wrong graph!")
        if to_erase._erased:
            import warnings

            warnings.warn(f"erase_node({to_erase}) on an already erased node", stacklevel=2)
            return
        self._find_nodes_lookup.get((to_erase.op, _lookup_key(to_erase.target)), {}).pop(to_erase, None)
        to_erase._remove_from_list()
        to_erase._erased = True
        self._len -= 1
        # Drop its uses of other nodes so they can be erased in turn.
        to_erase._update_args_kwargs((), {})

    def eliminate_dead_code(self, is_impure_node: Callable[[Node], bool] | None = None) -> bool:
        """Erases nodes whose value is unused and that have no effect; returns whether any went."""
        self.lint()
        changed = False
        for node in reversed(self.nodes):
            impure = is_impure_node(node) if is_impure_node is not None else node.is_impure()
            if not impure and not node.users:
                self.erase_node(node)
                changed = True
        return changed

    # -- checking and printing ------------------------------------------------------------
    def lint(self) -> None:
        """Checks the graph's invariants; raises RuntimeError naming the first broken one."""
        seen_names: set[str] = set()
        seen_values: set[Node] = set()
        for node in self.nodes:
            if node.graph is not self:
                raise RuntimeError(f"Node '{node}' does not belong to this Graph!")
            if node.name in seen_names:
                raise RuntimeError(f"Node redefined name {node.name}!")
            seen_names.add(node.name)
            for arg in node._input_nodes:
                if arg.graph is not self:
                    raise RuntimeError(f"Argument '{arg}' of Node '{node}' does not belong to this Graph, "
                                       "but was used as an argument! If you are copying nodes from another "
                                       "graph, make sure to use ``arg_transform`` on node_copy() to remap "
                                       "values\n" + str(self))
                if arg not in seen_values:
                    raise RuntimeError(f"Argument '{arg}' of Node '{node}' was used before it has been defined! "
                                       "Please check that Nodes in the graph are topologically ordered\n"
                                       + str(self))
                if node not in arg.users:
                    raise RuntimeError(f"Node '{node}' is missing from the users of its input '{arg}'")
            for user in node.users:
                if node not in user._input_nodes:
                    raise RuntimeError(f"Node '{user}' is a user of '{node}' but does not use it")
            seen_values.add(node)
        self._lint_targets()

    def _lint_targets(self) -> None:
        owner = self.owning_module
        if owner is None:
            return
        for node in self.nodes:
            if node.op in ("get_attr", "call_module") and not _has_path(owner, node.target):
                kind = "get_attr" if node.op == "get_attr" else "call_module"
                raise RuntimeError(f"Node {node} target {node.target} references nonexistent attribute "
                                   f"of {type(owner).__name__} ({kind})")

    def __str__(self) -> str:
        lines = [f"    {node.format_node()}" for node in self.nodes]
        return "graph():\n" + "\n".join(lines)

    def print_tabular(self) -> None:
        """Prints op, name, target, args and kwargs of every node as a table."""
        rows = [[n.op, n.name, str(n.target), str(n.args), str(n.kwargs)] for n in self.nodes]
        header = ["opcode", "name", "target", "args", "kwargs"]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(5)]
        for row in [header, ["-" * w for w in widths], *rows]:
            print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())

    def python_code(self, root_module: str, *, verbose: bool = False, include_stride: bool = False,
                    include_device: bool = False, colored: bool = False) -> PythonCode:
        """The Python source of this graph as ``def forward(self, ...)`` and its globals.

        ``root_module`` names the object ``get_attr``/``call_module`` nodes read from.
        """
        namespace = _naming.Namespace()
        for node in self.nodes:
            namespace.associate_name_with_obj(node.name, node)
            namespace._used_names.add(node.name)
        return self._codegen._gen_python_code(self.nodes, root_module, namespace, verbose=verbose,
                                              include_stride=include_stride, include_device=include_device)

    def set_codegen(self, codegen: CodeGen) -> None:
        self._codegen = codegen

    def process_inputs(self, *args: Any) -> Any:
        """The placeholders' values from the arguments the generated code takes (see ``CodeGen``)."""
        return self._codegen.process_inputs(*args)

    def process_outputs(self, outputs: Any) -> Any:
        """The generated code's result from the output node's value (see ``CodeGen``)."""
        return self._codegen.process_outputs(outputs)

    def _target_to_str(self, target: Target) -> str:
        return _naming.target_name_hint(target)


def _lookup_key(target: Any) -> Any:
    # Unhashable targets are keyed by identity.
    try:
        hash(target)
        return target
    except TypeError:
        return ("__id__", id(target))


def _has_path(module: Any, qualified_name: str) -> bool:
    obj = module
    for atom in qualified_name.split("."):
        if not hasattr(obj, atom):
            return False
        obj = getattr(obj, atom)
    return True
