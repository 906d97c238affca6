"""``convert_conv2d_weight_memory_format`` / ``convert_conv3d_weight_memory_format``: lay the weights of
a model's convolutions out in a memory format (``ember.channels_last`` for NHWC convolutions)."""

from __future__ import annotations

from typing import TypeVar

import ember

_M = TypeVar("_M", bound="ember.nn.Module")

__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]


def _convert(module, memory_format, kinds):
    if isinstance(module, kinds):
        # The same values and parameter object, its storage re-laid out (PyTorch assigns .data too).
        module.weight.data = module.weight.detach().clone(memory_format=memory_format)
    for child in module.children():
        _convert(child, memory_format, kinds)
    return module


def convert_conv2d_weight_memory_format(module: _M, memory_format: ember.memory_format) -> _M:
    """Converts the weight of every ``Conv2d``/``ConvTranspose2d`` in ``module`` (recursively, in place)
    to ``memory_format``; returns ``module``."""
    return _convert(module, memory_format, (ember.nn.Conv2d, ember.nn.ConvTranspose2d))


def convert_conv3d_weight_memory_format(module: _M, memory_format: ember.memory_format) -> _M:
    """Converts the weight of every ``Conv3d``/``ConvTranspose3d`` in ``module`` (recursively, in place)
    to ``memory_format`` (``ember.channels_last_3d``); returns ``module``."""
    return _convert(module, memory_format, (ember.nn.Conv3d, ember.nn.ConvTranspose3d))
