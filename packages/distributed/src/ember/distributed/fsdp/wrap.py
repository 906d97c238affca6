"""``ember.distributed.fsdp.wrap``: FSDP1's auto-wrap policies.

A policy is called as ``policy(module=..., recurse=..., nonwrapped_numel=...)``: with
``recurse=True`` it says whether to look into the module's children, with ``recurse=False``
whether to wrap the module itself (``nonwrapped_numel``: its parameters not wrapped by a child).
"""

from __future__ import annotations

from ember import nn


def always_wrap_policy(*args, **kwargs) -> bool:
    return True


def lambda_auto_wrap_policy(module, recurse: bool, nonwrapped_numel: int, lambda_fn) -> bool:
    return True if recurse else bool(lambda_fn(module))


def transformer_auto_wrap_policy(module, recurse: bool, nonwrapped_numel: int, transformer_layer_cls) -> bool:
    return True if recurse else isinstance(module, tuple(transformer_layer_cls))


def _module_wrap_policy(module, recurse: bool, nonwrapped_numel: int, module_classes) -> bool:
    return True if recurse else isinstance(module, tuple(module_classes))


def _default_force_leaf():
    return {nn.MultiheadAttention}


def _default_exclude():
    return {nn.ModuleList, nn.ModuleDict}


def size_based_auto_wrap_policy(module, recurse: bool, nonwrapped_numel: int, min_num_params: int = int(1e8),
                                force_leaf_modules=None, exclude_wrap_modules=None) -> bool:
    force_leaf = _default_force_leaf() if force_leaf_modules is None else force_leaf_modules
    exclude = _default_exclude() if exclude_wrap_modules is None else exclude_wrap_modules
    big_enough = nonwrapped_numel >= min_num_params
    if recurse:
        return big_enough and not isinstance(module, tuple(force_leaf))
    return big_enough and not isinstance(module, tuple(exclude))


size_based_auto_wrap_policy.FORCE_LEAF_MODULES = _default_force_leaf()
size_based_auto_wrap_policy.EXCLUDE_WRAP_MODULES = _default_exclude()


class ModuleWrapPolicy:
    """Wraps every module whose class is one of ``module_classes``."""

    def __init__(self, module_classes):
        self._module_classes = set(module_classes)
        self._module_classes_str = str(self._module_classes)

    def __call__(self, module, recurse: bool, *args, **kwargs) -> bool:
        return _module_wrap_policy(module, recurse, 0, self._module_classes)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._module_classes_str})"


class CustomPolicy:
    """Wraps the modules for which ``lambda_fn(module)`` is true (per-module keyword arguments,
    a ``dict`` result, are not supported: ``NotImplementedError``)."""

    def __init__(self, lambda_fn):
        self._lambda_fn = lambda_fn

    def __call__(self, module, recurse: bool, *args, **kwargs) -> bool:
        if recurse:
            return True
        result = self._lambda_fn(module)
        if isinstance(result, dict):
            raise NotImplementedError("CustomPolicy: per-module FSDP keyword arguments are not supported by ember")
        return bool(result)


def enable_wrap(*args, **kwargs):
    raise NotImplementedError("ember's FSDP1 layer supports auto_wrap_policy, not enable_wrap/wrap")


def wrap(*args, **kwargs):
    raise NotImplementedError("ember's FSDP1 layer supports auto_wrap_policy, not enable_wrap/wrap")


__all__ = ["CustomPolicy", "ModuleWrapPolicy", "always_wrap_policy", "enable_wrap",
           "lambda_auto_wrap_policy", "size_based_auto_wrap_policy", "transformer_auto_wrap_policy", "wrap"]
