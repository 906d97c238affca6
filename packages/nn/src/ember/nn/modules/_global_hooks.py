"""Hooks that apply to every Module (``torch.nn.modules.module.register_module_*``): profilers,
FLOP counters and debugging tools register them once instead of on each module.

A global forward pre-hook or forward hook runs before the module's own; global backward hooks
run before the module's own too. Registration hooks see each parameter, buffer or submodule as
it is registered and may return a replacement."""

from __future__ import annotations

from collections import OrderedDict

from ember.utils.hooks import RemovableHandle

forward_pre_hooks: OrderedDict = OrderedDict()
forward_hooks: OrderedDict = OrderedDict()
forward_hooks_with_kwargs: OrderedDict = OrderedDict()
forward_hooks_always_called: OrderedDict = OrderedDict()
backward_pre_hooks: OrderedDict = OrderedDict()
backward_hooks: OrderedDict = OrderedDict()
buffer_registration_hooks: OrderedDict = OrderedDict()
module_registration_hooks: OrderedDict = OrderedDict()
parameter_registration_hooks: OrderedDict = OrderedDict()
# Whether the global backward hooks are full ones (register_module_full_backward_hook) or legacy
# ones (register_module_backward_hook); one module cannot mix the two, as in PyTorch.
full_backward: list = [None]


def _add(hooks: OrderedDict, hook, extra=None) -> RemovableHandle:
    handle = RemovableHandle(hooks, extra_dict=extra)
    hooks[handle.id] = hook
    return handle


def register_module_forward_pre_hook(hook) -> RemovableHandle:
    """``hook(module, args)`` runs before every module's forward; it may return new args."""
    return _add(forward_pre_hooks, hook)


def register_module_forward_hook(hook, *, with_kwargs: bool = False, always_call: bool = False) -> RemovableHandle:
    """``hook(module, args, output)`` (``hook(module, args, kwargs, output)`` with ``with_kwargs``)
    runs after every module's forward; it may return a new output. ``always_call``: also when
    forward raised (with output None)."""
    handle = _add(forward_hooks, hook, [forward_hooks_with_kwargs, forward_hooks_always_called])
    if with_kwargs:
        forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        forward_hooks_always_called[handle.id] = True
    return handle


def _backward(hook, full: bool) -> RemovableHandle:
    if full_backward[0] is not None and full_backward[0] != full and backward_hooks:
        raise RuntimeError("Cannot use both regular backward hooks and full backward hooks as a global Module "
                           "hook. Please use only one of them.")
    full_backward[0] = full
    return _add(backward_hooks, hook)


def register_module_full_backward_hook(hook) -> RemovableHandle:
    """``hook(module, grad_input, grad_output)`` runs when every module's input gradients are computed."""
    return _backward(hook, True)


def register_module_backward_hook(hook) -> RemovableHandle:
    """The legacy form of ``register_module_full_backward_hook`` (ember reports full gradients)."""
    return _backward(hook, False)


def register_module_full_backward_pre_hook(hook) -> RemovableHandle:
    """``hook(module, grad_output)`` runs before every module's input gradients are computed."""
    return _add(backward_pre_hooks, hook)


def register_module_buffer_registration_hook(hook) -> RemovableHandle:
    """``hook(module, name, buffer)`` runs as any module registers a buffer; it may return a new one."""
    return _add(buffer_registration_hooks, hook)


def register_module_module_registration_hook(hook) -> RemovableHandle:
    """``hook(module, name, submodule)`` runs as any module registers a submodule; it may return a new one."""
    return _add(module_registration_hooks, hook)


def register_module_parameter_registration_hook(hook) -> RemovableHandle:
    """``hook(module, name, param)`` runs as any module registers a parameter; it may return a new one."""
    return _add(parameter_registration_hooks, hook)


def run_registration_hooks(hooks: OrderedDict, module, name: str, value):
    """``value`` after every registration hook in ``hooks`` (a hook returning None keeps it)."""
    for hook in list(hooks.values()):
        out = hook(module, name, value)
        if out is not None:
            value = out
    return value


__all__ = [
    "register_module_backward_hook", "register_module_buffer_registration_hook", "register_module_forward_hook",
    "register_module_forward_pre_hook", "register_module_full_backward_hook", "register_module_full_backward_pre_hook",
    "register_module_module_registration_hook", "register_module_parameter_registration_hook",
]
