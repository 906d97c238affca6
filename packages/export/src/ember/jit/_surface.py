"""``torch.jit`` helpers library code calls in eager mode: ``script_if_tracing`` and ``isinstance``."""

from __future__ import annotations

import builtins
import collections.abc
import functools
import types
import typing
import warnings

from ._state import is_tracing

# a bare container type names no element type: PyTorch refuses it
_BARE = {dict: "dict", list: "list", tuple: "tuple", typing.Dict: "Dict", typing.List: "List",  # noqa: UP006
         typing.Optional: "Optional", typing.Tuple: "Tuple"}  # noqa: UP006


def script_if_tracing(fn):
    """Runs ``fn`` as it is, except while ``ember.jit.trace`` records: then ``ember.jit.script(fn)``
    runs instead, as PyTorch's ``torch.jit.script_if_tracing``."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not is_tracing():
            return fn(*args, **kwargs)
        from ._script import script

        return script(wrapper.__original_fn)(*args, **kwargs)

    wrapper.__original_fn = fn
    wrapper.__script_if_tracing_wrapper = True
    return wrapper


def _refuse_bare(target_type) -> None:
    try:
        name = _BARE.get(target_type)
    except TypeError:  # an unhashable "type": left to builtins.isinstance to reject
        return
    if name is None:
        return
    if name.endswith("ict"):
        raise RuntimeError(f"Attempted to use {name} without contained types. Please add contained type, e.g. "
                           f"{name}[int, int]")
    raise RuntimeError(f"Attempted to use {name} without a contained type. Please add a contained type, e.g. "
                       f"{name}[int]")


def _warn_if_empty(obj) -> None:
    if obj == [] or obj == {} or obj == ():
        warnings.warn("The inner type of a container is lost when calling torch.jit.isinstance in eager mode. For "
                      "example, List[int] would become list and therefore falsely return True for List[float] or "
                      "List[str].", stacklevel=3)


def _matches(obj, target_type) -> bool:
    """``obj`` against one parameterized type (``List[int]``, ``Dict[str, List[int]]``, ``Optional[T]``)."""
    if typing.get_origin(target_type) is None:
        return builtins.isinstance(obj, target_type)
    return _container_matches(obj, target_type)


def _container_matches(obj, target_type) -> bool:
    origin = typing.get_origin(target_type)
    _refuse_bare(target_type)
    params = typing.get_args(target_type)
    if origin is list:
        _warn_if_empty(obj)
        return builtins.isinstance(obj, list) and all(_matches(el, params[0]) for el in obj)
    if origin is dict:
        _warn_if_empty(obj)
        return builtins.isinstance(obj, dict) and all(
            builtins.isinstance(k, params[0]) and _matches(v, params[1]) for k, v in obj.items())
    if origin is tuple:
        _warn_if_empty(obj)
        return (builtins.isinstance(obj, tuple) and len(obj) == len(params)
                and all(_matches(el, t) for el, t in zip(obj, params)))
    if origin is typing.Union or issubclass(origin, types.UnionType):  # Optional too
        if obj is None:
            return True
        for t in params:
            if typing.get_origin(t):  # PyTorch answers with the first parameterized member
                return _container_matches(obj, t)
            if builtins.isinstance(obj, t):
                return True
    return False


def isinstance(obj, target_type) -> bool:  # noqa: A001 - PyTorch's name
    """``torch.jit.isinstance``: ``builtins.isinstance`` that also checks the element types of
    ``List[T]``, ``Dict[K, V]``, ``Tuple[...]`` and ``Optional[T]`` (eager refinement)."""
    if builtins.isinstance(target_type, collections.abc.Container):
        if not builtins.isinstance(target_type, tuple):
            raise RuntimeError("The second argument to `torch.jit.isinstance` must be a type or a tuple of types")
        return any(isinstance(obj, t) for t in target_type)
    if typing.get_origin(target_type):
        return _container_matches(obj, target_type)
    _refuse_bare(target_type)
    return builtins.isinstance(obj, target_type)
