"""Version counters of fresh results and in-place writes (diag, block_diag, scatter, index_put, masked_fill,
one_hot, bincount, histc, ...) against torch's: a fresh result starts where torch's does (0, one_hot 2), one
in-place write bumps once, and autograd's saved-tensor checks still see a write after use."""

from __future__ import annotations

import warnings

import pytest

import ember
from ember._src.ops.nn import resample as nn_resample

from conftest import assert_same

torch = pytest.importorskip("torch")


def _one_hot(L, t, n=-1):
    return nn_resample.one_hot(t, n) if L is ember else torch.nn.functional.one_hot(t, n)


def _inputs(L, requires_grad=False):
    x = (L.arange(6.0).reshape(2, 3) + 1).requires_grad_(requires_grad)
    v = L.tensor([1.0, 2.0, 3.0], requires_grad=requires_grad)
    idx = L.tensor([[0, 1, 0], [1, 0, 1]])
    mask = L.tensor([[True, False, True], [False, True, False]])
    return x, v, idx, mask


# name -> f(L, x, v, idx, mask): an out-of-place op's fresh result.
FRESH = {
    "diag_1d": lambda L, x, v, i, m: L.diag(v),
    "diag_1d_offset": lambda L, x, v, i, m: L.diag(v, -1),
    "diag_2d": lambda L, x, v, i, m: L.diag(x),
    "diagflat": lambda L, x, v, i, m: L.diagflat(x),
    "diag_embed": lambda L, x, v, i, m: L.diag_embed(x),
    "block_diag": lambda L, x, v, i, m: L.block_diag(x, v.reshape(1, 3), v[0]),
    "scatter_src": lambda L, x, v, i, m: x.scatter(0, i, x * 2),
    "scatter_value": lambda L, x, v, i, m: x.scatter(0, i, 5.0),
    "scatter_fn": lambda L, x, v, i, m: L.scatter(x, 1, i, -1.0),
    "scatter_add": lambda L, x, v, i, m: x.scatter_add(0, i, x * 2),
    "scatter_reduce": lambda L, x, v, i, m: x.scatter_reduce(0, i, x * 2, "amax"),
    "index_put": lambda L, x, v, i, m: x.index_put((L.tensor([0, 1]),), v),
    "index_put_accumulate": lambda L, x, v, i, m: x.index_put((L.tensor([0, 0]),), v, accumulate=True),
    "masked_fill": lambda L, x, v, i, m: x.masked_fill(m, 0.0),
    "masked_fill_tensor": lambda L, x, v, i, m: x.masked_fill(m, v.sum()),
    "masked_fill_broadcast": lambda L, x, v, i, m: v.masked_fill(m, 7.0),
    "masked_scatter": lambda L, x, v, i, m: x.masked_scatter(m, x * 3),
    "index_add": lambda L, x, v, i, m: x.index_add(0, L.tensor([0]), v.reshape(1, 3)),
    "index_copy": lambda L, x, v, i, m: x.index_copy(0, L.tensor([1]), v.reshape(1, 3)),
    "index_fill": lambda L, x, v, i, m: x.index_fill(1, L.tensor([0, 2]), -2.0),
    "index_reduce": lambda L, x, v, i, m: x.index_reduce(0, L.tensor([0]), v.reshape(1, 3), "prod"),
    "put": lambda L, x, v, i, m: x.put(L.tensor([0, 4]), v[:2]),
    "fill": lambda L, x, v, i, m: L.fill(x, 2.0),
    "one_hot": lambda L, x, v, i, m: _one_hot(L, L.tensor([0, 2, 1])),
    "one_hot_classes": lambda L, x, v, i, m: _one_hot(L, L.tensor([[0], [1]]), 4),
    "one_hot_empty": lambda L, x, v, i, m: _one_hot(L, L.tensor([], dtype=L.int64), 3),
    "bincount": lambda L, x, v, i, m: L.bincount(L.tensor([0, 2, 2])),
    "bincount_weights": lambda L, x, v, i, m: L.bincount(L.tensor([0, 2, 2]), weights=v.detach()),
    "histc": lambda L, x, v, i, m: L.histc(L.tensor([1.0, 2.0, 1.0]), bins=4, min=0, max=3),
}
# Ops autograd records (the others take integer inputs or have no derivative).
NO_GRAD = {"one_hot", "one_hot_classes", "one_hot_empty", "bincount", "bincount_weights", "histc", "diag_2d"}


def _quiet(f, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # index_reduce is "beta" in torch
        return f(*args)


@pytest.mark.parametrize("name", sorted(FRESH))
def test_fresh_result_version(name):
    e, t = _quiet(FRESH[name], ember, *_inputs(ember)), _quiet(FRESH[name], torch, *_inputs(torch))
    assert_same(e, t)
    assert e._version == t._version
    if e.numel():  # one in-place write bumps once, and through a view too
        e.add_(1)
        e.view(-1)[:1].mul_(2)
        t.add_(1)
        t.view(-1)[:1].mul_(2)
        assert e._version == t._version


@pytest.mark.parametrize("name", sorted(set(FRESH) - NO_GRAD))
def test_fresh_result_under_autograd(name):
    # The same version as torch's with a history, gradients that agree, and a write after the result
    # was saved for backward is still caught (the saved-tensor check reads the new counter).
    grads = []
    for L in (ember, torch):
        x, v, i, m = _inputs(L, requires_grad=True)
        r = _quiet(FRESH[name], L, x, v, i, m)
        grads.append(r._version)
        (r * r).sum().backward()
        grads.extend([x.grad, v.grad])
        r = _quiet(FRESH[name], L, x, v, i, m)
        y = r * r
        r.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()
    e_version, e_dx, e_dv, t_version, t_dx, t_dv = grads
    assert e_version == t_version
    for a, b in ((e_dx, t_dx), (e_dv, t_dv)):
        assert (a is None) == (b is None)
        if a is not None:
            assert_same(a, b)


# name -> f(L, self, v, idx, mask): an in-place write into self.
INPLACE = {
    "scatter_src_": lambda L, s, v, i, m: s.scatter_(0, i, L.ones(2, 3)),
    "scatter_value_": lambda L, s, v, i, m: s.scatter_(0, i, 5.0),
    "scatter_reduce_arg_": lambda L, s, v, i, m: s.scatter_(0, i, 5.0, reduce="multiply"),
    "scatter_add_": lambda L, s, v, i, m: s.scatter_add_(0, i, L.ones(2, 3)),
    "scatter_reduce_": lambda L, s, v, i, m: s.scatter_reduce_(0, i, L.ones(2, 3), "amin"),
    "index_put_": lambda L, s, v, i, m: s.index_put_((L.tensor([0, 1]),), L.tensor(9.0)),
    "index_put_accumulate_": lambda L, s, v, i, m: s.index_put_((L.tensor([0, 0]),), v, accumulate=True),
    "setitem_index": lambda L, s, v, i, m: s.__setitem__(L.tensor([1, 0]), v),
    "setitem_mask": lambda L, s, v, i, m: s.__setitem__(m, 3.0),
    "masked_fill_": lambda L, s, v, i, m: s.masked_fill_(m, 0.0),
    "masked_fill_tensor_": lambda L, s, v, i, m: s.masked_fill_(m, L.tensor(-1.0)),
    "diagonal_copy_": lambda L, s, v, i, m: s.diagonal().copy_(v[:2]),
    "fill_diagonal_": lambda L, s, v, i, m: s.fill_diagonal_(4.0),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_write_bumps_once(name):
    e_args, t_args = _inputs(ember), _inputs(torch)
    e, t = e_args[0].clone(), t_args[0].clone()
    assert e._version == t._version == 0
    INPLACE[name](ember, e, *e_args[1:])
    INPLACE[name](torch, t, *t_args[1:])
    assert_same(e, t)
    assert e._version == t._version == 1
