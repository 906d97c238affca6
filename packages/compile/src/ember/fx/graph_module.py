"""``GraphModule``: an ``ember.nn.Module`` whose ``forward`` is generated from a Graph.

The module holds copies of exactly the submodules and attributes its graph names (from a
root Module, or a dict of path -> value), so parameters, ``state_dict`` and ``.to()`` behave
as for any module. Assigning ``gm.graph`` or calling ``recompile()`` regenerates ``code`` and
``forward``. Each instance gets its own subclass so that its ``forward`` is its own.
"""

from __future__ import annotations

import copy
import itertools
import linecache
from typing import Any

from ember import Tensor
from ember.nn import Module, Parameter

from ._codegen import PythonCode
from .graph import Graph, _has_path

__all__ = ["GraphModule"]

_SOURCE_IDS = itertools.count()


def _forward_from_src(src: str, globals_: dict[str, Any]):
    """Compiles generated source; linecache keeps its lines for tracebacks and inspect."""
    filename = f"<eval_with_key>.{next(_SOURCE_IDS)}"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    namespace = dict(globals_)
    exec(compile(src, filename, "exec"), namespace)  # noqa: S102 - the source is generated here
    return namespace["forward"]


def _assign_attr(value: Any, to_module: Module, target: str) -> None:
    """Sets ``to_module.<target>`` (a dotted path), creating plain Modules along the way."""
    *prefix, field = target.split(".")
    for item in prefix:
        child = getattr(to_module, item, None)
        if child is None:
            child = Module()
            setattr(to_module, item, child)
        to_module = child
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        to_module.register_buffer(field, value)
    else:
        setattr(to_module, field, value)


def _copy_attr(from_module: Module, to_module: Module, target: str) -> None:
    """Copies the object at ``target`` in ``from_module`` to the same path in ``to_module``."""
    *prefix, field = target.split(".")
    for item in prefix:
        source = getattr(from_module, item)
        dest = getattr(to_module, item, None)
        if source is dest:
            return
        if dest is None:
            dest = Module()
            setattr(to_module, item, dest)
        from_module, to_module = source, dest
    value = getattr(from_module, field)
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        persistent = field not in getattr(from_module, "_non_persistent_buffers_set", ())
        to_module.register_buffer(field, value, persistent=persistent)
    else:
        setattr(to_module, field, value)


# Set by ember.compile while it builds a graph: the GraphModule then compiles lazily.
_LAZY = [False]


def _compile_then_forward(self, *args, **kwargs):
    self.recompile()
    return self.forward(*args, **kwargs)


class GraphModule(Module):
    """A Module generated from a Graph.

    Args:
        root: a Module whose submodules/attributes the graph's ``get_attr`` and ``call_module``
            nodes name, or a dict from those dotted names to the objects.
        graph: the graph to run.
        class_name: the name ``print_readable`` and ``repr`` show.
    """

    def __new__(cls, *args, **kwargs):
        # One subclass per instance, so that recompile() sets this instance's forward only.
        for base in cls.__mro__:
            if "_fx_instance_class" not in base.__dict__:
                cls = base
                break

        class GraphModuleImpl(cls):  # type: ignore[valid-type,misc]
            _fx_instance_class = True

        return super().__new__(GraphModuleImpl)

    def __init__(self, root: Module | dict[str, Any], graph: Graph, class_name: str = "GraphModule") -> None:
        super().__init__()
        self.__class__.__name__ = class_name
        if isinstance(root, Module):
            if hasattr(root, "training"):
                self.training = root.training
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    if not isinstance(node.target, str):
                        raise AssertionError(f"{node.op} target must be a str")
                    _copy_attr(root, self, node.target)
        elif isinstance(root, dict):
            targets_to_copy = []
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    if node.target not in root:
                        raise RuntimeError(f"Node {node} referenced target {node.target} but that target "
                                           "was not provided in ``root``!")
                    targets_to_copy.append(node.target)
            # Parents before children, so that "a" is not replaced after "a.b" was set on it.
            for target in sorted(targets_to_copy, key=lambda t: t.count(".")):
                _assign_attr(root[target], self, target)
        else:
            raise RuntimeError(f"Unsupported type {root} passed for root!")
        self.meta: dict[str, Any] = {}
        self.graph = graph

    # -- the graph and its code -----------------------------------------------------------
    @property
    def graph(self) -> Graph:
        """The graph this module runs; assigning one recompiles."""
        return self._graph

    @graph.setter
    def graph(self, g: Graph) -> None:
        if not isinstance(g, Graph):
            raise AssertionError(f"Expected a Graph instance, but got {type(g)}")
        self._graph = g
        g.owning_module = self
        if _LAZY[0]:
            # ember.compile's graphs (as torch's _LazyGraphModule): the Python code is generated on
            # first use, which a backend that lowers the graph (or a graph-cache hit) never needs.
            type(self).forward = _compile_then_forward
        else:
            self.recompile()

    @property
    def code(self) -> str:
        """The Python source of ``forward``."""
        if not hasattr(self, "_code"):
            if type(self).forward is not _compile_then_forward:
                raise RuntimeError("Code has not been generated! Please report a bug to ember")
            self.recompile()
        return self._code

    def recompile(self) -> PythonCode:
        """Regenerates ``code`` and ``forward`` from ``graph`` (call after editing the graph)."""
        python_code = self._graph.python_code(root_module="self")
        self._code = python_code.src
        self._lineno_map = python_code._lineno_map
        for name, value in self._graph._codegen.module_attributes().items():
            object.__setattr__(self, name, value)
        cls = type(self)
        cls.forward = _forward_from_src(self._code, python_code.globals)
        return python_code

    def print_readable(self, print_output: bool = True, include_stride: bool = False,
                       include_device: bool = False, colored: bool = False) -> str:
        """The module as a class definition, with the user source lines nodes came from."""
        output = self._readable(self._get_name(), include_stride, include_device)
        if print_output:
            print(output)
        return output

    def _readable(self, name: str, include_stride: bool = False, include_device: bool = False) -> str:
        verbose = self._graph.python_code(root_module="self", verbose=True, include_stride=include_stride,
                                          include_device=include_device).src
        lines = [f"class {name}(ember.nn.Module):"]
        for child_name, child in self.named_children():
            if isinstance(child, GraphModule):
                child_text = child._readable(child_name, include_stride, include_device)
                lines += ["    " + ln if ln else ln for ln in child_text.split("\n")]
        lines += ["    " + ln if ln.strip() else "" for ln in verbose.lstrip("\n").split("\n")]
        return "\n".join(lines).rstrip() + "\n"

    def __str__(self) -> str:
        return "\n".join([super().__repr__(), self.code,
                          "# To see more debug info, please use `graph_module.print_readable()`"])

    # -- submodules -----------------------------------------------------------------------
    def add_submodule(self, target: str, m: Module) -> bool:
        """Installs ``m`` at dotted path ``target``, creating plain Modules on the way.

        Returns False when a non-Module attribute is in the way.
        """
        *prefix, field = target.split(".")
        mod: Module = self
        for item in prefix:
            submod = getattr(mod, item, None)
            if submod is None:
                submod = Module()
                mod.add_module(item, submod)
            if not isinstance(submod, Module):
                return False
            mod = submod
        mod.add_module(field, m)
        return True

    def delete_submodule(self, target: str) -> bool:
        """Removes the submodule at ``target``; False if there is none."""
        *prefix, field = target.split(".")
        mod: Any = self
        for item in prefix:
            if not hasattr(mod, item):
                return False
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                return False
        if not hasattr(mod, field) or not isinstance(getattr(mod, field), Module):
            return False
        delattr(mod, field)
        return True

    def delete_all_unused_submodules(self) -> None:
        """Deletes submodules that no ``call_module``/``get_attr`` node reaches."""
        used: set[str] = set()
        for node in self.graph.nodes:
            if node.op in ("call_module", "get_attr"):
                atoms = node.target.split(".")
                for i in range(1, len(atoms) + 1):
                    used.add(".".join(atoms[:i]))
                if node.op == "call_module":
                    # Everything inside a called module is in use too.
                    try:
                        submod = self.get_submodule(node.target)
                    except AttributeError:
                        continue
                    for sub_name, _ in submod.named_modules():
                        if sub_name:
                            used.add(f"{node.target}.{sub_name}")
        to_delete = [name for name, _ in self.named_modules() if name and name not in used]
        for name in to_delete:
            if _has_path(self, name):
                self.delete_submodule(name)

    # -- copies ---------------------------------------------------------------------------
    def __deepcopy__(self, memo: dict) -> GraphModule:
        holder = Module()
        memo[id(self)] = holder
        state = copy.deepcopy(self.__dict__, memo)
        holder.__dict__.update(state)
        result = GraphModule(holder, state["_graph"], self._get_name())
        memo[id(self)] = result
        result.meta = state.get("meta", {})
        for key in ("_state_dict_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks",
                    "_forward_hooks", "_forward_pre_hooks"):
            if key in state:
                result.__dict__[key] = state[key]
        return result

    def __copy__(self) -> GraphModule:
        result = GraphModule(self, self.graph, self._get_name())
        result.meta = getattr(self, "meta", {})
        return result

    def __reduce__(self):
        from ._pickle import graph_state, rebuild_graph_module

        skip = ("_graph", "_code", "_lineno_map")
        state = {k: v for k, v in self.__dict__.items() if k not in skip}
        return (rebuild_graph_module, (state, graph_state(self._graph), self._get_name()))

    def _get_name(self) -> str:
        return type(self).__name__
