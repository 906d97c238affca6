"""``functional_call``: run a module with some parameters and buffers temporarily replaced."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Sequence
from typing import Any

from ember import Tensor

from ..modules.module import Module

__all__ = ["functional_call"]

_MISSING = object()


def _untie_named_tensors_map(module: Module, parameters_and_buffers: dict) -> dict:
    """Adds every name tied (same tensor) to a given one, with the given value."""
    named = dict(module.named_parameters(remove_duplicate=False))
    named.update(module.named_buffers(remove_duplicate=False))
    by_tensor: dict[int, set] = {}
    for name, tensor in named.items():
        by_tensor.setdefault(id(tensor), set()).add(name)
    tied = {name: names for names in by_tensor.values() if len(names) > 1 for name in names}
    given = {name for name in parameters_and_buffers if name in tied}
    for name in given:
        names = tied[name]
        if len(names & given) > 1 and len({id(parameters_and_buffers[n]) for n in names & given}) != 1:
            raise ValueError(f"functional_call got multiple values for keys {sorted(names)}, which are tied. "
                             "Consider using tie_weights=False")
    untied = dict(parameters_and_buffers)
    for name in given:
        for tied_name in tied[name]:
            untied[tied_name] = parameters_and_buffers[name]
    return untied


def _swap_tensor(module: Module, name: str, value):
    """Puts ``value`` under ``name`` (``_MISSING`` removes it); returns what was there."""
    prefix, _, attr = name.rpartition(".")
    owner = module.get_submodule(prefix)
    if value is not _MISSING and value is not None and not isinstance(value, Tensor):
        raise TypeError(f"{value} is not an instance of torch.Tensor")
    for registry in (owner._parameters, owner._buffers):
        if attr in registry:
            old = registry[attr]
            if value is _MISSING:
                del registry[attr]
            else:
                registry[attr] = value
            return old
    old = getattr(owner, attr, _MISSING)
    if old is not _MISSING and old is not None and not isinstance(old, Tensor):
        raise TypeError(f"attribute `{attr}`: {old} is not an instance of torch.Tensor")
    if value is not _MISSING:
        setattr(owner, attr, value)
    elif old is not _MISSING:
        delattr(owner, attr)
    return old


@contextlib.contextmanager
def _reparametrize_module(module: Module, parameters_and_buffers: dict, tie_weights: bool = False,
                          strict: bool = False):
    untied = _untie_named_tensors_map(module, parameters_and_buffers) if tie_weights else parameters_and_buffers
    if strict:
        valid = {n for n, _ in module.named_parameters(remove_duplicate=False)}
        valid |= {n for n, _ in module.named_buffers(remove_duplicate=False)}
        missing, unexpected = sorted(valid - set(parameters_and_buffers)), sorted(set(parameters_and_buffers) - valid)
        errors = []
        if unexpected:
            errors.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            errors.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if errors:
            raise RuntimeError("Error(s) in reparametrizing for {}:\n\t{}".format(module._get_name(),
                                                                                  "\n\t".join(errors)))
    originals: dict[str, Any] = {}
    try:
        for name, value in untied.items():
            originals[name] = _swap_tensor(module, name, value)
        yield
    finally:
        restored = {name: _swap_tensor(module, name, value) for name, value in originals.items()}
        # The forward may have rebound entries of _parameters/_buffers: hand those back to the caller's dict.
        parameters_and_buffers.update({k: restored[k] for k in parameters_and_buffers if k in restored})


def _functional_call(module: Module, parameters_and_buffers: dict, args=None, kwargs=None, *,
                     tie_weights: bool = True, strict: bool = False):
    if kwargs is None:
        kwargs = {}
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _reparametrize_module(module, parameters_and_buffers, tie_weights=tie_weights, strict=strict):
        return module(*args, **kwargs)


def functional_call(module: Module, parameters_and_buffers: dict, args=None, kwargs=None, *,
                    tie_weights: bool = True, strict: bool = False):
    """Deprecated alias of ``ember.func.functional_call`` (a single dict only)."""
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will be removed "
                  "in a future version of PyTorch. Please use `torch.func.functional_call` instead which is a "
                  "drop-in replacement.", FutureWarning, stacklevel=2)
    return _functional_call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights, strict=strict)


def functional_call_dicts(module: Module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                          tie_weights: bool = True, strict: bool = False):
    """``ember.func.functional_call``: like ``functional_call``, also accepting a sequence of dicts."""
    if isinstance(parameter_and_buffer_dicts, dict):
        merged = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, Sequence):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be dictionaries")
        counts: dict[str, int] = {}
        for d in parameter_and_buffer_dicts:
            for key in d:
                counts[key] = counts.get(key, 0) + 1
        repeated = [key for key, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of functional call is "
                             "ambiguous")
        merged = {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    else:
        raise ValueError("Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
                         f"{type(parameter_and_buffer_dicts)}")
    return _functional_call(module, merged, args, kwargs, tie_weights=tie_weights, strict=strict)
