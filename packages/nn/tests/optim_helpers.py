"""Shared helpers for the ember.optim tests: one small model, built in ember and in PyTorch.

The model is a 2-layer MLP written with raw leaf tensors (``w1, b1, w2, b2``) so the tests
need nothing from ``ember.nn``: ``loss = mean((tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2)``.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember

# PyTorch is the oracle (the test extra); without it these tests are skipped, not broken.
torch = pytest.importorskip("torch")

DTYPES = {"float32": (ember.float32, torch.float32), "float64": (ember.float64, torch.float64)}
# float64 atol 1e-11: centered RMSprop's sqrt(v - g_avg**2) cancels, and on an AMD EPYC host one
# element drifted 6.5e-12 from PyTorch's after four steps (kernel order differs by CPU; same math).
TOLERANCES = {"float64": dict(rtol=1e-10, atol=1e-11), "float32": dict(rtol=2e-5, atol=2e-6)}


def model_arrays(seed: int = 0) -> dict[str, np.ndarray]:
    """Initial weights and one batch of data, as float64 NumPy arrays."""
    rng = np.random.default_rng(seed)
    return {
        "w1": rng.standard_normal((4, 6)) * 0.5,
        "b1": rng.standard_normal(6) * 0.1,
        "w2": rng.standard_normal((6, 3)) * 0.5,
        "b2": rng.standard_normal(3) * 0.1,
        "x": rng.standard_normal((8, 4)),
        "y": rng.standard_normal((8, 3)),
    }


class Model:
    """The MLP in one framework (``lib`` is ``ember`` or ``torch``)."""

    def __init__(self, lib, arrays: dict[str, np.ndarray], dtype: str = "float64"):
        self.lib = lib
        lib_dtype = DTYPES[dtype][0 if lib is ember else 1]
        as_tensor = (
            (lambda a: ember.tensor(a, dtype=lib_dtype))
            if lib is ember
            else (lambda a: torch.tensor(a, dtype=lib_dtype))
        )
        self.params = [as_tensor(arrays[k]).requires_grad_(True) for k in ("w1", "b1", "w2", "b2")]
        self.x, self.y = as_tensor(arrays["x"]), as_tensor(arrays["y"])

    def loss(self):
        w1, b1, w2, b2 = self.params
        out = self.lib.tanh(self.x @ w1 + b1) @ w2 + b2
        return ((out - self.y) ** 2).mean()

    def closure(self, optimizer):
        def closure():
            optimizer.zero_grad()
            loss = self.loss()
            loss.backward()
            return loss

        return closure

    def arrays(self) -> list[np.ndarray]:
        return [np.array(p.detach().numpy(), dtype=np.float64, copy=True) for p in self.params]


def pair(arrays=None, dtype: str = "float64") -> tuple[Model, Model]:
    arrays = model_arrays() if arrays is None else arrays
    return Model(ember, arrays, dtype), Model(torch, arrays, dtype)


def assert_params_close(
    ours: Model, theirs: Model, dtype: str = "float64", where: str = "", **tolerance
) -> None:
    tolerance = tolerance or TOLERANCES[dtype]
    for name, a, b in zip(("w1", "b1", "w2", "b2"), ours.arrays(), theirs.arrays()):
        np.testing.assert_allclose(a, b, err_msg=f"{name} {where}", **tolerance)


def train(model: Model, optimizer, steps: int, record_every: int = 5) -> list[list[np.ndarray]]:
    """Runs ``steps`` steps (grad via closure-free backward), recording weights every few steps."""
    snapshots = []
    for i in range(steps):
        optimizer.zero_grad()
        model.loss().backward()
        optimizer.step()
        if (i + 1) % record_every == 0:
            snapshots.append(model.arrays())
    return snapshots


def assert_same_trajectory(ours: list, theirs: list, dtype: str = "float64") -> None:
    assert len(ours) == len(theirs)
    for k, (snap_a, snap_b) in enumerate(zip(ours, theirs)):
        for name, a, b in zip(("w1", "b1", "w2", "b2"), snap_a, snap_b):
            np.testing.assert_allclose(a, b, err_msg=f"{name} at snapshot {k}", **TOLERANCES[dtype])


def to_ember(value):
    """A (nested) torch state value converted to ember, keeping dtypes (for load_state_dict)."""
    if isinstance(value, torch.Tensor):
        return ember.tensor(value.detach().numpy().copy(), dtype=DTYPES[str(value.dtype)[6:]][0])
    if isinstance(value, dict):
        return {k: to_ember(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_ember(v) for v in value)
    return value
