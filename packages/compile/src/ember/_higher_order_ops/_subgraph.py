"""Tracing a Python function into a subgraph: the branches of ``cond``, the body of ``while_loop``.

``trace_subgraph(fn, operands)`` runs ``fn`` on fake stand-ins of ``operands`` under a dispatch
mode that records every op into an ``ember.fx`` graph. Tensors the function reads that are not
its operands (a module's parameters, a tensor of an enclosing trace captured by a closure) become
extra placeholders after the operands; the caller passes them to the graph op as *lifted
inputs*, so an export sees them as inputs (parameters stay parameters) and the subgraph holds no
data of its own.

A traced subgraph is memoized by its structure: tracing the same function again (each call of an
``ember.compile``-d function re-runs its Python) returns the same ``GraphModule`` object, so the
capture's cache key, which holds the subgraph by identity, stays the same from call to call.
"""

from __future__ import annotations

import threading

from ember._src.device import META
from ember._src.dispatch import Op
from ember._src.tensor import Tensor, make_tensor
from ember.autograd._pytree import tree_flatten

from ..compiler._fake import FakeTensor, FakeTensorMode, fake_of
from ..compiler.symbolic_shapes import SymInt


class _State(threading.local):
    def __init__(self):
        self.depth = 0  # subgraph traces in progress on this thread


STATE = _State()
_MEMO: dict = {}
_MEMO_LIMIT = 512


def meta_of(t: Tensor) -> Tensor:
    """A meta tensor with ``t``'s layout (lazy tensors of a capture carry one already)."""
    lazy_meta = t.__dict__.get("_lz_meta") if hasattr(t, "__dict__") else None
    if lazy_meta is not None:
        return lazy_meta
    if t._device is META:
        return t
    from ember import _C

    storage = t._storage if type(t) is FakeTensor else _C.Storage.meta(t._storage.nbytes())
    return make_tensor(storage, t._shape, t._stride, t._offset, t.dtype, META)


class SubgraphTracer(FakeTensorMode):
    """Records the ops ``fn`` runs on fake tensors into a graph (see the module docstring)."""

    wants_types = False

    def __init__(self, what: str, decompositions: dict | None = None):
        super().__init__(allow_non_fake_inputs=True)
        self.decompositions = decompositions  # {op or op name: fn}: ops recorded as their decomposition
        from ember import fx

        self.what = what
        self.graph = fx.Graph()
        self.node_of: dict[int, object] = {}  # id(fake tensor) -> node
        self.keep: list = []  # the fakes above, alive while their ids are keys
        self.operand_nodes: list = []
        self.lifted: list = []  # outside tensors read, in order of first use
        self.lifted_nodes: list = []

    def _bind(self, fake: Tensor, node) -> None:
        self.node_of[id(fake)] = node
        self.keep.append(fake)
        node.meta["val"] = fake

    def operand(self, t: Tensor, index: int) -> FakeTensor:
        fake = fake_of(meta_of(t), t._device, t._requires_grad, self)
        node = self.graph.placeholder(f"arg{index}_1")
        self._bind(fake, node)
        self.operand_nodes.append(node)
        return fake

    def _lift(self, t: Tensor):
        """The placeholder of an outside tensor ``t`` (a new one on first use)."""
        for i, seen in enumerate(self.lifted):
            if seen is t:
                return self.lifted_nodes[i]
        node = self.graph.placeholder(f"lifted_{len(self.lifted)}")
        self._bind(fake_of(meta_of(t), t._device, t._requires_grad, self), node)
        self.lifted.append(t)
        self.lifted_nodes.append(node)
        return node

    def node_arg(self, a):
        """(graph argument, fake argument) for one op argument."""
        if isinstance(a, Tensor):
            node = self.node_of.get(id(a))
            if node is None:
                node = self._lift(a)
            return node, node.meta["val"]
        if type(a) in (list, tuple):
            pairs = [self.node_arg(b) for b in a]
            return type(a)(p[0] for p in pairs), type(a)(p[1] for p in pairs)
        if type(a) is dict:
            pairs = {k: self.node_arg(b) for k, b in a.items()}
            return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
        return a, a

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if self.decompositions:
            decomposition = self.decompositions.get(func) or self.decompositions.get(getattr(func, "name", None))
            if decomposition is not None:
                with self:  # the decomposition's own ops are recorded
                    out = decomposition(*args, **kwargs)
                if out is not NotImplemented:
                    return out
        node_args, fake_args = self.node_arg(tuple(args))
        node_kwargs, fake_kwargs = self.node_arg(kwargs)
        writes_input = _writes_first_arg(func) and fake_args and isinstance(fake_args[0], Tensor) and (
            node_args[0].op == "placeholder")
        if writes_input:
            raise RuntimeError(
                f"{self.what}: ember.ops.{func.name} writes one of the inputs in place; the function must be free of "
                "side effects on its inputs (clone the input first)")
        out = without_modes(super().__torch_dispatch__, func, types, fake_args, fake_kwargs)
        node = self.graph.call_function(func, node_args, node_kwargs)
        if isinstance(out, Tensor):
            self._bind(out, node)
        elif isinstance(out, (tuple, list)):
            node.meta["val"] = out
            import operator

            for i, o in enumerate(out):
                if isinstance(o, Tensor):
                    item = self.graph.call_function(operator.getitem, (node, i))
                    self._bind(o, item)
        return out


def without_modes(fn, *args):
    """Runs ``fn`` with no dispatch mode active: meta kernels that call other ops (a scalar made a
    tensor, an expand) must not be recorded by a capture below this one."""
    from ember._src import dispatch

    saved, dispatch._MODES.stack = dispatch._MODES.stack, []
    try:
        return fn(*args)
    finally:
        dispatch._MODES.stack = saved


def _writes_first_arg(func) -> bool:
    return isinstance(func, Op) and ("inplace" in func.tags or "(a!) self" in func.schema)


def retrace(gm, decompositions: dict, what: str = "subgraph"):
    """``gm`` traced again with ``decompositions`` applied (``run_decompositions`` inside subgraphs);
    nested subgraphs are retraced the same way."""
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            value = getattr(gm, node.target)
            if hasattr(value, "graph") and hasattr(value.graph, "nodes"):
                setattr(gm, node.target, retrace(value, decompositions, what))
    operands = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
    tracer, leaves, _ = trace_subgraph(lambda *xs: tuple(gm(*xs)), operands, what, decompositions)
    return finish_subgraph(tracer, leaves, [], what)


def trace_subgraph(fn, operands: list, what: str, decompositions: dict | None = None):
    """(tracer, flat outputs, output spec) of ``fn(*operands)`` traced into ``tracer.graph``."""
    tracer = SubgraphTracer(what, decompositions)
    fakes = [tracer.operand(t, i) if isinstance(t, Tensor) else t for i, t in enumerate(operands)]
    tracer.inputs = fakes  # what an output must not alias (check_no_alias)
    STATE.depth += 1
    try:
        with tracer:
            result = fn(*fakes)
    finally:
        STATE.depth -= 1
    leaves, spec = tree_flatten(result)
    return tracer, leaves, spec


def merged_lifted(*tracers: SubgraphTracer) -> list:
    """The outside tensors the subgraphs of one op read, each once, in order of first use across
    ``tracers`` (the order ``finish_subgraph`` gives all of them, so they share a signature)."""
    lifted: list = []
    for tracer in tracers:
        for t in tracer.lifted:
            if not any(t is s for s in lifted):
                lifted.append(t)
    return lifted


def finish_subgraph(tracer: SubgraphTracer, leaves: list, lifted_order: list, what: str):
    """Completes ``tracer.graph``: placeholders for every lifted tensor in ``lifted_order`` (unused
    ones included, so that all subgraphs of one op share a signature), the output, and the memoized
    GraphModule."""
    from ember import fx, nn

    graph = tracer.graph
    outputs = []
    for i, leaf in enumerate(leaves):
        if not isinstance(leaf, Tensor):
            raise RuntimeError(f"{what}: output {i} is a {type(leaf).__name__}; only tensors may be returned")
        node = tracer.node_of.get(id(leaf))
        if node is None:
            node = tracer._lift(leaf)
        if node.op == "placeholder":
            # An output may not alias an input of the op (as in PyTorch): return a copy.
            from ember._src.dispatch import OPS

            copy = graph.call_function(OPS["clone"], (node,))
            copy.meta["val"] = node.meta["val"]
            node = copy
        outputs.append(node)
    for t in lifted_order:
        tracer._lift(t)  # unused here, but part of the shared signature
    out = graph.output(tuple(outputs))
    # placeholders in signature order: operands, then the lifted tensors in the shared order
    by_identity = dict(zip((id(t) for t in tracer.lifted), tracer.lifted_nodes))
    anchor = next(n for n in graph.nodes if n.op != "placeholder") if any(
        n.op != "placeholder" for n in graph.nodes) else out
    for node in tracer.operand_nodes + [by_identity[id(t)] for t in lifted_order]:
        anchor.prepend(node)
    for i, node in enumerate(tracer.operand_nodes + [by_identity[id(t)] for t in lifted_order]):
        node._rename(f"__tmp{i}")
    for i, node in enumerate(n for n in graph.nodes if n.op == "placeholder"):
        node._rename(f"arg{i}_1")
        node.target = node.name
    # Nested subgraphs (a cond inside a branch) become get_attr nodes of this one, as at the top.
    root = nn.Module()
    count = 0
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        new_args = []
        for a in node.args:
            if isinstance(a, fx.GraphModule):
                name = f"subgraph_{count}"
                count += 1
                setattr(root, name, a)
                with graph.inserting_before(node):
                    a = graph.get_attr(name)
            new_args.append(a)
        node.args = tuple(new_args)
    gm = fx.GraphModule(root, graph)
    return memoize(gm)


def _structure_key(gm) -> tuple:
    """Everything that decides what ``gm`` computes: ops, arguments, literal values, placeholders'
    metadata, nested subgraphs by identity (they are memoized themselves)."""
    index = {}
    parts = []

    def size_key(s):
        # A symbolic size keys by its expression: comparing it with a stored key's int would
        # record a guard (an export with a dynamic dim specialized by a memo lookup).
        return ("sym", str(s.node)) if isinstance(s, SymInt) else s

    def arg_key(a):
        if isinstance(a, SymInt):
            return size_key(a)
        if hasattr(a, "op") and a in index:
            return ("n", index[a])
        if type(a) in (list, tuple):
            return (type(a).__name__, tuple(arg_key(b) for b in a))
        if type(a) is dict:
            return ("d", tuple((k, arg_key(v)) for k, v in a.items()))
        if type(a) is float:
            return ("f", a.hex())
        try:
            hash(a)
        except TypeError:
            return ("id", id(a))
        return (type(a), a)

    for node in gm.graph.nodes:
        index[node] = len(index)
        val = node.meta.get("val")
        meta = None
        if isinstance(val, Tensor):
            meta = (val.dtype, tuple(size_key(s) for s in val._shape), tuple(size_key(s) for s in val._stride),
                    val.device)
        target = node.target if node.op != "placeholder" else None
        if node.op == "get_attr":  # a nested subgraph: memoized itself, so its identity is stable
            target = (target, id(getattr(gm, node.target)))
        parts.append((node.op, target, arg_key(node.args),
                      arg_key(node.kwargs), meta if node.op == "placeholder" else None))
    return tuple(parts)


def memoize(gm):
    key = _structure_key(gm)
    found = _MEMO.get(key)
    if found is not None:
        return found
    if len(_MEMO) >= _MEMO_LIMIT:
        _MEMO.pop(next(iter(_MEMO)))
    _MEMO[key] = gm
    return gm
