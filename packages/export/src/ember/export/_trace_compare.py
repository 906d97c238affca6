"""Comparing traces of one program at different sizes: same ops, which integers differ.

A trace's signature lists, per node, its op, its argument leaves (ints, floats, node
references by position, literals) and its result shapes; two traces record the same
program when everything but the int/float leaves and the shapes agree.
"""

from __future__ import annotations

import ember

from ._subgraphs import is_graph_module, sub_signature


def is_node(x) -> bool:
    return hasattr(x, "op") and hasattr(x, "users")


def _slots(value, path, out, nodes_index):
    """Flattens an argument into (path, leaf) where leaves are ints, floats or node indices."""
    if is_node(value):
        out.append((path, ("node", nodes_index[value])))
    elif isinstance(value, bool) or value is None or isinstance(value, str):
        out.append((path, ("lit", value)))
    elif isinstance(value, int):
        out.append((path, ("int", int(value))))
    elif isinstance(value, float):
        out.append((path, ("float", value)))
    elif isinstance(value, (list, tuple)):
        out.append((path, ("seq", type(value).__name__, len(value))))
        for k, v in enumerate(value):
            _slots(v, path + (k,), out, nodes_index)
    elif isinstance(value, dict):
        out.append((path, ("dict", tuple(value))))
        for k, v in value.items():
            _slots(v, path + (k,), out, nodes_index)
    else:
        out.append((path, ("lit", id(value) if not isinstance(value, (ember.dtype, ember.device)) else value)))


def signature(gm):
    nodes = list(gm.graph.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    sig = []
    for n in nodes:
        slots: list = []
        _slots(list(n.args), ("args",), slots, index)
        _slots(dict(n.kwargs), ("kwargs",), slots, index)
        val = n.meta.get("val")
        shapes = val_shapes(val)
        target = getattr(n.target, "name", n.target) if n.op == "call_function" else n.target
        if n.op == "get_attr" and is_graph_module(getattr(gm, str(n.target), None)):
            target = "<subgraph>"  # named after the trace (true_graph_0 ...): compare by content
        sig.append((n.op, target, slots, shapes))
    return sig + sub_signature(gm, _slots, val_shapes)


def val_shapes(val):
    if val is None:
        return None
    if hasattr(val, "shape"):
        return [tuple(int(s) for s in val.shape)]
    if isinstance(val, (list, tuple)):
        return [tuple(int(s) for s in v.shape) if hasattr(v, "shape") else None for v in val]
    return None


def same_structure(a, b) -> str | None:
    """None when two trace signatures record the same ops, else where they differ."""
    if len(a) != len(b):
        return f"the graph has {len(a)} nodes at one size and {len(b)} at another"
    for k, ((op1, t1, s1, sh1), (op2, t2, s2, sh2)) in enumerate(zip(a, b)):
        if op1 != op2 or t1 != t2 or len(s1) != len(s2):
            return f"node {k} is {t1} at one size and {t2} at another"
        for (p1, v1), (p2, v2) in zip(s1, s2):
            if p1 != p2 or v1[0] != v2[0] or (v1[0] not in ("int", "float") and v1 != v2):
                return f"the arguments of node {k} ({t1}) differ in structure"
        if (sh1 is None) != (sh2 is None) or (sh1 is not None and [s is None for s in sh1] != [s is None for s in sh2]):
            return f"the result of node {k} ({t1}) differs in structure"
    return None
