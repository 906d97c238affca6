"""``ember.cuda``: what PyTorch programs ask before choosing a device.

This build has no CUDA backend, so ``is_available()`` is False and ``device_count()`` is
0, exactly what PyTorch's CPU build answers; seeding calls are accepted and do nothing, as
in PyTorch without a GPU. Anything that needs a GPU raises an error naming the problem.
A CUDA backend package registers itself through ``ember._src.device.register_backend``.
"""

from __future__ import annotations

from ember._src.device import _BACKENDS


def is_available() -> bool:
    return "cuda" in _BACKENDS


def device_count() -> int:
    backend = _BACKENDS.get("cuda")
    return getattr(backend, "device_count", lambda: 0)() if backend else 0


def is_initialized() -> bool:
    return is_available()


def _no_cuda(what: str):
    # AssertionError, as PyTorch's CPU build raises ("Torch not compiled with CUDA enabled").
    raise AssertionError(f"{what}: ember not compiled with CUDA enabled (no package providing 'cuda' is installed)")


def current_device() -> int:
    if not is_available():
        _no_cuda("ember.cuda.current_device()")
    return 0


def set_device(device) -> None:
    if not is_available():
        _no_cuda("ember.cuda.set_device()")


def get_device_name(device=None) -> str:
    if not is_available():
        _no_cuda("ember.cuda.get_device_name()")
    return _BACKENDS["cuda"].name


def synchronize(device=None) -> None:
    if not is_available():
        _no_cuda("ember.cuda.synchronize()")


def manual_seed(seed: int) -> None:
    """Accepted without a GPU, as in PyTorch (the call is silently ignored)."""


def manual_seed_all(seed: int) -> None:
    """Accepted without a GPU, as in PyTorch (the call is silently ignored)."""


def empty_cache() -> None:
    """Nothing is cached without a GPU."""


def memory_allocated(device=None) -> int:
    return 0


def max_memory_allocated(device=None) -> int:
    return 0


def is_bf16_supported() -> bool:
    return False


def __getattr__(name):
    # ember.cuda.amp (deprecated aliases) is loaded on first use: it needs the rest of ember.
    if name == "amp":
        import importlib

        return importlib.import_module("ember.cuda.amp")
    raise AttributeError(f"module 'ember.cuda' has no attribute '{name}'")
