"""``ember.accelerator``: PyTorch's device-generic accelerator API.

This build runs on the CPU only, so there is no current accelerator: ``is_available()`` is
False and ``current_accelerator()`` None, which is what the idiom
``device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else "cpu"``
expects. Functions that need a device raise the RuntimeError PyTorch's CPU build raises.
"""

from __future__ import annotations

__all__ = [
    "current_accelerator", "current_device_idx", "current_device_index", "current_stream", "device_count",
    "device_index", "empty_cache", "is_available", "set_device_idx", "set_device_index", "set_stream",
    "synchronize",
]


def _no_accelerator():
    raise RuntimeError("Cannot access accelerator device when none is available.")


def is_available() -> bool:
    return False


def current_accelerator(check_available: bool = False):
    return None


def device_count() -> int:
    return 0


def current_device_index() -> int:
    _no_accelerator()


current_device_idx = current_device_index


def set_device_index(device) -> None:
    _no_accelerator()


set_device_idx = set_device_index


def current_stream(device=None):
    _no_accelerator()


def set_stream(stream) -> None:
    _no_accelerator()


def synchronize(device=None) -> None:
    _no_accelerator()


def empty_cache() -> None:
    _no_accelerator()


class device_index:
    """Context manager selecting an accelerator by index; ``None`` is a no-op, as in PyTorch."""

    def __init__(self, device, /):
        self.idx = device

    def __enter__(self):
        if self.idx is not None:
            _no_accelerator()
        return self

    def __exit__(self, *exc) -> None:
        return None
