"""``ShapeProp``: runs a GraphModule and records each node's result shape, dtype and strides.

Every node whose result holds tensors gets ``meta['tensor_meta']`` (a ``TensorMetadata``,
or a structure of them matching the result), ``meta['val']`` (the result with every tensor
replaced by a data-free stand-in of the same shape, dtype and strides) and ``meta['type']``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import ember
from ember import Tensor

from ..graph_module import GraphModule
from ..interpreter import Interpreter
from ..node import Node, map_aggregate

__all__ = ["ShapeProp", "TensorMetadata"]


class TensorMetadata(NamedTuple):
    """What ShapeProp records about one tensor (the fields of torch.fx's TensorMetadata)."""

    shape: Any
    dtype: Any
    requires_grad: bool
    stride: tuple[int, ...]
    memory_format: Any
    is_quantized: bool
    qparams: dict[str, Any]


_MEMORY_FORMATS = ("contiguous_format", "channels_last", "channels_last_3d")


def _memory_format(result: Tensor) -> Any:
    for name in _MEMORY_FORMATS:
        memory_format = getattr(ember, name, None)
        if memory_format is None:
            continue
        try:
            if result.is_contiguous(memory_format=memory_format):
                return memory_format
        except (TypeError, RuntimeError, ValueError):
            continue
    return None


def _extract_tensor_metadata(result: Tensor) -> TensorMetadata:
    return TensorMetadata(result.shape, result.dtype, bool(result.requires_grad), tuple(result.stride()),
                          _memory_format(result), False, {})


def _fake_like(t: Tensor) -> Any:
    """A data-free tensor with ``t``'s shape, dtype and strides (a FakeTensor once the compiler has one)."""
    try:
        from ember.compiler.fake_tensor import FakeTensorMode  # same package: ember-compile

        return FakeTensorMode().from_tensor(t)
    except (ImportError, AttributeError, NotImplementedError):
        return ember.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="meta")


class ShapeProp(Interpreter):
    """Runs ``gm`` on example inputs (``propagate``) and stores each node's result metadata.

    Example:
        >>> gm = ember.fx.symbolic_trace(model)
        >>> ShapeProp(gm).propagate(ember.randn(2, 3))
        >>> gm.graph.find_nodes(op="output")[0].args[0].meta["tensor_meta"].shape
    """

    def __init__(self, gm: GraphModule, fake_mode: Any = None) -> None:
        super().__init__(gm)
        self.fake_mode = fake_mode

    def run_node(self, n: Node) -> Any:
        try:
            result = super().run_node(n)
        except Exception as e:
            raise RuntimeError(f"ShapeProp error for: node={n.format_node()} with meta={n.meta}") from e
        found_tensor = False

        def extract(obj: Any) -> Any:
            nonlocal found_tensor
            if isinstance(obj, Tensor):
                found_tensor = True
                return _extract_tensor_metadata(obj)
            return obj

        meta = map_aggregate(result, extract)
        if found_tensor:
            n.meta["tensor_meta"] = meta
        n.meta["val"] = map_aggregate(result, lambda v: _fake_like(v) if isinstance(v, Tensor) else v)
        n.meta["type"] = type(result)
        return result

    def propagate(self, *args: Any) -> Any:
        """Runs the module on ``args`` (converted by ``fake_mode`` when one was given)."""
        if self.fake_mode is not None:
            args = tuple(self.fake_mode.from_tensor(a) if isinstance(a, Tensor) else a for a in args)
        return super().run(*args)
