"""``parameters_to_vector`` and ``vector_to_parameters``: all parameters as one flat vector and back."""

from __future__ import annotations

from collections.abc import Iterable

import ember
from ember import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and concatenated, in iteration order (differentiable, as ``cat``)."""
    param_device = None
    vec = []
    for param in parameters:
        param_device = _check_param_device(param, param_device)
        vec.append(param.view(-1))
    return ember.cat(vec)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Points each parameter's data at its slice of ``vec`` (a view, as PyTorch does, not a copy)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {ember.typename(vec)}")
    param_device = None
    pointer = 0
    for param in parameters:
        param_device = _check_param_device(param, param_device)
        num_param = param.numel()
        param.data = vec[pointer:pointer + num_param].view_as(param).data
        pointer += num_param


def _check_param_device(param: Tensor, old_param_device: int | None) -> int:
    """-1 for CPU, the device index otherwise; two different devices are a TypeError."""
    index = param.get_device() if param.device.type != "cpu" else -1
    if old_param_device is None:
        return index
    if index != old_param_device:
        raise TypeError("Found two parameters on different devices, this is currently not supported.")
    return old_param_device
