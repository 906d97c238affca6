"""Temporary patches that let a traced program's calls reach the tracer.

A trace does not switch the ``__torch_function__`` protocol on (Note [Proxies and the torch
function protocol] in proxy.py), so while a trace runs the tracer swaps the public callables of
ember's namespaces (``ember.relu``, ``F.linear``, ...) and of the traced code's globals for
wrappers: called with a Proxy anywhere in their arguments, a wrapper records a ``call_function``
node on the original function; otherwise it calls the original. ``wrap()``-registered globals get
the same wrapper. Every patch is undone on exit.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import sys
from collections.abc import Callable
from types import BuiltinFunctionType, FunctionType, ModuleType
from typing import Any

from ember._C import FastFront
from ember._src import torch_function
from ember._src.torch_function import native_of
from ember.dispatch import DispatchMode

from .proxy import Proxy

# Namespaces whose public functions a trace records (imported lazily: some may be absent).
_EMBER_NAMESPACES = ("ember", "ember.nn.functional", "ember.special", "ember.linalg", "ember.fft")
# Public ember functions that are about the program, not values: never recorded.
_NEVER_RECORDED = frozenset({"is_tensor", "is_storage", "compile", "manual_seed", "set_printoptions",
                             "set_default_dtype", "get_default_dtype", "set_grad_enabled",
                             "is_grad_enabled", "typename", "is_fx_tracing"})


def find_proxy(args: tuple, kwargs: dict) -> Proxy | None:
    """The first Proxy in ``args``/``kwargs`` (one level into lists, tuples and dicts)."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, Proxy):
            return value
        if isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, Proxy):
                    return item
        elif isinstance(value, dict):
            for item in value.values():
                if isinstance(item, Proxy):
                    return item
    return None


class _RecordingFunction:
    """Stands in for a function while a trace runs: given a Proxy anywhere in its arguments it
    records a ``call_function`` node on the original, otherwise it calls the original.

    It compares and hashes equal to the original, so a pass that looks targets up while
    patches are active (``if target == ember.sigmoid``, ``rules[node.target]``) still finds them.
    """

    _fx_recording_stand_in = True  # Graph.create_node stores the original instead

    def __init__(self, orig_fn: Callable, mark_wrapped: bool) -> None:
        functools.update_wrapper(self, orig_fn)
        # Once the __torch_function__ protocol is on, a native function is bound behind a gate: the
        # stand-in calls the gate (handlers and modes still see calls without Proxies) and records
        # the native function, so that graphs are the same with the protocol on or off.
        self._call = orig_fn
        self.__wrapped__ = native_of(orig_fn)
        self._mark_wrapped = mark_wrapped

    def __call__(self, *args, **kwargs):
        proxy = find_proxy(args, kwargs)
        if proxy is None:
            return self._call(*args, **kwargs)
        result = proxy.tracer.create_proxy("call_function", self.__wrapped__, args, kwargs)
        if self._mark_wrapped:
            result.node.meta["is_wrapped"] = True
        return result

    def __eq__(self, other: object) -> bool:
        return other is self or native_of(other) is self.__wrapped__ or (
            isinstance(other, _RecordingFunction) and other.__wrapped__ is self.__wrapped__)

    def __hash__(self) -> int:
        return hash(self.__wrapped__)

    def __repr__(self) -> str:
        return repr(self.__wrapped__)


def make_recording_wrapper(orig_fn: Callable, mark_wrapped: bool = False) -> Callable:
    """A stand-in for ``orig_fn`` that records a node when given a Proxy."""
    return _RecordingFunction(orig_fn, mark_wrapped)


def _ember_functions() -> tuple[tuple[ModuleType, str, Callable], ...]:
    # Switching the __torch_function__ protocol on rebinds the native functions to gates: the list
    # made before the switch no longer matches the namespaces.
    return _ember_functions_while(torch_function.is_enabled())


@functools.cache
def _ember_functions_while(protocol_on: bool) -> tuple[tuple[ModuleType, str, Callable], ...]:
    found = []
    for module_name in _EMBER_NAMESPACES:
        try:
            module = sys.modules.get(module_name) or importlib.import_module(module_name)
        except ImportError:
            continue
        for name, value in list(vars(module).items()):
            if name.startswith("_") or name in _NEVER_RECORDED:
                continue
            # FastFront: the native front of ops such as ember.matmul or ember.sum (it falls back
            # to the Python function for anything but plain tensors, which a Proxy is not).
            if isinstance(value, (FunctionType, BuiltinFunctionType, FastFront)) or torch_function.is_gate(value):
                found.append((module, name, value))
    return tuple(found)


def ember_function_ids() -> frozenset[int]:
    """Ids of the public ember functions, and of the native ones behind gates (a global taken
    before the protocol was switched on holds the native function)."""
    return _ember_function_ids_while(torch_function.is_enabled())


@functools.cache
def _ember_function_ids_while(protocol_on: bool) -> frozenset[int]:
    return frozenset(id(f) for _, _, fn in _ember_functions_while(protocol_on) for f in (fn, native_of(fn)))


class Patcher:
    """Collects attribute/dict patches and undoes them, last first, on exit."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def __enter__(self) -> Patcher:
        return self

    def __exit__(self, *exc) -> None:
        while self._undo:
            self._undo.pop()()

    def enter(self, context: Any) -> None:
        context.__enter__()
        self._undo.append(lambda: context.__exit__(None, None, None))

    def patch_dict(self, frame_dict: dict, name: str, new_fn: Any) -> None:
        if name in frame_dict:
            old = frame_dict[name]
            self._undo.append(lambda: frame_dict.__setitem__(name, old))
        else:
            self._undo.append(lambda: frame_dict.pop(name, None))
        frame_dict[name] = new_fn

    def patch_attr(self, obj: Any, name: str, new_fn: Any) -> None:
        had_own = name in vars(obj)
        old = vars(obj).get(name)
        if had_own:
            self._undo.append(lambda: setattr(obj, name, old))
        else:
            self._undo.append(lambda: delattr(obj, name))
        setattr(obj, name, new_fn)


class _RecordOpsOnProxies(DispatchMode):
    """Catches ember ops reached with a Proxy argument (``real_tensor + proxy`` runs
    ``Tensor.__add__``, an op, before Python could try ``Proxy.__radd__``) and records them."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        proxy = find_proxy(args, kwargs)
        if proxy is None:
            return func(*args, **kwargs)
        return proxy.tracer.create_proxy("call_function", func, args, kwargs)


def _ember_stand_ins() -> dict[int, Callable]:
    return _ember_stand_ins_while(torch_function.is_enabled())


@functools.cache
def _ember_stand_ins_while(protocol_on: bool) -> dict[int, Callable]:
    # Stand-ins are stateless, so one per function serves every trace.
    return {id(fn): make_recording_wrapper(fn) for _, _, fn in _ember_functions_while(protocol_on)}


def patch_ember_namespaces(patcher: Patcher) -> None:
    """Swaps every public ember function for a recording wrapper until ``patcher`` exits,
    and records ember ops that receive a Proxy."""
    patcher.enter(_RecordOpsOnProxies())
    stand_ins = _ember_stand_ins()
    for module, name, fn in _ember_functions():
        if vars(module).get(name) is not fn:
            continue  # rebound since the list was made
        patcher.patch_dict(vars(module), name, stand_ins[id(fn)])


def autowrap_globals(patcher: Patcher, fn_globals: dict, function_ids: set[int]) -> None:
    """Wraps the globals of traced code that are functions to record (``from ember import relu``)."""
    for name, value in list(fn_globals.items()):
        if not name.startswith("_") and callable(value) and id(value) in function_ids:
            patcher.patch_dict(fn_globals, name, make_recording_wrapper(value))


# (globals dict of the module that called wrap(), name) pairs, filled by ``wrap``.
WRAPPED_FNS_TO_PATCH: dict[tuple[int, str], dict] = {}


def patch_wrapped_functions(patcher: Patcher) -> None:
    for (_, name), frame_dict in WRAPPED_FNS_TO_PATCH.items():
        if name not in frame_dict and hasattr(builtins, name):
            orig_fn = getattr(builtins, name)
        else:
            orig_fn = frame_dict[name]
        patcher.patch_dict(frame_dict, name, make_recording_wrapper(orig_fn, mark_wrapped=True))
