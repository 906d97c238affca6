"""``ember.xpu``: the Intel GPU device module PyTorch programs query (``torch.xpu``), as in a PyTorch
build without XPU: ``is_available()`` is False and ``device_count()`` 0 (the idiom
``"xpu" if torch.xpu.is_available() else "cpu"``), seeding and cache release do nothing, and what
needs a device raises PyTorch's AssertionError."""

from __future__ import annotations

__all__ = [
    "current_device", "device_count", "empty_cache", "is_available", "is_initialized", "manual_seed",
    "manual_seed_all", "seed", "seed_all", "synchronize",
]


def _not_compiled():
    raise AssertionError("ember not compiled with XPU enabled")


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def is_initialized() -> bool:
    return False


def manual_seed(seed: int) -> None:
    """Seeds nothing: there is no XPU generator (PyTorch's call is lazy and does the same here)."""


manual_seed_all = manual_seed


def seed() -> None:
    pass


seed_all = seed


def empty_cache() -> None:
    pass


def current_device() -> int:
    _not_compiled()


def synchronize(device=None) -> None:
    _not_compiled()
