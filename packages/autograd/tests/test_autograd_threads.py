"""Backward on independent graphs from several threads at once matches running them serially;
grad mode and saved-tensor hooks are per thread, as in PyTorch."""

from __future__ import annotations

import threading

import numpy as np

import ember


def _run_threads(work, n_threads: int) -> list:
    barrier = threading.Barrier(n_threads)
    results: list = [None] * n_threads
    errors: list = []

    def body(i):
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def _grads(seed: int) -> list:
    g = ember.Generator().manual_seed(seed)
    w1 = ember.randn(16, 32, generator=g, requires_grad=True)
    w2 = ember.randn(32, 4, generator=g, requires_grad=True)
    x = ember.randn(64, 16, generator=g)
    conv_w = ember.randn(3, 2, 3, 3, generator=g, requires_grad=True)
    image = ember.randn(4, 2, 8, 8, generator=g)
    for _ in range(3):  # accumulates into .grad three times
        h = (x @ w1).tanh()
        loss = ember.log_softmax(h @ w2, dim=1).sum() + ember.conv2d(image, conv_w).relu().pow(2).mean()
        loss.backward()
    (gx,) = ember.autograd.grad((w1.sin() * w1).sum(), w1, create_graph=True)
    (ggx,) = ember.autograd.grad(gx.sum(), w1)
    return [w1.grad.numpy(), w2.grad.numpy(), conv_w.grad.numpy(), ggx.numpy()]


def test_backward_on_independent_graphs_from_threads():
    expected = [_grads(seed) for seed in range(4)]
    for _ in range(2):
        for seed, got in enumerate(_run_threads(_grads, n_threads=4)):
            for a, b in zip(got, expected[seed]):
                np.testing.assert_array_equal(a, b)


def test_grad_mode_is_per_thread():
    entered, done = threading.Event(), threading.Event()

    def no_grad_thread():
        with ember.no_grad():
            entered.set()
            done.wait(timeout=30)
            return ember.is_grad_enabled()

    def grad_thread():
        entered.wait(timeout=30)
        try:
            x = ember.ones(3, requires_grad=True)
            return (x * 2).requires_grad
        finally:
            done.set()

    assert _run_threads(lambda i: no_grad_thread() if i == 0 else grad_thread(), 2) == [False, True]


def test_saved_tensor_hooks_are_per_thread():
    entered, done = threading.Event(), threading.Event()
    packed: list = []

    def hooked_thread():
        with ember.autograd.graph.saved_tensors_hooks(lambda t: packed.append(1) or t, lambda t: t):
            entered.set()
            done.wait(timeout=30)
        return len(packed)

    def plain_thread():
        entered.wait(timeout=30)
        try:
            for _ in range(20):
                x = ember.randn(5, requires_grad=True)
                (x.exp() * x).sum().backward()
        finally:
            done.set()
        return len(packed)

    assert _run_threads(lambda i: hooked_thread() if i == 0 else plain_thread(), 2) == [0, 0]
