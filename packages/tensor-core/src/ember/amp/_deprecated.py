"""The per-device aliases PyTorch keeps for old programs (``torch.cpu.amp``, ``torch.cuda.amp``)."""

from __future__ import annotations

import warnings

import ember
from ember._src.autocast import autocast as _autocast
from ember.amp.grad_scaler import GradScaler as _GradScaler


def make_aliases(device: str, default_dtype):
    """Returns ``(autocast, GradScaler)`` classes for ``device`` that warn like PyTorch's."""

    class autocast(_autocast):  # noqa: N801
        def __init__(self, enabled: bool = True, dtype=default_dtype, cache_enabled: bool = True):
            warnings.warn(
                f"`torch.{device}.amp.autocast(args...)` is deprecated. "
                f"Please use `torch.amp.autocast('{device}', args...)` instead.",
                FutureWarning, stacklevel=2,
            )
            super().__init__(device, enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)

    class GradScaler(_GradScaler):
        def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                     growth_interval: int = 2000, enabled: bool = True) -> None:
            warnings.warn(
                f"`torch.{device}.amp.GradScaler(args...)` is deprecated. "
                f"Please use `torch.amp.GradScaler('{device}', args...)` instead.",
                FutureWarning, stacklevel=2,
            )
            super().__init__(device, init_scale=init_scale, growth_factor=growth_factor,
                             backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)

    autocast.__module__ = GradScaler.__module__ = f"ember.{device}.amp"
    autocast.__qualname__, GradScaler.__qualname__ = "autocast", "GradScaler"
    return autocast, GradScaler


CPU = make_aliases("cpu", ember.bfloat16)
CUDA = make_aliases("cuda", ember.float16)
