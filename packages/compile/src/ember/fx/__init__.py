"""ember.fx: the graph IR of ember's compiler, API-compatible with ``torch.fx``.

A ``Graph`` of ``Node``s, ``GraphModule`` (a Module generated from a graph), ``symbolic_trace``
and ``Tracer`` (a graph from running Python on Proxies), ``Interpreter`` and ``Transformer``
(run or rewrite a graph node by node), ``subgraph_rewriter.replace_pattern`` and
``passes.shape_prop.ShapeProp``. Ordinary FX passes written for PyTorch run on it.
"""

from ._symbolic_trace import PH, Tracer, is_fx_tracing, symbolic_trace, wrap
from .graph import CodeGen, Graph, PythonCode
from .graph_module import GraphModule
from .interpreter import Interpreter, Transformer
from .node import Node, has_side_effect, map_arg
from .proxy import Proxy
from .subgraph_rewriter import replace_pattern

__all__ = [
    "CodeGen", "Graph", "GraphModule", "Interpreter", "Node", "PH", "Proxy", "PythonCode", "Tracer",
    "Transformer", "has_side_effect", "is_fx_tracing", "map_arg", "replace_pattern", "symbolic_trace",
    "wrap",
]
