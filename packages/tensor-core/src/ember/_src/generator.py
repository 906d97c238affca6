"""Random number generators: ``ember.Generator``, the default generator and seeding.

A CPU generator is PyTorch's: a 32-bit Mersenne Twister seeded from the low 32 bits of the
seed, 64-bit draws made of two 32-bit ones, and the cached second normal of a Box-Muller
pair (``_C.CpuRng``, csrc/cpu/random.cpp). Seeded programs therefore draw PyTorch's numbers,
and ``get_state``/``set_state`` use PyTorch's 5056-byte layout. Samplers draw serially, so
results do not depend on the thread count.
"""

from __future__ import annotations

import builtins
import os

from . import dtypes
from ._native import _C
from .device import device as _device
from .dispatch import sync_pending as _sync_pending
from .plugins import _LOADED
from .tensor import Tensor, new_empty_tensor

_MASK64 = (1 << 64) - 1
# PyTorch's default seed for a new generator.
_DEFAULT_SEED = 67280421310721
_STATE_BYTES = _C.cpu_rng_state_bytes


class Generator:
    """A source of random numbers for ``generator=`` arguments, as ``torch.Generator``."""

    __slots__ = ("__weakref__", "_device", "_rng")

    def __init__(self, device="cpu"):
        dev = _device(device)
        if dev.type != "cpu":
            raise RuntimeError(f"{dev.type.upper()} device type not an accelerator.")
        self._device = dev
        self._rng = _C.CpuRng(_DEFAULT_SEED)

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
        self._rng.manual_seed(seed & _MASK64)
        return self

    def seed(self) -> int:
        """Seeds from the operating system's entropy and returns the new seed."""
        _sync_pending(None, "random generator state")
        value = int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1)
        self._rng.manual_seed(value)
        return value

    def initial_seed(self) -> int:
        _sync_pending(None, "random generator state")
        return self._rng.initial_seed()

    def get_state(self):
        """The state as a uint8 tensor in PyTorch's CPU layout (5056 bytes)."""
        _sync_pending(None, "random generator state")
        raw = self._rng.get_state()
        state = new_empty_tensor((_STATE_BYTES,), dtypes.uint8)
        memoryview(state._storage)[:_STATE_BYTES] = raw
        return state

    def set_state(self, new_state) -> Generator:
        if not isinstance(new_state, Tensor):
            raise TypeError(f"expected a ember.ByteTensor, but got {type(new_state).__name__}")
        if new_state.dtype is not dtypes.uint8:
            raise TypeError("RNG state must be a ember.ByteTensor")
        if new_state._device.type != "cpu":
            raise RuntimeError("RNG state must be a CPU tensor")
        n = new_state.numel()
        if n != _STATE_BYTES:
            raise RuntimeError(
                f"Expected a CPUGeneratorImplState of size {_STATE_BYTES} but found the input RNG state "
                f"size to be {n}"
            )
        _sync_pending(None, "random generator state")
        # the bytes through numpy (a data read: a pending value is computed first), not a clone,
        # which under ember.compile's capture would be a pending op of its own with no data
        raw = new_state.numpy(force=True).tobytes(order="C")[:_STATE_BYTES]
        self._rng.set_state(raw)
        return self

    def clone_state(self) -> Generator:
        """A new generator at this one's position (as ``graphsafe_get_state`` clones)."""
        g = Generator.__new__(Generator)
        g._device = self._device
        g._rng = self._rng.clone()
        return g

    def __getstate__(self):
        return {"device": str(self._device), "state": self._rng.get_state()}

    def __setstate__(self, st):
        self._device = _device(st["device"])
        self._rng = _C.CpuRng(_DEFAULT_SEED)
        self._rng.set_state(st["state"])

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


def thread_safe_generator() -> Generator | None:
    """The generator a DataLoader *thread* worker owns (its ``WorkerInfo.rng``), for transforms that
    draw random numbers there; None elsewhere (the main process and process workers), which means
    the default generator. ember's DataLoader runs process workers only, but a WorkerInfo set up
    with ``worker_method="thread"`` is honoured as in PyTorch."""
    import sys

    # No import of ember.utils.data (a package above the core): a worker exists only once it is loaded.
    worker = sys.modules.get("ember.utils.data._utils.worker")
    info = None if worker is None else worker.get_worker_info()
    if info is not None and info.worker_method == "thread" and info.rng is not None:
        return info.rng.torch_generator
    return None

