"""``ScriptModule`` / ``ScriptFunction``: what ``ember.jit.script`` and ``trace`` return.

A scripted module runs its Python ``forward`` under TorchScript's call contract: arguments
are checked against the annotations (``Tensor``, ``int``, ``float``, ``bool``, ``str``,
``List[...]``, ``Optional[...]``), ``Final``/``__constants__`` attributes are read-only,
``@ember.jit.unused`` methods raise, and ``is_scripting()`` is true inside. So it computes
exactly what eager computes, data-dependent control flow included. Its ``graph``/``code``
and ``save`` come from ``ember.export`` on the inputs it was scripted or last called with:
a program with data-dependent control flow runs but cannot be saved (the error names the
line). A traced module runs the exported graph itself.
"""

from __future__ import annotations

import inspect
import types
import typing

import ember
from ember import nn

from ._state import FLAGS, FunctionModifiers, get_modifier

_SIMPLE = {int: (int,), float: (float, int), bool: (bool,), str: (str,)}


def _type_name(t) -> str:
    if t is ember.Tensor:
        return "Tensor"
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:  # Optional[float]
        return f"Optional[{_type_name(next(a for a in args if a is not type(None)))}]"
    if origin is not None and args:
        name = {list: "List", tuple: "Tuple", dict: "Dict"}.get(origin, getattr(origin, "_name", None) or str(origin))
        return f"{name}[{', '.join(_type_name(a) for a in args)}]"
    return getattr(t, "__name__", None) or str(t).replace("typing.", "")


def _resolve(annotation, fn):
    """A string annotation (``"Optional[float]"``, or any under ``from __future__ import
    annotations``) evaluated as TorchScript does: in the function's globals, where TorchScript's
    own names (``Tensor``, ``List``, ``Optional``, ``Dict``, ``Tuple``...) resolve even if not
    imported there. An unresolvable one accepts anything."""
    if not isinstance(annotation, str):
        return annotation
    names = {n: getattr(typing, n) for n in ("Any", "Dict", "Final", "List", "Optional", "Tuple", "Union")}
    names.update(Tensor=ember.Tensor, torch=ember, ember=ember)
    names.update(getattr(inspect.unwrap(fn), "__globals__", {}))
    for _ in range(2):  # a quoted annotation under ``from __future__ import annotations`` is quoted twice
        try:
            annotation = eval(annotation, names)  # noqa: S307 - an annotation the program's own source wrote
        except Exception:
            return inspect.Parameter.empty
        if not isinstance(annotation, str):
            return annotation
    return inspect.Parameter.empty


def check_value(value, annotation) -> bool:
    """Whether ``value`` fits a TorchScript annotation (unknown annotations accept anything)."""
    if annotation is inspect.Parameter.empty or annotation is typing.Any:
        return True
    if annotation is ember.Tensor or annotation is getattr(ember, "Tensor", None):
        return isinstance(value, ember.Tensor)
    if annotation in _SIMPLE:
        ok = isinstance(value, _SIMPLE[annotation])
        return ok and not (annotation is not bool and isinstance(value, bool))
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):  # Optional[float], float | None
        return any(check_value(value, a) for a in args)
    if origin in (list, typing.List):  # noqa: UP006 - both spellings appear in annotations
        return isinstance(value, list) and all(check_value(v, args[0]) for v in value) if args else True
    if origin in (tuple, typing.Tuple):  # noqa: UP006
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(check_value(v, args[0]) for v in value)
        return len(args) == len(value) and all(check_value(v, a) for v, a in zip(value, args))
    if origin in (dict, typing.Dict):  # noqa: UP006
        return isinstance(value, dict)
    if annotation is type(None):
        return value is None
    return True


def check_call(fn, args, kwargs, owner: str) -> None:
    """Raises TorchScript's RuntimeError for an argument that does not fit its annotation."""
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable string annotations: fall back to what inspect holds
        hints = {}
    bound = sig.bind(*args, **kwargs)
    params = list(sig.parameters)
    for name, value in bound.arguments.items():
        ann = _resolve(hints.get(name, sig.parameters[name].annotation), fn)
        if sig.parameters[name].kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if ann is inspect.Parameter.empty and not isinstance(value, ember.Tensor):
            ann = ember.Tensor  # TorchScript's default type for unannotated arguments
        if not check_value(value, ann):
            raise RuntimeError(
                f"{owner}() Expected a value of type '{_type_name(ann)}' for argument '{name}' but instead found "
                f"type '{type(value).__name__}'.\nPosition: {params.index(name) + 1}\nValue: {value!r}")


class ScriptModule(nn.Module):
    """A module compiled by ``ember.jit`` (PyTorch's ``torch.jit.ScriptModule``)."""

    def __init__(self, original: nn.Module, example_inputs=None, traced_program=None):
        super().__init__()
        object.__setattr__(self, "_original", original)
        object.__setattr__(self, "_example_inputs", example_inputs)
        object.__setattr__(self, "_program", traced_program)
        self.__dict__["training"] = original.training
        # Parameters, buffers and submodules are the original module's own dicts: one state.
        for slot in ("_parameters", "_buffers", "_modules", "_non_persistent_buffers_set"):
            self.__dict__[slot] = original.__dict__[slot]
        constants = set(getattr(type(original), "__constants__", ()))
        hints = getattr(type(original), "__annotations__", {})
        constants |= {k for k, v in hints.items() if typing.get_origin(v) is typing.Final or v is typing.Final}
        object.__setattr__(self, "_constants", constants)
        for name in dir(type(original)):
            fn = getattr(type(original), name, None)
            if callable(fn) and get_modifier(fn) in (FunctionModifiers.EXPORT, FunctionModifiers.IGNORE,
                                                     FunctionModifiers.UNUSED):
                object.__setattr__(self, name, getattr(original, name))

    # Attribute reads go to the original module; Final attributes cannot be assigned.
    def __getattr__(self, name):
        if name in ("_original", "_example_inputs", "_program", "_constants"):
            raise AttributeError(name)
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._original, name)

    def __setattr__(self, name, value):
        if name in getattr(self, "_constants", ()):
            raise RuntimeError(f"Cannot set attribute '{name}': it is a constant (Final or __constants__) of a "
                               "ScriptModule")
        if "_original" in self.__dict__ and hasattr(self._original, name) and name not in ("training",):
            setattr(self._original, name, value)
            return
        super().__setattr__(name, value)

    def forward(self, *args, **kwargs):
        if self._program is not None:  # traced: run the recorded graph
            args, kwargs = bind_positional(self._original, args, kwargs)
            return self._program(*args, **kwargs)
        check_call(type(self._original).forward.__get__(self._original), args, kwargs, "forward")
        object.__setattr__(self, "_example_inputs", (args, kwargs))
        from ._trace_eager import RECORDING

        if RECORDING:  # inside a trace that records ops: this module keeps its Python (one node)
            return RECORDING[-1].call_opaque(self._run_scripted, args, kwargs)
        return self._run_scripted(*args, **kwargs)

    def _run_scripted(self, *args, **kwargs):
        FLAGS.scripting += 1
        try:
            return self._original(*args, **kwargs)
        finally:
            FLAGS.scripting -= 1

    def train(self, mode: bool = True):
        super().train(mode)
        self._original.train(mode)
        return self

    # ------------------------------------------------------------------ export-backed views
    def exported_program(self):
        """The ``ember.export`` program of this module at its example inputs (a batch dim may vary)."""
        if self._example_inputs is None:
            raise RuntimeError("this scripted module has no example inputs yet: call it once, or pass "
                               "example_inputs to ember.jit.script, before asking for its graph or saving it "
                               "(ember saves an exported graph, traced at such inputs; TorchScript compiles "
                               "the source instead: see docs/deviations.md)")
        from ._trace import export_with_batch_dim

        args, kwargs = self._example_inputs
        return export_with_batch_dim(self._original, args, kwargs)

    @property
    def graph(self):
        recorded = self.__dict__.get("_recorded")  # a trace that keeps scripted submodules (_trace_eager)
        if recorded is not None:
            return recorded.gm.graph
        return (self.__dict__.get("_exported") or self.exported_program()).graph

    @property
    def code(self) -> str:
        recorded = self.__dict__.get("_recorded")
        if recorded is not None:
            return recorded.gm.code
        return (self.__dict__.get("_exported") or self.exported_program()).graph_module.code

    @property
    def original_name(self) -> str:
        return type(self._original).__name__

    def save(self, f, _extra_files=None) -> None:
        from ._serialization import save

        save(self, f, _extra_files=_extra_files)


class RecursiveScriptModule(ScriptModule):
    """What ``ember.jit.script`` and ``load`` return (PyTorch's class name)."""


class TopLevelTracedModule(ScriptModule):
    """What ``ember.jit.trace`` of a module returns (PyTorch's class name)."""


class ScriptFunction:
    """A scripted or traced free function (PyTorch's ``torch.jit.ScriptFunction``)."""

    def __init__(self, fn, module: ScriptModule):
        self._fn = fn
        self._module = module
        self.__name__ = getattr(fn, "__name__", "function")
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *args, **kwargs):
        if self._module._program is None:
            check_call(self._fn, args, kwargs, self.__name__)
        return self._module(*args, **kwargs)

    @property
    def graph(self):
        return self._module.graph

    @property
    def code(self) -> str:
        return self._module.code

    def save(self, f, _extra_files=None) -> None:
        self._module.save(f, _extra_files=_extra_files)


def bind_positional(module: nn.Module, args, kwargs):
    """(args, kwargs) with the arguments named by keyword that the forward (or traced
    function) also takes by position moved into ``args``: a trace records positional inputs,
    so the traced program takes either spelling, as TorchScript's does."""
    if not kwargs:
        return tuple(args), {}
    fn = module.__dict__.get("_fn") if isinstance(module, _FunctionModule) else module.forward
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):  # the call does not fit: the program reports it
        return tuple(args), dict(kwargs)
    return tuple(bound.args), dict(bound.kwargs)


class _FunctionModule(nn.Module):
    """A free function as a module, so that export and the ScriptModule machinery apply."""

    def __init__(self, fn):
        super().__init__()
        object.__setattr__(self, "_fn", fn)

    def forward(self, *args, **kwargs):
        return self._fn(*args, **kwargs)
