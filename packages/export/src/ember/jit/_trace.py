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

import sympy

import ember
from ember import nn
from ember.export import Dim
from ember.export import export as export_program
from ember.export._errors import GuardOnDataDependentSymNode

from ._script_module import ScriptFunction, TopLevelTracedModule, _FunctionModule, bind_positional
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
    """``module`` exported with a dynamic first dim where the program allows one.

    Export specializes a dim whose example size is 1 (PyTorch's 0/1 specialization), yet a
    TorchScript trace taken at batch 1 runs at any batch its ops allow. So an example with
    batch-1 tensors is first exported with those tensors repeated to batch 2; that graph is
    kept when its batch dims stayed symbolic with 1 in their range (so it takes the example
    itself), else the example is exported as it is."""
    ep = export_widened(module, args, kwargs)
    if ep is None:
        FLAGS.tracing += 1
        try:
            ep = export_program(module, tuple(args), dict(kwargs), dynamic_shapes=_batch_specs(args, kwargs))
        finally:
            FLAGS.tracing -= 1
    # A TorchScript trace keeps no guards: a ``!=`` the forward decided (``if x.shape[0] != 5``)
    # is baked in as the example took it, as torch.jit.trace does (export's ep.module() checks it).
    ep._runtime_guards = tuple(g for g in ep._runtime_guards if not isinstance(g, sympy.Ne))
    return ep


def export_widened(module, args, kwargs):
    """The export at the batch-1 tensors of the example repeated to batch 2, when that graph
    takes the example and computes what ``module`` does on it; else None (also when no input
    has batch 1). A program that reads tensor data raises as the export of the example does."""
    wide_args, wide_kwargs, widened = _widen(args, kwargs)
    if not widened:
        return None
    FLAGS.tracing += 1
    try:
        ep = export_program(module, wide_args, wide_kwargs, dynamic_shapes=_batch_specs(args, kwargs))
    except GuardOnDataDependentSymNode:
        raise
    except Exception:  # noqa: BLE001 - the program needs batch 1: the caller exports the example as it is
        return None
    finally:
        FLAGS.tracing -= 1
    return ep if _takes_batch_one(ep, widened) and _agrees(module, ep, args, kwargs) else None


def _agrees(module, ep, args, kwargs) -> bool:
    """Whether the graph exported at batch 2 computes what ``module`` does on the example: a
    size Python read as a number (``int(x.size(0))``) was frozen at 2 there, where a trace of
    the example freezes 1. Buffers (running statistics) are left as they were."""
    from ember.export._pytree import tree_leaves

    program = ep.module()
    buffers = list(module.buffers()) + list(program.buffers())
    saved = [b.clone() for b in buffers]
    try:
        with ember.no_grad():
            want = tree_leaves(module(*args, **kwargs))
            got = tree_leaves(program(*args, **kwargs))
    except Exception:  # noqa: BLE001 - e.g. a view frozen at batch 2
        return False
    finally:
        with ember.no_grad():
            for b, v in zip(buffers, saved):
                b.copy_(v)
    if len(want) != len(got):
        return False
    for w, g in zip(want, got):
        if isinstance(w, ember.Tensor):
            if not isinstance(g, ember.Tensor) or w.shape != g.shape or w.dtype != g.dtype or \
                    not ember.allclose(g, w, rtol=1e-5, atol=1e-5, equal_nan=True):
                return False
        elif w != g:
            return False
    return True


def _widen(args, kwargs):
    """(args, kwargs) with each top-level tensor of first dim 1 repeated to 2; and the
    positions of those tensors among the flattened inputs (export's user inputs)."""
    widened = []

    def wide(i, x):
        if isinstance(x, ember.Tensor) and x.ndim >= 1 and x.shape[0] == 1:
            widened.append(i)
            return ember.cat([x.detach(), x.detach()]).requires_grad_(x.requires_grad) if x.is_leaf else \
                ember.cat([x, x])
        return x

    from ember.export._pytree import tree_leaves

    values, leaf = list(args) + list(kwargs.values()), 0  # ``widened`` holds leaf positions
    new_values = []
    for v in values:
        new_values.append(wide(leaf, v))
        leaf += len(tree_leaves(v))
    return tuple(new_values[:len(args)]), dict(zip(kwargs, new_values[len(args):])), widened


def _takes_batch_one(ep, widened) -> bool:
    """Whether each widened input's first dim stayed symbolic with 1 in its range."""
    names = list(ep.graph_signature.user_inputs)
    nodes = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    ranges = {str(k): v for k, v in ep.range_constraints.items()}
    for i in widened:
        if i >= len(names) or names[i] not in nodes:
            return False
        val = nodes[names[i]].meta.get("val")
        size = val.shape[0] if val is not None else 2
        if type(size) is int:  # (a SymInt is an int too)
            return False
        vr = ranges.get(str(size))
        if vr is None or int(vr.lower) > 1:
            return False
    return True


def _graph_ops(ep) -> list:
    return [getattr(n.target, "name", str(n.target)) for n in ep.graph.nodes if n.op == "call_function"]


def _type_name(value) -> str:
    """TorchScript's name of a value's type (``Tuple[int]``, ``List[Tensor]``)."""
    if isinstance(value, ember.Tensor):
        return "Tensor"
    if isinstance(value, tuple):
        return f"Tuple[{', '.join(_type_name(v) for v in value)}]"
    if isinstance(value, list):
        return f"List[{_type_name(value[0]) if value else 'Tensor'}]"
    if isinstance(value, dict):
        k, v = next(iter(value.items()), ("str", None))
        return f"Dict[{type(k).__name__}, {_type_name(v) if v is not None else 'Tensor'}]"
    return type(value).__name__


def _check_traceable(args) -> None:
    """TorchScript traces only tensors and (possibly nested) lists, dicts and tuples of them."""
    def ok(v):
        if isinstance(v, ember.Tensor):
            return True
        if isinstance(v, (tuple, list)):
            return all(ok(x) for x in v)
        if isinstance(v, dict):
            return all(ok(x) for x in v.values())
        return False

    if not ok(args):
        raise RuntimeError(f"Type '{_type_name(tuple(args))}' cannot be traced. Only Tensors and (possibly nested) "
                           "Lists, Dicts, and Tuples of Tensors can be traced")


def trace(func, example_inputs=None, optimize=None, check_trace: bool = True, check_inputs=None,
          check_tolerance: float = 1e-5, strict: bool = True, _force_outplace: bool = False,
          _module_class=None, _compilation_unit=None, example_kwarg_inputs=None, _store_inputs: bool = True):
    """Records ``func`` on ``example_inputs`` into a ScriptModule (module) or ScriptFunction (function)."""
    if example_inputs is None and example_kwarg_inputs is None:
        raise RuntimeError("example_kwarg_inputs or example_inputs must be provided")
    args = example_inputs if isinstance(example_inputs, tuple) else (
        () if example_inputs is None else (example_inputs,))
    kwargs = dict(example_kwarg_inputs or {})
    _check_traceable(args)
    module = func if isinstance(func, nn.Module) else _FunctionModule(func)
    args, kwargs = bind_positional(module, args, kwargs)
    eager = False
    try:
        ep = export_widened(module, args, kwargs)
        if ep is None and _widen(args, kwargs)[2]:
            # A batch-1 example whose graph is tied to batch 1: Python read a size as a number
            # (``int(x.size(0))``). TorchScript freezes that number and replays the ops at any
            # batch: so does the recording (its export is widened in turn).
            warnings.warn(TracerWarning(_DATA_READ_WARNING.format("integer")), stacklevel=2)
            eager = True
            ep, program = _export_recorded(module, args, kwargs)
        else:
            ep = ep if ep is not None else export_with_batch_dim(module, args, kwargs)
            program = ep.module()
    except GuardOnDataDependentSymNode as exc:
        # Python reads tensor data: record the path the example takes, as TorchScript does.
        eager = True
        ep, program = _export_recorded(module, args, kwargs)
        if ep is not None:  # (the read was not inside a scripted submodule, which keeps its branch)
            _warn_at(exc)
    except Exception:
        # The example does not run (a shape mismatch, ...): TorchScript's trace runs it for real,
        # so its error is eager's, with the example's sizes (export's would name symbols: s0x5).
        _run_eagerly(module, args, kwargs)
        raise
    traced = TopLevelTracedModule(module, (args, kwargs), program)
    object.__setattr__(traced, "_exported", ep)
    if ep is None:
        object.__setattr__(traced, "_recorded", program)
    if check_trace:
        checks = [(args, kwargs)] + [(c if isinstance(c, tuple) else (c,), {}) for c in (check_inputs or [])]
        for check, check_kwargs in checks:
            _check(module, traced, ep, check, check_tolerance, eager, check_kwargs)
    return traced if isinstance(func, nn.Module) else ScriptFunction(func, traced)


def _run_eagerly(module, args, kwargs) -> None:
    """Runs the example as eager Python; its error, when it raises one, replaces export's."""
    try:
        module(*args, **kwargs)
    except Exception as eager_error:  # noqa: BLE001 - re-raised as it is
        raise eager_error from None


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


def _check(module, traced, ep, args, tol, eager=False, kwargs=None):
    kwargs = kwargs or {}
    if eager:
        other, recorded = _export_recorded(module, args, kwargs)
        a = _graph_ops(ep) if ep is not None else _graph_ops(traced._recorded.gm)
        b = _graph_ops(other) if other is not None else _graph_ops(recorded.gm)
    else:
        a, b = _graph_ops(ep), _graph_ops(export_with_batch_dim(module, args, kwargs))
    if a != b:
        diff = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        raise TracingCheckError(f"\tfirst difference at op {diff}: {a[diff:diff + 1]} vs {b[diff:diff + 1]} "
                                f"({len(a)} ops vs {len(b)})", None)
    try:
        got = traced(*args, **kwargs)
    except AssertionError as exc:  # a size the recorded graph cannot take
        raise TracingCheckError(None, None, f"the traced graph rejects a check input: {exc}") from None
    with ember.no_grad():
        want = module(*args, **kwargs)
    from ember.export._pytree import tree_leaves

    for g, w in zip(tree_leaves(got), tree_leaves(want)):
        if isinstance(w, ember.Tensor) and not ember.allclose(g.detach(), w.detach(), rtol=tol, atol=tol):
            raise TracingCheckError(None, "Output values differ from the Python function's on a check input.")


class _MethodModule(nn.Module):
    """``module.<name>`` as the forward of a module sharing ``module``'s state (so its export
    names the parameters as ``module``'s own)."""

    def __init__(self, module: nn.Module, name: str):
        super().__init__()
        for slot in ("_parameters", "_buffers", "_modules", "_non_persistent_buffers_set"):
            self.__dict__[slot] = module.__dict__[slot]
        object.__setattr__(self, "_method", getattr(module, name))
        self.__dict__["training"] = module.training

    def forward(self, *args, **kwargs):
        return self._method(*args, **kwargs)


def trace_module(mod, inputs, optimize=None, check_trace: bool = True, check_inputs=None,
                 check_tolerance: float = 1e-5, strict: bool = True, _force_outplace: bool = False,
                 _module_class=None, _compilation_unit=None, example_inputs_is_kwarg: bool = False,
                 _store_inputs: bool = True):
    """Traces the methods ``inputs`` names ({method name: example inputs}) of ``mod``; the
    result is ``trace(mod, inputs["forward"])`` with the other methods traced beside it."""
    if not isinstance(mod, nn.Module):
        raise AttributeError("expected torch.nn.Module as the first argument")
    if not isinstance(inputs, dict):
        raise AttributeError("expected a dictionary of (method_name, input) pairs")
    for name in inputs:
        getattr(mod, name)  # AttributeError naming the module, as PyTorch's

    def one(target, name):
        example = inputs[name]
        checks = [c[name] for c in check_inputs] if check_inputs is not None else None
        keyword = {"example_kwarg_inputs": example} if example_inputs_is_kwarg else {"example_inputs": example}
        return trace(target, check_trace=check_trace, check_inputs=checks, check_tolerance=check_tolerance,
                     strict=strict, **keyword)

    if "forward" in inputs:
        top = one(mod, "forward")
    else:  # no forward traced: calling the result raises, as PyTorch's
        top = TopLevelTracedModule(mod, None, _NoForward(type(mod).__name__))
    for name in inputs:
        if name != "forward":
            traced = one(_MethodModule(mod, name), name)
            object.__setattr__(top, name, traced)
    return top


class _NoForward:
    def __init__(self, owner: str):
        self.owner = owner

    def __call__(self, *args, **kwargs):
        raise AttributeError(f"'RecursiveScriptModule' object has no attribute 'forward' (forward of "
                             f"{self.owner} was not traced)")
