"""Per-sample gradients (``vmap(grad(loss), in_dims=(None, 0, 0))``) of an MLP, a CNN and a small
transformer against ``torch.func``, and the same gradients from a Python loop in ember."""

from __future__ import annotations

import pytest
import torch
import torch.func as tf
from func_models import (
    assert_trees_close,
    cnn_loss,
    cnn_params,
    mlp_loss,
    mlp_params,
    to_ember,
    transformer_loss,
    transformer_params,
)

import ember
from ember.func import grad, grad_and_value, vmap


def _data(kind, batch, seed=1):
    g = torch.Generator().manual_seed(seed)
    if kind == "mlp":
        return torch.randn(batch, 10, generator=g), torch.randint(0, 4, (batch,), generator=g)
    if kind == "cnn":
        return torch.randn(batch, 1, 8, 8, generator=g), torch.randint(0, 3, (batch,), generator=g)
    return torch.randint(0, 11, (batch, 6), generator=g), torch.randint(0, 11, (batch, 6), generator=g)


MODELS = {
    "mlp": (mlp_params, mlp_loss),
    "cnn": (cnn_params, cnn_loss),
    "transformer": (transformer_params, transformer_loss),
}


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_per_sample_grads_match_torch_func(kind):
    make_params, loss = MODELS[kind]
    tp = make_params()
    x, y = _data(kind, 8)
    expected = tf.vmap(tf.grad(lambda p, a, b: loss(torch, p, a, b)), in_dims=(None, 0, 0))(tp, x, y)
    actual = vmap(grad(lambda p, a, b: loss(ember, p, a, b)), in_dims=(None, 0, 0))(to_ember(tp), to_ember(x),
                                                                                  to_ember(y))
    assert_trees_close(actual, expected, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_per_sample_grads_match_an_ember_loop(kind):
    make_params, loss = MODELS[kind]
    p = to_ember(make_params(seed=3))
    x, y = (to_ember(t) for t in _data(kind, 5, seed=4))
    batched = vmap(grad(lambda q, a, b: loss(ember, q, a, b)), in_dims=(None, 0, 0))(p, x, y)
    for i in range(5):
        one = grad(lambda q, i=i: loss(ember, q, x[i], y[i]))(p)
        assert_trees_close({k: v[i] for k, v in batched.items()}, one, rtol=1e-4, atol=1e-5)


def test_per_sample_grads_leave_parameters_alone():
    p = to_ember(mlp_params())
    x, y = (to_ember(t) for t in _data("mlp", 4))
    grads, values = vmap(grad_and_value(lambda q, a, b: mlp_loss(ember, q, a, b)), in_dims=(None, 0, 0))(p, x, y)
    assert values.shape == (4,)
    assert all(not g.requires_grad for g in grads.values())
    assert all(v.grad is None and not v.requires_grad for v in p.values())


def test_per_sample_grads_in_chunks_equal_whole_batch():
    p = to_ember(mlp_params())
    x, y = (to_ember(t) for t in _data("mlp", 7))
    f = grad(lambda q, a, b: mlp_loss(ember, q, a, b))
    whole = vmap(f, in_dims=(None, 0, 0))(p, x, y)
    chunked = vmap(f, in_dims=(None, 0, 0), chunk_size=3)(p, x, y)
    assert_trees_close(chunked, whole, rtol=1e-6, atol=1e-7)


def test_per_sample_grads_under_outer_autograd():
    """The per-sample gradients stay differentiable for plain autograd outside (a gradient penalty)."""
    tp = {k: v.requires_grad_() for k, v in mlp_params().items()}
    x, y = _data("mlp", 4)
    tg = tf.vmap(tf.grad(lambda p, a, b: mlp_loss(torch, p, a, b)), in_dims=(None, 0, 0))(tp, x, y)
    sum(g.pow(2).sum() for g in tg.values()).backward()
    ep = {k: v.requires_grad_() for k, v in to_ember(mlp_params()).items()}
    eg = vmap(grad(lambda p, a, b: mlp_loss(ember, p, a, b)), in_dims=(None, 0, 0))(ep, to_ember(x), to_ember(y))
    sum(g.pow(2).sum() for g in eg.values()).backward()
    assert_trees_close({k: v.grad for k, v in ep.items()}, {k: v.grad for k, v in tp.items()}, rtol=1e-3,
                       atol=1e-5)


def _per_sample_grads_inplace_relu(lib):
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(4, 4), lib.nn.ReLU(inplace=True), lib.nn.Linear(4, 2))
    x = lib.randn(3, 4)
    params = {k: v.detach() for k, v in m.named_parameters()}
    loss = lambda p, xi: lib.func.functional_call(m, p, (xi,)).sum()  # noqa: E731
    grads = lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0))(params, x)
    return {k: v.numpy() for k, v in grads.items()}


def test_per_sample_grads_through_an_inplace_activation():
    # vmap(grad(...)) over ReLU(inplace=True) failed: the recorder asked the batched op for
    # `differentiable` (relu_ has no formula of its own) and _LogicalOp had none.
    import numpy as np

    theirs, ours = _per_sample_grads_inplace_relu(torch), _per_sample_grads_inplace_relu(ember)
    for k in theirs:
        np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-5, atol=1e-6)
