"""Autograd through sparse tensors against torch and gradcheck (issue 19)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.autograd import gradcheck

IDX = [[0, 1, 1, 2, 2], [2, 0, 0, 1, 3]]  # (1, 0) stored twice: an uncoalesced tensor


def _values(seed=0):
    return np.random.default_rng(seed).standard_normal(5)


def _dense(shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape)


def _grads(make_e, make_t, fn_e, fn_t, layout="sparse_coo"):
    """Gradients of (values, dense) through fn, in ember and torch."""
    v, d = _values(), _dense((4, 3))
    ve, de = ember.tensor(v, requires_grad=True), ember.tensor(d, requires_grad=True)
    vt, dt_ = torch.tensor(v, requires_grad=True), torch.tensor(d, requires_grad=True)
    (fn_e(make_e(ve), de) ** 2).sum().backward()
    (fn_t(make_t(vt), dt_) ** 2).sum().backward()
    np.testing.assert_allclose(de.grad.numpy(), dt_.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(ve.grad.numpy(), vt.grad.numpy(), rtol=1e-10)


def _coo(mod):
    return lambda v: mod.sparse_coo_tensor(IDX, v, (3, 4))


@pytest.mark.parametrize("fn", ["mm", "sparse.mm", "matmul", "spmm", "addmm"])
def test_sparse_dense_products_grad(fn):
    def call(mod):
        if fn == "addmm":
            return lambda s, d: mod.addmm(mod.ones(3, 3, dtype=mod.float64), s, d, beta=0.5, alpha=2.0)
        if fn == "sparse.mm":
            return mod.sparse.mm
        return getattr(mod, fn)

    _grads(_coo(ember), _coo(torch), call(ember), call(torch))


def test_csr_values_grad():
    crow, col = [0, 1, 3, 5], [2, 0, 1, 1, 3]

    def make(mod):
        return lambda v: mod.sparse_csr_tensor(crow, col, v, (3, 4))

    _grads(make(ember), make(torch), lambda s, d: ember.mm(s, d), lambda s, d: torch.mm(s, d))


def test_sparse_leaf_grads_match_torch():
    v, d = _values(), _dense((4, 3))
    se = ember.sparse_coo_tensor(IDX, v, (3, 4)).requires_grad_()
    st = torch.sparse_coo_tensor(IDX, torch.tensor(v), (3, 4)).requires_grad_()
    de, dt_ = ember.tensor(d), torch.tensor(d)
    ember.mm(se, de).sum().backward()
    torch.mm(st, dt_).sum().backward()
    assert se.grad.layout is ember.strided and st.grad.layout == torch.strided  # mm: a dense gradient
    np.testing.assert_allclose(se.grad.numpy(), st.grad.numpy(), rtol=1e-10)
    se.grad = st.grad = None
    ember.sparse.mm(se, de).pow(2).sum().backward()
    torch.sparse.mm(st, dt_).pow(2).sum().backward()
    assert se.grad.layout is ember.sparse_coo  # sparse.mm: masked to the pattern
    np.testing.assert_allclose(se.grad.to_dense().numpy(), st.grad.to_dense().numpy(), rtol=1e-10)
    assert se.grad._nnz() == st.grad._nnz()
    se.grad = st.grad = None
    (se.to_dense() * 3).sum().backward()
    (st.to_dense() * 3).sum().backward()
    assert se.grad.layout is ember.sparse_coo
    np.testing.assert_allclose(se.grad.to_dense().numpy(), st.grad.to_dense().numpy())


def test_dense_to_sparse_grad():
    d = _dense((3, 4)) * (np.random.default_rng(2).random((3, 4)) < 0.5)
    de, dt_ = ember.tensor(d, requires_grad=True), torch.tensor(d, requires_grad=True)
    w = _dense((4, 2))
    ember.mm(de.to_sparse(), ember.tensor(w)).sum().backward()
    torch.mm(dt_.to_sparse(), torch.tensor(w)).sum().backward()
    assert de.grad.layout is ember.strided
    np.testing.assert_allclose(de.grad.numpy(), dt_.grad.numpy(), rtol=1e-10)


def test_gradcheck_through_sparse_ops():
    idx = ember.tensor(IDX)
    d = ember.tensor(_dense((4, 3)))
    v = ember.tensor(_values(), requires_grad=True)
    dd = ember.tensor(_dense((4, 3)), requires_grad=True)
    assert gradcheck(lambda v: ember.mm(ember.sparse_coo_tensor(idx, v, (3, 4)), d), (v,))
    assert gradcheck(lambda v: ember.sparse.mm(ember.sparse_coo_tensor(idx, v, (3, 4)), d), (v,))
    assert gradcheck(lambda v: ember.sparse_coo_tensor(idx, v, (3, 4)).coalesce().to_dense(), (v,))
    assert gradcheck(lambda dd: ember.mm(ember.sparse_coo_tensor(idx, v.detach(), (3, 4)).to_sparse_csr(), dd),
                     (dd,))
    assert gradcheck(lambda dd: ember.mm(dd.t(), ember.sparse_coo_tensor(idx, v.detach(), (3, 4)).t()), (dd,))
    assert gradcheck(lambda v: ember.sparse.sum(ember.sparse_coo_tensor(idx, v, (3, 4)) * 2.0), (v,))
    crow = ember.tensor([0, 1, 3, 5])
    col = ember.tensor([2, 0, 1, 1, 3])
    assert gradcheck(lambda v: ember.sparse_csr_tensor(crow, col, v, (3, 4)).to_dense() ** 2, (v,))


def test_vmap_of_sparse_ops_raises():
    from ember.func import vmap

    with pytest.raises(RuntimeError, match="vmap does not support"):
        vmap(lambda x: x.to_sparse())(ember.ones(3, 2, 2))


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("log", [False, True])
def test_sparse_softmax_grad(dim, log):
    v, w = _values(), _dense((3, 4), seed=5)
    ve, vt = ember.tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
    fe = ember.sparse.log_softmax if log else ember.sparse.softmax
    ft = torch.sparse.log_softmax if log else torch.sparse.softmax
    (fe(ember.sparse_coo_tensor(IDX, ve, (3, 4)), dim).to_dense() * ember.tensor(w)).sum().backward()
    (ft(torch.sparse_coo_tensor(IDX, vt, (3, 4)), dim).to_dense() * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(ve.grad.numpy(), vt.grad.numpy(), rtol=1e-10, atol=1e-12)
    idx = ember.tensor(IDX)
    leaf = ve.detach().requires_grad_()
    assert gradcheck(lambda v: fe(ember.sparse_coo_tensor(idx, v, (3, 4)), dim).to_dense(), (leaf,))
