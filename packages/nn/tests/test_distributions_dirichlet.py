"""Dirichlet and Beta compared with torch.distributions."""

import numpy as np
import pytest
import torch
import torch.distributions as td
from distributions_helpers import close, pair, rng, to_ember

import ember
import ember.distributions as ed


@pytest.mark.parametrize("shape", [(3,), (2, 4)])
def test_dirichlet_matches_torch(shape):
    r = rng(22)
    c_e, c_t = pair(r.uniform(0.5, 3.0, size=shape), requires_grad=True)
    de, dt = ed.Dirichlet(c_e), td.Dirichlet(c_t)
    assert de.batch_shape == dt.batch_shape and de.event_shape == dt.event_shape
    for name in ("mean", "mode", "variance"):
        close(getattr(de, name), getattr(dt, name), rtol=1e-5)
    v_t = dt.sample((3,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-4, atol=1e-4)
    close(de.entropy(), dt.entropy(), rtol=1e-4, atol=1e-5)
    q_e, q_t = pair(r.uniform(0.5, 3.0, size=shape))
    ke, kt = ed.kl_divergence(de, ed.Dirichlet(q_e)), td.kl_divergence(dt, td.Dirichlet(q_t))
    close(ke, kt, rtol=1e-4, atol=1e-5)
    (lp_e.sum() + de.entropy().sum() + ke.sum()).backward()
    (lp_t.sum() + dt.entropy().sum() + kt.sum()).backward()
    close(c_e.grad, c_t.grad, rtol=1e-4, atol=1e-4)
    s = de.sample((5,))
    assert s.shape == (5,) + shape and bool(((s.sum(-1) - 1).abs() < 1e-5).all())
    assert de.expand((3,) + tuple(de.batch_shape)).sample().shape == (3,) + shape


def test_dirichlet_mode_small_concentrations_and_errors():
    c = [[0.5, 0.7, 0.2], [2.0, 3.0, 1.5]]
    close(ed.Dirichlet(ember.tensor(c)).mode, td.Dirichlet(torch.tensor(c)).mode)
    with pytest.raises(ValueError, match="`concentration` parameter must be at least one-dimensional."):
        ed.Dirichlet(ember.tensor(1.0))
    with pytest.raises(ValueError, match="Expected parameter concentration"):
        ed.Dirichlet(ember.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="Expected value argument"):
        ed.Dirichlet(ember.ones(2)).log_prob(ember.tensor([0.3, 0.3]))


def test_dirichlet_rsample_gradient_is_unbiased():
    # d/dalpha E[x] = d/dalpha (alpha / sum(alpha)), estimated from reparameterized samples.
    c = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    ember.manual_seed(13)
    x = ed.Dirichlet(c).rsample((4000,))
    x[:, 0].mean().backward()
    ct = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (ct[0] / ct.sum()).backward()
    np.testing.assert_allclose(c.grad.numpy(), ct.grad.numpy(), atol=0.01)
    np.testing.assert_allclose(x.detach().numpy().mean(0), [1 / 6, 2 / 6, 3 / 6], atol=0.01)


@pytest.mark.parametrize("shape", [(), (3,)])
def test_beta_matches_torch(shape):
    r = rng(23)
    a_e, a_t = pair(r.uniform(0.5, 3.0, size=shape), requires_grad=True)
    b_e, b_t = pair(r.uniform(0.5, 3.0, size=shape), requires_grad=True)
    de, dt = ed.Beta(a_e, b_e), td.Beta(a_t, b_t)
    assert de.batch_shape == dt.batch_shape and de.has_rsample
    for name in ("mean", "mode", "variance", "concentration1", "concentration0"):
        close(getattr(de, name), getattr(dt, name), rtol=1e-5)
    v_t = dt.sample((4,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-4, atol=1e-4)
    close(de.entropy(), dt.entropy(), rtol=1e-4, atol=1e-5)
    q_e, q_t = ed.Beta(1.5, 2.5).expand(shape), td.Beta(1.5, 2.5).expand(shape)
    ke, kt = ed.kl_divergence(de, q_e), td.kl_divergence(dt, q_t)
    close(ke, kt, rtol=1e-4, atol=1e-5)
    (lp_e.sum() + de.entropy().sum() + ke.sum()).backward()
    (lp_t.sum() + dt.entropy().sum() + kt.sum()).backward()
    close(a_e.grad, a_t.grad, rtol=1e-4, atol=1e-4)
    close(b_e.grad, b_t.grad, rtol=1e-4, atol=1e-4)
    x = de.rsample((7,))
    assert x.shape == (7,) + tuple(shape) and bool(((x >= 0) & (x <= 1)).all()) and x.requires_grad
    e = de.expand((2,) + tuple(shape))
    assert e.batch_shape == (2,) + tuple(shape) and e.sample().shape == e.batch_shape


def test_beta_scalar_moments_and_errors():
    d = ed.Beta(2.0, 5.0)
    assert d.batch_shape == ()
    ember.manual_seed(14)
    x = d.sample((10000,)).numpy()
    assert abs(x.mean() - 2 / 7) < 0.01 and abs(x.var() - 10 / (49 * 8)) < 0.003
    with pytest.raises(ValueError, match="Expected parameter concentration"):
        ed.Beta(ember.tensor([1.0]), ember.tensor([-1.0]))
    with pytest.raises(ValueError, match="Expected value argument"):
        d.log_prob(ember.tensor(1.5))
