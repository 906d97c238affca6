"""Categorical and OneHotCategorical compared with torch.distributions."""

import numpy as np
import pytest
import torch
import torch.distributions as td
from distributions_helpers import close, pair, rng, to_ember

import ember
import ember.distributions as ed


def _params(param, shape, seed=3):
    r = rng(seed)
    return r.uniform(0.1, 1.0, size=shape) if param == "probs" else r.normal(size=shape)


@pytest.mark.parametrize("param", ["probs", "logits"])
@pytest.mark.parametrize("shape", [(4,), (2, 3), (2, 1, 5)])
def test_categorical_matches_torch(param, shape):
    p_e, p_t = pair(_params(param, shape), requires_grad=True)
    de, dt = ed.Categorical(**{param: p_e}), td.Categorical(**{param: p_t})
    assert de.batch_shape == dt.batch_shape and de.event_shape == dt.event_shape
    assert de.param_shape == dt.param_shape
    for name in ("probs", "logits", "mean", "variance"):
        close(getattr(de, name), getattr(dt, name), rtol=1e-4)
    close(de.mode, dt.mode)
    v_t = dt.sample((3,))
    lp_e, lp_t = de.log_prob(to_ember(v_t).long()), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-4)
    close(de.entropy(), dt.entropy(), rtol=1e-4)
    (lp_e.sum() + de.entropy().sum()).backward()
    (lp_t.sum() + dt.entropy().sum()).backward()
    close(p_e.grad, p_t.grad, rtol=1e-4, atol=1e-5)
    close(de.enumerate_support(), dt.enumerate_support())
    close(de.enumerate_support(expand=False), dt.enumerate_support(expand=False))
    close(de.log_prob(de.enumerate_support()), dt.log_prob(dt.enumerate_support()), rtol=1e-4)


def test_categorical_zero_probability_entropy():
    p = [0.0, 0.25, 0.75]
    close(ed.Categorical(probs=ember.tensor(p)).entropy(), td.Categorical(probs=torch.tensor(p)).entropy())
    lg = [float("-inf"), 0.0, 1.0]
    close(
        ed.Categorical(logits=ember.tensor(lg)).entropy(), td.Categorical(logits=torch.tensor(lg)).entropy()
    )


def test_categorical_sampling_shape_dtype_frequencies():
    d = ed.Categorical(probs=ember.tensor([[0.1, 0.9, 0.0], [0.5, 0.0, 0.5]]))
    s = d.sample((3, 4))
    assert s.shape == (3, 4, 2) and s.dtype == ember.int64
    assert d.sample().shape == (2,)
    ember.manual_seed(0)
    many = d.sample((4000,)).numpy()
    assert not (many[:, 0] == 2).any() and not (many[:, 1] == 1).any()
    assert abs((many[:, 0] == 1).mean() - 0.9) < 0.03
    ember.manual_seed(0)
    np.testing.assert_array_equal(many, d.sample((4000,)).numpy())


def test_categorical_expand_and_errors():
    d = ed.Categorical(logits=ember.tensor([0.1, 0.2, 0.3])).expand((2,))
    t = td.Categorical(logits=torch.tensor([0.1, 0.2, 0.3])).expand((2,))
    close(d.log_prob(ember.tensor([0, 2])), t.log_prob(torch.tensor([0, 2])))
    with pytest.raises(ValueError, match="`probs` parameter must be at least one-dimensional."):
        ed.Categorical(probs=ember.tensor(1.0))
    with pytest.raises(ValueError, match="`logits` parameter must be at least one-dimensional."):
        ed.Categorical(logits=ember.tensor(1.0))
    with pytest.raises(ValueError, match="Either"):
        ed.Categorical()
    with pytest.raises(ValueError, match="Expected parameter probs"):
        ed.Categorical(probs=ember.tensor([0.5, -0.5, 1.0]))
    with pytest.raises(ValueError, match="Expected value argument"):
        ed.Categorical(probs=ember.tensor([0.5, 0.5])).log_prob(ember.tensor(2))
    assert repr(ed.Categorical(probs=ember.ones(3)).support) == repr(
        td.Categorical(probs=torch.ones(3)).support
    )


@pytest.mark.parametrize("param", ["probs", "logits"])
@pytest.mark.parametrize("shape", [(4,), (2, 3)])
def test_one_hot_categorical_matches_torch(param, shape):
    p_e, p_t = pair(_params(param, shape, seed=4), requires_grad=True)
    de, dt = ed.OneHotCategorical(**{param: p_e}), td.OneHotCategorical(**{param: p_t})
    assert de.batch_shape == dt.batch_shape and de.event_shape == dt.event_shape
    for name in ("probs", "logits", "mean", "variance", "mode"):
        close(getattr(de, name), getattr(dt, name), rtol=1e-4)
    v_t = dt.sample((3,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-4)
    close(de.entropy(), dt.entropy(), rtol=1e-4)
    lp_e.sum().backward()
    lp_t.sum().backward()
    close(p_e.grad, p_t.grad, rtol=1e-4, atol=1e-5)
    close(de.enumerate_support(), dt.enumerate_support())
    s = de.sample((5,))
    assert s.shape == (5,) + shape and bool((s.sum(-1) == 1).all())
    with pytest.raises(ValueError, match="Expected value argument"):
        de.log_prob(ember.full(shape, 0.5))
    e = de.expand((2,) + de.batch_shape)
    assert e.batch_shape == (2,) + dt.batch_shape and e.sample().shape == (2,) + shape


def test_one_hot_straight_through_rsample_grad():
    p = ember.tensor([0.2, 0.3, 0.5], requires_grad=True)
    d = ed.OneHotCategoricalStraightThrough(probs=p)
    s = d.rsample((4,))
    assert bool((s.sum(-1) == 1).all())
    (s * ember.tensor([1.0, 2.0, 3.0])).sum().backward()
    # The straight-through gradient is that of 4 * <probs, c>, where probs = p / p.sum().
    pt = torch.tensor([0.2, 0.3, 0.5], requires_grad=True)
    (4 * (pt / pt.sum()) * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    close(p.grad, pt.grad, rtol=1e-4)
