"""Graph ops whose arguments are functions (PyTorch's ``torch._higher_order_ops``): ``cond`` and
``while_loop`` run eagerly as plain Python and, under a capture, record one op holding their
functions as traced subgraphs (``_subgraph``), so data-dependent control flow needs no graph break
and exports as one node; ``map`` is a Python loop over the first dim of its inputs. Under vmap, cond
and while_loop run once per sample (their op tag ``batch_loop``): each sample picks its branch.
Nothing here imports ember.func: its BatchedTensor class would switch the dispatcher's subclass path
on for the whole process (the fused optimizer and native fast paths then step aside)."""

from .cond import cond
from .map import map  # noqa: A004 - PyTorch's name
from .while_loop import while_loop

__all__ = ["cond", "map", "while_loop"]
