"""Seed-independent initial states: every floating parameter/buffer of a module is filled from NumPy.

Programs call ``seed_free_init(model, salt)`` after building a model, so PyTorch and ember start from
the same state_dict (copied in through NumPy arrays) whatever their random generators draw. Each entry's
values come from its own ``RandomState`` (seeded from the entry's name and the salt), uniform in
``±1/sqrt(fan_in)``; running statistics of norm layers keep their own values (mean 0, var 1).
A program run with the argument ``torch-init`` keeps its modules' own (seeded) initialization instead.
"""

from __future__ import annotations

import sys
import zlib

import numpy as np


def _values(name: str, shape: tuple, salt: int) -> np.ndarray:
    rs = np.random.RandomState((zlib.crc32(name.encode()) + salt) % (2**32))
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else max(int(shape[0]) if shape else 1, 1)
    bound = 1.0 / np.sqrt(max(fan_in, 1))
    return rs.uniform(-bound, bound, size=shape).astype(np.float32)


def seed_free_init(model, salt: int = 0):
    import torch

    if "torch-init" in sys.argv[1:]:
        # the program's run with its modules' own seeded initialization (the driver seeds both libraries
        # alike; ember draws PyTorch's CPU random streams), as written without this helper
        return model

    state = model.state_dict()
    new = {}
    for name, t in state.items():
        if not t.is_floating_point() or name.endswith(("running_mean", "running_var")):
            new[name] = t
            continue
        arr = _values(name, tuple(t.shape), salt)
        new[name] = torch.from_numpy(arr).to(t.dtype)
    model.load_state_dict(new)
    return model


def data(shape, salt: int = 0, low: float = -1.0, high: float = 1.0):
    """A float32 tensor of the given shape from NumPy (the same in both libraries)."""
    import torch

    rs = np.random.RandomState(1000 + salt)
    return torch.from_numpy(rs.uniform(low, high, size=shape).astype(np.float32))


def integers(shape, high: int, salt: int = 0):
    """An int64 tensor in [0, high) from NumPy."""
    import torch

    rs = np.random.RandomState(2000 + salt)
    return torch.from_numpy(rs.randint(0, high, size=shape).astype(np.int64))
