"""``make_fx``: a whole function as one ``ember.fx.GraphModule`` of ember ops (PyTorch's
``torch.fx.experimental.proxy_tensor.make_fx``), on the same recorder as ``ember.compile``.

The graph takes the function's tensor arguments, in order, as placeholders (``arg<i>_1``) and
returns its outputs in their structure; other real tensors it reads (parameters, globals)
become ``_tensor_constant<k>`` attributes. Capture is strict: reading tensor data (``.item()``,
``if t:``, ``print(t)``) raises ``ember._dynamo.exc.Unsupported`` naming the line, in every
tracing mode ("real", "fake", "symbolic": no mode computes values, so each traces the same).
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
            finally:
                rec.discard()
        return gm

    return wrapped
