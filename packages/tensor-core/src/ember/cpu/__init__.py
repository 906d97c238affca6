"""``ember.cpu``: the CPU device module PyTorch programs query (``torch.cpu``)."""

from ember.cpu import amp


def is_available() -> bool:
    return True


def device_count() -> int:
    return 1


def current_device() -> str:
    return "cpu"


def synchronize(device=None) -> None:
    """CPU kernels finish before returning: nothing to wait for."""


__all__ = ["amp", "current_device", "device_count", "is_available", "synchronize"]
