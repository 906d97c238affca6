"""Derivatives of views, copies, indexing, cat/flip and the matrix products: gradcheck
(float64) and gradients equal to PyTorch's, over contiguous and non-contiguous inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ag_helpers import grads_match_torch, leaves, make_arrays

import ember
from ember.autograd.gradcheck import gradcheck


def _check(fn, shapes, layout="contiguous", seed=0):
    arrays = make_arrays(shapes, seed)
    es, _ = leaves(arrays, layout)
    assert gradcheck(lambda *xs: fn(ember, *xs), tuple(es))
    grads_match_torch(fn, arrays, layout)


def _index(m, values):
    return m.tensor(values)


VIEWS = [
    ("view", lambda m, x: x.contiguous().view(6, 1) * 1, [(2, 3)]),
    ("reshape", lambda m, x: x.reshape(3, 2) * 1, [(2, 3)]),
    ("flatten", lambda m, x: x.flatten() * 1, [(2, 3)]),
    ("squeeze", lambda m, x: x.unsqueeze(0).squeeze(0) * 1, [(2, 3)]),
    ("squeeze_dim", lambda m, x: x.reshape(2, 1, 3).squeeze(1) * 1, [(2, 3)]),
    ("unsqueeze", lambda m, x: x.unsqueeze(1) * 1, [(2, 3)]),
    ("permute", lambda m, x: x.reshape(1, 2, 3).permute(2, 0, 1) * 1, [(2, 3)]),
    ("transpose", lambda m, x: x.transpose(0, 1) * 1, [(2, 3)]),
    ("t", lambda m, x: x.t() * 1, [(2, 3)]),
    ("expand", lambda m, x: x.expand(4, 2, 3) * 1, [(2, 3)]),
    ("expand_1", lambda m, x: x.expand(2, 3) * 1, [(2, 1)]),
    ("select", lambda m, x: x.select(1, -1) * 1, [(2, 3)]),
    ("getitem_int", lambda m, x: x[1] * 1, [(2, 3)]),
    ("narrow", lambda m, x: x.narrow(1, 1, 2) * 1, [(2, 3)]),
    ("slice_step", lambda m, x: x[:, ::2] * 1, [(2, 3)]),
    ("slice_rows", lambda m, x: x[1:] * 1, [(3, 3)]),
    ("diagonal", lambda m, x: m.diagonal(x, 1) * 1, [(3, 4)]),
    ("diagonal_dims", lambda m, x: m.diagonal(x.reshape(2, 3, 1), 0, 0, 1) * 1, [(2, 3)]),
    ("unfold_overlap", lambda m, x: x.unfold(1, 2, 1) * 1, [(2, 4)]),
    ("unfold_gap", lambda m, x: x.unfold(0, 1, 2) * 1, [(3, 2)]),
    ("as_strided", lambda m, x: m.as_strided(x, (2, 2), (1, 2), 1) * 1, [(2, 3)]),
    ("as_strided_overlap", lambda m, x: m.as_strided(x, (3, 2), (1, 1)) * 1, [(2, 3)]),
    ("clone", lambda m, x: x.clone(), [(2, 3)]),
    ("contiguous", lambda m, x: x.contiguous() * 1, [(2, 3)]),
    ("flip", lambda m, x: x.flip([0, 1]), [(2, 3)]),
    ("cat", lambda m, x, y: m.cat([x, y, x], 1), [(2, 3), (2, 1)]),
    ("cat_0d_dim", lambda m, x, y: m.cat([x, y], -2), [(2, 3), (1, 3)]),
    ("stack", lambda m, x, y: m.stack([x, y]), [(2, 3), (2, 3)]),
    ("split", lambda m, x: x.split(1, 1)[1] * 2, [(2, 3)]),
    ("index_tensor", lambda m, x: x[_index(m, [1, 1, 0])], [(2, 3)]),
    ("index_two", lambda m, x: x[_index(m, [0, 1, 1]), _index(m, [2, 0, 2])], [(2, 3)]),
    ("index_mask", lambda m, x: x[x > 0], [(2, 3)]),
    ("index_select", lambda m, x: m.index_select(x, 1, _index(m, [2, 0, 2])), [(2, 3)]),
    ("index_select_0d", lambda m, x: m.index_select(x, 0, _index(m, [0])), [()]),
    ("index_put", lambda m, x, v: m.index_put(x, (_index(m, [0, 1]),), v), [(2, 3), (3,)]),
    ("index_put_acc", lambda m, x, v: m.index_put(x, (_index(m, [1, 1]),), v, accumulate=True), [(2, 3), (3,)]),
    ("masked_fill", lambda m, x: m.masked_fill(x, x > 0, 0.5), [(2, 3)]),
    ("where_scalar", lambda m, x: m.where(x > 0, x, 0.0), [(2, 3)]),
    ("to_same", lambda m, x: x.to(m.float64) * 1, [(2, 3)]),
    ("mm", lambda m, a, b: m.mm(a, b), [(2, 3), (3, 4)]),
    ("matmul_batched", lambda m, a, b: m.matmul(a, b), [(2, 2, 3), (3, 2)]),
    ("bmm", lambda m, a, b: m.bmm(a, b), [(2, 2, 3), (2, 3, 2)]),
    ("mv", lambda m, a, v: m.mv(a, v), [(2, 3), (3,)]),
    ("dot", lambda m, a, b: m.dot(a, b), [(3,), (3,)]),
    ("outer", lambda m, a, b: m.outer(a, b), [(3,), (2,)]),
    ("addmm", lambda m, c, a, b: m.addmm(c, a, b, beta=0.5, alpha=2.0), [(4,), (2, 3), (3, 4)]),
    ("addmv", lambda m, c, a, v: m.addmv(c, a, v, beta=2.0, alpha=0.5), [(2,), (2, 3), (3,)]),
    ("baddbmm", lambda m, c, a, b: m.baddbmm(c, a, b, alpha=1.5), [(2, 1, 2), (2, 2, 3), (2, 3, 2)]),
    ("addbmm", lambda m, c, a, b: m.addbmm(c, a, b, beta=0.0), [(2, 2), (3, 2, 3), (3, 3, 2)]),
    ("einsum", lambda m, a, b: m.einsum("ij,jk->ik", a, b), [(2, 3), (3, 2)]),
]


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("name, fn, shapes", VIEWS, ids=[v[0] for v in VIEWS])
def test_structural(name, fn, shapes, layout):
    _check(fn, shapes, layout)


def test_to_copy_cast_matches_torch():
    # float32 round trip: finite differences would be too coarse; compare with torch only.
    grads_match_torch(lambda m, x: x.to(m.float32).to(m.float64) * 3, make_arrays([(2, 3)]), rtol=1e-6)


def test_masked_fill_tensor_value_gets_gradient():
    arrays = make_arrays([(2, 3), ()])
    (ex, ev), (tx, tv) = leaves(arrays)
    ember.masked_fill(ex, ex > 0, ev).sum().backward()
    torch.masked_fill(tx, tx > 0, tv).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy())
    np.testing.assert_allclose(ev.grad.numpy(), tv.grad.numpy())


INPLACE = [
    ("mul_", lambda m, x, y: (x * 1).mul_(y)),
    ("div_", lambda m, x, y: (x * 1).div_(y + 3)),
    ("exp_", lambda m, x, y: (x * y).exp_()),
    ("sigmoid_", lambda m, x, y: (x + y).sigmoid_()),
    ("pow_", lambda m, x, y: (x + 2).pow_(y)),
    ("copy_", lambda m, x, y: (x * 1).copy_(y)),
    ("fill_", lambda m, x, y: (x * y).fill_(2.0) * x),
    ("masked_fill_", lambda m, x, y: (x * y).masked_fill_(x > 0, 1.0)),
    ("index_put_", lambda m, x, y: (x * 1).index_put_((m.tensor([1]),), y[0])),
    ("eq_", lambda m, x, y: (x * 1).eq_(y) + x),
    ("setitem", lambda m, x, y: _setitem(x, y)),
]


def _setitem(x, y):
    z = x * 1
    z[0] = y[1]
    return z


@pytest.mark.parametrize("name, fn", INPLACE, ids=[i[0] for i in INPLACE])
def test_inplace_variants(name, fn):
    _check(fn, [(2, 3), (2, 3)])


def test_random_inplace_gives_zero_gradient():
    ex = ember.randn(3, dtype=ember.float64, requires_grad=True)
    y = (ex * 2).normal_()
    (g,) = ember.autograd.grad(y.sum(), [ex])
    assert not g.numpy().any()
