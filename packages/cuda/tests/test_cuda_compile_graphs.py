"""``ember.compile(mode="reduce-overhead")`` on CUDA: compiled graphs replayed as CUDA graphs
give eager's values, for inference and for a training step (GPU only; needs ember-compile)."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import host, needs_gpu, rand

import ember

pytestmark = [pytest.mark.gpu, needs_gpu]
pytest.importorskip("ember.compiler")
nn = pytest.importorskip("ember.nn")
F = pytest.importorskip("ember.nn.functional")


def _counts():
    from ember.compiler.inductor._cudagraphs import COUNTERS

    return dict(COUNTERS, reasons=list(COUNTERS["reasons"]))


def test_reduce_overhead_inference_follows_inputs():
    before = _counts()
    def fn(x, w):
        return ember.softmax((x @ w).relu() + 1.0, -1) * 2.0

    compiled = ember.compile(fn, mode="reduce-overhead")
    w = rand((16, 8), seed=1).cuda()
    kept = []
    for seed in range(5):  # warm-up, capture, then replays
        x = rand((32, 16), seed=seed + 2).cuda()
        out = compiled(x, w)
        kept.append((out, fn(x, w)))
    for got, want in kept:  # results held across calls are not overwritten by later replays
        np.testing.assert_allclose(host(got), host(want), rtol=1e-5, atol=1e-6)
    after = _counts()
    assert after["failures"] == before["failures"], after["reasons"]
    assert after["captures"] > before["captures"] and after["replays"] >= before["replays"] + 3


def _small_model(mode):
    """The same seeded CUDA model, its SGD optimizer, and the model to call (compiled when ``mode``)."""
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4)).cuda()
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    return model, opt, ember.compile(model, mode=mode) if mode else model


def _training_losses(step_model, opt, steps):
    """The losses of ``steps`` SGD steps on the same seeded batches."""
    g = np.random.default_rng(0)
    out = []
    for _ in range(steps):
        x = ember.tensor(g.standard_normal((8, 16)).astype(np.float32)).cuda()
        y = ember.tensor(g.integers(0, 4, 8)).cuda()
        loss = F.cross_entropy(step_model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def test_reduce_overhead_training_matches_eager():
    def losses(mode):
        _, opt, step_model = _small_model(mode)
        return _training_losses(step_model, opt, 6)

    before = _counts()
    np.testing.assert_allclose(losses("reduce-overhead"), losses(None), rtol=1e-5, atol=1e-6)
    after = _counts()
    assert after["failures"] == before["failures"], after["reasons"]
    assert after["captures"] >= before["captures"] + 2  # the forward and the backward graph


def test_reduce_overhead_outputs_held_or_viewed_keep_their_values():
    # Outputs are aliases of the graph's buffers: one still referenced (itself or through a view,
    # even written in place by the program) is copied out before the next replay overwrites them.
    def fn(x):
        return (x * 2.0).relu() + 1.0, x.sum(0)

    compiled = ember.compile(fn, mode="reduce-overhead")
    kept = []
    for seed in range(6):
        x = rand((8, 4), seed=seed).cuda()
        a, b = compiled(x)
        row = a[1]  # only a view of the first output stays referenced
        b.mul_(3.0)
        want_a, want_b = fn(x)
        kept.append((row, b, host(want_a)[1], host(want_b) * 3.0))
        del a
    for row, b, want_row, want_b in kept:
        np.testing.assert_allclose(host(row), want_row, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(host(b), want_b, rtol=1e-5, atol=1e-6)


def test_reduce_overhead_training_copies_only_what_the_program_holds():
    # A training loop: the saved activations are read by the backward graph where the forward
    # graph wrote them, and released by backward, so a replay copies out only the loss kept in
    # the loop's variable; two forwards before one backward (gradient accumulation) still give
    # eager's gradients.
    def run(mode, accumulate):
        model, opt, step_model = _small_model(mode)
        g = np.random.default_rng(1)
        grads = []
        for _ in range(6):
            xs = [ember.tensor(g.standard_normal((8, 16)).astype(np.float32)).cuda() for _ in range(accumulate)]
            loss = sum(step_model(x).square().mean() for x in xs)
            opt.zero_grad()
            loss.backward()
            grads.append(host(model[0].weight.grad))
            opt.step()
        return grads

    for accumulate in (1, 2):
        before = _counts()
        got = run("reduce-overhead", accumulate)
        after = _counts()
        for a, b in zip(got, run(None, accumulate)):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
        assert after["failures"] == before["failures"], after["reasons"]
        assert after["replays"] > before["replays"]
        if accumulate == 1:  # at most the loss per forward replay
            assert after["evacuated"] - before["evacuated"] <= after["replays"] - before["replays"]


def test_cudagraphs_backend_training_matches_eager():
    # backend="cudagraphs" (PyTorch's): AOT autograd with eager kernels, the forward and backward
    # graphs captured and replayed as CUDA graphs.
    def losses(backend):
        ember.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).cuda()
        opt = ember.optim.SGD(model.parameters(), lr=0.1)
        step_model = ember.compile(model, backend=backend) if backend else model
        return _training_losses(step_model, opt, 5)

    before = _counts()
    np.testing.assert_allclose(losses("cudagraphs"), losses(None), rtol=1e-5, atol=1e-6)
    after = _counts()
    assert after["failures"] == before["failures"], after["reasons"]
    assert after["captures"] >= before["captures"] + 2 and after["replays"] > before["replays"]
