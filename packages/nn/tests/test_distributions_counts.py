"""Binomial, Multinomial and Gumbel compared with torch.distributions."""

import numpy as np
import pytest
import torch
import torch.distributions as td
from distributions_helpers import close, pair, rng, to_ember

import ember
import ember.distributions as ed


@pytest.mark.parametrize("param", ["probs", "logits"])
@pytest.mark.parametrize("shape", [(), (3,)])
def test_binomial_matches_torch(param, shape):
    r = rng(17)
    values = r.uniform(0.1, 0.9, size=shape) if param == "probs" else r.normal(size=shape)
    p_e, p_t = pair(values, requires_grad=True)
    de, dt = ed.Binomial(5, **{param: p_e}), td.Binomial(5, **{param: p_t})
    assert de.batch_shape == dt.batch_shape
    for name in ("mean", "mode", "variance", "probs", "logits"):
        close(getattr(de, name), getattr(dt, name), rtol=1e-5)
    v_t = dt.sample((4,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-4, atol=1e-5)
    close(de.entropy(), dt.entropy(), rtol=1e-4)
    close(de.enumerate_support(), dt.enumerate_support())
    (lp_e.sum() + de.entropy().sum()).backward()
    (lp_t.sum() + dt.entropy().sum()).backward()
    close(p_e.grad, p_t.grad, rtol=1e-4, atol=1e-5)
    q_e, q_t = ed.Binomial(5, probs=ember.full(shape, 0.3)), td.Binomial(5, probs=torch.full(shape, 0.3))
    close(ed.kl_divergence(de, q_e), td.kl_divergence(dt, q_t), rtol=1e-4, atol=1e-6)


def test_binomial_sampling_and_errors():
    d = ed.Binomial(ember.tensor([3.0, 10.0]), probs=ember.tensor([0.5, 0.2]))
    ember.manual_seed(8)
    x = d.sample((4000,))
    ember.manual_seed(8)
    assert bool((x == d.sample((4000,))).all())
    np.testing.assert_allclose(x.numpy().mean(0), [1.5, 2.0], atol=0.1)
    assert bool((x <= ember.tensor([3.0, 10.0])).all())
    with pytest.raises(NotImplementedError, match="Inhomogeneous total count not supported by `entropy`."):
        d.entropy()
    with pytest.raises(ValueError, match="Expected value argument"):
        d.log_prob(ember.tensor([4.0, 1.0]))
    with pytest.raises(ValueError, match="Expected parameter total_count"):
        ed.Binomial(ember.tensor([1.5]), probs=ember.tensor([0.5]))
    with pytest.raises(NotImplementedError, match="q.total_count > p.total_count"):
        ed.kl_divergence(ed.Binomial(2, probs=ember.tensor(0.5)), ed.Binomial(3, probs=ember.tensor(0.5)))
    e = d.expand((2, 2))
    assert e.batch_shape == (2, 2) and e.sample().shape == (2, 2)


@pytest.mark.parametrize("param", ["probs", "logits"])
@pytest.mark.parametrize("shape", [(3,), (2, 4)])
def test_multinomial_matches_torch(param, shape):
    r = rng(18)
    values = r.uniform(0.1, 1.0, size=shape) if param == "probs" else r.normal(size=shape)
    p_e, p_t = pair(values, requires_grad=True)
    de, dt = ed.Multinomial(6, **{param: p_e}), td.Multinomial(6, **{param: p_t})
    assert de.batch_shape == dt.batch_shape and de.event_shape == dt.event_shape
    for name in ("mean", "variance", "probs", "logits"):
        close(getattr(de, name), getattr(dt, name), rtol=1e-5)
    v_t = dt.sample((3,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-4, atol=1e-5)
    close(de.entropy(), dt.entropy(), rtol=1e-4)
    (lp_e.sum() + de.entropy().sum()).backward()
    (lp_t.sum() + dt.entropy().sum()).backward()
    close(p_e.grad, p_t.grad, rtol=1e-4, atol=1e-5)
    s = de.sample((5,))
    assert s.shape == (5,) + shape and s.dtype == ember.float32 and bool((s.sum(-1) == 6).all())
    e = de.expand((2,) + tuple(de.batch_shape))
    assert e.sample().shape == (2,) + shape


def test_multinomial_frequencies_and_errors():
    d = ed.Multinomial(100, probs=ember.tensor([0.2, 0.0, 0.8]))
    ember.manual_seed(9)
    x = d.sample((200,)).numpy()
    assert (x[:, 1] == 0).all()
    np.testing.assert_allclose(x.mean(0), [20.0, 0.0, 80.0], atol=2.0)
    with pytest.raises(NotImplementedError, match="inhomogeneous total_count is not supported"):
        ed.Multinomial(ember.tensor([2, 3]), probs=ember.ones(2))
    with pytest.raises(ValueError, match="Expected value argument"):
        d.log_prob(ember.tensor([50.0, 0.0, 60.0]))
    close(ed.Multinomial(3, logits=ember.tensor([0.0, float("-inf")])).log_prob(ember.tensor([3.0, 0.0])),
          td.Multinomial(3, logits=torch.tensor([0.0, float("-inf")])).log_prob(torch.tensor([3.0, 0.0])))  # fmt: skip


@pytest.mark.parametrize("shape", [(), (3,)])
def test_gumbel_matches_torch(shape):
    r = rng(19)
    loc_e, loc_t = pair(r.normal(size=shape), requires_grad=True)
    sc_e, sc_t = pair(r.uniform(0.5, 2.0, size=shape), requires_grad=True)
    de, dt = ed.Gumbel(loc_e, sc_e), td.Gumbel(loc_t, sc_t)
    assert de.batch_shape == dt.batch_shape and de.has_rsample
    for name in ("mean", "mode", "variance", "stddev"):
        close(getattr(de, name), getattr(dt, name), rtol=1e-5)
    v_t = dt.sample((4,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-4, atol=1e-5)
    close(de.cdf(to_ember(v_t)), dt.cdf(v_t), rtol=1e-4, atol=1e-6)
    close(de.entropy(), dt.entropy())
    q_e, q_t = ed.Gumbel(0.3, 1.5).expand(shape), td.Gumbel(0.3, 1.5).expand(shape)
    ke, kt = ed.kl_divergence(de, q_e), td.kl_divergence(dt, q_t)
    close(ke, kt, rtol=1e-4, atol=1e-5)
    (lp_e.sum() + ke.sum()).backward()
    (lp_t.sum() + kt.sum()).backward()
    close(loc_e.grad, loc_t.grad, rtol=1e-4, atol=1e-5)
    close(sc_e.grad, sc_t.grad, rtol=1e-4, atol=1e-5)
    ember.manual_seed(10)
    x = ed.Gumbel(ember.tensor(1.0), ember.tensor(2.0)).sample((20000,)).numpy()
    assert abs(x.mean() - (1.0 + 2.0 * 0.5772)) < 0.1
    e = de.expand((2,) + tuple(shape))
    assert isinstance(e, ed.Gumbel) and e.rsample().shape == (2,) + tuple(shape)
