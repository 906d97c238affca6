"""Uniform compared with torch.distributions.Uniform."""

import pytest
import torch
import torch.distributions as td
from distributions_helpers import close, pair, rng, to_ember

import ember
import ember.distributions as ed


@pytest.mark.parametrize("shape", [(), (3,), (2, 2)])
def test_uniform_matches_torch(shape):
    r = rng(6)
    low = r.normal(size=shape)
    lo_e, lo_t = pair(low, requires_grad=True)
    hi_e, hi_t = pair(low + r.uniform(0.5, 2.0, size=shape), requires_grad=True)
    de, dt = ed.Uniform(lo_e, hi_e), td.Uniform(lo_t, hi_t)
    assert de.batch_shape == dt.batch_shape
    for name in ("mean", "mode", "variance", "stddev"):
        close(getattr(de, name), getattr(dt, name))
    v_t = dt.sample((4,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t)
    close(de.cdf(to_ember(v_t)), dt.cdf(v_t))
    q_e, q_t = pair(r.uniform(size=shape))
    close(de.icdf(q_e), dt.icdf(q_t))
    (lp_e.sum() + de.entropy().sum()).backward()
    (lp_t.sum() + dt.entropy().sum()).backward()
    close(lo_e.grad, lo_t.grad)
    close(hi_e.grad, hi_t.grad)


def test_uniform_rsample_range_grad_and_seed():
    lo = ember.tensor([0.0, -2.0], requires_grad=True)
    hi = ember.tensor([1.0, 3.0], requires_grad=True)
    d = ed.Uniform(lo, hi)
    ember.manual_seed(1)
    x = d.rsample((500,))
    assert bool(((x >= lo) & (x < hi)).all())
    x.sum().backward()
    u = (x.detach() - lo.detach()) / (hi.detach() - lo.detach())
    close(hi.grad, torch.tensor(u.sum(0).numpy()), rtol=1e-4)
    close(lo.grad, torch.tensor((1 - u).sum(0).numpy()), rtol=1e-4)
    ember.manual_seed(1)
    assert bool((d.rsample((500,)) == x).all())


def test_uniform_scalar_expand_and_errors():
    d = ed.Uniform(0.0, 2.0)
    assert d.batch_shape == () and d.sample((3,)).shape == (3,)
    e = d.expand((2, 3))
    assert e.batch_shape == (2, 3)
    with pytest.raises(ValueError, match="Expected parameter low"):
        ed.Uniform(ember.tensor([0.0, 2.0]), ember.tensor([1.0, 1.0]))
    with pytest.raises(ValueError, match="Expected value argument"):
        d.log_prob(ember.tensor(3.0))
    assert repr(d.support) == repr(td.Uniform(0.0, 2.0).support)
    ed.Uniform(ember.tensor(1.0), ember.tensor(0.0), validate_args=False)
