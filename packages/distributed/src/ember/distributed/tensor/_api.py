"""``distribute_module``: a module's parameters and buffers as DTensors, with input/output hooks."""

from __future__ import annotations

import inspect

from ember import nn

from ._dtensor import DTensor, distribute_tensor
from ._placements import Replicate


def replace_parameter(module, name: str, dtensor) -> None:
    """Registers ``dtensor`` as parameter ``name`` of ``module`` (keeping requires_grad)."""
    old = module._parameters[name]
    param = nn.Parameter(dtensor, requires_grad=old.requires_grad if old is not None else True)
    module._parameters[name] = param


def _replicate_module(module, mesh) -> None:
    for name, param in list(module._parameters.items()):
        if param is not None and not isinstance(param, DTensor):
            replace_parameter(module, name, distribute_tensor(param.detach(), mesh, [Replicate()] * mesh.ndim))
    for name, buf in list(module._buffers.items()):
        if buf is not None and not isinstance(buf, DTensor):
            module._buffers[name] = distribute_tensor(buf, mesh, [Replicate()] * mesh.ndim)


def distribute_module(module, device_mesh=None, partition_fn=None, input_fn=None, output_fn=None):
    """Lays every submodule's parameters out with ``partition_fn(name, submodule, mesh)`` (default:
    replicate whatever is not a DTensor yet) and installs ``input_fn``/``output_fn`` as hooks."""
    from ._dtensor import _default_mesh

    mesh = device_mesh if device_mesh is not None else _default_mesh()
    if getattr(module, "_distribute_module_applied", False):
        raise RuntimeError("distribute_module should only be called once on a module, but it has already been "
                           "called on this module!")
    for name, sub in module.named_modules():
        if partition_fn is not None:
            partition_fn(name, sub, mesh)
        _replicate_module(sub, mesh)
    if input_fn is not None:
        if len(inspect.signature(input_fn).parameters) != 3:
            raise ValueError("input_fn should take in 3 arguments: (module, inputs, device_mesh)")
        module.register_forward_pre_hook(lambda mod, inputs: input_fn(mod, inputs, mesh))
    if output_fn is not None:
        if len(inspect.signature(output_fn).parameters) != 3:
            raise ValueError("output_fn should take in 3 arguments: (module, outputs, device_mesh)")
        module.register_forward_hook(lambda mod, inputs, outputs: output_fn(mod, outputs, mesh))
    module._distribute_module_applied = True
    return module
