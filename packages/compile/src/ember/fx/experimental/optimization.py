"""Inference rewrites on traced modules (PyTorch's ``torch.fx.experimental.optimization``).

``fuse`` folds each BatchNorm that directly follows a convolution or linear layer into that
layer's weights (valid in eval mode only: the running statistics become constants);
``remove_dropout`` drops Dropout modules; ``extract_subgraph`` makes a module of part of a
graph.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from ember import nn
from ember.nn.utils.fusion import fuse_conv_bn_eval, fuse_linear_bn_eval

from .._symbolic_trace import symbolic_trace
from ..graph import Graph
from ..graph_module import GraphModule
from ..interpreter import Transformer
from ..node import Node

__all__ = ["extract_subgraph", "fuse", "matches_module_pattern", "remove_dropout", "replace_node_module"]

_FUSIBLE = (
    (nn.Conv1d, nn.BatchNorm1d),
    (nn.Conv2d, nn.BatchNorm2d),
    (nn.Conv3d, nn.BatchNorm3d),
    (nn.Linear, nn.BatchNorm1d),
)


def _parent_name(target: str) -> tuple[str, str]:
    *parent, name = target.rsplit(".", 1)
    return (parent[0] if parent else ""), name


def matches_module_pattern(pattern: Iterable[type], node: Node, modules: dict[str, nn.Module]) -> bool:
    """Whether ``node`` and its first argument are ``call_module`` nodes of the pattern's types
    (first argument first)."""
    if len(node.args) == 0:
        return False
    chain = (node.args[0], node)
    for expected_type, current in zip(pattern, chain, strict=False):
        if not isinstance(current, Node) or current.op != "call_module" or not isinstance(current.target, str):
            return False
        if current.target not in modules or type(modules[current.target]) is not expected_type:
            return False
    return True


def replace_node_module(node: Node, modules: dict[str, nn.Module], new_module: nn.Module) -> None:
    """Installs ``new_module`` at ``node.target`` (in its parent module and in ``modules``)."""
    if not isinstance(node.target, str):
        raise AssertionError("call_module node target must be a str")
    parent_name, name = _parent_name(node.target)
    modules[node.target] = new_module
    setattr(modules[parent_name], name, new_module)


def fuse(model: nn.Module, inplace: bool = False, no_trace: bool = False) -> nn.Module:
    """Folds BatchNorm into the preceding Conv1d/2d/3d or Linear (eval-mode models).

    Args:
        model: the model (traced here unless ``no_trace``, then it must be a GraphModule).
        inplace: change ``model``'s submodules instead of a deep copy's.
        no_trace: ``model`` already is a GraphModule.
    """
    if not inplace:
        model = copy.deepcopy(model)
    if not no_trace or not isinstance(model, GraphModule):
        fx_model = symbolic_trace(model)
    else:
        fx_model = model
    modules = dict(fx_model.named_modules())
    new_graph = copy.deepcopy(fx_model.graph)
    for pattern in _FUSIBLE:
        for node in new_graph.nodes:
            if not matches_module_pattern(pattern, node, modules):
                continue
            if len(node.args[0].users) > 1:
                continue  # the layer's unnormalized output is used elsewhere
            first, bn = modules[node.args[0].target], modules[node.target]
            if not bn.track_running_stats:
                continue
            if pattern[0] is nn.Linear:
                fused = fuse_linear_bn_eval(first, bn)
            else:
                fused = fuse_conv_bn_eval(first, bn)
            replace_node_module(node.args[0], modules, fused)
            node.replace_all_uses_with(node.args[0])
            new_graph.erase_node(node)
    return GraphModule(fx_model, new_graph)


def remove_dropout(model: nn.Module) -> nn.Module:
    """A traced copy of ``model`` without its Dropout modules (identity in eval mode anyway)."""
    fx_model = symbolic_trace(model)

    class DropoutRemover(Transformer):
        def call_module(self, target: Any, args: tuple, kwargs: dict) -> Any:
            if isinstance(self.submodules[target], nn.Dropout):
                if len(args) != 1:
                    raise AssertionError("a Dropout call takes one argument")
                return args[0]
            return super().call_module(target, args, kwargs)

    return DropoutRemover(fx_model).transform()


def extract_subgraph(orig_module: nn.Module, nodes: list[Node], inputs: list[Node],
                     outputs: list[Node]) -> GraphModule:
    """A module running ``nodes`` of an existing graph, from ``inputs`` to ``outputs``."""
    new_graph = Graph()
    env: dict[Node, Node] = {}
    for input_node in inputs:
        env[input_node] = new_graph.placeholder(input_node.name)
    for node in nodes:
        env[node] = new_graph.node_copy(node, lambda n: env[n])
    new_graph.output([env[output] for output in outputs])
    new_graph.lint()
    return GraphModule(orig_module, new_graph)
