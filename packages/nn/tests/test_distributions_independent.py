"""Independent compared with torch.distributions.Independent."""

import pytest
import torch.distributions as td
from distributions_helpers import close, pair, rng, to_ember

import ember
import ember.distributions as ed


@pytest.mark.parametrize("ndims", [0, 1, 2])
def test_independent_normal_matches_torch(ndims):
    r = rng(7)
    loc_e, loc_t = pair(r.normal(size=(2, 3, 4)), requires_grad=True)
    sc_e, sc_t = pair(r.uniform(0.5, 1.5, size=(2, 3, 4)), requires_grad=True)
    de = ed.Independent(ed.Normal(loc_e, sc_e), ndims)
    dt = td.Independent(td.Normal(loc_t, sc_t), ndims)
    assert de.batch_shape == dt.batch_shape and de.event_shape == dt.event_shape
    assert de.has_rsample and de.has_enumerate_support == dt.has_enumerate_support
    for name in ("mean", "mode", "variance", "stddev"):
        close(getattr(de, name), getattr(dt, name))
    v_t = dt.sample((2,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-4)
    close(de.entropy(), dt.entropy(), rtol=1e-4)
    (lp_e.sum() + de.entropy().sum()).backward()
    (lp_t.sum() + dt.entropy().sum()).backward()
    close(loc_e.grad, loc_t.grad, rtol=1e-4)
    close(sc_e.grad, sc_t.grad, rtol=1e-4)
    assert de.rsample((5,)).shape == (5, 2, 3, 4)
    assert repr(de.support) == repr(dt.support)
    ex_e, ex_t = de.expand((6,) + de.batch_shape), dt.expand((6,) + dt.batch_shape)
    assert ex_e.batch_shape == ex_t.batch_shape and ex_e.event_shape == ex_t.event_shape
    assert ex_e.sample().shape == ex_t.sample().shape


def test_independent_bernoulli_enumerate_and_errors():
    probs = ember.tensor([[0.2, 0.7], [0.4, 0.5]])
    d0 = ed.Independent(ed.Bernoulli(probs=probs), 0)
    assert d0.has_enumerate_support and d0.enumerate_support().shape == (2, 2, 2)
    d1 = ed.Independent(ed.Bernoulli(probs=probs), 1)
    assert not d1.has_enumerate_support
    with pytest.raises(NotImplementedError, match="cartesian product"):
        d1.enumerate_support()
    with pytest.raises(ValueError, match="Expected reinterpreted_batch_ndims <= len"):
        ed.Independent(ed.Bernoulli(probs=probs), 3)
    with pytest.raises(ValueError, match="Expected value argument"):
        d1.log_prob(ember.tensor([[0.0, 2.0], [1.0, 1.0]]))
    assert repr(d1) == "Independent(Bernoulli(probs: ember.Size([2, 2])), 1)"
    assert not ed.Independent(ed.Bernoulli(probs=probs), 1).has_rsample
