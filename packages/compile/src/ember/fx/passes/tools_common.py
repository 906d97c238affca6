"""Graph ordering helpers (PyTorch's ``torch.fx.passes.tools_common``).

``stable_topological_sort`` puts a graph whose nodes were moved out of dependency order back
into a valid order, moving as little as possible: Kahn's algorithm, always taking the ready
node that came first originally. ``legalize_graph`` is the same sort (PyTorch's makes no
stability promise; a stable order is one of the orders it allows).
"""

from __future__ import annotations

import heapq

from ..graph_module import GraphModule

__all__ = ["legalize_graph", "stable_topological_sort"]


def stable_topological_sort(gm: GraphModule) -> GraphModule:
    """Reorders ``gm.graph`` topologically, keeping the original order where dependencies allow.

    Modifies ``gm`` in place (and recompiles it); returns it.
    """
    graph = gm.graph
    nodes = list(graph.nodes)
    position = {node: i for i, node in enumerate(nodes)}
    waiting_on = {node: len(node._input_nodes) for node in nodes}
    ready = [position[node] for node in nodes if waiting_on[node] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        node = nodes[heapq.heappop(ready)]
        order.append(node)
        for user in node.users:
            waiting_on[user] -= 1
            if waiting_on[user] == 0:
                heapq.heappush(ready, position[user])
    if len(order) != len(nodes):
        raise RuntimeError("the graph has a cycle: no topological order exists")
    for node in order:
        graph._root.prepend(node)  # moves it to the end, so the graph ends up in `order`
    graph.lint()
    gm.recompile()
    return gm


def legalize_graph(gm: GraphModule) -> GraphModule:
    """Reorders ``gm.graph`` into a topological order (in place); returns ``gm``."""
    return stable_topological_sort(gm)
