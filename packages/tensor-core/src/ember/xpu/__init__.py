"""``ember.xpu``: the Intel GPU device module PyTorch programs query (``torch.xpu``), as in a PyTorch
build without XPU: ``is_available()`` is False and ``device_count()`` 0 (the idiom
``"xpu" if torch.xpu.is_available() else "cpu"``), seeding and cache release do nothing, and what
needs a device raises PyTorch's AssertionError."""

from __future__ import annotations

import collections

__all__ = [
    "current_device", "device_count", "empty_cache", "get_arch_list", "get_device_capability", "get_device_name",
    "get_device_properties", "get_gencode_flags", "get_per_process_memory_fraction", "get_rng_state",
    "get_rng_state_all", "init", "initial_seed", "is_available", "is_bf16_supported", "is_initialized",
    "is_tf32_supported", "manual_seed", "manual_seed_all", "max_memory_allocated", "max_memory_reserved",
    "mem_get_info", "memory_allocated", "memory_reserved", "memory_snapshot", "memory_stats",
    "memory_stats_as_nested_dict", "reset_accumulated_memory_stats", "reset_peak_memory_stats", "seed",
    "seed_all", "set_device", "set_per_process_memory_fraction", "set_rng_state", "set_rng_state_all",
    "synchronize",
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


# What a PyTorch build without XPU answers: memory queries report nothing allocated, the RNG state
# lists are empty and setting them does nothing, capability checks are False, and what names a
# device raises.


def init() -> None:
    _not_compiled()


def set_device(device) -> None:
    _not_compiled()


def get_device_properties(device=None):
    _not_compiled()


def get_device_capability(device=None):
    _not_compiled()


def get_device_name(device=None):
    _not_compiled()


def get_rng_state(device="xpu"):
    _not_compiled()


def initial_seed() -> int:
    _not_compiled()


def mem_get_info(device=None):
    _not_compiled()


def get_per_process_memory_fraction(device=None) -> float:
    _not_compiled()


def set_per_process_memory_fraction(fraction: float, device=None) -> None:
    _not_compiled()


def get_rng_state_all() -> list:
    return []


def set_rng_state(new_state, device="xpu") -> None:
    """Sets nothing: PyTorch queues the call until an XPU is initialized, which never happens here."""


def set_rng_state_all(new_states) -> None:
    for state in new_states:
        set_rng_state(state)


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return False


def is_tf32_supported() -> bool:
    return False


def get_arch_list() -> list:
    return []


def get_gencode_flags() -> str:
    return ""


def memory_stats(device=None) -> dict:
    return collections.OrderedDict()


def memory_stats_as_nested_dict(device=None) -> dict:
    return {}


def memory_snapshot(mempool_id=None) -> list:
    return []


def memory_allocated(device=None) -> int:
    return 0


def max_memory_allocated(device=None) -> int:
    return 0


def memory_reserved(device=None) -> int:
    return 0


def max_memory_reserved(device=None) -> int:
    return 0


def reset_peak_memory_stats(device=None) -> None:
    raise AttributeError("module 'ember._C' has no attribute '_xpu_resetPeakMemoryStats'")


def reset_accumulated_memory_stats(device=None) -> None:
    raise AttributeError("module 'ember._C' has no attribute '_xpu_resetAccumulatedMemoryStats'")
