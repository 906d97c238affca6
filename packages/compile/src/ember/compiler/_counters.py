"""``torch._dynamo.utils.counters``: what the compiler did, counted by category.

``counters["graph_break"][reason]``: the graph breaks met, once per compiled function and place
(not per call); ``counters["stats"]["unique_graphs"]``: the graphs handed to a backend, and
``["calls_captured"]`` the op calls in them. ``counters.clear()`` starts over.
"""

from __future__ import annotations

import collections

counters: collections.defaultdict = collections.defaultdict(collections.Counter)

__all__ = ["counters"]
