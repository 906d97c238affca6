"""``ember.mps``: the Apple GPU device module PyTorch programs query (``torch.mps``), as in a PyTorch
build on a machine without Metal: ``is_available()`` is False and ``device_count()`` 0 (the idiom
``"mps" if torch.mps.is_available() else "cpu"``), ``manual_seed`` does nothing (PyTorch's is lazy),
and what needs the device raises PyTorch's RuntimeError naming the missing backend."""

from __future__ import annotations

__all__ = [
    "current_allocated_memory", "device_count", "driver_allocated_memory", "empty_cache", "get_rng_state",
    "is_available", "manual_seed", "recommended_max_memory", "seed", "set_per_process_memory_fraction",
    "set_rng_state", "synchronize",
]


def _no_backend(what: str):
    raise RuntimeError(f"Cannot execute {what}() without MPS backend.")


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def manual_seed(seed: int) -> None:
    """Seeds nothing: there is no MPS generator (PyTorch's call does the same without the backend)."""


def seed() -> None:
    _no_backend("getDefaultGenerator")


def get_rng_state(device="mps"):
    _no_backend("getDefaultGenerator")


def set_rng_state(new_state, device="mps") -> None:
    _no_backend("getDefaultGenerator")


def synchronize() -> None:
    _no_backend("deviceSynchronize")


def empty_cache() -> None:
    _no_backend("emptyCache")


def current_allocated_memory() -> int:
    _no_backend("getCurrentAllocatedMemory")


def driver_allocated_memory() -> int:
    _no_backend("getDriverAllocatedMemory")


def recommended_max_memory() -> int:
    _no_backend("getRecommendedMaxMemory")


def set_per_process_memory_fraction(fraction) -> None:
    _no_backend("setMemoryFraction")
