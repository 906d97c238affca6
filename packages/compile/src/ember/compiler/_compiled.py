"""A compiled function: each call re-runs the user's Python under a ``Recorder`` and runs the
recorded segments through the cache of compiled graphs.

The cache maps a segment's recorded structure (``_recorder`` docstring) to the callable the
backend returned for it. Each segment position (first, second ... segment of a call) may
compile at most ``config.cache_size_limit`` graphs; past that the function runs eagerly from
then on, with one warning logged on "ember._dynamo" (not a Python warning), as PyTorch logs it
when a frame hits its cache limit.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
import time

from ember._src import dispatch as _dispatch

from .. import _logging
from .._logging import _log
from . import _replay, config
from ._break_reasons import explain_text, fullgraph_text
from ._counters import counters
from ._dynamic import (
    ScalarSource,
    has_marked_dims,
    scalar_arguments,
    scalars_changed,
    shapes_changed,
    symbolic_scalars,
    symbolize,
)
from ._exc import BackendCompilerFailed, RecompileError, TorchDynamoException
from ._recorder import Recorder, Unsupported, current
from ._unbacked import plain_scalars

log = logging.getLogger("ember._dynamo")
_ALL: list = []  # weak references to every CompiledFunction (reset() clears their caches)
_ALL_LOCK = threading.Lock()
_DISABLED = threading.local()
_STANCE = ["default"]
_STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile")
# Recorded calls in a row that may fail to become replay entries before a function stops
# being observed (a function with a graph break would pay the profiler on every call).
_OBSERVE_TRIES = 3


class set_stance:  # noqa: N801 - PyTorch's name; a function that also works as a context manager
    """``torch.compiler.set_stance``: "default", "force_eager" (compiled functions run eagerly),
    "eager_on_recompile" (run eagerly instead of compiling again) or "fail_on_recompile"."""

    def __init__(self, stance: str = "default", *, skip_guard_eval_unsafe: bool = False, force_backend=None):
        if stance not in _STANCES:
            raise RuntimeError(f"Unknown stance {stance!r}; expected one of {', '.join(_STANCES)}")
        self.prev = _STANCE[0]
        _STANCE[0] = stance

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _STANCE[0] = self.prev
        return False

    def __call__(self, fn):
        stance = _STANCE[0]
        _STANCE[0] = self.prev

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_stance(stance):
                return fn(*args, **kwargs)

        return wrapper


class GraphCompileReason:
    """One graph break: why, and where in the user's program (PyTorch's ``GraphCompileReason``)."""

    __slots__ = ("reason", "user_stack", "graph_break")

    def __init__(self, reason: str, frame):
        self.reason = reason
        self.user_stack = [frame] if frame is not None else []
        self.graph_break = True

    def __repr__(self) -> str:
        # PyTorch's repr, its frames as traceback.FrameSummary shows them
        stack = ", ".join(f"<FrameSummary file {f.filename}, line {f.lineno} in {f.name}>" for f in self.user_stack)
        return f"GraphCompileReason(reason={self.reason!r}, user_stack=[{stack}], graph_break={self.graph_break})"


BreakReason = GraphCompileReason


def _refuse_print(owner, rec, inner):
    """A profile function for a fullgraph=True recording: the program's ``print`` call is the graph
    break Dynamo reports (it cannot trace print), raised before anything is printed; ``inner`` (the
    replay observer's) sees every event too."""
    import builtins

    from ._user_frames import _EMBER_DIRS, user_frame

    def profile(frame, event, arg):
        if event == "c_call" and arg is builtins.print and not frame.f_code.co_filename.startswith(_EMBER_DIRS):
            owner.note_break("print", user_frame(), rec)
        if inner is not None:
            inner(frame, event, arg)

    return profile


def _break_at_print(owner, rec):
    """A profile function for a recording under ``explain()``: the program's ``print`` call after
    some ops is a graph break, as Dynamo reports it (the ops before it are one graph, those after
    another; a print before any op breaks nothing)."""
    import builtins

    from ._user_frames import _EMBER_DIRS

    def profile(frame, event, arg):
        # At print's return: a tensor it printed has already broken the graph with its own reason.
        if event == "c_return" and arg is builtins.print and not frame.f_code.co_filename.startswith(_EMBER_DIRS):
            if rec.nodes:
                rec.flush("print")

    return profile


def _fail_on_recompile_text(fn) -> str:
    """PyTorch's error for a recompile under the ``fail_on_recompile`` stance, naming the function."""
    target = getattr(fn, "forward", fn) if not hasattr(fn, "__code__") else fn
    target = getattr(target, "__func__", target)
    code = getattr(target, "__code__", None)
    if code is None:
        return "Detected recompile when torch.compile stance is 'fail_on_recompile'."
    return (f"Detected recompile when torch.compile stance is 'fail_on_recompile'. filename: '{code.co_filename}', "
            f"function name: '{code.co_name}', line number: {code.co_firstlineno}")


class CompiledFunction:
    """The state behind one ``ember.compile(fn)``: options, cache and counters."""

    def __init__(self, fn, backend, fullgraph: bool, dynamic, options=None, name=None):
        from .backends.registry import lookup_backend

        self.fn = fn
        self.backend = lookup_backend(backend)
        self.backend_name = backend if isinstance(backend, str) else getattr(backend, "__name__", "custom")
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        self.options = options
        self.cache: dict = {}
        self.per_position: dict = {}
        self.seen_shapes: dict = {}  # segment position -> input shapes of its last static compile
        self.auto_dynamic: dict = {}  # segment position -> the (input, dim) sizes made symbolic
        self.seen_scalars: dict = {}  # segment position -> {slot: number} of its last compile
        self.auto_scalars: dict = {}  # segment position -> number-argument slots made symbolic
        self.fallback = False
        self.entries: list = []  # replay entries (``_replay``), newest first
        self.misses = 0  # recorded calls in a row that could not become replay entries
        self.want_stacks = False
        self.listener = None  # explain(): sees every graph and break
        self.name = name or getattr(fn, "__qualname__", repr(fn))
        import weakref

        with _ALL_LOCK:
            if len(_ALL) >= 1024:  # compile() called in a loop: drop the references to dead ones
                _ALL[:] = [r for r in _ALL if r() is not None]
            _ALL.append(weakref.ref(self))

    def reset(self) -> None:
        self.cache.clear()
        self.per_position.clear()
        self.seen_shapes.clear()
        self.auto_dynamic.clear()
        self.seen_scalars.clear()
        self.auto_scalars.clear()
        self.entries.clear()
        self.misses = 0
        self.fallback = False

    # -- one call -----------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if self.fallback or _STANCE[0] == "force_eager" or getattr(_DISABLED, "depth", 0) or current() is not None:
            # Eager (cache limit, ember.compiler.disable), or inside another capture: the
            # outer recorder sees these ops, as Dynamo inlines a compiled callee.
            return self.fn(*args, **kwargs)
        for entry in self.entries:
            try:
                hit = entry.guard(args, kwargs)
            except Exception:  # noqa: BLE001 - a guard that cannot evaluate (an emptied cell) fails
                hit = False
            if hit:
                return entry.call(args, kwargs)
        return self._record(args, kwargs)

    def _record(self, args, kwargs):
        rec = Recorder(self)
        rec.scalar_args = scalar_arguments(args, kwargs)
        rec.size_values.update(v for _, v in rec.scalar_args if type(v) is int)
        rec.call_args = (args, kwargs)  # the graphs' placeholders are named after them (cleared below)
        observer = None
        if self.want_stacks or _logging._ON:
            rec.want_stacks = self.want_stacks or _logs_want_stacks()
        elif self.misses < _OBSERVE_TRIES and self.listener is None and sys.getprofile() is None:
            observer = _replay.Observer(self.fn, args, kwargs)
        profile = observer.profile if observer is not None else None
        if self.fullgraph and sys.getprofile() is None:
            profile = _refuse_print(self, rec, profile)
        elif self.listener is not None and profile is None and sys.getprofile() is None:
            profile = _break_at_print(self, rec)
        with rec:
            try:
                if observer is not None:
                    rec.observer = observer
                if profile is not None:
                    sys.setprofile(profile)
                try:
                    result = self.fn(*args, **kwargs)
                finally:
                    if profile is not None:
                        sys.setprofile(None)
                        rec.observer = None
            except Unsupported:
                rec.discard()
                raise
            except BaseException as exc:
                rec.flush(final=True)  # eager ran every op before the exception: so do we
                if type(exc) is RuntimeError and _raised_by_an_op(exc):
                    raise _as_fake_tensor_error(exc) from exc
                if type(exc) is RecursionError:
                    # Dynamo's tracer recurses with the program and meets the limit itself
                    from ._exc import InternalTorchDynamoError

                    text = f"RecursionError: maximum recursion depth exceeded\n({exc})"
                    raise InternalTorchDynamoError(text) from exc
                if self.fullgraph and isinstance(exc, Exception) and _raised_by_the_user(exc):
                    # Dynamo traces the ``raise`` and, with no handler inside the graph, refuses it
                    raise Unsupported("Observed exception\n  Explanation: Dynamo found no exception handler at the "
                                      "top-level compiled function when encountering an exception. Exception will "
                                      "propagate outside the compiled region.") from exc
                raise
            rec.flush(final=True)
        rec.call_args = None
        if self.fullgraph:
            result = plain_scalars(result)
        if observer is not None:
            self._add_entry(observer, rec, result)
        return result

    def _add_entry(self, observer, rec, result) -> None:
        """Keeps a replay entry for this call when it is replayable (``_replay``)."""
        if self.fallback:
            return
        entry = observer.entry(rec, result)
        if entry is None:
            self.misses += 1
            _log("recompiles", lambda: f"ember.compile: {self.name} re-runs its Python on every call: "
                 f"{observer.why}")
            return
        self.misses = 0
        limit = config.cache_size_limit if config.recompile_limit == 8 else config.recompile_limit
        self.entries.insert(0, entry)
        del self.entries[max(limit, 1):]

    # -- called by the recorder ---------------------------------------------------------------
    def note_break(self, reason: str, frame, rec) -> None:
        if self.fullgraph:
            where = f"\n\nfrom user code:\n   {frame}" if frame is not None else ""
            raise Unsupported(f"{fullgraph_text(reason)}{where}")
        brk = BreakReason(explain_text(reason), frame)
        counted = self.__dict__.setdefault("_counted_breaks", set())
        if (reason, str(frame)) not in counted:  # once per place, as Dynamo counts per compile
            counted.add((reason, str(frame)))
            counters["graph_break"][brk.reason] += 1
        if self.listener is not None:
            self.listener.on_break(brk)
        _log("graph_breaks", lambda: f"Graph break in user code at {frame!r}\nReason: {reason}")

    def lookup(self, rec, live):
        """The runner (``run(inputs) -> outputs``) for ``rec``'s pending segment."""
        position = rec.segment_index
        dyn = None
        marked = has_marked_dims(rec.inputs)
        all_dims = True if self.dynamic is True else self.auto_dynamic.get(position, False)
        if marked and self.dynamic is not True:
            # A dim marked dynamic stays symbolic at this position for later calls too (their
            # tensors are not marked): they reuse the dynamic graph, as in PyTorch.
            dims = {(k, d) for k, t in enumerate(rec.inputs) if t.__dict__
                    for d in t.__dict__.get("_dynamo_dynamic_indices", ())}
            all_dims = dims | (all_dims if isinstance(all_dims, set) else set())
            self.auto_dynamic[position] = all_dims
        scalar_args = getattr(rec, "scalar_args", ())
        scalars = ()
        if scalar_args and self.dynamic is not False:
            slots = True if self.dynamic is True else self.auto_scalars.get(position, ())
            scalars = symbolic_scalars(scalar_args, slots) if slots else ()
        if self.dynamic is not False or marked:
            if all_dims or marked or scalars:
                dyn = symbolize(rec, all_dims, scalars)
        if rec.eager_autograd:
            # ``autograd.grad(..., create_graph=True)`` follows: op by op under eager autograd,
            # which differentiates twice (the AOT backward does not).
            rec.eager_autograd = False
            return _bind(_runner(_interpret(rec, live, dyn), dyn), dyn, rec)
        key = _key(rec, live, dyn)
        run = self.cache.get(key)
        if run is not None:
            if self.listener is not None:
                self.listener.on_hit(key)
            return _bind(run, dyn, rec)
        if self.dynamic is None and config.automatic_dynamic_shapes:
            changed = set()
            if dyn is None:
                seen = self.seen_shapes.get(position)
                changed = shapes_changed(seen, rec.inputs) if seen is not None else set()
            seen_numbers = self.seen_scalars.get(position)
            auto_scalars = self.auto_scalars.get(position, set())
            changed_numbers = set()
            if seen_numbers is not None and scalar_args:
                changed_numbers = scalars_changed(seen_numbers, scalar_args) - auto_scalars
            if changed or changed_numbers:
                # PyTorch's automatic dynamic: the sizes and number arguments that changed are
                # symbolic from now on.
                what = "an input size" if changed else "a number argument"
                _log("recompiles", lambda: f"Recompiling function {self.name} (segment {position}) with "
                     f"dynamic shapes: {what} changed")
                if changed:
                    self.auto_dynamic[position] = changed
                auto_scalars = auto_scalars | changed_numbers
                self.auto_scalars[position] = auto_scalars
                scalars = symbolic_scalars(scalar_args, auto_scalars)
                new_dyn = symbolize(rec, self.auto_dynamic.get(position, False), scalars)
                if new_dyn is not None:
                    dyn = new_dyn
                    key = _key(rec, live, dyn)
                    run = self.cache.get(key)
                    if run is not None:
                        return _bind(run, dyn, rec)
            if dyn is None:
                self.seen_shapes[position] = [t._shape for t in rec.inputs]
            self.seen_scalars[position] = dict(scalar_args)
        if dyn is not None:
            run = self._coincident_entry(key, dyn, rec)
            if run is not None:
                self.cache[key] = run  # this recording's key too: the next such call is a plain hit
                return _bind(run, dyn, rec)
        count = self.per_position.get(position, 0)
        limit = config.cache_size_limit if config.recompile_limit == 8 else config.recompile_limit
        if count >= limit or sum(self.per_position.values()) >= config.accumulated_cache_size_limit:
            if not self.fallback:
                # logged, not warned, as TorchDynamo logs it (convert_frame): a program running with
                # warnings as errors keeps running, eagerly
                code = getattr(self.fn, "__code__", None)
                where = f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""
                log.warning("ember._dynamo hit config.recompile_limit (%d)\n   function: '%s'%s\n   it reached the "
                            "cache size limit (ember.compiler.config.cache_size_limit = %d) and runs eagerly from "
                            "now on", limit, self.name, where, limit)
                self.fallback = True
            return _bind(_runner(_interpret(rec, live, dyn), dyn), dyn, rec)
        if count:
            if config.error_on_recompile:
                code = getattr(self.fn, "__code__", None)
                where = f"{code.co_name} in {code.co_filename}:{code.co_firstlineno}" if code is not None \
                    else self.name
                raise RecompileError(f"Recompiling function {where}\n  the recorded ops, input metadata or grad mode "
                                     "differ from the cached entries (torch._dynamo.config.error_on_recompile)")
            if _STANCE[0] == "fail_on_recompile":
                raise RuntimeError(_fail_on_recompile_text(self.fn))
            if _STANCE[0] == "eager_on_recompile":
                return _bind(_runner(_interpret(rec, live, dyn), dyn), dyn, rec)
            _log("recompiles", lambda: f"Recompiling function {self.name} (segment {position}): "
                 "the recorded ops, input metadata or grad mode differ from the cached entries")
        self.per_position[position] = count + 1
        try:
            compiled = self._compile(rec, live, dyn)
        except BackendCompilerFailed as exc:
            if not config.suppress_errors:
                raise
            # torch._dynamo.config.suppress_errors: Dynamo logs the failure and runs the frame eagerly from
            # now on (its code is skipped); so does this function
            log.warning("ember._dynamo: backend compiler failed with suppress_errors=True, running %s eagerly: "
                        "%s", self.name, exc)
            self.fallback = True
            return _bind(_runner(_interpret(rec, live, dyn), dyn), dyn, rec)
        run = _runner(compiled, dyn)
        if dyn is not None:
            run.sources = dyn[1]  # where its symbols are read (``_coincident_entry``)
        self.cache[key] = run
        return _bind(run, dyn, rec)

    def _coincident_entry(self, key, dyn, rec):
        """A cached dynamic graph whose recording differs from this one only by ints that equal
        a size this call (``same_up_to_coincidence``), or None."""
        from ._dynamic import same_up_to_coincidence

        values = None
        numbers = dict(getattr(rec, "scalar_args", ()))
        for other, run in self.cache.items():
            if len(other) != 4 or other[2] != "dynamic" or other[1:] != key[1:] or len(other[0]) != len(key[0]):
                continue
            if values is None:
                values = _symbol_values(dyn[1], rec.inputs, numbers)
            # The cached graph computes its own symbols from this call's inputs (its sources): two sizes it
            # keeps apart may be equal this call (duck sizing merged them in this recording's key).
            sources = getattr(run, "sources", None)
            try:
                cached_values = values if sources is None else _symbol_values(sources, rec.inputs, numbers)
            except (IndexError, KeyError):
                continue
            if same_up_to_coincidence(other[0], key[0], values, cached_values):
                return run
        return None

    def _compile(self, rec, live, dyn=None):
        from ember import fx

        from ._graph_build import build_graph_module

        start = time.perf_counter()
        gm = build_graph_module(rec, live, fx, symbols=dyn and _symbols(dyn, rec))
        _name_placeholders(gm, rec, self.fn)
        example_inputs = list(rec.inputs)
        order = None
        if dyn is not None:
            example_inputs += _symbol_values(dyn[1], rec.inputs, dict(rec.scalar_args))
            order = _dynamo_input_order(gm, len(rec.inputs), dyn[1])
            if order is not None:
                example_inputs = [example_inputs[k] for k in order]
        _log("graph_code", lambda: f"TRACED GRAPH\n {self.name} {gm.print_readable(print_output=False)}")
        _log("guards", lambda: _guards_text(rec))
        if self.listener is not None:
            self.listener.on_graph(gm, rec)
        counters["stats"]["unique_graphs"] += 1
        counters["stats"]["calls_captured"] += sum(1 for n in gm.graph.nodes if n.op == "call_function")
        try:
            compiled = self._run_backend(gm, example_inputs)
            if not callable(compiled):
                # PyTorch asserts it inside the same wrapper: BackendCompilerFailed of an AssertionError
                raise AssertionError("compiler_fn did not return callable")
        except (Unsupported, BackendCompilerFailed):
            raise
        except Exception as exc:
            raise BackendCompilerFailed(self.backend, exc) from exc  # PyTorch's wrapper of backend errors
        if order is not None:
            compiled = _permuted(compiled, order)
        _log("output_code", lambda: f"Output code ({self.backend_name}):\n{getattr(compiled, 'code', gm.code)}")
        log.debug("compiled %s in %.3f s", self.name, time.perf_counter() - start)
        return compiled

    def _run_backend(self, gm, example_inputs):
        # Options (from ``mode=`` or ``options=``) are the inductor's settings while it compiles.
        if self.options and self.backend_name == "inductor":
            from .inductor import config

            with config.patch(self.options):
                return self.backend(gm, example_inputs)
        return self.backend(gm, example_inputs)


def _module_sources(module, prefix: str, names: dict) -> None:
    """Dynamo's names of a module's parameters and buffers: ``fc.weight`` of ``self`` is
    ``self_modules_fc_parameters_weight``."""
    for path, sub in module.named_modules(remove_duplicate=False):
        base = prefix + "".join(f"_modules_{p}" for p in path.split(".") if path)
        for name, t in list(sub._parameters.items()) + list(sub._buffers.items()):
            if t is not None:
                kind = "parameters" if name in sub._parameters else "buffers"
                names.setdefault(id(t), f"{base}_{kind}_{name}_")


def _value_sources(value, source: str, names: dict, tensor_type, depth: int = 0) -> None:
    """Dynamo's names of the tensors inside an argument, from their source (``L['t'].a`` is
    ``L_t_a``, ``L['d']['k'][1]`` is ``L_d_k_1_``): items of lists, tuples and dicts, fields of
    namedtuples and dataclasses."""
    import dataclasses
    import re

    if isinstance(value, tensor_type):
        names.setdefault(id(value), re.sub(r"[^A-Za-z0-9]+", "_", source))
        return
    if depth > 8:
        return
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):
        for field in value._fields:
            _value_sources(getattr(value, field), f"{source}.{field}", names, tensor_type, depth + 1)
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            _value_sources(item, f"{source}[{i}]", names, tensor_type, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, (str, int)) and not isinstance(key, bool):
                _value_sources(item, f"{source}[{key!r}]", names, tensor_type, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            _value_sources(getattr(value, field.name, None), f"{source}.{field.name}", names, tensor_type, depth + 1)


def _source_names(fn, args, kwargs) -> dict:
    """id(tensor) -> Dynamo's source name (``L_x_``, ``L_self_modules_fc_parameters_weight_``,
    ``G_w_``) of the call's tensor arguments, the bound module's state and the function's
    global tensors and modules."""
    import inspect

    from ember import nn
    from ember._src.tensor import Tensor

    names: dict = {}
    owner = fn if isinstance(fn, nn.Module) else getattr(fn, "__self__", None)
    target = fn.forward if isinstance(fn, nn.Module) else fn
    try:
        bound = inspect.signature(target).bind(*args, **kwargs)
    except (TypeError, ValueError):
        bound = None
    if bound is not None:
        for name, value in bound.arguments.items():
            if isinstance(value, nn.Module):
                _module_sources(value, f"L_{name}", names)
            else:
                _value_sources(value, f"L[{name!r}]", names, Tensor)
    if isinstance(owner, nn.Module):
        _module_sources(owner, "L_self", names)
    code_globals = getattr(getattr(target, "__func__", target), "__globals__", {})
    code = getattr(getattr(target, "__func__", target), "__code__", None)
    for name in (code.co_names if code is not None else ()):
        value = code_globals.get(name)
        if isinstance(value, Tensor):
            names.setdefault(id(value), f"G_{name}_")
        elif isinstance(value, nn.Module):
            _module_sources(value, f"G_{name}", names)
    return names


def _name_placeholders(gm, rec, fn) -> None:
    """Names the placeholders of a compiled function's graph after where their tensors came
    from, as Dynamo's graphs do (target ``L_x_``, node ``l_x_``); others keep ``arg<i>``."""
    call = getattr(rec, "call_args", None)
    if call is None:
        return
    names = _source_names(fn, *call)
    if not names:
        return
    nodes = [n for n in gm.graph.nodes if n.op == "placeholder"]
    renamed = False
    for node, t in zip(nodes, rec.inputs):
        source = names.get(id(t))
        if source is None:
            continue
        node._rename(source.lower())
        node.target = source
        renamed = True
    if renamed:
        gm.recompile()


def _dynamo_input_order(gm, n_tensors: int, sources):
    """Puts a dynamic graph's size placeholders where Dynamo lifts them: each just before the
    first tensor input carrying that size (``s0, l_x_, s1, l_y_``), number arguments' symbols
    last. Returns the new order as indices into the old one (None when it is unchanged)."""
    order = []
    for i in range(n_tensors):
        order += [n_tensors + j for j, src in enumerate(sources)
                  if type(src) is not ScalarSource and src[0] == i]
        order.append(i)
    order += [n_tensors + j for j, src in enumerate(sources) if type(src) is ScalarSource]
    if order == list(range(len(order))):
        return None
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(order):
        return None
    anchor = next(n for n in gm.graph.nodes if n.op != "placeholder")
    for k in order:
        anchor.prepend(placeholders[k])
    gm.recompile()
    return order


def _permuted(compiled, order):
    """``compiled`` (taking its inputs in the graph's ``order``) called with them in the recorded
    order (tensors, then sizes, then numbers)."""
    def call(*args):
        return compiled(*[args[k] for k in order])

    code = getattr(compiled, "code", None)
    if code is not None:
        call.code = code
    return call


def _interpret(rec, live, dyn=None):
    """Runs a segment op by op with no backend (past the cache limit)."""
    from ember import fx

    from ._graph_build import build_graph_module

    return build_graph_module(rec, live, fx, symbols=dyn and _symbols(dyn, rec)).forward


def _symbols(dyn, rec) -> tuple:
    """What ``build_graph_module`` needs of a symbolization: (sources, int symbols, derived
    sizes, float symbols, int values that are number arguments, the call's numbers)."""
    return (*dyn[1:], dict(getattr(rec, "scalar_args", ())))


_OP_CODE = os.path.join("ember", "_src", "")  # tensor-core's op implementations


def _raised_by_an_op(exc: BaseException) -> bool:
    """Whether ``exc`` came from an op's own checks (a reshape to a size that does not fit), not from
    the user's code or the compile machinery."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return _OP_CODE in tb.tb_frame.f_code.co_filename


def _raised_by_the_user(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by the program's own code (a ``raise`` statement in a user file)."""
    from ._user_frames import is_user_file

    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return is_user_file(tb.tb_frame.f_code.co_filename) and not isinstance(exc, TorchDynamoException)


def _as_fake_tensor_error(exc: RuntimeError):
    """PyTorch's Dynamo meets a failing op in its fake-tensor run: a TorchRuntimeError (a RuntimeError)
    whose first line is Dynamo's, with the op's message inside."""
    from ._exc import TorchRuntimeError

    return TorchRuntimeError("RuntimeError when making fake tensor call\n  Explanation: Dynamo failed to run FX "
                             f"node with fake tensors: got RuntimeError({str(exc)!r})")


def _symbol_values(sources, inputs, numbers) -> list:
    return [numbers[s.slot] if type(s) is ScalarSource else inputs[s[0]]._shape[s[1]] for s in sources]


def _key(rec, live, dyn) -> tuple:
    if dyn is None:
        return (tuple(rec.key), tuple(live))
    # Which arguments the number symbols read is part of what the graph means.
    numbers = tuple(s for s in dyn[1] if type(s) is ScalarSource)
    return (dyn[0], tuple(live), "dynamic", numbers)


def _bind(run, dyn, rec):
    """The runner for this call: number symbols take this call's argument values."""
    if dyn is None or not any(type(s) is ScalarSource for s in dyn[1]):
        return run
    numbers = dict(rec.scalar_args)
    values = [numbers[s.slot] for s in dyn[1] if type(s) is ScalarSource]
    return lambda inputs: run(inputs, values)


def _runner(compiled, dyn):
    """``run(inputs[, numbers])``: calls the compiled graph (adding the symbols' values when
    dynamic: sizes read from the inputs, then the number arguments' ``numbers``); backends
    return a callable giving a tuple/list, or one tensor."""
    if dyn is None:
        def run(inputs):
            out = _without_autocast(compiled, inputs)
            return out if isinstance(out, (tuple, list)) else _one_output(out)
    else:
        sources = [s for s in dyn[1] if type(s) is not ScalarSource]

        def run(inputs, numbers=()):
            out = _without_autocast(compiled, (*inputs, *[inputs[k]._shape[d] for k, d in sources], *numbers))
            return out if isinstance(out, (tuple, list)) else _one_output(out)

    return run


def _one_output(out) -> tuple:
    """A backend's callable returned one value: a tensor is the graph's one output; anything else is what
    PyTorch's caller meets indexing it (``'int' object is not subscriptable``)."""
    from ember._src.tensor import Tensor

    if out is not None and not isinstance(out, Tensor) and not hasattr(out, "__getitem__"):
        raise TypeError(f"{type(out).__name__!r} object is not subscriptable")
    return (out,)


def _without_autocast(compiled, args):
    """Calls the compiled graph with autocast off: the recording already holds autocast's casts,
    so the graph's library calls (addmm, bmm ...) must not apply the cast policies again — that
    re-cast every extern argument on each replayed call, a host cost on every step."""
    state = _dispatch._AUTOCAST_STATE if _dispatch._AUTOCAST_ON[0] else None
    if state is None or not state.active:
        return compiled(*args)
    state.active = False
    try:
        return compiled(*args)
    finally:
        state.active = True


def _guards_text(rec) -> str:
    lines = ["GUARDS:"]
    for k, t in enumerate(rec.inputs):
        lines.append(
            f"  arg{k}: TENSOR_MATCH dtype={t.dtype} device={t._device} size={list(t._shape)} "
            f"stride={list(t._stride)} requires_grad={t._requires_grad}"
        )
    lines.append(f"  GRAD_MODE: {rec.start_grad_mode}")
    lines.append("  (every op, argument structure and constant recorded this call; Python re-runs each call)")
    return "\n".join(lines)


def _logs_want_stacks() -> bool:
    on = _logging._ON
    return bool(on) and ("graph_code" in on or "graph_breaks" in on)


def reset() -> None:
    """Forgets every compiled graph of every compiled function (``torch._dynamo.reset``)."""
    with _ALL_LOCK:
        refs = list(_ALL)
        _ALL[:] = [r for r in refs if r() is not None]
    for r in refs:
        cf = r()
        if cf is not None:
            cf.reset()


def wrap_function(fn, state: CompiledFunction):
    @functools.wraps(fn)
    def compiled(*args, **kwargs):
        return state(*args, **kwargs)

    compiled._ember_compiled = state
    compiled._torchdynamo_orig_callable = fn
    return compiled


class disable_context:
    """``ember.compiler.disable``'s region: compiled functions called inside run eagerly."""

    def __enter__(self):
        _DISABLED.depth = getattr(_DISABLED, "depth", 0) + 1
        return self

    def __exit__(self, *exc):
        _DISABLED.depth -= 1
        return False
