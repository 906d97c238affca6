"""``replace_pattern``: find every occurrence of a pattern graph and splice in a replacement.

Occurrences are found by ``passes.utils.matcher_utils.SubgraphMatcher`` (whose docstring
gives the matching rules). Each replacement goes just before the first user of the values
it replaces; a later occurrence whose input was an earlier one's output reads the
replacement's value.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

from ember.nn import Module

from ._symbolic_trace import symbolic_trace
from .graph import Graph
from .graph_module import GraphModule
from .node import Node
from .passes.utils.matcher_utils import InternalMatch, SubgraphMatcher

__all__ = ["InternalMatch", "Match", "ReplacedPatterns", "replace_pattern", "replace_pattern_with_filters"]


class Match(NamedTuple):
    anchor: Node  # the pattern node matching started from (its first returned node)
    nodes_map: dict[Node, Node]  # pattern node -> graph node


@dataclasses.dataclass
class ReplacedPatterns:
    anchor: Node
    nodes_map: dict[Node, Node]
    replacements: list[Node]


def _as_graph(obj: Callable | Graph | GraphModule) -> Graph:
    if isinstance(obj, Graph):
        return obj
    if isinstance(obj, GraphModule):
        return obj.graph
    return symbolic_trace(obj).graph


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
    matcher = SubgraphMatcher(pattern_graph, ignore_literals=ignore_literals)
    matches = matcher.match(original_graph, node_name_match)
    matches = [m for m in matches if all(f(m, original_graph, pattern_graph) for f in match_filters or ())]
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
        for pn in matcher.pattern_placeholder_nodes:
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
