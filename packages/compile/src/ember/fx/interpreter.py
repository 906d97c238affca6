"""``Interpreter`` runs a GraphModule node by node; ``Transformer`` rebuilds it into a new one.

Each op has a method (``placeholder``, ``get_attr``, ``call_function``, ``call_method``,
``call_module``, ``output``) that a subclass overrides to change how that kind of node runs;
``run_node`` dispatches to them. A Transformer runs the same methods on Proxies, so what
they return is recorded into a new graph.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

from ember.nn import Module

from . import _patching
from . import traceback as fx_traceback
from .graph import Graph
from .graph_module import GraphModule
from .node import Argument, Node, Target, map_aggregate, map_arg
from .proxy import Proxy, TracerBase, recording_by_patches

__all__ = ["Interpreter", "Transformer"]


class Interpreter:
    """Runs a module's graph one node at a time.

    Args:
        module: the module whose graph (or ``graph``) is run; attributes are read from it.
        garbage_collect_values: drop each value after its last use (as generated code does).
        graph: run this graph instead of ``module.graph``.

    Example:
        >>> class NegSigmoid(Interpreter):
        ...     def call_function(self, target, args, kwargs):
        ...         if target is ember.sigmoid:
        ...             return ember.neg(*args, **kwargs)
        ...         return super().call_function(target, args, kwargs)
    """

    def __init__(self, module: Module, garbage_collect_values: bool = True, graph: Graph | None = None) -> None:
        self.module = module
        self.submodules = dict(module.named_modules())
        if graph is not None:
            self.graph = graph
        else:
            self.graph = module.graph
        self.env: dict[Node, Any] = {}
        self.name = "Interpreter"
        self.garbage_collect_values = garbage_collect_values
        self.extra_traceback = True
        self.user_to_last_uses: dict[Node, list[Node]] = {}
        if garbage_collect_values:
            seen: set[Node] = set()
            for node in reversed(self.graph.nodes):
                for used in node._input_nodes:
                    if used not in seen:
                        seen.add(used)
                        self.user_to_last_uses.setdefault(node, []).append(used)

    def run(self, *args, initial_env: dict[Node, Any] | None = None, enable_io_processing: bool = True) -> Any:
        """Runs the graph on ``args``; ``initial_env`` pre-sets some node values (they are not run).
        With ``enable_io_processing`` the arguments and the result pass through the graph's codegen
        as the generated code's would (an exported module's flattening of structured inputs and
        outputs)."""
        self.env = initial_env if initial_env is not None else {}
        if enable_io_processing:
            args = self.graph.process_inputs(*args)
        self.args_iter: Iterator[Any] = iter(args)
        for node in self.graph.nodes:
            if node in self.env:
                continue
            try:
                self.env[node] = self.run_node(node)
            except Exception as e:
                if self.extra_traceback:
                    # The error names the node (and the user line it came from).
                    msg = f"While executing {node.format_node()}"
                    msg = f"{e.args[0]}\n\n{msg}" if e.args else msg
                    if node.stack_trace:
                        msg += f"\nOriginal traceback:\n{node.stack_trace}"
                    e.args = (msg, *e.args[1:])
                    if isinstance(e, KeyError):
                        raise RuntimeError(*e.args) from e
                raise
            if self.garbage_collect_values:
                for to_delete in self.user_to_last_uses.get(node, []):
                    del self.env[to_delete]
            if node.op == "output":
                output = self.env[node]
                return self.graph.process_outputs(output) if enable_io_processing else output
        return None

    def boxed_run(self, args_list: list) -> Any:
        """Runs on the values of ``args_list``, which is emptied first (the caller's references go)."""
        args_iter = iter(args_list)
        env = {}
        for n in self.graph.nodes:
            if n.op == "placeholder":
                env[n] = next(args_iter)
        args_list.clear()
        return self.run(initial_env=env)

    def run_node(self, n: Node) -> Any:
        """Runs one node: fetches its argument values and calls the method named by ``n.op``."""
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        if not isinstance(args, tuple) or not isinstance(kwargs, dict):
            raise AssertionError("args must be a tuple and kwargs a dict")
        return getattr(self, n.op)(n.target, args, kwargs)

    # -- one method per op ----------------------------------------------------------------
    def placeholder(self, target: Target, args: tuple, kwargs: dict) -> Any:
        if not isinstance(target, str):
            raise AssertionError("placeholder target must be a str")
        if target.startswith("*"):
            # *args takes every remaining argument.
            return list(self.args_iter)
        try:
            return next(self.args_iter)
        except StopIteration as si:
            if args:
                return args[0]
            raise RuntimeError(f"Expected positional argument for parameter {target}, "
                               "but one was not passed in!") from si

    def get_attr(self, target: Target, args: tuple, kwargs: dict) -> Any:
        return self.fetch_attr(target)

    def call_function(self, target: Target, args: tuple, kwargs: dict) -> Any:
        if isinstance(target, str):
            raise AssertionError("call_function target must be a callable")
        return target(*args, **kwargs)

    def call_method(self, target: Target, args: tuple, kwargs: dict) -> Any:
        self_obj, *args_tail = args
        return getattr(self_obj, target)(*args_tail, **kwargs)

    def call_module(self, target: Target, args: tuple, kwargs: dict) -> Any:
        submod = self.fetch_attr(target)
        return submod(*args, **kwargs)

    def output(self, target: Target, args: tuple, kwargs: dict) -> Any:
        return args[0]

    # -- helpers --------------------------------------------------------------------------
    def fetch_attr(self, target: str) -> Any:
        """The object at dotted path ``target`` in ``self.module``."""
        atoms = target.split(".")
        attr_itr = self.module
        for i, atom in enumerate(atoms):
            if not hasattr(attr_itr, atom):
                raise RuntimeError(f"Node referenced nonexistent target {'.'.join(atoms[: i + 1])}")
            attr_itr = getattr(attr_itr, atom)
        return attr_itr

    def fetch_args_kwargs_from_env(self, n: Node) -> tuple[tuple, dict]:
        """``n``'s args and kwargs with every Node replaced by its value."""
        args = self.map_nodes_to_values(n.args, n)
        kwargs = self.map_nodes_to_values(n.kwargs, n)
        return args, kwargs

    def map_nodes_to_values(self, args: Argument, n: Node) -> Argument:
        def load_arg(n_arg: Node) -> Any:
            if n_arg not in self.env:
                raise RuntimeError(f"Node {n} referenced nonexistent value {n_arg}! Run Graph.lint() "
                                   "to diagnose such issues")
            return self.env[n_arg]

        return map_arg(args, load_arg)


class _TransformerTracer(TracerBase):
    def __init__(self, graph: Graph, root: Module) -> None:
        super().__init__()
        self.graph = graph
        self.root = root
        self.tensor_attrs: dict[int, str] = {}

    def is_leaf_module(self, m: Module, module_qualified_name: str) -> bool:
        return True


class Transformer(Interpreter):
    """Re-records a GraphModule's graph into a new GraphModule; override the op methods to change it.

    Inside the overrides, values are Proxies: operators, tensor methods and ember functions
    applied to them become nodes of the new graph.
    """

    def __init__(self, module: GraphModule) -> None:
        super().__init__(module)
        self.new_graph = Graph()
        self.new_graph.set_codegen(module.graph._codegen)  # the result takes and returns what module did
        self.tracer = _TransformerTracer(self.new_graph, module)

    def run_node(self, n: Node) -> Any:
        # Nodes recorded while re-running n inherit its provenance meta (fx.traceback).
        with fx_traceback.set_current_meta(n):
            stand_in = self._stand_ins.get(id(n.target)) if n.op == "call_function" else None
            if stand_in is None:
                return super().run_node(n)
            # ember's functions are recording stand-ins while transform() runs: an override sees
            # the one ``ember.relu`` names now, so ``target is torch.relu`` holds as in torch.fx
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            return self.call_function(stand_in, args, kwargs)

    _stand_ins: dict = {}

    def placeholder(self, target: Target, args: tuple, kwargs: dict) -> Proxy:
        if not isinstance(target, str):
            raise AssertionError("placeholder target must be a str")
        default_value = next(iter(args)) if args else inspect.Signature.empty
        return Proxy(self.new_graph.placeholder(target, default_value=default_value), self.tracer)

    def get_attr(self, target: Target, args: tuple, kwargs: dict) -> Proxy:
        return self.tracer.create_proxy("get_attr", target, args, kwargs)

    def call_module(self, target: Target, args: tuple, kwargs: dict) -> Any:
        return self.tracer.create_proxy("call_module", target, args, kwargs)

    def call_function(self, target: Target, args: tuple, kwargs: dict) -> Any:
        return self.tracer.create_proxy("call_function", target, args, kwargs)

    def call_method(self, target: Target, args: tuple, kwargs: dict) -> Any:
        return self.tracer.create_proxy("call_method", target, args, kwargs)

    def transform(self) -> GraphModule:
        """Runs the transformation and returns the new GraphModule."""
        with _patching.Patcher() as patcher, fx_traceback.preserve_node_meta(), recording_by_patches():
            _patching.patch_ember_namespaces(patcher)
            stand_ins = _patching._ember_stand_ins()
            self._stand_ins = {**{id(s.__wrapped__): s for s in stand_ins.values()}, **stand_ins}
            try:
                result = super().run(enable_io_processing=False)
            finally:
                self.__dict__.pop("_stand_ins", None)
        if result is not None:
            def strip_proxy(a: Any) -> Any:
                return a.node if isinstance(a, Proxy) else a

            output_node = self.new_graph.output(map_aggregate(result, strip_proxy))
            old_output = next(iter(reversed(self.module.graph.nodes)), None)
            if old_output is not None and old_output.op == "output":
                output_node.meta.update(old_output.meta)
        return GraphModule(self.module, self.new_graph)
