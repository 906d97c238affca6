"""nn.Embedding(sparse=True), F.embedding(sparse=True) and the optimizers that take sparse
gradients (SGD, Adagrad, SparseAdam), against torch (issue 19)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember

STEPS = [[[1, 2, 1], [3, 1, 7]], [[0, 9, 9]], [[4, 4, 4]]]


@pytest.mark.parametrize("padding_idx", [None, 1])
@pytest.mark.parametrize("scale", [False, True])
def test_embedding_sparse_grad(padding_idx, scale):
    w = np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32)
    me = ember.nn.Embedding(10, 4, sparse=True, padding_idx=padding_idx, scale_grad_by_freq=scale,
                            _weight=ember.tensor(w))
    mt = torch.nn.Embedding(10, 4, sparse=True, padding_idx=padding_idx, scale_grad_by_freq=scale,
                            _weight=torch.tensor(w))
    idx = [[1, 2, 1], [3, 1, 7]]
    if scale:  # torch has no sparse gradient with frequency scaling: the same error
        with pytest.raises(RuntimeError, match="scale_grad_by_freq not supported with sparse gradients"):
            me(ember.tensor(idx)).sum().backward()
        return
    (me(ember.tensor(idx)) * 2).sum().backward()
    (mt(torch.tensor(idx)) * 2).sum().backward()
    assert me.weight.grad.layout is ember.sparse_coo
    assert me.weight.grad._nnz() == mt.weight.grad._nnz()
    np.testing.assert_allclose(me.weight.grad.to_dense().numpy(), mt.weight.grad.to_dense().numpy(),
                               rtol=1e-6, atol=1e-6)
    # A second backward accumulates (sparse + sparse stays sparse).
    (me(ember.tensor(idx)) * 2).sum().backward()
    (mt(torch.tensor(idx)) * 2).sum().backward()
    assert me.weight.grad.layout is ember.sparse_coo
    np.testing.assert_allclose(me.weight.grad.to_dense().numpy(), mt.weight.grad.to_dense().numpy(),
                               rtol=1e-6, atol=1e-6)


def test_functional_embedding_sparse():
    w = np.random.default_rng(1).standard_normal((6, 3))
    we, wt = ember.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    ember.nn.functional.embedding(ember.tensor([0, 5, 5]), we, sparse=True).sum().backward()
    torch.nn.functional.embedding(torch.tensor([0, 5, 5]), wt, sparse=True).sum().backward()
    assert we.grad.layout is ember.sparse_coo
    np.testing.assert_allclose(we.grad.to_dense().numpy(), wt.grad.to_dense().numpy())


@pytest.mark.parametrize("name,kwargs", [
    ("SGD", {}), ("SGD", {"momentum": 0.9}), ("SGD", {"momentum": 0.9, "nesterov": True}),
    ("Adagrad", {}), ("Adagrad", {"lr_decay": 0.1, "initial_accumulator_value": 0.2}),
    ("SparseAdam", {}), ("SparseAdam", {"betas": (0.8, 0.99), "maximize": True}),
])
def test_optimizers_with_sparse_grads(name, kwargs):
    w = np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32)
    me = ember.nn.Embedding(10, 4, sparse=True, _weight=ember.tensor(w))
    mt = torch.nn.Embedding(10, 4, sparse=True, _weight=torch.tensor(w))
    oe = getattr(ember.optim, name)(me.parameters(), lr=0.1, **kwargs)
    ot = getattr(torch.optim, name)(mt.parameters(), lr=0.1, **kwargs)
    for idx in STEPS:
        for model, opt, mod in ((me, oe, ember), (mt, ot, torch)):
            opt.zero_grad()
            (model(mod.tensor(idx)) ** 2).sum().backward()
            opt.step()
    np.testing.assert_allclose(me.weight.detach().numpy(), mt.weight.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_sparse_adam_errors():
    dense = ember.nn.Linear(2, 2)
    opt = ember.optim.SparseAdam(dense.parameters())
    dense(ember.ones(1, 2)).sum().backward()
    with pytest.raises(RuntimeError, match="does not support dense gradients"):
        opt.step()
    with pytest.raises(ValueError, match="Invalid epsilon"):
        ember.optim.SparseAdam(dense.parameters(), eps=0.0)
    emb = ember.nn.Embedding(4, 2, sparse=True)
    emb(ember.tensor([1])).sum().backward()
    with pytest.raises(RuntimeError, match="weight_decay"):
        ember.optim.Adagrad(emb.parameters(), weight_decay=0.1).step()


def test_sparse_adam_step_is_a_python_int_as_in_pytorch():
    """PyTorch's SparseAdam keeps ``state['step']`` as an int (its state_dict and a printout show ``5``,
    not ``tensor(5.)``); the counter survives a state_dict round trip as an int."""
    torch = pytest.importorskip("torch")
    results = []
    for mod in (ember, torch):
        emb = mod.nn.Embedding(5, 2, sparse=True)
        opt = mod.optim.SparseAdam(emb.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            emb(mod.tensor([1, 3])).sum().backward()
            opt.step()
        opt2 = mod.optim.SparseAdam(emb.parameters(), lr=0.1)
        opt2.load_state_dict(opt.state_dict())
        results.append((opt.state[emb.weight]["step"], opt2.state_dict()["state"][0]["step"]))
    assert results[0] == results[1] == (3, 3)
    assert all(type(v) is int for v in results[0])
