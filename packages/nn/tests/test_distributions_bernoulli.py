"""Bernoulli compared with torch.distributions.Bernoulli."""

import pytest
import torch
import torch.distributions as td
from distributions_helpers import close, pair, rng, to_ember

import ember
import ember.distributions as ed


@pytest.mark.parametrize("param", ["probs", "logits"])
@pytest.mark.parametrize("shape", [(), (4,), (2, 3)])
def test_bernoulli_matches_torch(param, shape):
    r = rng(2)
    values = r.uniform(0.05, 0.95, size=shape) if param == "probs" else r.normal(size=shape)
    p_e, p_t = pair(values, requires_grad=True)
    de, dt = ed.Bernoulli(**{param: p_e}), td.Bernoulli(**{param: p_t})
    assert de.batch_shape == dt.batch_shape and de.event_shape == dt.event_shape == ()
    for name in ("mean", "variance", "stddev", "probs", "logits", "mode"):
        close(getattr(de, name), getattr(dt, name), rtol=1e-4)
    v_t = dt.sample((3,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-4)
    close(de.entropy(), dt.entropy(), rtol=1e-4)
    (lp_e.sum() + de.entropy().sum()).backward()
    (lp_t.sum() + dt.entropy().sum()).backward()
    close(p_e.grad, p_t.grad, rtol=1e-4, atol=1e-4)
    close(de.enumerate_support(), dt.enumerate_support())
    close(de.enumerate_support(expand=False), dt.enumerate_support(expand=False))


def test_bernoulli_mode_half_is_nan_and_scalar_param():
    de, dt = (
        ed.Bernoulli(probs=ember.tensor([0.5, 0.7, 0.2])),
        td.Bernoulli(probs=torch.tensor([0.5, 0.7, 0.2])),
    )
    close(de.mode, dt.mode)
    s = ed.Bernoulli(0.3)
    assert s.batch_shape == () and s.sample((5,)).shape == (5,)


def test_bernoulli_sample_values_and_seed():
    d = ed.Bernoulli(probs=ember.full((2000,), 0.3))
    ember.manual_seed(5)
    a = d.sample()
    ember.manual_seed(5)
    assert bool((a == d.sample()).all())
    assert bool(((a == 0) | (a == 1)).all()) and a.dtype == ember.float32
    assert abs(float(a.mean()) - 0.3) < 0.05
    assert not d.has_rsample
    with pytest.raises(NotImplementedError):
        d.rsample()


def test_bernoulli_expand_keeps_param_kind():
    d = ed.Bernoulli(logits=ember.tensor([0.1, -0.4])).expand((3, 2))
    t = td.Bernoulli(logits=torch.tensor([0.1, -0.4])).expand((3, 2))
    assert "logits" in d.__dict__ and d.batch_shape == (3, 2)
    close(d.log_prob(ember.ones(3, 2)), t.log_prob(torch.ones(3, 2)))


def test_bernoulli_errors():
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        ed.Bernoulli()
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        ed.Bernoulli(probs=ember.tensor(0.1), logits=ember.tensor(0.1))
    with pytest.raises(ValueError, match="Expected parameter probs"):
        ed.Bernoulli(probs=ember.tensor([0.5, 1.5]))
    with pytest.raises(ValueError, match="Expected value argument"):
        ed.Bernoulli(probs=ember.tensor([0.5, 0.5])).log_prob(ember.tensor([0.0, 0.5]))
