"""``make_fx``: a whole function as one ``ember.fx.GraphModule`` of ember ops (PyTorch's
``torch.fx.experimental.proxy_tensor.make_fx``), on the same recorder as ``ember.compile``.

The graph takes the function's arguments, in order, as placeholders named as PyTorch names them
(``x_1`` after the parameter ``x``, ``arg<i>_1`` under ``*args``; a number or None argument is a
placeholder nothing reads; the tensors inside a list or dict argument ``d`` are ``d_1, d_2...``,
flat, where PyTorch keeps ``d`` as one input) and returns its outputs in their structure; other
real tensors it reads (parameters, globals) become ``_tensor_constant<k>`` attributes. Capture
is strict: reading tensor data (``.item()``, ``if t:``, ``print(t)``) raises
``ember._dynamo.exc.Unsupported`` naming the line, in every tracing mode ("real", "fake",
"symbolic": no mode computes values, so each traces the same).
"""

from __future__ import annotations

from ember._src.tensor import Tensor

from ._break_reasons import DYNAMIC_SHAPE_OPERATOR
from ._recorder import Recorder, Unsupported
from ._user_frames import user_frame

_MODES = ("real", "fake", "symbolic")


class _Strict:
    """The owner a make_fx recorder reports to: every break is an error, nothing is cached."""

    want_stacks = True
    fullgraph = True
    traces_through_regions = True  # autograd.Function.apply: its forward's ops join the graph
    traces_inputs = True  # no op runs on the example inputs' data

    def note_break(self, reason, frame, rec):
        where = f"\n  {frame}" if frame is not None else ""
        if reason.startswith(DYNAMIC_SHAPE_OPERATOR):
            reason = f"ember.ops.{reason[len(DYNAMIC_SHAPE_OPERATOR):]} has a data-dependent output shape"
        raise Unsupported(f"make_fx: data-dependent operation: {reason}{where}")

    def lookup(self, rec, live):
        # Reached when Python reads a traced tensor's data (.item(), .tolist(), a kernel that
        # needs the values): the trace has no data to give.
        frame = user_frame()
        where = f"\n  {frame}" if frame is not None else ""
        raise Unsupported(f"make_fx: data-dependent operation: Python reads a traced tensor's data{where}")


def _flatten(x, out: list):
    if isinstance(x, Tensor):
        out.append(x)
    elif type(x) in (list, tuple):
        for y in x:
            _flatten(y, out)
    elif type(x) is dict:
        for y in x.values():
            _flatten(y, out)


def make_fx(f, decomposition_table=None, tracing_mode: str = "real", _allow_non_fake_inputs: bool = False,
            *, pre_dispatch: bool = False, record_module_stack: bool = False, _allow_fake_constant: bool = False,
            _error_on_data_dependent_ops: bool = True):
    """Returns ``wrapped(*args) -> GraphModule`` tracing ``f`` on ``args``.

    Example::

        >>> import ember
        >>> from ember.compiler import make_fx
        >>> gm = make_fx(lambda x: x.sin() * 2)(ember.ones(3))
        >>> [n.op for n in gm.graph.nodes]
        ['placeholder', 'call_function', 'call_function', 'output']
    """
    if tracing_mode not in _MODES:
        raise AssertionError(f"Unexpected tracing type: {tracing_mode}")

    def wrapped(*args):
        from ember import fx

        from ._graph_build import build_graph_module

        flat: list = []
        _flatten(args, flat)
        rec = Recorder(_Strict())
        # PyTorch's composite ops (linear, conv2d, batch_norm ...) stay whole (ember._src.composite).
        rec.pre_dispatch = pre_dispatch
        # Inputs whose sizes are SymInts (export's dynamic dims) trace symbolically.
        rec.symbolic = any(type(s) is not int for t in flat for s in t._shape)
        if decomposition_table:
            rec.decompositions = dict(decomposition_table)
        with rec:
            try:
                placeholders = set()
                for t in flat:
                    if id(t) not in rec.input_index:
                        placeholders.add(rec._lift(t))
                rec.traced_inputs = placeholders  # their data is not the graph's (_hooks.sync_hook)
                result = f(*args)
                output, _, _ = rec._conv(result)
                constants = frozenset(v for v in rec.input_index.values() if v not in placeholders)
                gm = build_graph_module(rec, [], fx, constants=constants, output=output,
                                        placeholder_name="arg{}_1")
                inputs = [t for t in rec.inputs if rec.input_index[id(t)] not in constants]
            finally:
                rec.discard()
        _name_placeholders(gm, f, args, inputs)
        return gm

    return wrapped


def _argument_names(f, count: int) -> list:
    """The parameter name of each of ``count`` positional arguments of ``f`` (None past its
    named parameters: ``*args``, a callable without a signature)."""
    import inspect

    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        return [None] * count
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return (names + [None] * count)[:count]


def _name_placeholders(gm, f, args, inputs: list) -> None:
    """PyTorch's placeholders: named after ``f``'s parameters (``x_1``; ``d_1, d_2`` for the
    tensors inside a container ``d``; ``arg<i>_1`` under ``*args``), and one for each argument
    that is a number, string or None (specialized, read by nothing), so the graph module is
    called with the arguments ``f`` was (``gm(x, 3)``). ``inputs`` are the tensors the
    graph's placeholders stand for, in order."""
    graph = gm.graph
    nodes = [n for n in graph.nodes if n.op == "placeholder"]
    by_input = {id(t): node for t, node in zip(inputs, nodes)}
    named: set = set()
    previous = None
    for i, (arg, name) in enumerate(zip(args, _argument_names(f, len(args)))):
        base = name if name is not None else f"arg{i}"
        if isinstance(arg, Tensor) or type(arg) in (list, tuple, dict):
            leaves: list = []
            _flatten(arg, leaves)
            for k, t in enumerate(leaves, 1):
                node = by_input.get(id(t))
                if node is None or id(node) in named:
                    continue
                named.add(id(node))
                wanted = f"{base}_{k}" if type(arg) in (list, tuple, dict) and name is not None else f"{base}_1"
                if wanted != node.name and name is not None:
                    node._rename(wanted)
                    node.target = node.name
                previous = node
            continue
        if not isinstance(arg, (int, float, bool, str, type(None))):
            continue
        with graph.inserting_after(previous) if previous is not None else graph.inserting_before(None):
            node = graph.placeholder(f"{base}_1", default_value=None) if arg is None else graph.placeholder(
                f"{base}_1")
        node.target = node.name
        node.meta["val"] = arg
        previous = node
    gm.recompile()
