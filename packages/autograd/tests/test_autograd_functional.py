"""ember.autograd.functional against torch.autograd.functional on the same functions."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.autograd.functional as TF
from ag_helpers import make_arrays

import ember
import ember.autograd.functional as EF


def _pair(arrays):
    return tuple(ember.tensor(a) for a in arrays), tuple(torch.tensor(a) for a in arrays)


def _assert_nested(e, t):
    if isinstance(t, (tuple, list)):
        assert isinstance(e, tuple) and len(e) == len(t)
        for a, b in zip(e, t):
            _assert_nested(a, b)
        return
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-9)


def f_single(m, x):
    return (x.exp() * x.sin()).sum(0)


def f_two(m, x, y):
    return m.mm(x, y).tanh(), (x * x).sum()


def f_scalar(m, x, y):
    return (x.pow(3) * y.sum() + m.exp(x).sum()).sum()


@pytest.mark.parametrize("create_graph", [False, True])
def test_vjp(create_graph):
    (ex,), (tx,) = _pair(make_arrays([(2, 3)]))
    (ev,), (tv,) = _pair(make_arrays([(3,)], 1))
    e = EF.vjp(lambda x: f_single(ember, x), ex, ev, create_graph=create_graph)
    t = TF.vjp(lambda x: f_single(torch, x), tx, tv, create_graph=create_graph)
    _assert_nested(e, t)


def test_vjp_tuple_inputs_and_outputs():
    e_in, t_in = _pair(make_arrays([(2, 3), (3, 2)]))
    e_v, t_v = _pair(make_arrays([(2, 2), ()], 4))
    e = EF.vjp(lambda x, y: f_two(ember, x, y), e_in, e_v)
    t = TF.vjp(lambda x, y: f_two(torch, x, y), t_in, t_v)
    _assert_nested(e, t)


def test_jvp():
    e_in, t_in = _pair(make_arrays([(2, 3), (3, 2)]))
    e_v, t_v = _pair(make_arrays([(2, 3), (3, 2)], 5))
    e = EF.jvp(lambda x, y: f_two(ember, x, y), e_in, e_v)
    _assert_nested(e, TF.jvp(lambda x, y: f_two(torch, x, y), t_in, t_v))


@pytest.mark.parametrize("tuple_inputs", [False, True])
def test_jacobian(tuple_inputs):
    if tuple_inputs:
        e_in, t_in = _pair(make_arrays([(2, 3), (3, 2)]))
        _assert_nested(EF.jacobian(lambda x, y: f_two(ember, x, y), e_in),
                       TF.jacobian(lambda x, y: f_two(torch, x, y), t_in))
    else:
        (ex,), (tx,) = _pair(make_arrays([(2, 3)]))
        _assert_nested(EF.jacobian(lambda x: f_single(ember, x), ex), TF.jacobian(lambda x: f_single(torch, x), tx))


def test_hessian_hvp_vhp():
    e_in, t_in = _pair(make_arrays([(3,), (2,)]))
    e_v, t_v = _pair(make_arrays([(3,), (2,)], 7))
    def ef(x, y):
        return f_scalar(ember, x, y)

    def tf(x, y):
        return f_scalar(torch, x, y)

    _assert_nested(EF.hessian(ef, e_in), TF.hessian(tf, t_in))
    _assert_nested(EF.hvp(ef, e_in, e_v), TF.hvp(tf, t_in, t_v))
    _assert_nested(EF.vhp(ef, e_in, e_v), TF.vhp(tf, t_in, t_v))
    (ex,), (tx,) = _pair(make_arrays([(2, 2)]))
    _assert_nested(EF.hessian(lambda x: (x ** 4).sum(), ex), TF.hessian(lambda x: (x ** 4).sum(), tx))


def test_create_graph_keeps_graph():
    x = ember.tensor([1.0, 2.0], dtype=ember.float64, requires_grad=True)
    _, g = EF.vjp(lambda x: (x ** 3).sum(), x, create_graph=True)
    assert g.requires_grad
    (gg,) = ember.autograd.grad(g.sum(), [x])
    np.testing.assert_allclose(gg.numpy(), [6.0, 12.0])


def test_strict_independent_input_raises():
    x, y = ember.ones(2, dtype=ember.float64), ember.ones(2, dtype=ember.float64)
    with pytest.raises(RuntimeError, match="independent of input 1"):
        EF.vjp(lambda a, b: (a * 2).sum(), (x, y), strict=True)
    _, (gx, gy) = EF.vjp(lambda a, b: (a * 2).sum(), (x, y))
    assert not gy.numpy().any()


def test_errors_match_torch():
    x = ember.ones(2, dtype=ember.float64)
    with pytest.raises(RuntimeError, match="v can only be None"):
        EF.vjp(lambda a: a * 2, x)
    with pytest.raises(TypeError):
        EF.vjp(lambda a: a * 2, [1.0])
    with pytest.raises(RuntimeError, match="single element"):
        EF.hessian(lambda a: a * 2, x)
    with pytest.raises(NotImplementedError):
        EF.jacobian(lambda a: a * 2, x, strategy="forward-mode")
