"""``ember.jit.trace``: TorchScript's tracing entry point, on ember.export's tracer.

The module (or function) is exported at the example inputs with the first dim of every
tensor input hinted ``Dim.AUTO`` (a batch dim stays dynamic when the program allows it);
the result runs the recorded graph. Unlike TorchScript, reading tensor data while tracing
(``if x.sum() > 0``) is an error naming the line, not a silently frozen branch: use
``ember.jit.script`` for such code. ``check_inputs`` are traced too; a different graph
raises ``TracingCheckError`` ("Graphs differed across invocations!"), different values
raise it as well.
"""

from __future__ import annotations

import ember
from ember import nn
from ember.export import Dim
from ember.export import export as export_program

from ._script_module import ScriptFunction, ScriptModule, _FunctionModule
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
    ep = export_with_batch_dim(module, args, kwargs)
    traced = ScriptModule(module, (args, kwargs), ep.module())
    object.__setattr__(traced, "_exported", ep)
    if check_trace:
        checks = [args] + [c if isinstance(c, tuple) else (c,) for c in (check_inputs or [])]
        for check in checks:
            _check(module, traced, ep, check, check_tolerance)
    return traced if isinstance(func, nn.Module) else ScriptFunction(func, traced)


def _check(module, traced, ep, args, tol):
    other = export_with_batch_dim(module, args, {})
    if _graph_ops(other) != _graph_ops(ep):
        a, b = _graph_ops(ep), _graph_ops(other)
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
