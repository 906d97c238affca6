"""grad / vjp / jvp / jacrev / jacfwd / hessian / linearize against torch.func, alone and composed."""

from __future__ import annotations

import pytest
import torch
import torch.func as tf
from func_models import assert_trees_close, mlp, mlp_params, to_ember

import ember
import ember.func as ef


def _pair(*shape, seed=0):
    t = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return ember.tensor(t.numpy()), t


def f_scalar(lib, x, y):
    return (lib.sin(x) * y).sum() + (x ** 3).sum() * 0.1


def f_vector(lib, x):
    return lib.tanh(x) * x.sum()


def test_grad_argnums_and_aux():
    ex, tx = _pair(4)
    ey, ty = _pair(4, seed=1)
    for argnums in (0, 1, (0, 1), -1):
        assert_trees_close(ef.grad(lambda a, b: f_scalar(ember, a, b), argnums=argnums)(ex, ey),
                           tf.grad(lambda a, b: f_scalar(torch, a, b), argnums=argnums)(tx, ty))
    (eg, eaux) = ef.grad(lambda a: (a.pow(2).sum(), {"m": a.mean()}), has_aux=True)(ex)
    (tg, taux) = tf.grad(lambda a: (a.pow(2).sum(), {"m": a.mean()}), has_aux=True)(tx)
    assert_trees_close((eg, eaux), (tg, taux))


def test_grad_and_value_and_pytree_inputs():
    p = to_ember(mlp_params())
    tp = mlp_params()
    x = torch.randn(3, 10)
    eg, ev = ef.grad_and_value(lambda q: mlp(ember, q, to_ember(x)).pow(2).sum())(p)
    tg, tv = tf.grad_and_value(lambda q: mlp(torch, q, x).pow(2).sum())(tp)
    assert_trees_close((eg, ev), (tg, tv), rtol=1e-4, atol=1e-5)
    assert not ev.requires_grad and all(not g.requires_grad for g in eg.values())


def test_grad_and_value_has_aux_nests_like_torch():
    # PyTorch returns (grad, (value, aux)); ember returned ((grad, value), aux), so the tutorials'
    # ``g, (loss, aux) = grad_and_value(f, has_aux=True)(...)`` failed to unpack.
    ex, tx = _pair(4)
    eout = ef.grad_and_value(lambda a: (a.pow(2).sum(), (a * 3, {"m": a.mean()})), has_aux=True)(ex)
    tout = tf.grad_and_value(lambda a: (a.pow(2).sum(), (a * 3, {"m": a.mean()})), has_aux=True)(tx)
    assert isinstance(eout, tuple) and len(eout) == 2 and isinstance(eout[1], tuple) and len(eout[1]) == 2
    assert_trees_close(eout, tout)
    eg, (ev, (e3, em)) = eout
    assert ev.dim() == 0 and e3.shape == (4,) and set(em) == {"m"}
    # under vmap too (per-sample loss and prediction beside the per-sample gradient)
    eb, tb = _pair(5, 3, seed=2)
    ev_out = ember.func.vmap(ef.grad_and_value(lambda a: (a.sin().sum(), a.argmax()), has_aux=True))(eb)
    tv_out = torch.func.vmap(tf.grad_and_value(lambda a: (a.sin().sum(), a.argmax()), has_aux=True))(tb)
    assert_trees_close(ev_out, tv_out)


def test_grad_of_grad_and_closures():
    ex, tx = _pair(3)
    assert_trees_close(ef.grad(ef.grad(lambda a: (a ** 4).sum() if a.dim() == 0 else a))(ember.tensor(1.5)),
                       tf.grad(tf.grad(lambda a: a ** 4))(torch.tensor(1.5)))
    # the inner function closes over the outer input (no perturbation confusion)
    e = ef.grad(lambda a: ef.grad(lambda b: (a * b).sum())(a).sum())(ex)
    t = tf.grad(lambda a: tf.grad(lambda b: (a * b).sum())(a).sum())(tx)
    assert_trees_close(e, t)


def test_grad_errors():
    x = ember.ones(3)
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor"):
        ef.grad(lambda a: a * 2)(x)
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a Tensor"):
        ef.grad(lambda a: 3.0)(x)
    with pytest.raises(RuntimeError, match="output of function f should be a tuple"):
        ef.grad(lambda a: a.sum(), has_aux=True)(x)
    with pytest.raises(RuntimeError, match="Got argnum=2, but only 1 positional inputs"):
        ef.grad(lambda a: a.sum(), argnums=2)(x)
    with pytest.raises(RuntimeError, match="argnums must be int or Tuple"):
        ef.grad(lambda a: a.sum(), argnums=[0])(x)


def test_vjp_and_jvp():
    ex, tx = _pair(5)
    ev = _pair(5, seed=2)
    eo, efn = ef.vjp(lambda a: f_vector(ember, a), ex)
    to, tfn = tf.vjp(lambda a: f_vector(torch, a), tx)
    assert_trees_close((eo, efn(ev[0])), (to, tfn(ev[1])))
    assert_trees_close(efn(ev[0]), tfn(ev[1]))  # a vjp_fn runs again
    assert_trees_close(ef.jvp(lambda a: f_vector(ember, a), (ex,), (ev[0],)),
                       tf.jvp(lambda a: f_vector(torch, a), (tx,), (ev[1],)))
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        ef.jvp(ember.sin, ex, (ex,))


def test_linearize_matches_jvp_without_rerunning():
    ex, tx = _pair(4)
    calls = []

    def f(a):
        calls.append(1)
        return ember.sin(a) * a

    out, jvp_fn = ef.linearize(f, ex)
    t_out, t_fn = tf.linearize(lambda a: torch.sin(a) * a, tx)
    for seed in (3, 4):
        ev, tv = _pair(4, seed=seed)
        assert_trees_close(jvp_fn(ev), t_fn(tv))
    assert_trees_close(out, t_out)
    assert len(calls) == 1


@pytest.mark.parametrize("jac", ["jacrev", "jacfwd"])
def test_jacobian_of_a_small_network(jac):
    p = mlp_params(sizes=(5, 6, 3))
    x = torch.randn(2, 5, dtype=torch.float32)
    ejac, tjac = getattr(ef, jac), getattr(tf, jac)
    e = ejac(lambda q, a: mlp(ember, q, a), argnums=(0, 1))(to_ember(p), to_ember(x))
    t = tjac(lambda q, a: mlp(torch, q, a), argnums=(0, 1))(p, x)
    assert_trees_close(e, t, rtol=1e-4, atol=1e-5)


def test_jacobians_with_several_outputs_and_chunks():
    ex, tx = _pair(3)
    for chunk in (None, 2):
        e = ef.jacrev(lambda a: (ember.sin(a), a.sum() * a[:2]), chunk_size=chunk)(ex)
        t = tf.jacrev(lambda a: (torch.sin(a), a.sum() * a[:2]))(tx)
        assert_trees_close(e, t)
        e = ef.jacfwd(lambda a: {"s": ember.sin(a), "p": a.prod()}, chunk_size=chunk)(ex)
        t = tf.jacfwd(lambda a: {"s": torch.sin(a), "p": a.prod()})(tx)
        assert_trees_close(e, t)


def test_hessian_of_a_small_network():
    p = mlp_params(sizes=(4, 5, 1))
    x = torch.randn(4, dtype=torch.float32)

    def loss(lib, a):
        return mlp(lib, p if lib is torch else to_ember(p), a).pow(2).sum()

    assert_trees_close(ef.hessian(lambda a: loss(ember, a))(to_ember(x)), tf.hessian(lambda a: loss(torch, a))(x),
                       rtol=1e-4, atol=1e-5)


def test_compositions():
    ex, tx = _pair(3)
    f_e = lambda a: (ember.sin(a) * a).sum()  # noqa: E731
    f_t = lambda a: (torch.sin(a) * a).sum()  # noqa: E731
    assert_trees_close(ef.jacrev(ef.jacrev(f_e))(ex), tf.jacrev(tf.jacrev(f_t))(tx))
    assert_trees_close(ef.jacfwd(ef.jacfwd(f_e))(ex), tf.jacfwd(tf.jacfwd(f_t))(tx))
    assert_trees_close(ef.jacrev(ef.jacfwd(f_e))(ex), tf.jacrev(tf.jacfwd(f_t))(tx))
    eb, tb = _pair(4, 3, seed=5)
    assert_trees_close(ef.vmap(ef.jacrev(ef.grad(f_e)))(eb), tf.vmap(tf.jacrev(tf.grad(f_t)))(tb))
    assert_trees_close(ef.vmap(ef.hessian(f_e))(eb), tf.vmap(tf.hessian(f_t))(tb))
    assert_trees_close(ef.grad(lambda a: ef.vmap(ef.grad(f_e))(a).sum())(eb),
                       tf.grad(lambda a: tf.vmap(tf.grad(f_t))(a).sum())(tb))
    assert_trees_close(ef.grad(lambda a: ef.vmap(f_e)(a).sum())(eb), tf.grad(lambda a: tf.vmap(f_t)(a).sum())(tb))


def test_grad_of_vmap_of_grad_with_a_closure_over_the_outer_input():
    """The inner function mixes the outer level's input with its own: both levels see it."""
    x_e, x_t = _pair(4, 3, seed=6)
    w_e, w_t = _pair(3, seed=7)
    u_e, u_t = _pair(3, seed=8)

    def outer(lib, func, w, xs):
        def g(u):
            def inner(v, x):
                return lib.sin(u * v * x).sum()
            return func.vmap(func.grad(inner), (None, 0))(w, xs).pow(2).sum()
        return g

    e = ef.grad(outer(ember, ef, w_e, x_e))(u_e)
    assert not e.requires_grad
    assert_trees_close(e, tf.grad(outer(torch, tf, w_t, x_t))(u_t))


def test_forward_mode_compositions_with_vmap():
    ex, tx = _pair(4, 3, seed=9)

    def fe(a):
        return ember.sin(a) * a.sum()

    def ft(a):
        return torch.sin(a) * a.sum()

    assert_trees_close(ef.vmap(ef.jacfwd(fe))(ex), tf.vmap(tf.jacfwd(ft))(tx))
    assert_trees_close(ef.jacfwd(ef.vmap(fe))(ex), tf.jacfwd(tf.vmap(ft))(tx))
    assert_trees_close(ef.jacrev(ef.vmap(fe))(ex), tf.jacrev(tf.vmap(ft))(tx))
    assert_trees_close(ef.vmap(lambda a: ef.jvp(fe, (a,), (ember.ones_like(a),))[1])(ex),
                       tf.vmap(lambda a: tf.jvp(ft, (a,), (torch.ones_like(a),))[1])(tx))
    assert_trees_close(ef.jvp(ef.vmap(fe), (ex,), (ember.ones_like(ex),)),
                       tf.jvp(tf.vmap(ft), (tx,), (torch.ones_like(tx),)))
    assert_trees_close(ef.vmap(ef.vmap(ef.grad(lambda a: (a ** 3).sum())))(ex.reshape(2, 2, 3)),
                       tf.vmap(tf.vmap(tf.grad(lambda a: (a ** 3).sum())))(tx.reshape(2, 2, 3)))


@pytest.mark.parametrize("case", ["select", "slice", "narrow", "diagonal"])
def test_hessian_through_the_backward_of_a_view(case):
    # hessian = jacfwd(jacrev(f)): select's backward wrote the gradient with a copy_ into a view of
    # zeros, whose tangent stayed on the view, so the rows of the indexed element lost a term
    # (hessian of t[0] * t.sum() came out [[1, 0, 0], ...] instead of [[2, 1, 1], ...]).
    views = {"select": lambda t: t[0], "slice": lambda t: t[1:3].sum(), "narrow": lambda t: t.narrow(0, 0, 2).prod(),
             "diagonal": lambda t: t.view(2, 2).diagonal().sum()}
    z = [0.3, -0.7, 1.1, 0.4]
    got = ef.hessian(lambda t: views[case](t) * (t ** 3).sum())(ember.tensor(z))
    want = tf.hessian(lambda t: views[case](t) * (t ** 3).sum())(torch.tensor(z))
    assert_trees_close(got, want, rtol=1e-5, atol=1e-6)


def test_jvp_tangent_shape_mismatch_raises_pytorchs_message():
    with pytest.raises(RuntimeError) as theirs:
        tf.jvp(torch.sin, (torch.ones(3),), (torch.ones(2),))
    with pytest.raises(RuntimeError) as ours:
        ef.jvp(ember.sin, (ember.ones(3),), (ember.ones(2),))
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("make", [
    lambda F: F.jacrev(lambda x: x.long()),
    lambda F: F.jacrev(lambda x: (x * 2, x > 0)),
    lambda F: (lambda x: F.vjp(lambda a: a.argmax(), x)),
])
def test_vjp_and_jacrev_refuse_integer_outputs_as_torch(make):
    # ember gave a zero Jacobian for an integer output where PyTorch raises
    with pytest.raises(RuntimeError) as theirs:
        make(tf)(torch.ones(3))
    with pytest.raises(RuntimeError) as ours:
        make(ef)(ember.ones(3))
    assert str(ours.value).replace("ember.", "torch.") == str(theirs.value)
