"""``replace_pattern``: find every occurrence of a pattern graph and splice in a replacement.

Matching walks backwards from the pattern's returned nodes along argument edges. A pattern
placeholder matches any value, but two placeholders never match the same graph node; other
nodes match on op and target, with literal arguments equal. An occurrence whose internal
nodes are used outside it is skipped (replacing it would cut those uses), and occurrences
that overlap an earlier one are dropped. Each replacement goes just before the first user
of the values it replaces.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Callable
from typing import Any, NamedTuple

from ember.nn import Module

from ._symbolic_trace import symbolic_trace
from .graph import Graph
from .graph_module import GraphModule
from .node import Node

__all__ = ["InternalMatch", "Match", "ReplacedPatterns", "replace_pattern", "replace_pattern_with_filters"]


class Match(NamedTuple):
    anchor: Node  # the pattern node matching started from (its first returned node)
    nodes_map: dict[Node, Node]  # pattern node -> graph node


@dataclasses.dataclass
class ReplacedPatterns:
    anchor: Node
    nodes_map: dict[Node, Node]
    replacements: list[Node]


@dataclasses.dataclass
class InternalMatch:
    """One occurrence of the pattern, as filters see it."""

    anchors: list[Node]
    nodes_map: dict[Node, Node] = dataclasses.field(default_factory=dict)
    placeholder_nodes: list[Any] = dataclasses.field(default_factory=list)
    returning_nodes: list[Node] = dataclasses.field(default_factory=list)
    name_node_map: dict[str, Node] = dataclasses.field(default_factory=dict)


def _as_graph(obj: Callable | Graph | GraphModule) -> Graph:
    if isinstance(obj, Graph):
        return obj
    if isinstance(obj, GraphModule):
        return obj.graph
    return symbolic_trace(obj).graph


def _returned_nodes(pattern: Graph) -> list[Node]:
    output = next(n for n in reversed(pattern.nodes) if n.op == "output")
    result = output.args[0]
    values = list(result) if isinstance(result, (tuple, list)) else [result]
    if not all(isinstance(v, Node) for v in values):
        raise ValueError("the pattern must return nodes of its graph")
    return values


class _Matcher:
    def __init__(self, pattern: Graph, ignore_literals: bool) -> None:
        self.pattern = pattern
        self.ignore_literals = ignore_literals
        self.placeholders = [n for n in pattern.nodes if n.op == "placeholder"]
        self.returning = _returned_nodes(pattern)

    def _match_value(self, pn: Any, gn: Any, nodes_map: dict[Node, Node]) -> bool:
        if isinstance(pn, Node):
            return isinstance(gn, Node) and self._match_node(pn, gn, nodes_map) or (
                not isinstance(gn, Node) and pn.op == "placeholder" and self._bind_literal(pn, gn, nodes_map))
        if isinstance(pn, (list, tuple)):
            return (isinstance(gn, (list, tuple)) and len(pn) == len(gn)
                    and all(self._match_value(p, g, nodes_map) for p, g in zip(pn, gn, strict=True)))
        if isinstance(pn, dict):
            return (isinstance(gn, dict) and pn.keys() == gn.keys()
                    and all(self._match_value(pn[k], gn[k], nodes_map) for k in pn))
        if isinstance(gn, Node):
            return False
        return self.ignore_literals or _same_target(pn, gn)

    def _bind_literal(self, pn: Node, value: Any, nodes_map: dict) -> bool:
        # A placeholder may stand for a literal of the graph (torch.fx allows it too).
        if pn in nodes_map:
            return not isinstance(nodes_map[pn], Node) and nodes_map[pn] == value
        nodes_map[pn] = value
        return True

    def _match_node(self, pn: Node, gn: Node, nodes_map: dict[Node, Node]) -> bool:
        if pn in nodes_map:
            return nodes_map[pn] is gn
        if any(v is gn for v in nodes_map.values()):
            return False  # each graph node stands for one pattern node
        if pn.op == "placeholder":
            nodes_map[pn] = gn
            return True
        if pn.op != gn.op or not _same_target(pn.target, gn.target):
            return False
        saved = dict(nodes_map)
        nodes_map[pn] = gn
        if self._match_value(pn.args, gn.args, nodes_map) and self._match_value(pn.kwargs, gn.kwargs, nodes_map):
            return True
        nodes_map.clear()
        nodes_map.update(saved)
        return False

    def _self_contained(self, nodes_map: dict[Node, Node]) -> bool:
        inside = {gn for pn, gn in nodes_map.items() if pn.op != "placeholder" and isinstance(gn, Node)}
        returning = {nodes_map[pn] for pn in self.returning}
        for gn in inside:
            if gn in returning:
                continue
            if any(user not in inside for user in gn.users):
                return False
        return True

    def matches(self, graph: Graph) -> list[InternalMatch]:
        candidates = [[gn for gn in graph.nodes if gn.op == pn.op and (pn.op == "placeholder" or
                       _same_target(pn.target, gn.target))] for pn in self.returning]
        found: list[InternalMatch] = []
        for combo in itertools.product(*candidates):
            nodes_map: dict[Node, Node] = {}
            if all(self._match_node(pn, gn, nodes_map) for pn, gn in zip(self.returning, combo, strict=True)):
                if len(nodes_map) < sum(1 for n in self.pattern.nodes if n.op != "output"):
                    continue  # a pattern node unreachable from the outputs stayed unmatched
                if not self._self_contained(nodes_map):
                    continue
                found.append(InternalMatch(
                    anchors=list(self.returning), nodes_map=nodes_map,
                    placeholder_nodes=[nodes_map[pn] for pn in self.placeholders],
                    returning_nodes=[nodes_map[pn] for pn in self.returning]))
        return _drop_overlapping(found)


def _same_target(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - uncomparable targets are different
        return False


def _drop_overlapping(matches: list[InternalMatch]) -> list[InternalMatch]:
    kept: list[InternalMatch] = []
    used: set[Node] = set()
    for match in matches:
        inside = {gn for pn, gn in match.nodes_map.items() if pn.op != "placeholder"}
        if inside & used:
            continue
        used |= inside
        kept.append(match)
    return kept


def replace_pattern(gm: GraphModule, pattern: Callable | GraphModule,
                    replacement: Callable | GraphModule) -> list[Match]:
    """Replaces every occurrence of ``pattern`` in ``gm`` by ``replacement``; returns the matches.

    ``pattern`` and ``replacement`` are functions (traced with ``symbolic_trace``) or
    GraphModules taking the same inputs; ``gm`` is recompiled.
    """
    replaced = _replace(gm, pattern, replacement, None, False)
    return [Match(anchor=r.anchor, nodes_map=r.nodes_map) for r in replaced]


def replace_pattern_with_filters(gm: GraphModule, pattern: Callable | Graph | GraphModule,
                                 replacement: Callable | Graph | GraphModule | None = None,
                                 match_filters: list[Callable[[InternalMatch, Graph, Graph], bool]] | None = None,
                                 ignore_literals: bool = False,
                                 replacement_callback: Callable[[InternalMatch, Graph, Graph], Graph] | None = None,
                                 node_name_match: str = "") -> list[ReplacedPatterns]:
    """``replace_pattern`` keeping only matches every filter accepts; returns what was replaced."""
    if replacement is None and replacement_callback is None:
        raise AssertionError("Must provide either a replacement GraphModule or a replacement callback")
    return _replace(gm, pattern, replacement, match_filters, ignore_literals, replacement_callback,
                    node_name_match)


def _replace(gm, pattern, replacement, match_filters, ignore_literals, replacement_callback=None,
             node_name_match: str = "") -> list[ReplacedPatterns]:
    original_graph = gm.graph
    pattern_graph = _as_graph(pattern)
    matcher = _Matcher(pattern_graph, ignore_literals)
    matches = matcher.matches(original_graph)
    matches = [m for m in matches if all(f(m, original_graph, pattern_graph) for f in match_filters or ())]
    if node_name_match:
        matches = [m for m in matches if any(node_name_match in n.name for n in m.returning_nodes)]
    replaced: list[ReplacedPatterns] = []
    changed: dict[Node, Node] = {}  # graph node -> the node that took its place in an earlier match
    for match in matches:
        if replacement_callback is not None:
            replacement_graph = replacement_callback(match, original_graph, pattern_graph)
        else:
            replacement_graph = _as_graph(replacement)
        replacement_placeholders = [n for n in replacement_graph.nodes if n.op == "placeholder"]
        if len(replacement_placeholders) != len(match.placeholder_nodes):
            raise AssertionError("The pattern and the replacement must take the same number of inputs")
        val_map: dict[Node, Any] = {}
        for rn, gn in zip(replacement_placeholders, match.placeholder_nodes, strict=True):
            val_map[rn] = changed.get(gn, gn) if isinstance(gn, Node) else gn
        for pn in matcher.placeholders:
            gn = match.nodes_map[pn]
            if isinstance(gn, Node) and gn in changed:
                match.nodes_map[pn] = changed[gn]
        insert_point = _insert_point(original_graph, match.returning_nodes)
        before = set(val_map.values())
        with original_graph.inserting_before(insert_point):
            copied = original_graph.graph_copy(replacement_graph, val_map)
        copied_returning = list(copied) if isinstance(copied, (tuple, list)) else [copied]
        if len(copied_returning) != len(match.returning_nodes):
            raise AssertionError("The pattern and the replacement must return the same number of values")
        new_nodes = [v for k, v in val_map.items() if k.op != "placeholder" and v not in before]
        for gn, new in zip(match.returning_nodes, copied_returning, strict=True):
            gn.replace_all_uses_with(new)
            changed[gn] = new
        for pn in reversed(list(pattern_graph.nodes)):
            if pn.op not in ("placeholder", "output"):
                original_graph.erase_node(match.nodes_map[pn])
        replaced.append(ReplacedPatterns(anchor=match.anchors[0], nodes_map=match.nodes_map,
                                         replacements=new_nodes))
    gm.recompile()
    if isinstance(replacement, Module):
        _copy_replacement_attributes(gm, replacement)
    return replaced


def _insert_point(graph: Graph, returning: list[Node]) -> Node | None:
    users = {u for n in returning for u in n.users}
    if users:
        return next(n for n in graph.nodes if n in users)
    # No users: just after the last returned node.
    returning_set = set(returning)
    following = None
    for n in reversed(graph.nodes):
        if n in returning_set:
            return following
        following = n
    return None


def _copy_replacement_attributes(gm: GraphModule, replacement: Module) -> None:
    for node in gm.graph.nodes:
        if node.op in ("call_module", "get_attr"):
            try:
                gm.get_submodule(node.target) if node.op == "call_module" else _getattr_path(gm, node.target)
            except AttributeError:
                value = _getattr_path(replacement, node.target)
                if isinstance(value, Module):
                    gm.add_submodule(node.target, copy.deepcopy(value))
                else:
                    *prefix, field = node.target.split(".")
                    owner = gm.get_submodule(".".join(prefix)) if prefix else gm
                    setattr(owner, field, copy.deepcopy(value))
    gm.recompile()


def _getattr_path(obj: Any, path: str) -> Any:
    for atom in path.split("."):
        obj = getattr(obj, atom)
    return obj
