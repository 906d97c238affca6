"""``torch.overrides``: helpers of the ``__torch_function__`` protocol (ember/_src/torch_function.py).

Importing this module switches the protocol on (Note [Torch function switch] in that module): a
tensor-like class that is not a Tensor subclass is dispatched to from then on.
"""

from __future__ import annotations

import contextlib

from ember._src import torch_function as _tf
from ember._src.torch_function import (
    DisableTorchFunction,
    DisableTorchFunctionSubclass,
    TorchFunctionMode,
    _get_current_function_mode,
    _get_current_function_mode_stack,
    get_default_nowrap_functions,
    handle_torch_function,
)

__all__ = [
    "get_ignored_functions", "get_overridable_functions", "handle_torch_function", "has_torch_function",
    "has_torch_function_unary", "has_torch_function_variadic", "is_tensor_like", "is_tensor_method_or_property",
    "TorchFunctionMode", "BaseTorchFunctionMode", "enable_reentrant_dispatch", "wrap_torch_function",
    "get_default_nowrap_functions", "resolve_name",
]

_tf.enable()


def _active(values) -> bool:
    if _tf._STATE.modes and not _tf._STATE.all_disabled:
        return True
    return not _tf._STATE.subclasses_disabled and any(_tf._overloads(v) for v in values)


def has_torch_function(relevant_args) -> bool:
    """Whether a call on ``relevant_args`` must go through ``handle_torch_function``: one of them
    overrides ``__torch_function__`` (a plain Tensor does not), or a mode is active."""
    return _active(relevant_args)


def has_torch_function_unary(arg) -> bool:
    return _active((arg,))


def has_torch_function_variadic(*args) -> bool:
    return _active(args)


def is_tensor_like(inp) -> bool:
    """A Tensor, or an object whose type defines ``__torch_function__``."""
    from ember import Tensor

    return type(inp) is Tensor or hasattr(type(inp), "__torch_function__")


def is_tensor_method_or_property(func) -> bool:
    from ember import Tensor

    name = getattr(func, "__name__", None)
    return name is not None and (getattr(Tensor, name, None) is func or func in get_overridable_functions().get(
        Tensor, ()))


class BaseTorchFunctionMode(TorchFunctionMode):
    """A mode whose handler runs the function unchanged (subclass it to override some calls)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def enable_reentrant_dispatch():
    """PyTorch's re-entry into dispatch from a ``__torch_dispatch__`` handler: ember's handlers may
    call ops directly, so this has nothing to restore."""
    yield


def wrap_torch_function(dispatcher):
    """Decorator: the function goes through ``handle_torch_function`` for the arguments that
    ``dispatcher(*args, **kwargs)`` returns."""
    import functools

    def inner(func):
        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            relevant = dispatcher(*args, **kwargs)
            if has_torch_function(relevant):
                return handle_torch_function(wrapped, relevant, *args, **kwargs)
            return func(*args, **kwargs)

        return wrapped

    return inner


def get_ignored_functions() -> set:
    """Public callables that do not take part (factories, type tests, settings and the like)."""
    import ember

    names = ("tensor", "as_tensor", "from_numpy", "is_tensor", "is_storage", "set_default_dtype",
             "get_default_dtype", "manual_seed", "seed", "is_grad_enabled", "set_grad_enabled", "no_grad",
             "enable_grad", "typename", "empty", "zeros", "ones", "full", "arange", "linspace", "logspace", "eye",
             "rand", "randn", "randint", "randperm", "save", "load", "compile")
    return {getattr(ember, n) for n in names if hasattr(ember, n)} | {ember.Tensor.as_subclass}


def get_overridable_functions() -> dict:
    """``{namespace: [callables]}`` of what the protocol reaches (ember, its special/linalg/fft
    namespaces, nn.functional when loaded, and Tensor's methods and properties)."""
    import types

    import ember

    ignored = get_ignored_functions()
    result: dict = {}
    modules = [ember, ember.special, ember.linalg, ember.fft] + [m for m in _tf._NAMESPACES]
    for module in modules:
        names = _tf._TABLE_NAMESPACES[0]()[0][1] if module is ember else None
        found = []
        for name, value in vars(module).items():
            if name.startswith("_") or (names is not None and name not in names):
                continue
            if isinstance(value, (type, types.ModuleType)) or not callable(value) or value in ignored:
                continue
            found.append(value)
        result[module] = found
    tensor = []
    for name, value in vars(ember.Tensor).items():
        if name in _tf._TENSOR_SKIP or (name.startswith("_") and not name.endswith("__")):
            continue
        if isinstance(value, property):
            tensor.append(value.__get__)
        elif callable(value) and not isinstance(value, (staticmethod, classmethod, type)):
            tensor.append(value)
    result[ember.Tensor] = tensor
    return result


def resolve_name(f):
    """The qualified name of an overridable function (``"ember.add"``, ``"ember.Tensor.add"``,
    ``"ember.Tensor.grad.__get__"``); None for anything else. Evaluated, it gives back ``f``."""
    from ember import Tensor

    for namespace, functions in get_overridable_functions().items():
        if f not in functions:
            continue
        if namespace is Tensor:
            for name, value in vars(Tensor).items():
                if value is f or (isinstance(value, property) and value.__get__ == f):
                    return f"ember.Tensor.{name}.__get__" if isinstance(value, property) else f"ember.Tensor.{name}"
            return None
        for name, value in vars(namespace).items():
            if value is f and not name.startswith("_"):
                return f"{namespace.__name__}.{name}"
    return None

