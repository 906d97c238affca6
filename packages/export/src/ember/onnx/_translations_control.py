"""``cond`` and ``while_loop`` as ONNX ``If`` and ``Loop``.

``cond(pred, true_graph, false_graph, operands)`` becomes ``If(pred)`` whose branches are the
translated subgraphs; they read the operands from the enclosing graph by name (ONNX subgraphs
see outer values). ``while_loop(cond_graph, body_graph, carried, additional)`` becomes
``Loop("", first_cond, *carried)``: the condition subgraph is translated once outside (the
first test) and once inside the body after the body's own nodes (the test for the next trip).
"""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from ._builder import Builder, UnsupportedOp, onnx_dtype
from ._translations import register


def _subgraph(b: Builder, node):
    owner = getattr(b, "owner", None)
    sub = getattr(owner, str(node.target), None) if owner is not None and hasattr(node, "target") else None
    if sub is None or not hasattr(sub, "graph"):
        raise UnsupportedOp(f"{node} is not a subgraph of this program")
    return sub


def _names(b: Builder, values) -> list:
    return [b.value(v) for v in values]


def _graph(child, name, inputs, outputs):
    return helper.make_graph(child.nodes, name, inputs, outputs)


@register("cond")
def _cond(b: Builder, node):
    from ._exporter import translate_subgraph

    pred, true_node, false_node, operands = node.args[:4]
    inputs = _names(b, operands)
    branches = []
    for sub_node, label in ((true_node, "then"), (false_node, "else")):
        child, _, infos = translate_subgraph(b, _subgraph(b, sub_node), inputs, f"{label}_branch")
        branches.append(_graph(child, b.fresh(f"{label}_branch"), [], infos))
    n_out = len(branches[0].output)
    cond_value = b.value(pred)
    outs = b.emit("If", [cond_value], n_out=n_out, then_branch=branches[0], else_branch=branches[1])
    return outs if isinstance(outs, list) else [outs]


@register("while_loop")
def _while_loop(b: Builder, node):
    from ._exporter import translate_subgraph

    cond_node, body_node, carried, additional = node.args[:4]
    cond_sub, body_sub = _subgraph(b, cond_node), _subgraph(b, body_node)
    carried_names = _names(b, carried)
    extra_names = _names(b, additional)
    # the first test, in the enclosing graph
    first, (first_cond,), _ = translate_subgraph(b, cond_sub, carried_names + extra_names, "loop_first_cond")
    b.nodes.extend(first.nodes)
    # the body: (iteration, cond_in, *carried) -> (cond_out, *new carried)
    iteration = b.fresh("loop_iter")
    cond_in = b.fresh("loop_cond_in")
    body_in = [b.fresh("loop_carried") for _ in carried]
    body_inputs = [helper.make_tensor_value_info(iteration, TensorProto.INT64, []),
                   helper.make_tensor_value_info(cond_in, TensorProto.BOOL, [])]
    from ember.export._program import node_shape_dtype

    for name, value in zip(body_in, carried):
        _, dtype = node_shape_dtype(value)
        body_inputs.append(helper.make_tensor_value_info(name, onnx_dtype(dtype), None))
    body, new_values, value_infos = translate_subgraph(b, body_sub, body_in + extra_names, "loop_body")
    test, (next_cond,), _ = translate_subgraph(b, cond_sub, new_values + extra_names, "loop_next_cond")
    nodes = body.nodes + test.nodes
    cond_out = b.fresh("loop_cond_out")
    nodes.append(helper.make_node("Identity", [next_cond], [cond_out], name=b.fresh("node_cond_out")))
    outputs = [helper.make_tensor_value_info(cond_out, TensorProto.BOOL, [])] + value_infos
    body_graph = helper.make_graph(nodes, b.fresh("loop_body"), body_inputs, outputs)
    # ONNX wants a bool scalar condition; the traced test gives a 0-d bool already
    outs = b.emit("Loop", ["", first_cond, *carried_names], n_out=len(carried), body=body_graph)
    return outs if isinstance(outs, list) else [outs]


__all__ = ["onnx"]
