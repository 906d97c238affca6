"""``functional_call`` and ``stack_module_state``: modules as functions of their parameters.

This layer sits below ``ember.nn``, so a module is whatever has ``named_parameters`` /
``named_buffers`` and keeps its tensors in ``_parameters`` / ``_buffers`` dicts (ember's and
PyTorch's ``Module`` both do); parameters are swapped in for the call and restored after it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import ember
from ember._src.tensor import Tensor

__all__ = ["functional_call", "stack_module_state", "reparametrize_module", "functional_call_single",
           "replace_all_batch_norm_modules_"]

_MISSING = object()


def _named_tensors(module) -> dict:
    named = dict(module.named_parameters(remove_duplicate=False))
    named.update(module.named_buffers(remove_duplicate=False))
    return named


def _untie_named_tensors_map(module, parameters_and_buffers: dict) -> dict:
    """Adds every name tied (same tensor) to a given one, with the given value."""
    by_tensor: dict[int, set] = {}
    for name, tensor in _named_tensors(module).items():
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


def _owner(module, prefix: str):
    owner = module
    for part in prefix.split(".") if prefix else ():
        sub = getattr(owner, "_modules", {}).get(part, _MISSING)
        if sub is _MISSING:
            sub = getattr(owner, part, _MISSING)
        if sub is _MISSING or sub is None:
            raise AttributeError(f"{type(owner).__name__} has no attribute `{part}`")
        owner = sub
    return owner


def _swap_tensor(module, name: str, value):
    """Puts ``value`` under ``name`` (``_MISSING`` removes it); returns what was there."""
    prefix, _, attr = name.rpartition(".")
    owner = _owner(module, prefix)
    if value is not _MISSING and value is not None and not isinstance(value, Tensor):
        raise TypeError(f"{value} is not an instance of torch.Tensor")
    for registry in (getattr(owner, "_parameters", {}), getattr(owner, "_buffers", {})):
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


def _module_name(module) -> str:
    get_name = getattr(module, "_get_name", None)
    return get_name() if get_name is not None else type(module).__name__


@contextlib.contextmanager
def reparametrize_module(module, parameters_and_buffers: dict, tie_weights: bool = False, strict: bool = False):
    """Inside the context, ``module``'s tensors named in ``parameters_and_buffers`` are those values."""
    untied = _untie_named_tensors_map(module, parameters_and_buffers) if tie_weights else parameters_and_buffers
    if strict:
        valid = set(_named_tensors(module))
        missing, unexpected = sorted(valid - set(parameters_and_buffers)), sorted(set(parameters_and_buffers) - valid)
        errors = []
        if unexpected:
            errors.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            errors.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if errors:
            raise RuntimeError("Error(s) in reparametrizing for {}:\n\t{}".format(_module_name(module),
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


def functional_call_single(module, parameters_and_buffers: dict, args=None, kwargs=None, *,
                           tie_weights: bool = True, strict: bool = False):
    """``functional_call`` with one dict (what ``nn.utils.stateless.functional_call`` takes)."""
    if kwargs is None:
        kwargs = {}
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with reparametrize_module(module, parameters_and_buffers, tie_weights=tie_weights, strict=strict):
        return module(*args, **kwargs)


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights: bool = True,
                    strict: bool = False):
    """Calls ``module`` with its parameters and buffers replaced by the given ones.

    Args:
        module: the module to call.
        parameter_and_buffer_dicts: a dict ``name -> tensor``, or a sequence of such dicts (no name
            in two of them).
        args: the positional arguments (a single non-tuple value is one argument).
        kwargs: the keyword arguments.
        tie_weights: a value given for one of several tied names is used for all of them.
        strict: every parameter and buffer must be given, and no other name.

    Returns:
        What ``module(*args, **kwargs)`` returns with the replacements in place.

    Example:
        >>> import ember
        >>> lin = ember.nn.Linear(2, 1)
        >>> params = {"weight": ember.ones(1, 2), "bias": ember.zeros(1)}
        >>> ember.func.functional_call(lin, params, (ember.ones(3, 2),)).flatten()
        tensor([2., 2., 2.])
    """
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
    return functional_call_single(module, merged, args, kwargs, tie_weights=tie_weights, strict=strict)


def _stacked_leaf(tensors, name: str) -> Tensor:
    all_grad = all(t.requires_grad for t in tensors)
    if not all_grad and any(t.requires_grad for t in tensors):
        raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
    result = ember.stack(tensors)
    if all_grad:
        result = result.detach().requires_grad_()
    return result


def stack_module_state(models) -> tuple[dict[str, Any], dict[str, Any]]:
    """Stacks the parameters and buffers of same-class modules, by name, for ensembling with ``vmap``.

    The stacked parameters are new leaves (optimizable), unrelated to the modules' own.

    Example:
        >>> import ember
        >>> from ember.func import stack_module_state, functional_call, vmap
        >>> models = [ember.nn.Linear(3, 2) for _ in range(4)]
        >>> params, buffers = stack_module_state(models)
        >>> out = vmap(lambda p, b, x: functional_call(models[0], (p, b), (x,)), (0, 0, None))(
        ...     params, buffers, ember.ones(5, 3))
        >>> tuple(out.shape)
        (4, 5, 2)
    """
    models = list(models)
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    first_type = type(models[0])
    if not all(type(m) is first_type for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    all_params = [dict(m.named_parameters()) for m in models]
    params = {k: _stacked_leaf(tuple(p[k] for p in all_params), k) for k in all_params[0]}
    all_buffers = [dict(m.named_buffers()) for m in models]
    buffers = {k: _stacked_leaf(tuple(b[k] for b in all_buffers), k) for k in all_buffers[0]}
    return params, buffers


def replace_all_batch_norm_modules_(root):
    """Makes every batch norm module under ``root`` stop tracking running statistics (in place), so
    that it runs under ``vmap`` in training mode: running stats would be updated in place from a
    batch of samples. Returns ``root``."""
    for module in root.modules():
        if hasattr(module, "track_running_stats") and hasattr(module, "running_mean"):
            module.running_mean = None
            module.running_var = None
            if hasattr(module, "num_batches_tracked"):
                module.num_batches_tracked = None
            module.track_running_stats = False
    return root
