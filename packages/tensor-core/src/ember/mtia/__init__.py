"""``ember.mtia``: the MTIA device module PyTorch programs query (``torch.mtia``), answering as a
PyTorch build without MTIA: ``is_available()`` is False, ``device_count()`` 0, the memory counters
read 0, seeding does nothing, and what needs a device raises PyTorch's errors."""

from __future__ import annotations

__all__ = [
    "current_device", "current_stream", "default_stream", "device_count", "empty_cache", "get_device_capability",
    "get_device_properties", "get_rng_state", "get_rng_state_all", "init", "initial_seed", "is_available",
    "is_bf16_supported", "is_initialized", "manual_seed", "manual_seed_all", "max_memory_allocated",
    "memory_allocated", "memory_stats", "reset_peak_memory_stats", "seed", "seed_all", "set_device",
    "set_rng_state", "set_rng_state_all", "synchronize",
]


def _no_backend(what: str):
    raise RuntimeError(f"Cannot execute {what}() without MTIA backend.")


def _not_compiled():
    raise AssertionError("ember not compiled with MTIA enabled. Ensure you have `import "
                         "mtia.host_runtime.torch_mtia.dynamic_library` in your python src file and include "
                         "`//mtia/host_runtime/torch_mtia:torch_mtia` as your target dependency!")


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def is_initialized() -> bool:
    return False


def init() -> None:
    _not_compiled()


def current_device() -> int:
    _no_backend("getCurrentDevice")


def set_device(device) -> None:
    _no_backend("setCurrentDevice")


def synchronize(device=None) -> None:
    _no_backend("getCurrentDevice")


def current_stream(device=None):
    _no_backend("getCurrentDevice")


def default_stream(device=None):
    _no_backend("getCurrentDevice")


def get_device_capability(device=None):
    _no_backend("getCurrentDevice")


def get_device_properties(device=None):
    _no_backend("getCurrentDevice")


def empty_cache() -> None:
    _no_backend("emptyCache")


def memory_stats(device=None) -> dict:
    return {}


def memory_allocated(device=None) -> int:
    return 0


def max_memory_allocated(device=None) -> int:
    return 0


def reset_peak_memory_stats(device=None) -> None:
    return None


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True  # PyTorch's answer: every MTIA generation has bfloat16


def get_rng_state(device="mtia"):
    _not_compiled()


def set_rng_state(new_state, device="mtia") -> None:
    _no_backend("getCurrentDevice")


def get_rng_state_all() -> list:
    return []


def set_rng_state_all(new_states) -> None:
    for state in new_states:
        set_rng_state(state)


def initial_seed() -> int:
    _not_compiled()


def manual_seed(seed: int) -> None:
    """Seeds nothing: there is no MTIA generator."""


manual_seed_all = manual_seed


def seed() -> None:
    pass


seed_all = seed
