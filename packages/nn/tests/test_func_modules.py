"""ember.func with ember.nn modules against torch.func: MAML's inner loop (functional_call + grad),
model ensembling (stack_module_state + vmap) and per-sample gradients through modules."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.func as tf

import ember
import ember.func as ef


def _to_ember(t):
    return ember.tensor(t.detach().numpy())


def _twin(make_torch, make_ember, seed=0):
    torch.manual_seed(seed)
    tm = make_torch()
    em = make_ember()
    em.load_state_dict({k: _to_ember(v) for k, v in tm.state_dict().items()})
    return tm, em


def _close(a, b, rtol=1e-4, atol=1e-5):
    if isinstance(b, dict):
        assert set(a) == set(b)
        for k in b:
            _close(a[k], b[k], rtol, atol)
        return
    np.testing.assert_allclose(np.asarray(a.detach().numpy()), b.detach().numpy(), rtol=rtol, atol=atol)


def _mlp(lib):
    return lib.nn.Sequential(lib.nn.Linear(3, 8), lib.nn.Tanh(), lib.nn.Linear(8, 1))


def _maml_step(lib, func, model, params, x_s, y_s, x_q, y_q, inner_lr=0.1, steps=2):
    def loss(p, x, y):
        return lib.nn.functional.mse_loss(func.functional_call(model, p, (x,)), y)

    fast = dict(params)
    for _ in range(steps):
        grads = func.grad(loss)(fast, x_s, y_s)
        fast = {k: fast[k] - inner_lr * grads[k] for k in fast}
    return loss(fast, x_q, y_q)


def test_maml_inner_loop_matches_torch():
    tm, em = _twin(lambda: _mlp(torch), lambda: _mlp(ember))
    g = torch.Generator().manual_seed(1)
    data = [torch.randn(4, 3, generator=g), torch.randn(4, 1, generator=g), torch.randn(4, 3, generator=g),
            torch.randn(4, 1, generator=g)]
    tparams = {k: v for k, v in tm.named_parameters()}
    eparams = {k: v for k, v in em.named_parameters()}
    t_loss = _maml_step(torch, tf, tm, tparams, *data)
    e_loss = _maml_step(ember, ef, em, eparams, *[_to_ember(d) for d in data])
    _close(e_loss, t_loss)
    # the meta-gradient flows back to the module's own parameters through the inner loop
    t_loss.backward()
    e_loss.backward()
    for (name, tp), (_, ep) in zip(tm.named_parameters(), em.named_parameters()):
        assert ep.grad is not None, name
        _close(ep.grad, tp.grad, rtol=1e-3, atol=1e-5)


def test_maml_over_a_batch_of_tasks_with_vmap():
    tm, em = _twin(lambda: _mlp(torch), lambda: _mlp(ember), seed=2)
    g = torch.Generator().manual_seed(3)
    tasks = [torch.randn(5, 4, 3, generator=g), torch.randn(5, 4, 1, generator=g), torch.randn(5, 4, 3, generator=g),
             torch.randn(5, 4, 1, generator=g)]
    tparams = {k: v.detach() for k, v in tm.named_parameters()}
    eparams = {k: v.detach() for k, v in em.named_parameters()}
    t = tf.vmap(lambda *d: _maml_step(torch, tf, tm, tparams, *d))(*tasks)
    e = ef.vmap(lambda *d: _maml_step(ember, ef, em, eparams, *d))(*[_to_ember(d) for d in tasks])
    _close(e, t)


def test_ensembling_with_stack_module_state():
    torch.manual_seed(4)
    t_models = [_mlp(torch) for _ in range(4)]
    e_models = [_mlp(ember) for _ in range(4)]
    for tm, em in zip(t_models, e_models):
        em.load_state_dict({k: _to_ember(v) for k, v in tm.state_dict().items()})
    tp, tb = tf.stack_module_state(t_models)
    ep, eb = ef.stack_module_state(e_models)
    assert set(ep) == set(tp) and all(v.is_leaf and v.requires_grad for v in ep.values())
    x = torch.randn(6, 3)
    base_t = copy.deepcopy(t_models[0]).to("meta")
    t = tf.vmap(lambda p, b, d: tf.functional_call(base_t, (p, b), (d,)), in_dims=(0, 0, None))(tp, tb, x)
    e = ef.vmap(lambda p, b, d: ef.functional_call(e_models[0], (p, b), (d,)), in_dims=(0, 0, None))(
        ep, eb, _to_ember(x))
    _close(e, t)
    # different data per model too
    xs = torch.randn(4, 6, 3)
    t = tf.vmap(lambda p, b, d: tf.functional_call(base_t, (p, b), (d,)))(tp, tb, xs)
    e = ef.vmap(lambda p, b, d: ef.functional_call(e_models[0], (p, b), (d,)))(ep, eb, _to_ember(xs))
    _close(e, t)


def test_stack_module_state_errors():
    with pytest.raises(RuntimeError, match="Expected at least one model"):
        ef.stack_module_state([])
    a, b = ember.nn.Linear(2, 2), ember.nn.Linear(2, 2)
    b.eval()
    with pytest.raises(RuntimeError, match="same training/eval mode"):
        ef.stack_module_state([a, b])
    with pytest.raises(RuntimeError, match="same class"):
        ef.stack_module_state([a, ember.nn.Identity()])


def _cnn(lib):
    return lib.nn.Sequential(lib.nn.Conv2d(1, 3, 3, padding=1), lib.nn.ReLU(), lib.nn.MaxPool2d(2),
                             lib.nn.Flatten(), lib.nn.Linear(3 * 4 * 4, 5))


@pytest.mark.parametrize("make", [_mlp, _cnn], ids=["mlp", "cnn"])
def test_per_sample_grads_through_modules(make):
    tm, em = _twin(lambda: make(torch), lambda: make(ember), seed=5)
    is_cnn = make is _cnn
    x = torch.randn(6, 1, 8, 8) if is_cnn else torch.randn(6, 3)
    y = torch.randint(0, 5, (6,)) if is_cnn else torch.randn(6, 1)

    def loss(lib, func, model):
        def f(p, xi, yi):
            out = func.functional_call(model, p, (xi.unsqueeze(0),))
            if is_cnn:
                return lib.nn.functional.cross_entropy(out, yi.unsqueeze(0))
            return lib.nn.functional.mse_loss(out, yi.unsqueeze(0))
        return f

    tp = {k: v.detach() for k, v in tm.named_parameters()}
    ep = {k: v.detach() for k, v in em.named_parameters()}
    t = tf.vmap(tf.grad(loss(torch, tf, tm)), in_dims=(None, 0, 0))(tp, x, y)
    e = ef.vmap(ef.grad(loss(ember, ef, em)), in_dims=(None, 0, 0))(ep, _to_ember(x), _to_ember(y))
    _close(e, t, rtol=2e-4, atol=2e-5)


def test_functional_call_jacobian_and_hessian_of_a_module():
    tm, em = _twin(lambda: _mlp(torch), lambda: _mlp(ember), seed=6)
    x = torch.randn(3)
    tp = {k: v.detach() for k, v in tm.named_parameters()}
    ep = {k: v.detach() for k, v in em.named_parameters()}
    t = tf.jacrev(lambda p: tf.functional_call(tm, p, (x,)))(tp)
    e = ef.jacrev(lambda p: ef.functional_call(em, p, (_to_ember(x),)))(ep)
    _close(e, t)
    t = tf.hessian(lambda a: tf.functional_call(tm, tp, (a,)).sum())(x)
    e = ef.hessian(lambda a: ef.functional_call(em, ep, (a,)).sum())(_to_ember(x))
    _close(e, t)


def test_batch_norm_under_vmap_after_replace_all_batch_norm_modules():
    def make(lib):
        return lib.nn.Sequential(lib.nn.Conv2d(2, 3, 3), lib.nn.BatchNorm2d(3), lib.nn.ReLU())

    tm, em = _twin(lambda: make(torch), lambda: make(ember), seed=7)
    x = torch.randn(4, 5, 2, 6, 6)  # 4 groups of 5 images: one batch norm per group
    with pytest.raises(RuntimeError, match="running_mean or running_var"):
        ef.vmap(em)(_to_ember(x))
    tf.replace_all_batch_norm_modules_(tm)
    assert ef.replace_all_batch_norm_modules_(em) is em
    assert em[1].running_mean is None and not em[1].track_running_stats
    _close(ef.vmap(em)(_to_ember(x)), tf.vmap(tm)(x))
    loop = ember.stack([em(_to_ember(x[i])) for i in range(4)])
    _close(ef.vmap(em)(_to_ember(x)), loop)
