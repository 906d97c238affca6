"""``torch._C`` entry points programs call directly, set on ember's native module at import (so
``_C.pyi`` lists them): the TorchScript executor switches (ember has one executor: the setters
keep and return the flag as PyTorch does), ``_log_api_usage_once``, ``_GLIBCXX_USE_CXX11_ABI``, and
``_C._nn._parse_to`` (``Tensor.to``'s argument parsing, which ``nn.Module.to`` overrides use)."""

from __future__ import annotations

import sys
import types
import warnings

_FLAGS = {"profiling_mode": True, "profiling_executor": True, "bailout_depth": 20}


def _jit_set_profiling_mode(profiling_flag: bool) -> bool:
    """_jit_set_profiling_mode(profiling_flag: bool) -> bool: sets the flag, returns its previous value"""
    old, _FLAGS["profiling_mode"] = _FLAGS["profiling_mode"], bool(profiling_flag)
    return old


def _jit_set_profiling_executor(profiling_flag: bool) -> bool:
    """_jit_set_profiling_executor(profiling_flag: bool) -> bool: sets the flag, returns its previous value"""
    old, _FLAGS["profiling_executor"] = _FLAGS["profiling_executor"], bool(profiling_flag)
    return old


def _jit_set_bailout_depth(depth: int) -> int:
    """_jit_set_bailout_depth(depth: int) -> int: sets the depth, returns the previous one"""
    warnings.warn(f"Use _jit_set_fusion_strategy, bailout depth is deprecated. Setting to (STATIC, {int(depth)})",
                  stacklevel=2)
    old, _FLAGS["bailout_depth"] = _FLAGS["bailout_depth"], int(depth)
    return old


def _log_api_usage_once(event: str) -> None:
    """_log_api_usage_once(event: str) -> None: PyTorch's usage logging hook (no logger in ember)"""
    if not isinstance(event, str):
        raise TypeError(f"_log_api_usage_once(): argument 'event' must be str, not {type(event).__name__}")


def _parse_to(*args, **kwargs):
    """_parse_to(*args, **kwargs) -> tuple: (device, dtype, non_blocking, memory_format) of ``Tensor.to``'s overloads"""
    import ember

    if "copy" in kwargs:
        raise RuntimeError(".to() does not accept copy argument")
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    non_blocking = kwargs.pop("non_blocking", False)
    memory_format = kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
    rest = list(args)
    if rest:
        first = rest.pop(0)
        if isinstance(first, ember.Tensor) or (isinstance(first, (float, complex)) and not isinstance(first, bool)):
            if isinstance(first, ember.Tensor):
                device, dtype = first.device, first.dtype
            else:  # a Python number stands for a 0-d tensor of its double type
                device = ember.device("cpu")
                dtype = ember.complex128 if isinstance(first, complex) else ember.float64
        elif isinstance(first, ember.dtype):
            dtype = first
        elif first is not None:
            device = ember.device(first)
            if rest and (isinstance(rest[0], ember.dtype) or rest[0] is None):
                dtype = rest.pop(0)
    if rest:
        non_blocking = rest.pop(0)
    if rest:
        raise RuntimeError(".to() does not accept copy argument")
    if device is not None and not isinstance(device, ember.device):
        device = ember.device(device)
    return device, dtype, bool(non_blocking), memory_format


def install(native) -> None:
    for fn in (_jit_set_profiling_mode, _jit_set_profiling_executor, _jit_set_bailout_depth, _log_api_usage_once):
        setattr(native, fn.__name__, fn)
    native._GLIBCXX_USE_CXX11_ABI = True
    nn = types.ModuleType("ember._C._nn", "Native nn helpers: ``_parse_to``.")
    nn._parse_to = _parse_to
    native._nn = nn
    sys.modules[nn.__name__] = nn
