"""nn models trained on CUDA match the same training on the CPU step for step (GPU only)."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import needs_gpu

import ember

# ember-nn is a test-only companion of ember-cuda (installed alone, `nox -s cuda` has only the core).
nn = pytest.importorskip("ember.nn")
F = pytest.importorskip("ember.nn.functional")

pytestmark = [pytest.mark.gpu, needs_gpu]


def _mlp():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.GELU(), nn.LayerNorm(64),
                         nn.Linear(64, 10))


def _cnn():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, stride=2, padding=1),
                         nn.ReLU(), nn.Flatten(), nn.Linear(16 * 6 * 6, 10))


def _train(make, device, optimizer, x, y, steps=20):
    ember.manual_seed(0)
    model = make().to(device)
    if optimizer == "sgd":
        opt = ember.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    else:
        opt = ember.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = x.to(device), y.to(device)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
@pytest.mark.parametrize("make,shape", [(_mlp, (64, 32)), (_cnn, (16, 1, 12, 12))], ids=["mlp", "cnn"])
def test_training_matches_cpu(make, shape, optimizer):
    g = np.random.default_rng(0)
    x = ember.tensor(g.standard_normal(shape).astype(np.float32))
    y = ember.tensor(g.integers(0, 10, shape[0]))
    cpu = _train(make, "cpu", optimizer, x, y)
    gpu = _train(make, "cuda", optimizer, x, y)
    np.testing.assert_allclose(gpu, cpu, rtol=2e-4, atol=2e-5)
    assert gpu[-1] < gpu[0]


def test_dataloader_pin_memory_feeds_the_gpu():
    from ember.utils.data import DataLoader, TensorDataset

    data = TensorDataset(ember.arange(40, dtype=ember.float32).reshape(20, 2), ember.arange(20))
    total = 0.0
    for xb, _yb in DataLoader(data, batch_size=8, pin_memory=True):
        assert xb.is_pinned()
        total += float(xb.to("cuda", non_blocking=True).sum())
    assert total == float(ember.arange(40).sum())


def test_cpu_leaf_moved_to_cuda_gets_its_gradient_on_the_cpu():
    # PyTorch's _to_copy backward returns the gradient on the source device (and dtype).
    x = ember.ones(3, requires_grad=True)
    (x.to("cuda", ember.float64) * 2).sum().backward()
    assert x.grad.device.type == "cpu" and x.grad.dtype is ember.float32
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
    w = ember.ones(2, device="cuda", requires_grad=True)
    (w.cpu() * 3).sum().backward()
    assert w.grad.device.type == "cuda" and w.grad.cpu().tolist() == [3.0, 3.0]
