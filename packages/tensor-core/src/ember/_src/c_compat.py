"""``torch._C`` entry points programs call directly, set on ember's native module at import (so
``_C.pyi`` lists them): the TorchScript executor and fuser switches (ember has one executor and no
TorchScript fuser: the setters keep and return the flags as PyTorch does), ``_log_api_usage_once``,
``_GLIBCXX_USE_CXX11_ABI``, ``_get_privateuse1_backend_name`` and ``_C._nn._parse_to`` (``Tensor.to``'s
argument parsing, which ``nn.Module.to`` overrides use)."""

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


def _bool_arg(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name}(): incompatible function arguments. The following argument types are supported:\n"
                        f"    1. (arg0: bool) -> None\n\nInvoked with: {value!r}")
    return value


_FLAGS.update(can_fuse_on_cpu=False, can_fuse_on_gpu=False, texpr_fuser=True)


def _jit_can_fuse_on_cpu() -> bool:
    """_jit_can_fuse_on_cpu() -> bool"""
    return _FLAGS["can_fuse_on_cpu"]


def _jit_can_fuse_on_gpu() -> bool:
    """_jit_can_fuse_on_gpu() -> bool"""
    return _FLAGS["can_fuse_on_gpu"]


def _jit_override_can_fuse_on_cpu(arg0: bool) -> None:
    """_jit_override_can_fuse_on_cpu(arg0: bool) -> None"""
    _FLAGS["can_fuse_on_cpu"] = _bool_arg("_jit_override_can_fuse_on_cpu", arg0)


def _jit_override_can_fuse_on_gpu(arg0: bool) -> None:
    """_jit_override_can_fuse_on_gpu(arg0: bool) -> None"""
    _FLAGS["can_fuse_on_gpu"] = _bool_arg("_jit_override_can_fuse_on_gpu", arg0)


def _jit_texpr_fuser_enabled() -> bool:
    """_jit_texpr_fuser_enabled() -> bool"""
    return _FLAGS["texpr_fuser"]


def _jit_set_texpr_fuser_enabled(arg0: bool) -> None:
    """_jit_set_texpr_fuser_enabled(arg0: bool) -> None"""
    _FLAGS["texpr_fuser"] = _bool_arg("_jit_set_texpr_fuser_enabled", arg0)


def _jit_set_nvfuser_enabled(arg0: bool) -> None:
    """_jit_set_nvfuser_enabled(arg0: bool) -> None: deprecated, does nothing (as PyTorch)"""
    warnings.warn("nvfuser is no longer supported in torch script, use _jit_set_nvfuser_enabled is deprecated and a "
                  "no-op", stacklevel=2)


def _jit_set_nvfuser_guard_mode(arg0: bool) -> None:
    """_jit_set_nvfuser_guard_mode(arg0: bool) -> None: deprecated, does nothing (as PyTorch)"""
    warnings.warn("nvfuser is no longer supported in torch script, use _jit_set_nvfuser_guard_mode is deprecated and "
                  "a no-op", stacklevel=2)


def _get_privateuse1_backend_name() -> str:
    """_get_privateuse1_backend_name() -> str"""
    return "privateuseone"


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
    for fn in (_jit_set_profiling_mode, _jit_set_profiling_executor, _jit_set_bailout_depth, _log_api_usage_once,
               _jit_can_fuse_on_cpu, _jit_can_fuse_on_gpu, _jit_override_can_fuse_on_cpu, _jit_override_can_fuse_on_gpu,
               _jit_texpr_fuser_enabled, _jit_set_texpr_fuser_enabled, _jit_set_nvfuser_enabled,
               _jit_set_nvfuser_guard_mode, _get_privateuse1_backend_name):
        setattr(native, fn.__name__, fn)
    native._GLIBCXX_USE_CXX11_ABI = True
    # the metaclass of Tensor (PyTorch's is a class of its own; ember's Tensor is an ordinary class)
    from ember._src.tensor import Tensor

    native._TensorMeta = type(Tensor)
    nn = types.ModuleType("ember._C._nn", "Native nn helpers: ``_parse_to``.")
    nn._parse_to = _parse_to
    native._nn = nn
    sys.modules[nn.__name__] = nn
