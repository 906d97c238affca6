"""``FakeTensorProp``: runs a GraphModule on fake tensors and stores each node's ``meta['val']``.

Like ShapeProp, but nothing is computed: every op runs its meta kernel under a
``FakeTensorMode`` (ember.compiler's), so large models propagate in microseconds per node.
"""

from __future__ import annotations

from typing import Any

from ember import Tensor

from ..graph_module import GraphModule
from ..interpreter import Interpreter
from ..node import Node, map_aggregate

__all__ = ["FakeTensorProp"]


class FakeTensorProp(Interpreter):
    """Fills ``node.meta['val']`` with fake values; ``propagate`` converts real inputs first.

    Args:
        module: the GraphModule to run.
        mode: the FakeTensorMode to run under; when None, a new one that lets real tensors in
            (the parameters a ``call_module`` node's module holds are read as metadata only).
    """

    def __init__(self, module: GraphModule, mode: Any = None) -> None:
        super().__init__(module)
        if mode is None:
            from ember.compiler.fake_tensor import FakeTensorMode  # same package: ember-compile

            mode = FakeTensorMode(allow_non_fake_inputs=True)
        self._mode = mode

    def run_node(self, n: Node) -> Any:
        result = super().run_node(n)
        if n.op == "get_attr":
            # Parameters and buffers are real: they enter the fake world as their metadata.
            result = map_aggregate(result, lambda v: self._mode.from_tensor(v) if isinstance(v, Tensor) else v)
        n.meta["val"] = result
        return result

    def propagate(self, *args: Any) -> Any:
        fake_args = [self._mode.from_tensor(a) if isinstance(a, Tensor) else a for a in args]
        return self.propagate_dont_convert_inputs(*fake_args)

    def propagate_dont_convert_inputs(self, *args: Any) -> Any:
        with self._mode:
            return super().run(*args)
