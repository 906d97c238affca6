"""Mutation analysis and functionalization of captured graphs.

A captured graph records in-place ops as they ran (``add_``, ``copy_``, ``fill_``, a
training-mode ``native_batch_norm`` updating running statistics). Export needs the graph to
be functional *at its boundary*: no input is written. ``lift_input_mutations`` does that:
each written input (a buffer, or a user input) is cloned once at the top of the graph, every
later use reads the clone, and the clone's final value becomes an extra output that the
signature marks as ``BUFFER_MUTATION`` (or ``USER_INPUT_MUTATION``). In-place ops on fresh
intermediates stay in the graph (they are invisible outside it, as in PyTorch's training
IR); ``rewrite_inplace_ops`` turns the ones that alias nothing into out-of-place ops.

Which argument an op writes comes from its schema (``Tensor(a!) self``) plus a small table
of ops whose kernels write arguments their schema does not mark (``native_batch_norm``'s
running statistics in training mode).
"""

from __future__ import annotations

import re

from ember._src.dispatch import OPS, Op


def _schema_args(schema: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in schema.split("(", 1)[1]:
        if ch == "(" or ch == "[":
            depth += 1
        elif ch == ")" or ch == "]":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return [a for a in out if a != "*"]


_MUTATES_CACHE: dict[str, tuple[int, ...]] = {}


def schema_mutated_args(op: Op) -> tuple[int, ...]:
    """Positions of the arguments an op's schema marks as written (``Tensor(a!)``)."""
    cached = _MUTATES_CACHE.get(op.name)
    if cached is None:
        cached = tuple(i for i, a in enumerate(_schema_args(op.schema)) if re.search(r"\([a-z]!\)", a))
        _MUTATES_CACHE[op.name] = cached
    return cached


def _arg(node, index: int, name: str, default=None):
    if index < len(node.args):
        return node.args[index]
    return node.kwargs.get(name, default)


def mutated_inputs(node) -> list:
    """The tensor nodes an op node writes in place."""
    target = node.target
    if node.op != "call_function" or not isinstance(target, Op):
        return []
    out = [node.args[i] for i in schema_mutated_args(target) if i < len(node.args)]
    if target.name in ("native_batch_norm", "batch_norm") and _arg(node, 5, "training"):
        out += [a for a in (_arg(node, 3, "running_mean"), _arg(node, 4, "running_var")) if a is not None]
    return [a for a in out if hasattr(a, "op")]


def is_view(node) -> bool:
    return node.op == "call_function" and isinstance(node.target, Op) and "view" in node.target.tags


def view_root(node):
    """The node whose storage ``node`` aliases (itself unless it is a view)."""
    while is_view(node) and node.args and hasattr(node.args[0], "op"):
        node = node.args[0]
    return node


def lift_input_mutations(graph, kinds: dict[str, str]) -> list[tuple[str, object]]:
    """Clones every placeholder the graph writes and returns the clones' final values.

    Args:
        graph: an ember.fx Graph, edited in place.
        kinds: placeholder name -> a label (passed through to the result).

    Returns:
        ``[(placeholder name, node holding its final value)]`` in placeholder order; the
        caller adds the nodes to the graph's outputs.
    """
    written = {}
    for node in graph.nodes:
        for arg in mutated_inputs(node):
            root = view_root(arg)
            if root.op == "placeholder":
                written[root.name] = root
    if not written:
        return []
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    clone = OPS["clone"]
    result = []
    last = placeholders[-1]
    for ph in placeholders:
        if ph.name not in written:
            continue
        with graph.inserting_after(last):
            copy = graph.call_function(clone, (ph,))
        copy.meta.update({k: v for k, v in ph.meta.items() if k in ("val", "tensor_meta")})
        ph.replace_all_uses_with(copy, delete_user_cb=lambda user, c=copy: user is not c)
        last = copy
        result.append((ph.name, copy))
    return result


def _users_after(node, position: dict) -> list:
    # A node inserted since ``position`` was taken (the functional replacement itself) is not a user after.
    return [u for u in node.users if position.get(u, -1) > position[node]]


def rewrite_inplace_ops(graph) -> int:
    """Rewrites ``x.add_(y)`` into ``x2 = add(x, y)`` where ``x`` aliases nothing; returns the count.

    An in-place op is left as it is when its target is a view, or when a view of its target
    is read after it (those readers must see the write)."""
    count = 0
    changed = True
    while changed:
        changed = False
        order = {n: i for i, n in enumerate(graph.nodes)}
        for node in list(graph.nodes):
            if node.op != "call_function" or not isinstance(node.target, Op):
                continue
            written = mutated_inputs(node)
            if len(written) != 1 or node.target.name == "native_batch_norm":
                continue
            (dst,) = written
            if is_view(dst) or dst.op == "placeholder" or dst is not node.args[0]:
                continue
            if any(is_view(u) and _users_after(u, order) for u in dst.users if u is not node):
                continue
            replacement = _functional_form(graph, node)
            if replacement is None:
                continue
            for user in _users_after(dst, order):
                if user is not node:
                    user.replace_input_with(dst, replacement)
            node.replace_all_uses_with(replacement)
            graph.erase_node(node)
            count += 1
            changed = True
            break
    return count


def _functional_form(graph, node):
    """Inserts the out-of-place equivalent of in-place ``node`` before it, or returns None."""
    name = node.target.name
    args, kwargs = node.args, node.kwargs
    with graph.inserting_before(node):
        if name == "copy_":
            dst, src = args[0], args[1]
            val = dst.meta.get("val")
            if val is None:
                return None
            conv = graph.call_function(OPS["_to_copy"], (src,), {"dtype": val.dtype})
            new = graph.call_function(OPS["expand"], (conv, list(val.shape)))
        elif name == "fill_":
            val = args[0].meta.get("val")
            if val is None:
                return None
            new = graph.call_function(OPS["full"], (list(val.shape), args[1]), {"dtype": val.dtype})
        elif name.endswith("_") and name[:-1] in OPS:
            new = graph.call_function(OPS[name[:-1]], args, dict(kwargs))
        else:
            return None
    kept = ("val", "tensor_meta", "stack_trace", "nn_module_stack")
    new.meta.update({k: v for k, v in node.meta.items() if k in kept})
    return new
