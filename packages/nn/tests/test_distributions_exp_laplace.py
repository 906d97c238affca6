"""Exponential and Laplace compared with torch.distributions."""

import pytest
import torch
import torch.distributions as td
from distributions_helpers import close, pair, rng, to_ember

import ember
import ember.distributions as ed


def _make(family, shape, r):
    if family == "Exponential":
        rate_e, rate_t = pair(r.uniform(0.5, 2.0, size=shape), requires_grad=True)
        return ed.Exponential(rate_e), td.Exponential(rate_t), [(rate_e, rate_t)]
    loc_e, loc_t = pair(r.normal(size=shape), requires_grad=True)
    sc_e, sc_t = pair(r.uniform(0.5, 2.0, size=shape), requires_grad=True)
    return ed.Laplace(loc_e, sc_e), td.Laplace(loc_t, sc_t), [(loc_e, loc_t), (sc_e, sc_t)]


@pytest.mark.parametrize("family", ["Exponential", "Laplace"])
@pytest.mark.parametrize("shape", [(), (3,), (2, 2)])
def test_family_matches_torch(family, shape):
    r = rng(9)
    de, dt, params = _make(family, shape, r)
    assert de.batch_shape == dt.batch_shape and de.has_rsample
    for name in ("mean", "mode", "variance", "stddev"):
        close(getattr(de, name), getattr(dt, name))
    v_t = dt.sample((4,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-4)
    close(de.cdf(to_ember(v_t)), dt.cdf(v_t), rtol=1e-4, atol=1e-6)
    q_e, q_t = pair(r.uniform(0.05, 0.95, size=shape))
    close(de.icdf(q_e), dt.icdf(q_t), rtol=1e-4)
    close(de.entropy(), dt.entropy())
    (lp_e.sum() + de.entropy().sum()).backward()
    (lp_t.sum() + dt.entropy().sum()).backward()
    for pe, pt in params:
        close(pe.grad, pt.grad, rtol=1e-4)
    e = de.expand((5,) + tuple(shape))
    assert e.batch_shape == (5,) + tuple(shape) and e.rsample((2,)).shape == (2, 5) + tuple(shape)


def test_exponential_rsample_grad_and_moments():
    rate = ember.tensor([0.5, 2.0], requires_grad=True)
    ember.manual_seed(4)
    x = ed.Exponential(rate).rsample((20000,))
    assert bool((x >= 0).all())
    m = x.detach().mean(0).numpy()
    assert abs(m[0] - 2.0) < 0.1 and abs(m[1] - 0.5) < 0.03
    x.sum().backward()  # d/drate (E/rate) = -x/rate
    close(rate.grad, torch.tensor((-(x.detach() / rate.detach()).sum(0)).numpy()), rtol=1e-4)


def test_laplace_rsample_grad_and_moments():
    loc = ember.tensor(1.0, requires_grad=True)
    scale = ember.tensor(2.0, requires_grad=True)
    ember.manual_seed(4)
    x = ed.Laplace(loc, scale).rsample((20000,))
    assert abs(float(x.mean()) - 1.0) < 0.1 and abs(float(x.var()) - 8.0) < 0.5
    x.sum().backward()
    close(loc.grad, torch.tensor(20000.0))
    close(scale.grad, torch.tensor(float(((x.detach() - 1.0) / 2.0).sum())), rtol=1e-3, atol=1e-2)
    ember.manual_seed(4)
    assert bool((ed.Laplace(loc, scale).sample((20000,)) == x.detach()).all())


def test_errors():
    with pytest.raises(ValueError, match="Expected parameter rate"):
        ed.Exponential(ember.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="Expected value argument"):
        ed.Exponential(ember.tensor(1.0)).log_prob(ember.tensor(-1.0))
    with pytest.raises(ValueError, match="Expected parameter scale"):
        ed.Laplace(0.0, -1.0)
    assert ed.Exponential(2.0).batch_shape == () and ed.Laplace(0.0, 1.0).sample((3,)).shape == (3,)
