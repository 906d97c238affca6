"""The replay fast path: a later call whose guards pass runs the cached graph directly,
without running the user's Python again.

The first call (and any call whose guards fail) is recorded as usual, with an ``Observer``
watching through ``sys.setprofile``: every Python frame the call runs is seen, and

- for the program's own frames (files outside ember), each name its code can load from
  globals or builtins is guarded by identity, with the value's contents one level deep;
- the compiled function's closure cells and bound ``self`` are guarded the same way;
- every ``nn.Module`` whose method runs is guarded with its whole submodule tree (the
  version tags of each module's ``__dict__`` and of the dicts in it: parameters, buffers,
  submodules, hooks; ``training`` lives in ``__dict__``);
- arguments are guarded by structure and value (tensors by metadata), and the call's grad
  mode, inference mode, default dtype, autocast and dispatch-mode state by value.

A recording becomes a replay entry only when the replay would be indistinguishable from
running the Python: one graph with no break and no op run eagerly, no tensor data read by
Python, no write to any watched object (its state at the end equals its state when first
seen), no call to a known side-effecting builtin (``print``, ``open``, ``time``, ``random``
...), and a result built only of the graph's outputs, the inputs and constants. Anything
else keeps re-running the Python on every call, as before.

Deliberately not seen (docs/deviations.md): a write or read two or more attribute levels
below a watched object that is not a module (``cfg.sub.x``), and closure cells of functions
other than the compiled one.
"""

from __future__ import annotations

import types

from ember._C import FastFront
from ember._src import autocast as _autocast
from ember._src import dispatch, grad_mode
from ember._src import dtypes as _dtypes
from ember._src.tensor import Tensor

from ._guards import _SCALARS, GuardBuilder, is_module
from ._recorder import overlaps
from ._user_frames import _EMBER_DIRS

_GRAD = grad_mode.STATE
# Frames whose names are not guarded: ember's own (their state is guarded through modules,
# grad mode and the other call state) and the import system's.
_INTERNAL = (*_EMBER_DIRS, "<frozen ")
_IMPURE_BUILTINS = frozenset({"print", "input", "open", "breakpoint", "exec", "eval", "setattr", "delattr",
                              "globals", "locals", "vars"})
_IMPURE_MODULES = ("time", "random", "_random", "os", "posix", "nt", "sys", "io", "_io", "socket", "_socket",
                   "subprocess", "_thread", "threading", "logging", "warnings", "_warnings", "numpy.random",
                   "pickle", "_pickle", "shutil", "builtins.print")


def _impure(fn) -> bool:
    """A builtin whose call has an effect outside the program's tensors (I/O, clocks, Python's
    random state, the interpreter)."""
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, types.ModuleType):
        mod = owner.__name__
        if mod == "builtins":
            return getattr(fn, "__name__", "") in _IMPURE_BUILTINS
    elif owner is not None:
        mod = type(owner).__module__ or ""
    else:
        mod = getattr(fn, "__module__", None) or ""
    return mod.startswith(_IMPURE_MODULES)


class Observer:
    """Builds the guards of one recorded call (see the module docstring)."""

    def __init__(self, fn, args, kwargs):
        self.b = b = GuardBuilder()
        self.sources: dict = {}  # id(argument tensor) -> its access expression
        self.why = None  # why this recording cannot be replayed
        self.codes: set = set()
        self.names: list = []  # (globals, name, value) the guards fixed
        self.cells: list = []  # (cell, value)
        b.value("args", args, sources=self.sources)
        b.exprs.append(f"tuple(kwargs) == {b.const(tuple(kwargs))}")
        for k, v in kwargs.items():
            b.value(f"kwargs[{k!r}]", v, depth=1, sources=self.sources)
        arg_tensors = _arg_tensors(args, kwargs, self.sources)
        if len(arg_tensors) > 1:
            # Which argument tensors are the same object or share storage decides the
            # recording (inputs are lifted by identity, in-place writes are seen through
            # shared storage): the pattern must repeat.
            exprs = [e for e, _ in arg_tensors]
            pattern = _alias_pattern([t for _, t in arg_tensors])
            b.exprs.append(f"_alias_pattern(({', '.join(exprs)},)) == {b.const(pattern)}")
            b.consts["_alias_pattern"] = _alias_pattern
        self.grad = _GRAD.grad_enabled, _GRAD.inference
        g = b.const(_GRAD)
        b.exprs.append(f"{g}.grad_enabled is {self.grad[0]} and {g}.inference is {self.grad[1]}")
        b.exprs.append(f"{b.const(_dtypes)}._default_dtype is {b.const(_dtypes._default_dtype)}")
        b.exprs.append(f"not {b.const(dispatch._MODES)}.stack")
        # The recording's autocast casts are graph ops: a replay needs this thread's autocast
        # state as it was (which devices cast, to which dtype); without autocast, none on.
        ac = b.const(_autocast.STATE)
        if any(_autocast.STATE.enabled.values()):
            b.exprs.append(f"{ac}.enabled == {b.const(dict(_autocast.STATE.enabled))} and "
                           f"{ac}.dtype == {b.const(dict(_autocast.STATE.dtype))}")
        else:
            b.exprs.append(f"not {b.const(dispatch._AUTOCAST_ON)}[0] or not any({ac}.enabled.values())")
        self._callable(fn)

    def _callable(self, fn) -> None:
        if isinstance(fn, types.MethodType):
            self._self(fn.__self__)
            fn = fn.__func__
        if isinstance(fn, types.FunctionType):
            for cell in fn.__closure__ or ():
                try:
                    v = cell.cell_contents
                except ValueError:
                    continue  # an empty cell (a name assigned later)
                self.b.exprs.append(f"{self.b.const(cell)}.cell_contents is {self.b.const(v)}")
                self.cells.append((cell, v))
                self.b.watch(v)
        elif not isinstance(fn, (types.BuiltinFunctionType, FastFront)):
            self._self(fn)  # a module or a callable object

    def _self(self, obj) -> None:
        if id(obj) in self.b.watched or isinstance(obj, (Tensor, *_SCALARS)):
            return
        self.b.watch(obj)  # a module: its whole tree

    def profile(self, frame, event, arg):
        if event == "call":
            code = frame.f_code
            internal = code.co_filename.startswith(_INTERNAL)
            if not internal and code not in self.codes:
                self.codes.add(code)
                g, bi = frame.f_globals, frame.f_builtins
                for name in code.co_names:
                    v = g.get(name, _ABSENT)
                    if v is _ABSENT and name not in bi:
                        continue
                    self.b.global_name(g, bi, name)
                    self.names.append((g, name, v))
            if not internal and code.co_freevars:
                # A closure's free variables (a hook's counter list): watched, so a write
                # to them makes the call unreplayable.
                local = frame.f_locals
                for name in code.co_freevars:
                    v = local.get(name)
                    if v is not None and not isinstance(v, _SCALARS):
                        self._self(v)
            if code.co_argcount and code.co_varnames[0] == "self" and code.co_name != "__init__":
                # (an object under construction is new: nothing earlier can depend on it)
                obj = frame.f_locals.get("self")
                if obj is not None and (not internal or is_module(obj)):
                    self._self(obj)
        elif event == "c_call" and self.why is None:
            if not frame.f_code.co_filename.startswith(_INTERNAL) and _impure(arg):
                self.why = f"it calls {getattr(arg, '__qualname__', arg)!r}"

    # -- after the call -----------------------------------------------------------------------
    def entry(self, rec, result):
        """A replay entry for this call, or None (``self.why`` says why)."""
        if self.why is not None:
            return None
        why = _not_replayable(rec)
        if why is None and (_GRAD.grad_enabled, _GRAD.inference) != self.grad:
            why = "it changes the grad mode"
        if why is None and not (self.b.unchanged() and all(g.get(n, _ABSENT) is v for g, n, v in self.names)
                                and all(_contents(c) is v for c, v in self.cells)):
            why = "it writes Python state it also reads"
        if why is not None:
            self.why = why
            return None
        b = self.b
        exprs = []
        for t in rec.inputs:
            src = self.sources.get(id(t))
            if src is None:
                if id(t) not in b.watched and overlaps(rec.written, t._storage):
                    self.why = "the graph writes a tensor the call created"
                    return None
                src = b.const(t)
                b.watch(t)
            exprs.append(src)
        out_index = {id(t): i for i, t in enumerate(rec.last_lazies)}
        in_expr = {id(t): e for t, e in zip(rec.inputs, exprs)}
        used: set = set()
        try:
            template = _template(result, b, out_index, in_expr, used)
        except _NotReplayable as exc:
            self.why = str(exc)
            return None
        if len(used) != len(out_index):
            self.why = "a graph output outlives the call outside its result"
            return None
        return Entry(b.build(), rec.last_run, exprs, template, self.grad,
                     (rec.start_grad_mode, rec.start_inference_mode), b.consts)


_ABSENT = object()


def _arg_tensors(args, kwargs, sources) -> list:
    """(access expression, tensor) of every tensor argument, in argument order."""
    found = []

    def visit(v, expr, depth):
        if isinstance(v, Tensor):
            found.append((expr, v))
        elif type(v) in (tuple, list) and depth < 4 and len(v) <= 64:
            for i, x in enumerate(v):
                visit(x, f"{expr}[{i}]", depth + 1)
        elif type(v) is dict and depth < 4 and len(v) <= 64 and all(type(k) is str for k in v):
            for k, x in v.items():
                visit(x, f"{expr}[{k!r}]", depth + 1)

    visit(args, "args", 0)
    for k, v in kwargs.items():
        visit(v, f"kwargs[{k!r}]", 1)
    return found


def _alias_pattern(tensors) -> tuple:
    """For each tensor, the first earlier one that is the same object and the first that shares
    its storage (its own position when none)."""
    objs: dict = {}
    storages: dict = {}
    out = []
    for i, t in enumerate(tensors):
        out.append((objs.setdefault(id(t), i), storages.setdefault(id(t._storage), i)))
    return tuple(out)


def _contents(cell):
    try:
        return cell.cell_contents
    except ValueError:
        return _ABSENT


def _not_replayable(rec) -> str | None:
    if rec.segment_index != 1 or rec.broke:
        return "it has a graph break"
    if rec.went_eager:
        return "part of it runs eagerly"
    if rec.synced:
        return "Python reads tensor data"
    return None


class _NotReplayable(Exception):
    pass


def _template(v, b, out_index, in_expr, used) -> str:
    if isinstance(v, Tensor):
        i = out_index.get(id(v))
        if i is not None:
            used.add(i)
            return f"_o[{i}]"
        e = in_expr.get(id(v))
        if e is None:
            raise _NotReplayable("its result holds a tensor that is neither a graph output nor an input")
        return e
    t = type(v)
    if t in _SCALARS:
        return b.const(v)
    if t is tuple or t is list:
        items = ", ".join(_template(x, b, out_index, in_expr, used) for x in v)
        return f"({items},)" if t is tuple else f"[{items}]"
    if t is dict:
        items = ", ".join(f"{b.const(k)}: {_template(x, b, out_index, in_expr, used)}" for k, x in v.items())
        return "{" + items + "}"
    if isinstance(v, tuple) and hasattr(t, "_fields"):
        items = ", ".join(_template(x, b, out_index, in_expr, used) for x in v)
        return f"{b.const(t)}({items})"
    raise _NotReplayable(f"its result holds a {t.__name__}")


class Entry:
    """One replayable recording: ``guard(args, kwargs)`` and ``call(args, kwargs)``."""

    __slots__ = ("guard", "call", "source")

    def __init__(self, guard, run, inputs, template, entry_grad, start_grad, consts):
        lines = ["def call(args, kwargs):", f"    _inputs = [{', '.join(inputs)}]"]
        if start_grad != entry_grad:
            # The first op ran under another grad mode (a ``no_grad`` block at the top): the
            # graph runs in it, as the recorded flush did.
            lines += [f"    _G.grad_enabled, _G.inference = {start_grad[0]}, {start_grad[1]}",
                      "    try:", "        _o = _run(_inputs)", "    finally:",
                      f"        _G.grad_enabled, _G.inference = {entry_grad[0]}, {entry_grad[1]}"]
        else:
            lines.append("    _o = _run(_inputs)")
        lines.append(f"    return {template}")
        src = "\n".join(lines) + "\n"
        ns = dict(consts)
        ns["_run"], ns["_G"] = run, _GRAD
        exec(compile(src, "<ember.compile replay>", "exec"), ns)  # noqa: S102 - generated call code
        self.guard = guard
        self.call = ns["call"]
        self.source = guard.source + src
