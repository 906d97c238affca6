"""``ember.nn.attention``: choosing the implementation of ``scaled_dot_product_attention``
(``SDPBackend``, ``sdpa_kernel``), as ``torch.nn.attention``.

ember has two: the math composite (every device) and the fused flash pair (devices with a kernel
for it, CUDA). ``EFFICIENT_ATTENTION``, ``CUDNN_ATTENTION`` and ``OVERRIDEABLE`` name kernels ember
does not have: allowing only those leaves no viable backend, which raises, as PyTorch does when
none of the allowed kernels applies.
"""

from __future__ import annotations

import contextlib
import enum

from ember._src.ops.nn.attention import ENABLED_BACKENDS

__all__ = ["SDPBackend", "WARN_FOR_UNFUSED_KERNELS", "sdpa_kernel"]

WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(enum.IntEnum):
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority: bool = False):
    """Within the block, ``scaled_dot_product_attention`` may only use ``backends`` (one or a list).
    ``set_priority`` (the order to try them in) is accepted: ember prefers flash where it applies."""
    if not isinstance(backends, (list, SDPBackend)):  # PyTorch's check (a list's items it does not check)
        raise AssertionError(f"Backend must be an instance of SDPBackend or a list of SDPBackend instances, "
                             f"got {type(backends).__name__}")
    if isinstance(backends, SDPBackend):
        backends = [backends]
    previous = dict(ENABLED_BACKENDS)
    ENABLED_BACKENDS["math"] = SDPBackend.MATH in backends
    ENABLED_BACKENDS["flash"] = SDPBackend.FLASH_ATTENTION in backends
    try:
        yield {}
    finally:
        ENABLED_BACKENDS.update(previous)


def __getattr__(name: str):
    # `torch.nn.attention.flex_attention` after `import torch.nn`: the submodule on first access.
    if name == "flex_attention":
        import importlib

        return importlib.import_module(f"{__name__}.flex_attention")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
