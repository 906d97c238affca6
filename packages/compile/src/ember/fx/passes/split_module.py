"""``split_module``: cut a GraphModule into submodules by a partition id per node.

Every computing node goes to the partition ``split_callback(node)`` names. A value crossing
partitions becomes an output of the partition that makes it and an input of the one that
uses it, both in the order uses are met walking the graph. Placeholders and ``get_attr``
nodes stay in the top-level graph and are passed to the partitions that need them. The
partitions run in a dependency order, as ``submod_<id>`` modules of the result.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from typing import Any

from ember.nn import Module

from ..graph import Graph
from ..graph_module import GraphModule
from ..node import Node, map_arg

__all__ = ["Partition", "split_module"]


class Partition:
    """One partition: its nodes, the values it takes and gives, and its place in the order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.submod_name = f"submod_{name}"
        self.node_names: list[str] = []
        self.inputs: dict[str, None] = {}
        self.outputs: dict[str, None] = {}
        self.dependencies: dict[str, None] = {}  # partitions this one reads from
        self.dependents: dict[str, None] = {}  # partitions reading from this one
        self.graph = Graph()
        self.environment: dict[Node, Node] = {}
        self.targets: dict[str, Any] = {}

    def __repr__(self) -> str:
        return (f"name: {self.name},\n nodes: {self.node_names},\n inputs: {list(self.inputs)},\n"
                f" outputs: {list(self.outputs)},\n partitions depended on: {list(self.dependencies)},\n"
                f" partition dependents: {list(self.dependents)}")


def _get_attr_path(obj: Any, path: str) -> Any:
    for atom in path.split("."):
        if not hasattr(obj, atom):
            raise AttributeError(f"Operator target {path} not found!")
        obj = getattr(obj, atom)
    return obj


def split_module(m: GraphModule, root_m: Module, split_callback: Callable[[Node], int],
                 qualname_map: dict[str, str] | None = None, keep_original_order: bool | None = False,
                 keep_original_node_name: bool | None = False, keep_original_input_name: bool = True,
                 *, partition_affix: str | None = None, tuple_return: bool = False) -> GraphModule:
    """Splits ``m`` into one submodule per partition id that ``split_callback`` returns.

    Args:
        m: the GraphModule to split.
        root_m: the module that owns the parameters and submodules ``m``'s nodes name.
        split_callback: partition id (an int) for each computing node.
        qualname_map: filled with ``{"submod_<id>.<target>": "<target>"}`` for moved submodules.
        tuple_return: every partition returns a tuple, even with one output.
    """
    if keep_original_order:
        raise NotImplementedError("split_module(keep_original_order=True) is not supported by ember.fx")
    partitions: dict[str, Partition] = {}
    node_partition: dict[Node, str] = {}

    def record_use(def_node: Node, use_node: Node | None) -> None:
        def_part = node_partition.get(def_node)
        use_part = node_partition.get(use_node) if use_node is not None else None
        if def_part == use_part:
            return
        if def_part is not None:
            partitions[def_part].outputs.setdefault(def_node.name)
        if use_part is not None:
            partitions[use_part].inputs.setdefault(def_node.name)
        if def_part is not None and use_part is not None:
            partitions[def_part].dependents.setdefault(use_part)
            partitions[use_part].dependencies.setdefault(def_part)

    for node in m.graph.nodes:
        if node.op in ("placeholder", "get_attr"):
            continue
        if node.op == "output":
            map_arg(node.args[0], lambda n: record_use(n, None))
            continue
        partition_name = str(split_callback(node))
        partition = partitions.setdefault(partition_name, Partition(partition_name))
        partition.node_names.append(node.name)
        node_partition[node] = partition_name
        for used in node._input_nodes:
            record_use(used, node)

    order = _dependency_order(partitions)
    nodes_by_name = {n.name: n for n in m.graph.nodes}

    # Each partition's graph: placeholders for its inputs, then copies of its nodes.
    for name in order:
        partition = partitions[name]
        for input_name in partition.inputs:
            source = nodes_by_name[input_name]
            placeholder = partition.graph.placeholder(input_name if keep_original_input_name else
                                                      f"{input_name}_{name}", type_expr=source.type)
            placeholder.meta = source.meta.copy()
            partition.environment[source] = placeholder
    for node in m.graph.nodes:
        partition_name = node_partition.get(node)
        if partition_name is None:
            continue
        partition = partitions[partition_name]
        target = node.target
        if node.op in ("call_module", "get_attr"):
            value = _get_attr_path(root_m, target)
            flat_name = target.replace(".", "_")
            partition.targets[flat_name] = value
            if qualname_map is not None:
                qualname_map[f"{partition.submod_name}.{flat_name}"] = target
            target = flat_name
        args = map_arg(node.args, lambda n, p=partition: p.environment[n])
        kwargs = map_arg(node.kwargs, lambda n, p=partition: p.environment[n])
        new_node = partition.graph.create_node(node.op, target, args, kwargs,
                                               name=node.name,
                                               type_expr=node.type)
        new_node.meta = node.meta.copy()
        partition.environment[node] = new_node

    # The top-level graph: inputs and attributes, then one call per partition.
    base_graph = Graph()
    base_env: dict[Node, Node] = {}
    base_attrs: dict[str, Any] = {}
    for node in m.graph.nodes:
        if node.op == "placeholder":
            default = node.args[0] if node.args else inspect.Signature.empty
            base_env[node] = base_graph.placeholder(node.target, type_expr=node.type, default_value=default)
            base_env[node].meta = node.meta.copy()
        elif node.op == "get_attr":
            base_env[node] = base_graph.get_attr(node.target)
            base_env[node].meta = node.meta.copy()
            base_attrs[node.target] = _get_attr_path(root_m, node.target)
    for name in order:
        partition = partitions[name]
        outputs = [partition.environment[nodes_by_name[o]] for o in partition.outputs]
        if len(outputs) == 1 and not tuple_return:
            partition.graph.output(outputs[0])
        else:
            partition.graph.output(tuple(outputs))
        base_attrs[partition.submod_name] = GraphModule(partition.targets, partition.graph)
        call = base_graph.call_module(partition.submod_name,
                                      tuple(base_env[nodes_by_name[i]] for i in partition.inputs))
        if len(outputs) == 1 and not tuple_return:
            base_env[nodes_by_name[next(iter(partition.outputs))]] = call
        else:
            for index, output_name in enumerate(partition.outputs):
                base_env[nodes_by_name[output_name]] = base_graph.call_function(
                    operator.getitem, (call, index))
    output_node = next(n for n in reversed(m.graph.nodes) if n.op == "output")
    base_graph.output(map_arg(output_node.args[0], lambda n: base_env[n]), type_expr=output_node.type)
    return GraphModule(base_attrs, base_graph)


def _dependency_order(partitions: dict[str, Partition]) -> list[str]:
    remaining = {name: len(p.dependencies) for name, p in partitions.items()}
    ready = [name for name, count in remaining.items() if count == 0]
    order: list[str] = []
    while ready:
        name = ready.pop(0)
        order.append(name)
        for dependent in partitions[name].dependents:
            remaining[dependent] -= 1
            if remaining[dependent] == 0:
                ready.append(dependent)
    if len(order) != len(partitions):
        raise RuntimeError("cycle exists between partitions!")
    return order
