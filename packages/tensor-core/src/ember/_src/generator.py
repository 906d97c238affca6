"""Random number generators: ``ember.Generator``, the default generator and seeding.

A generator is counter-based (Philox4x32-10, csrc/cpu/random.cpp): its whole state is
``(seed, offset)``. A call that draws ``n`` values uses counters ``offset .. offset+n-1``
and advances ``offset`` by ``n``, so every value depends on (seed, its counter) alone and
results are the same for any thread count. The streams differ from PyTorch's (Mersenne
Twister); ``get_state`` returns ember's 16-byte state, not PyTorch's 5056 bytes.
"""

from __future__ import annotations

import builtins
import os
import threading

from . import dtypes
from .device import device as _device
from .dispatch import sync_pending as _sync_pending
from .plugins import _LOADED
from .tensor import Tensor, new_empty_tensor

_MASK64 = (1 << 64) - 1
# PyTorch's default seed for a new generator.
_DEFAULT_SEED = 67280421310721
_STATE_BYTES = 16
# Reserving counters is a read-modify-write of (seed, offset): threads sharing a generator
# (the default one, typically) must never reserve the same counters. One lock for all
# generators keeps Generator objects copyable and picklable; it is held for nanoseconds.
_LOCK = threading.Lock()


class Generator:
    """A source of random numbers for ``generator=`` arguments, as ``torch.Generator``."""

    __slots__ = ("__weakref__", "_device", "_offset", "_seed")

    def __init__(self, device="cpu"):
        dev = _device(device)
        if dev.type != "cpu":
            raise RuntimeError(f"{dev.type.upper()} device type not an accelerator.")
        self._device = dev
        self._seed = _DEFAULT_SEED
        self._offset = 0

    @property
    def device(self):
        return self._device

    def manual_seed(self, seed) -> Generator:
        """Sets the seed (any int in [-2**63, 2**64); negatives wrap) and rewinds the stream."""
        if isinstance(seed, builtins.bool) or not isinstance(seed, int):
            raise RuntimeError(f"manual_seed expected a long, but got {type(seed).__name__}")  # noqa: TRY004 (PyTorch's type)
        if seed < -(1 << 63) or seed > _MASK64:
            raise ValueError("Overflow when unpacking long long")
        _sync_pending(None, "random generator state")
        with _LOCK:
            self._seed = seed & _MASK64
            self._offset = 0
        return self

    def seed(self) -> int:
        """Seeds from the operating system's entropy and returns the new seed."""
        _sync_pending(None, "random generator state")
        value = int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1)
        self._seed, self._offset = value, 0
        return value

    def initial_seed(self) -> int:
        _sync_pending(None, "random generator state")
        return self._seed

    def get_state(self):
        """The state as a uint8 tensor: seed then offset, 8 little-endian bytes each."""
        _sync_pending(None, "random generator state")

        state = new_empty_tensor((_STATE_BYTES,), dtypes.uint8)
        memoryview(state._storage)[:_STATE_BYTES] = (
            self._seed.to_bytes(8, "little") + self._offset.to_bytes(8, "little")
        )
        return state

    def set_state(self, new_state) -> Generator:
        if not isinstance(new_state, Tensor):
            raise TypeError(f"expected a ember.ByteTensor, but got {type(new_state).__name__}")
        if new_state.dtype is not dtypes.uint8:
            raise TypeError("RNG state must be a ember.ByteTensor")
        if new_state.numel() != _STATE_BYTES:
            raise RuntimeError(
                f"Expected an ember generator state of size {_STATE_BYTES} but found the input RNG state "
                f"size to be {new_state.numel()}"
            )
        if new_state._device.type != "cpu":
            raise RuntimeError("RNG state must be a CPU tensor")
        _sync_pending(None, "random generator state")
        raw = bytes(memoryview(new_state.contiguous().clone()._storage)[:_STATE_BYTES])
        self._seed = int.from_bytes(raw[:8], "little")
        self._offset = int.from_bytes(raw[8:], "little")
        return self

    def _take(self, n: int) -> tuple:
        """Reserves ``n`` counters: returns (seed, first counter) and advances the offset."""
        with _LOCK:
            seed, offset = self._seed, self._offset
            self._offset = (offset + n) & _MASK64
        return seed, offset

    def __repr__(self) -> str:
        return f"<ember.Generator object at {hex(id(self))}>"


default_generator = Generator()


def resolve(generator) -> Generator:
    """The generator a ``generator=`` argument names (the default one for None)."""
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be an ember.Generator, not {type(generator).__name__}")
    return generator


def manual_seed(seed) -> Generator:
    """Seeds the default generator (``int(seed)`` first, as PyTorch) and returns it; a device plugin
    already in use (CUDA) is seeded too, as ``torch.manual_seed`` seeds every device."""
    gen = default_generator.manual_seed(int(seed))

    plugin = _LOADED.get("cuda")
    api = getattr(plugin, "api", None)
    if api is not None and api.is_available():
        api.manual_seed(int(seed))
    return gen


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(new_state) -> None:
    default_generator.set_state(new_state)
