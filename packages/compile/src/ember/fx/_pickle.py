"""Pickling a GraphModule (``torch.save(gm)``, ``pickle.dumps(gm)``, multiprocessing).

The module's state is pickled as a plain Module's, and its graph as a list of nodes in which
node references are names and ember ops are their names (an ``Op`` object itself does not
pickle); loading rebuilds the graph and regenerates ``forward``. Node ``meta`` is not kept (as
with PyTorch, whose pickled GraphModule carries only its code). Targets that are Python
functions pickle by reference, as pickle does for any function.
"""

from __future__ import annotations

from typing import Any

from ember._src.dispatch import OPS, Op

from .graph import Graph
from .node import Node, map_aggregate


class _NodeRef:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self):
        return (_NodeRef, (self.name,))


class _OpRef:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self):
        return (_OpRef, (self.name,))


def _encode(value: Any) -> Any:
    def one(a):
        if isinstance(a, Node):
            return _NodeRef(a.name)
        if isinstance(a, Op):
            return _OpRef(a.name)
        return a

    return map_aggregate(value, one)


def graph_state(graph: Graph) -> list:
    """The graph as picklable rows ``(op, name, target, args, kwargs, type)``."""
    rows = []
    for n in graph.nodes:
        target = _OpRef(n.target.name) if isinstance(n.target, Op) else n.target
        rows.append((n.op, n.name, target, _encode(n.args), _encode(dict(n.kwargs)), n.type))
    return rows


def graph_from_state(rows: list) -> Graph:
    graph = Graph()
    env: dict[str, Node] = {}

    def decode(value):
        def one(a):
            if isinstance(a, _NodeRef):
                return env[a.name]
            if isinstance(a, _OpRef):
                return OPS[a.name]
            return a

        return map_aggregate(value, one)

    for op, name, target, args, kwargs, type_expr in rows:
        if isinstance(target, _OpRef):
            target = OPS[target.name]
        node = graph.create_node(op, target, decode(args), decode(kwargs), name=name, type_expr=type_expr)
        env[name] = node
    return graph


def rebuild_graph_module(module_state: dict, rows: list, class_name: str):
    from ember.nn import Module

    from .graph_module import GraphModule

    holder = Module()
    holder.__dict__.update(module_state)
    gm = GraphModule(holder, graph_from_state(rows), class_name)
    gm.__dict__.update({k: v for k, v in module_state.items() if k not in gm.__dict__ or k == "meta"})
    return gm
