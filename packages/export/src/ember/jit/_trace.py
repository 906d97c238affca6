"""``ember.jit.trace``: TorchScript's tracing entry point, on ember.export's tracer.

The module (or function) is exported at the example inputs with the first dim of every
tensor input hinted ``Dim.AUTO`` (a batch dim stays dynamic when the program allows it);
the result runs the recorded graph. A program whose Python reads tensor data while tracing
(``if x.sum() > 0``) is run for real on the example and its ops recorded (``_trace_eager``):
the branch taken is frozen into the graph, with TorchScript's ``TracerWarning`` naming the
line (``ember.jit.script`` keeps such control flow). ``check_inputs`` are traced too; a
different graph raises ``TracingCheckError`` ("Graphs differed across invocations!"),
different values raise it as well.
"""

from __future__ import annotations

import warnings

import ember
from ember import nn
from ember.export import Dim
from ember.export import export as export_program
from ember.export._errors import GuardOnDataDependentSymNode

from ._script_module import ScriptFunction, TopLevelTracedModule, _FunctionModule
from ._state import FLAGS


class TracingCheckError(Exception):
    """The traced program disagrees with eager execution on a check input (PyTorch's name)."""

    def __init__(self, graph_diff_error, tensor_compare_error, extra_msg=None):
        self.message = "Tracing failed sanity checks!\n"
        if extra_msg is not None:
            self.message += extra_msg + "\n"
        if graph_diff_error is not None:
            self.message += "ERROR: Graphs differed across invocations!\n" + graph_diff_error + "\n"
        if tensor_compare_error is not None:
            self.message += "ERROR: Tensor-valued Constant nodes differed in value across invocations. " + \
                tensor_compare_error + "\n"
        super().__init__(self.message)


class TracerWarning(Warning):
    pass


def _batch_specs(args, kwargs):
    def spec(x):
        # min=1: a traced module takes batches of one, as TorchScript's does.
        return {0: Dim.AUTO(min=1)} if isinstance(x, ember.Tensor) and x.ndim >= 1 else None

    specs = [spec(a) for a in args] + [spec(v) for v in kwargs.values()]
    return tuple(specs) if any(s is not None for s in specs) else None


def export_with_batch_dim(module, args, kwargs):
    FLAGS.tracing += 1
    try:
        return export_program(module, tuple(args), dict(kwargs), dynamic_shapes=_batch_specs(args, kwargs))
    finally:
        FLAGS.tracing -= 1


def _graph_ops(ep) -> list:
    return [getattr(n.target, "name", str(n.target)) for n in ep.graph.nodes if n.op == "call_function"]


def trace(func, example_inputs=None, optimize=None, check_trace: bool = True, check_inputs=None,
          check_tolerance: float = 1e-5, strict: bool = True, _force_outplace: bool = False,
          _module_class=None, _compilation_unit=None, example_kwarg_inputs=None, _store_inputs: bool = True):
    """Records ``func`` on ``example_inputs`` into a ScriptModule (module) or ScriptFunction (function)."""
    if example_inputs is None and example_kwarg_inputs is None:
        raise RuntimeError("example_kwarg_inputs or example_inputs must be provided")
    args = example_inputs if isinstance(example_inputs, tuple) else (
        () if example_inputs is None else (example_inputs,))
    kwargs = dict(example_kwarg_inputs or {})
    module = func if isinstance(func, nn.Module) else _FunctionModule(func)
    eager = False
    try:
        ep = export_with_batch_dim(module, args, kwargs)
        program = ep.module()
    except GuardOnDataDependentSymNode as exc:
        # Python reads tensor data: record the path the example takes, as TorchScript does.
        eager = True
        ep, program = _export_recorded(module, args, kwargs)
        if ep is not None:  # (the read was not inside a scripted submodule, which keeps its branch)
            _warn_at(exc)
    traced = TopLevelTracedModule(module, (args, kwargs), program)
    object.__setattr__(traced, "_exported", ep)
    if ep is None:
        object.__setattr__(traced, "_recorded", program)
    if check_trace:
        checks = [args] + [c if isinstance(c, tuple) else (c,) for c in (check_inputs or [])]
        for check in checks:
            _check(module, traced, ep, check, check_tolerance, eager)
    return traced if isinstance(func, nn.Module) else ScriptFunction(func, traced)


_DATA_READ_WARNING = (
    "Converting a tensor to a Python {} might cause the trace to be incorrect. We can't record the data flow "
    "of Python values, so this value will be treated as a constant in the future. This means that the trace "
    "might not generalize to other inputs!")


def _warn_at(exc) -> None:
    """TracerWarning at the user's line that export's data-dependence error names."""
    import re

    text = str(exc)
    message = TracerWarning(_DATA_READ_WARNING.format("boolean" if "branching" in text else "number"))
    site = re.search(r'File "([^"]+)", line (\d+)', text)
    if site is None:
        warnings.warn(message, stacklevel=3)
    else:  # (once per line, as a warning raised there would be)
        warnings.warn_explicit(message, TracerWarning, site.group(1), int(site.group(2)), registry=_WARNED)


_WARNED: dict = {}


def _export_recorded(module, args, kwargs):
    """The export of the ops ``module`` runs on the example (``_trace_eager``), data reads frozen."""
    from ._trace_eager import record_eagerly

    recorded = record_eagerly(module, args, kwargs)
    if recorded.opaque:  # a scripted submodule keeps its Python: the recorded graph is the program
        return None, recorded
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = export_with_batch_dim(recorded, args, kwargs)
    return ep, ep.module()


def _check(module, traced, ep, args, tol, eager=False):
    if eager:
        other, recorded = _export_recorded(module, args, {})
        a = _graph_ops(ep) if ep is not None else _graph_ops(traced._recorded.gm)
        b = _graph_ops(other) if other is not None else _graph_ops(recorded.gm)
    else:
        a, b = _graph_ops(ep), _graph_ops(export_with_batch_dim(module, args, {}))
    if a != b:
        diff = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        raise TracingCheckError(f"\tfirst difference at op {diff}: {a[diff:diff + 1]} vs {b[diff:diff + 1]} "
                                f"({len(a)} ops vs {len(b)})", None)
    try:
        got = traced(*args)
    except AssertionError as exc:  # a size the recorded graph cannot take
        raise TracingCheckError(None, None, f"the traced graph rejects a check input: {exc}") from None
    with ember.no_grad():
        want = module(*args)
    from ember.export._pytree import tree_leaves

    for g, w in zip(tree_leaves(got), tree_leaves(want)):
        if isinstance(w, ember.Tensor) and not ember.allclose(g.detach(), w.detach(), rtol=tol, atol=tol):
            raise TracingCheckError(None, "Output values differ from the Python function's on a check input.")
