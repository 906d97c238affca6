"""Argument normalization (PyTorch's ``torch.fx.operator_schemas``): a call's arguments bound to
its target's signature, defaults filled in, so passes can read them by name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["ArgsKwargsPair", "normalize_function", "normalize_module"]

_SUPPORTED_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


class ArgsKwargsPair(NamedTuple):
    """Positional and keyword arguments of a normalized call."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def _normalize(sig: inspect.Signature, args: tuple, kwargs: dict,
               normalize_to_only_use_kwargs: bool) -> ArgsKwargsPair | None:
    if any(p.kind not in _SUPPORTED_KINDS for p in sig.parameters.values()):
        return None  # *args/**kwargs or positional-only: no unique names to give
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    new_args: list[Any] = []
    new_kwargs: dict[str, Any] = {}
    for i, name in enumerate(sig.parameters):
        if not normalize_to_only_use_kwargs and i < len(args):
            new_args.append(bound.arguments[name])
        else:
            new_kwargs[name] = bound.arguments[name]
    return ArgsKwargsPair(tuple(new_args), new_kwargs)


def normalize_function(target: Callable, args: tuple, kwargs: dict | None = None, arg_types: Any = None,
                       kwarg_types: Any = None, normalize_to_only_use_kwargs: bool = False
                       ) -> ArgsKwargsPair | None:
    """``target``'s call arguments by its signature; None when it has no usable signature
    (builtins such as ``operator.add``, ember ops, variadic functions)."""
    if not inspect.isfunction(inspect.unwrap(target)):
        return None
    try:
        sig = inspect.signature(inspect.unwrap(target))
    except (TypeError, ValueError):
        return None
    return _normalize(sig, tuple(args), dict(kwargs or {}), normalize_to_only_use_kwargs)


def normalize_module(root: Any, target: str, args: tuple, kwargs: dict | None = None,
                     normalize_to_only_use_kwargs: bool = False) -> ArgsKwargsPair | None:
    """The arguments of a call of submodule ``target`` of ``root``, by its ``forward``."""
    try:
        submod = root.get_submodule(target)
    except AttributeError as e:
        raise RuntimeError(f"Tried to normalize node with target {target} but root did not "
                           f"have that target!") from e
    forward = getattr(type(submod), "forward", None)
    if forward is None or not inspect.isfunction(forward):
        return None
    sig = inspect.signature(forward)
    parameters = list(sig.parameters.values())[1:]  # without self
    return _normalize(sig.replace(parameters=parameters), tuple(args), dict(kwargs or {}),
                      normalize_to_only_use_kwargs)
