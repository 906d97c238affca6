"""The subgraphs of ``cond`` and ``while_loop`` nodes in an exported program.

The capture memoizes subgraphs (one ``GraphModule`` object per structure, shared by every trace
that produced it), so export first takes its own copies, then names them as PyTorch does:
``true_graph_0``/``false_graph_0`` for ``cond``, ``while_loop_cond_graph_0``/
``while_loop_body_graph_0`` for ``while_loop``; each is a ``get_attr`` node of the root graph
and a submodule of the program's graph module (the shape ``torch.export`` prints and saves).
"""

from __future__ import annotations

import copy

_NAMES = {"cond": ("true_graph", "false_graph"), "while_loop": ("while_loop_cond_graph", "while_loop_body_graph")}


def is_graph_module(value) -> bool:
    from ember.fx import GraphModule

    return isinstance(value, GraphModule)


def subgraph_nodes(gm) -> list:
    """(get_attr node, GraphModule) for every subgraph the root graph reads."""
    out = []
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            value = _get(gm, node.target)
            if is_graph_module(value):
                out.append((node, value))
    return out


def _get(gm, target: str):
    value = gm
    for part in target.split("."):
        value = getattr(value, part, None)
    return value


def own_copy(sub):
    """A private copy of a (memoized) subgraph, its own subgraphs copied as well."""
    from ember import nn
    from ember.fx import GraphModule

    root = nn.Module()
    for node, value in subgraph_nodes(sub):
        setattr(root, node.target, value)  # copied by name_subgraphs below
    new = GraphModule(root, copy.deepcopy(sub.graph))
    name_subgraphs(new)
    return new


def name_subgraphs(gm) -> None:
    """Copies and renames the subgraphs of ``gm``'s graph (see the module docstring)."""
    counters: dict = {}
    for node, value in subgraph_nodes(gm):
        users = [u for u in node.users if u.op == "call_function" and getattr(u.target, "name", None) in _NAMES]
        if not users:
            continue
        user = users[0]
        names = _NAMES[user.target.name]
        # cond(pred, true_graph, false_graph, operands); while_loop(cond_graph, body_graph, ...)
        first = user.args[1] if user.target.name == "cond" else user.args[0]
        position = 0 if first is node else 1
        base = names[position]
        index = counters.get(base, 0)
        while hasattr(gm, f"{base}_{index}") and _get(gm, f"{base}_{index}") is not value:
            index += 1
        counters[base] = index + 1
        new_name = f"{base}_{index}"
        old = node.target
        setattr(gm, new_name, own_copy(value))
        node.target = new_name
        node._rename(new_name)
        if old != new_name and old in getattr(gm, "_modules", {}):
            del gm._modules[old]
    gm.recompile()


def sub_signature(gm, slots_of) -> list:
    """Entries describing every subgraph's nodes (ops and arguments), for comparing traces; their
    integers are literals here, so a size inside a subgraph that follows a dynamic dim shows as a
    structural difference (export cannot yet rewrite sizes inside subgraphs)."""
    out = []
    for node, sub in subgraph_nodes(gm):
        nodes = list(sub.graph.nodes)
        index = {n: i for i, n in enumerate(nodes)}
        for n in nodes:
            slots: list = []
            slots_of(list(n.args), ("args",), slots, index)
            slots_of(dict(n.kwargs), ("kwargs",), slots, index)
            slots = [(p, ("lit", v[1]) if v[0] in ("int", "float") else v) for p, v in slots]
            target = getattr(n.target, "name", n.target) if n.op == "call_function" else n.target
            out.append(("subgraph", f"a size inside the subgraph {node.target} ({target})", slots, None))
        out.extend(sub_signature(sub, slots_of))
    return out
