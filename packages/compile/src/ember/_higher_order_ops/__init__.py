"""Graph ops whose arguments are functions (PyTorch's ``torch._higher_order_ops``): ``cond`` and
``while_loop`` run eagerly as plain Python and, under a capture, record one op holding their
functions as traced subgraphs (``_subgraph``), so data-dependent control flow needs no graph break
and exports as one node; ``map`` is a Python loop over the first dim of its inputs."""

from .cond import cond
from .map import map  # noqa: A004 - PyTorch's name
from .while_loop import while_loop


def _batch_by_loop(*names) -> None:
    # vmap of a graph op: one call per sample is exactly its semantics (each sample picks its branch).
    from ember.func import batching

    for name in names:
        batching.BATCH_RULES.setdefault(name, batching.loop_fallback)


_batch_by_loop("cond", "while_loop")

__all__ = ["cond", "map", "while_loop"]
