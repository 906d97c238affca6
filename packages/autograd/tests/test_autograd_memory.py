"""Graphs die with their outputs (no reference cycles through grad_fn) and RSS stays flat."""

from __future__ import annotations

import gc
import os
import weakref

import pytest

import ember
import ember.autograd as ag


def _rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _no_cycle_collection(fn):
    """Runs ``fn`` with the cycle collector off: whatever it frees, plain refcounting freed."""
    gc.collect()
    gc.disable()
    try:
        return fn()
    finally:
        gc.enable()


class _Exp(ag.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y


def _graphs():
    """Builders of small graphs: each returns (output, its grad_fn)."""

    def op_chain():
        x = ember.randn(8, requires_grad=True)
        y = (x * x).exp()  # exp saves its output
        return y, y.grad_fn

    def inplace():
        x = ember.randn(8, requires_grad=True)
        y = x * 2
        y.mul_(x)
        return y, y.grad_fn

    def view_inplace():
        x = ember.randn(4, 2, requires_grad=True)
        y = x.clone()
        y[1].mul_(3)
        return y, y.grad_fn

    def function():
        x = ember.randn(8, requires_grad=True)
        y = _Exp.apply(x)
        return y, y.grad_fn

    def retained():
        x = ember.randn(8, requires_grad=True)
        y = x * 3
        y.retain_grad()
        y.register_hook(lambda g: g)
        return y.sum(), y.grad_fn

    return [op_chain, inplace, view_inplace, function, retained]


@pytest.mark.parametrize("build", _graphs(), ids=lambda f: f.__name__)
def test_graph_freed_when_output_dropped(build):
    def run():
        out, fn = build()
        ref = weakref.ref(fn)
        del out, fn
        return ref

    assert _no_cycle_collection(run)() is None


@pytest.mark.parametrize("build", _graphs(), ids=lambda f: f.__name__)
def test_graph_freed_after_backward(build):
    def run():
        out, fn = build()
        ref = weakref.ref(fn)
        out.sum().backward()
        del out, fn
        return ref

    assert _no_cycle_collection(run)() is None


def test_saved_tensors_released_after_backward():
    x = ember.randn(1000, requires_grad=True)
    a = x * 2
    storage_ref = weakref.ref(a._storage)
    y = (a * a).sum()
    del a
    assert storage_ref() is not None  # kept for backward by MulBackward0
    y.backward()
    gc.collect()
    assert storage_ref() is None  # freed once the node ran, although y (and its graph) is alive


def test_leaf_not_kept_alive_by_its_accumulator():
    def run():
        x = ember.randn(4, requires_grad=True)
        ref = weakref.ref(x)
        (x * 2).sum().backward()
        del x
        return ref

    assert _no_cycle_collection(run)() is None


def test_rss_flat_over_many_steps():
    w1 = ember.randn(64, 64, requires_grad=True)
    w2 = ember.randn(64, 8, requires_grad=True)
    x = ember.randn(32, 64)

    def step():
        h = ember.relu(ember.matmul(x, w1))
        loss = ember.matmul(h, w2).exp().mean()
        loss.backward()
        w1.grad = None
        w2.grad = None

    for _ in range(100):  # warm up allocator and caches
        step()
    gc.collect()
    before = _rss_bytes()
    for _ in range(1000):
        step()
    gc.collect()
    grown = _rss_bytes() - before
    # One step's tensors are ~40 KB; a leak of one graph per step would add > 40 MB.
    assert grown < 16 * 1024 * 1024, f"RSS grew by {grown / 1e6:.1f} MB over 1000 steps"
