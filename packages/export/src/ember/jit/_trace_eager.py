"""TorchScript's tracing semantics for programs that read tensor data: run for real, record ops.

``ember.jit.trace`` first exports the program (symbolic sizes, one graph). A program whose
Python reads tensor data (``if x.sum() > 0``) cannot be exported; TorchScript's tracer runs
such a program on the example inputs and freezes the decisions it took. ``record_eagerly``
does the same: every op runs on the real tensors under a dispatch mode that also appends it to
an ``ember.fx`` graph, so Python sees real values and the graph holds the path taken. Tensors
the ops read that are neither inputs nor results of recorded ops become graph attributes:
the module's parameters and buffers by their names, other tensors as constants. The result is
a module that runs the graph; ``trace`` then exports that (it reads no data any more), which
gives the traced module its graph, code and ``save``.

A scripted submodule (``ember.jit.script``) met during the recording keeps its Python, as a
TorchScript trace keeps a scripted module's control flow: its call is one opaque graph node
that runs it (``RECORDING`` tells ScriptModule.forward that a recording is active). Such a
graph cannot be exported, so the traced module runs it as it is and cannot be saved.
"""

from __future__ import annotations

import operator

from ember import nn
from ember._src.tensor import Tensor
from ember.dispatch import DispatchMode
from ember.export import _pytree as pytree

RECORDING: list = []  # the active _Recorder (ScriptModule.forward reads it)


class _Recorder(DispatchMode):
    """Runs each op and records it; ``nodes`` maps id(tensor) to the node that produced it."""

    wants_types = False

    def __init__(self, graph, state_names: dict):
        self.graph = graph
        self.nodes: dict = {}
        self.state_names = state_names  # id(parameter or buffer) -> qualified name
        self.constants: dict = {}  # attribute name -> tensor
        self.keep: list = []  # every tensor seen stays alive, so no id is reused during the trace
        self.opaque = False  # an opaque call was recorded

    def node_of(self, t: Tensor):
        node = self.nodes.get(id(t))
        if node is None:
            name = self.state_names.get(id(t))
            if name is None:
                name = f"_tensor_constant{len(self.constants)}"
                self.constants[name] = t
            node = self.nodes[id(t)] = self.graph.get_attr(name)
            self.keep.append(t)
        return node

    def arg(self, a):
        if isinstance(a, Tensor):
            return self.node_of(a)
        if type(a) in (list, tuple):
            return type(a)(self.arg(b) for b in a)
        return a

    def call_opaque(self, fn, args, kwargs):
        """``fn(*args, **kwargs)`` run unrecorded, recorded as one node that calls ``fn``."""
        from ember._src import dispatch

        stack = dispatch._MODES.stack
        pos = stack.index(self)
        del stack[pos]
        try:
            out = fn(*args, **kwargs)
        finally:
            stack.insert(pos, self)
        self.opaque = True
        return self._record(fn, args, kwargs, out)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        return self._record(func, args, kwargs, func(*args, **kwargs))

    def _record(self, func, args, kwargs, out):
        node = self.graph.call_function(func, self.arg(tuple(args)), {k: self.arg(v) for k, v in kwargs.items()})
        if isinstance(out, Tensor):
            self.nodes[id(out)] = node  # an in-place op's result is its input, now this node's value
            self.keep.append(out)
        elif type(out) in (list, tuple):


            for i, o in enumerate(out):
                if isinstance(o, Tensor):
                    self.nodes[id(o)] = self.graph.call_function(operator.getitem, (node, i))
                    self.keep.append(o)
        return out


class _Recorded(nn.Module):
    """Runs a recorded graph: the same call contract as the traced module (the tensors among
    the arguments are the graph's inputs; other arguments were frozen by the trace)."""

    def __init__(self, gm, tensor_positions, out_spec):
        super().__init__()
        self.gm = gm
        self._positions, self._out_spec = tensor_positions, out_spec

    def forward(self, *args, **kwargs):
        leaves, _ = pytree.tree_flatten((args, kwargs))
        flat = self.gm(*[leaves[i] for i in self._positions])
        return pytree.tree_unflatten(list(flat), self._out_spec)


def record_eagerly(module: nn.Module, args: tuple, kwargs: dict) -> _Recorded:
    """``module(*args, **kwargs)`` run once for real, its ops recorded (see the module docstring)."""
    from ember import fx

    graph = fx.Graph()
    state = {id(t): name for name, t in module.named_parameters(remove_duplicate=False)}
    state.update({id(t): name for name, t in module.named_buffers(remove_duplicate=False)})
    leaves, _ = pytree.tree_flatten((tuple(args), dict(kwargs)))
    positions = [i for i, x in enumerate(leaves) if isinstance(x, Tensor)]
    rec = _Recorder(graph, state)
    for k, i in enumerate(positions):
        rec.nodes[id(leaves[i])] = graph.placeholder(f"input_{k}")
    rec.keep.extend(leaves)
    RECORDING.append(rec)
    try:
        with rec:
            result = module(*args, **kwargs)
    finally:
        RECORDING.pop()
    out_leaves, out_spec = pytree.tree_flatten(result)
    graph.output(tuple(rec.arg(x) for x in out_leaves))
    root = nn.Module()
    for name, t in list(module.named_parameters(remove_duplicate=False)) + \
            list(module.named_buffers(remove_duplicate=False)):
        _set_path(root, name, t, module)
    for name, t in rec.constants.items():
        root.register_buffer(name, t.detach().clone(), persistent=False)
    gm = fx.GraphModule(root, graph)
    recorded = _Recorded(gm, positions, out_spec)
    recorded.opaque = rec.opaque
    return recorded


def _set_path(root: nn.Module, name: str, t: Tensor, module: nn.Module) -> None:
    """Places ``t`` at ``name`` (``layer.0.weight``) under ``root`` as a parameter or buffer."""
    *path, leaf = name.split(".")
    owner = root
    for part in path:
        if part not in owner._modules:
            owner._modules[part] = nn.Module()
        owner = owner._modules[part]
    if isinstance(t, nn.Parameter):
        owner._parameters[leaf] = t
    else:
        owner._buffers[leaf] = t
