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


def sub_entries(gm) -> list:
    """(subgraph module, node, graph-op node using it) for every node of every subgraph, nested
    ones after their parent's."""
    out = []
    for attr_node, sub in subgraph_nodes(gm):
        users = [u for u in attr_node.users if u.op == "call_function"]
        hop = users[0] if users else None
        for n in sub.graph.nodes:
            out.append((sub, n, hop))
        out.extend(sub_entries(sub))
    return out


def operands_of(hop) -> list:
    """The outer values bound to a subgraph's placeholders, in order."""
    name = getattr(hop.target, "name", None)
    if name == "cond":
        return list(hop.args[3])
    if name == "while_loop":
        return list(hop.args[2]) + list(hop.args[3])
    return []


def size_sources(sub, hop, symbols) -> dict:
    """symbol -> (placeholder of ``sub``, dim, coeff, offset) from the operands' symbolic shapes."""
    import sympy

    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    sources: dict = {}
    for ph, outer in zip(placeholders, operands_of(hop)):
        shape = outer.meta.get("sym_shape") if hasattr(outer, "meta") else None
        if shape is None:
            continue
        for d, size in enumerate(shape):
            expr = sympy.sympify(size)
            if len(expr.free_symbols) != 1 or not expr.is_polynomial() or sympy.degree(expr) != 1:
                continue
            sym = next(iter(expr.free_symbols))
            coeff, offset = int(expr.coeff(sym)), int(expr.subs(sym, 0))
            best = sources.get(sym)
            if best is None or (best[2], abs(best[3])) > (coeff, abs(offset)):
                sources[sym] = (ph, d, coeff, offset)
    return sources
