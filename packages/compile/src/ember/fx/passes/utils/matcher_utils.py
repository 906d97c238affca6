"""``SubgraphMatcher``: where a pattern graph occurs in a graph (PyTorch's
``torch.fx.passes.utils.matcher_utils``), the matching behind ``replace_pattern``.

Matching walks backwards from the pattern's returned nodes along argument edges. A pattern
placeholder matches any value (only graph placeholders with ``match_placeholder``), but two
placeholders never match the same graph node; other nodes match on op and target, with
literal arguments equal (unless ``ignore_literals``). An occurrence whose internal nodes are
used outside it is skipped, and with ``remove_overlapping_matches`` an occurrence sharing
nodes with an earlier one is dropped.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

from ...graph import Graph
from ...node import Node

__all__ = ["InternalMatch", "SubgraphMatcher"]


@dataclasses.dataclass
class InternalMatch:
    """One occurrence of the pattern, as filters see it."""

    anchors: list[Node]
    nodes_map: dict[Node, Node] = dataclasses.field(default_factory=dict)
    placeholder_nodes: list[Any] = dataclasses.field(default_factory=list)
    returning_nodes: list[Node] = dataclasses.field(default_factory=list)
    name_node_map: dict[str, Node] = dataclasses.field(default_factory=dict)


def _returned_nodes(pattern: Graph) -> list[Node]:
    output = next(n for n in reversed(pattern.nodes) if n.op == "output")
    result = output.args[0]
    values = list(result) if isinstance(result, (tuple, list)) else [result]
    if not all(isinstance(v, Node) for v in values):
        raise ValueError("the pattern must return nodes of its graph")
    return values


class SubgraphMatcher:
    """Finds the occurrences of ``pattern`` in a graph (see the module docstring).

    Args:
        pattern: the graph to look for; every node but the output must be used.
        match_output: the pattern's returned values must be exactly the graph's outputs.
        match_placeholder: pattern placeholders match only graph placeholders.
        remove_overlapping_matches: drop an occurrence that shares nodes with an earlier one.
        ignore_literals: literal arguments match any literal.
    """

    def __init__(self, pattern: Graph, match_output: bool = False, match_placeholder: bool = False,
                 remove_overlapping_matches: bool = True, ignore_literals: bool = False) -> None:
        self.pattern = pattern
        self.match_output = match_output
        self.match_placeholder = match_placeholder
        self.remove_overlapping_matches = remove_overlapping_matches
        self.ignore_literals = ignore_literals
        if not any(n.op == "output" for n in pattern.nodes):
            raise AssertionError("SubgraphMatcher cannot be initialized with an empty pattern")
        for node in pattern.nodes:
            if node.op != "output" and not node.users:
                raise AssertionError("SubgraphMatcher cannot be initialized with an pattern with dead code")
        self.pattern_placeholder_nodes = [n for n in pattern.nodes if n.op == "placeholder"]
        self.pattern_returning_nodes = _returned_nodes(pattern)
        self.pattern_anchors = list(self.pattern_returning_nodes)

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
            if self.match_placeholder and gn.op != "placeholder":
                return False
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
        returning = {nodes_map[pn] for pn in self.pattern_returning_nodes}
        for gn in inside:
            if gn in returning:
                continue
            if any(user not in inside for user in gn.users):
                return False
        return True

    def match(self, graph: Graph, node_name_match: str = "") -> list[InternalMatch]:
        """Every occurrence of the pattern in ``graph``, in graph order."""
        candidates = [[gn for gn in graph.nodes if gn.op == pn.op and (pn.op == "placeholder" or
                       _same_target(pn.target, gn.target))] for pn in self.pattern_returning_nodes]
        found: list[InternalMatch] = []
        returning = self.pattern_returning_nodes
        for combo in itertools.product(*candidates):
            nodes_map: dict[Node, Node] = {}
            if all(self._match_node(pn, gn, nodes_map) for pn, gn in zip(returning, combo, strict=True)):
                if len(nodes_map) < sum(1 for n in self.pattern.nodes if n.op != "output"):
                    continue  # a pattern node unreachable from the outputs stayed unmatched
                if not self._self_contained(nodes_map):
                    continue
                if self.match_output and not _returns_exactly(graph, combo):
                    continue
                if node_name_match and not any(node_name_match in n.name for n in combo):
                    continue
                found.append(InternalMatch(
                    anchors=list(self.pattern_anchors), nodes_map=nodes_map,
                    placeholder_nodes=[nodes_map[pn] for pn in self.pattern_placeholder_nodes],
                    returning_nodes=[nodes_map[pn] for pn in self.pattern_returning_nodes]))
        return _drop_overlapping(found) if self.remove_overlapping_matches else found


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




def _returns_exactly(graph: Graph, values: tuple[Node, ...]) -> bool:
    result = graph.output_node().args[0]
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    return len(outputs) == len(values) and all(a is b for a, b in zip(outputs, values, strict=True))
