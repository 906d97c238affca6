"""``ember.random``: the default generator's seed and state, and ``fork_rng``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ember._src.api import (
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
    thread_safe_generator,
)

__all__ = ["default_generator", "fork_rng", "get_rng_state", "initial_seed", "manual_seed", "seed", "set_rng_state",
           "thread_safe_generator"]


@contextlib.contextmanager
def fork_rng(devices=None, enabled: bool = True, _caller: str = "fork_rng", _devices_kw: str = "devices",
             device_type: str | None = None) -> Iterator[None]:
    """Restores the default generator's state on exit: random draws inside do not change the
    stream outside. ``devices``/``device_type`` name accelerator generators, which the CPU build
    does not have (PyTorch's CPU build accepts and ignores them the same way)."""
    if not enabled or device_type == "meta":  # PyTorch forks nothing, not even the CPU generator, for "meta"
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
