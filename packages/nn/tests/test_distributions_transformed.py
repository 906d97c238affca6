"""Transforms, TransformedDistribution and LogNormal compared with torch.distributions."""

import math

import pytest
import torch
import torch.distributions as td
import torch.distributions.transforms as tt
from distributions_helpers import close, pair, rng, to_ember

import ember
import ember.distributions as ed


def _transform_pairs():
    return [
        (ed.ExpTransform(), tt.ExpTransform()),
        (ed.SigmoidTransform(), tt.SigmoidTransform()),
        (ed.TanhTransform(), tt.TanhTransform()),
        (ed.AffineTransform(0.5, -2.0), tt.AffineTransform(0.5, -2.0)),
        (ed.AffineTransform(ember.tensor([1.0, 2.0, 3.0]), ember.tensor([0.5, 2.0, -1.0])),
         tt.AffineTransform(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.5, 2.0, -1.0]))),
        (ed.AffineTransform(0.0, ember.tensor([0.5, 2.0, 3.0]), event_dim=1),
         tt.AffineTransform(0.0, torch.tensor([0.5, 2.0, 3.0]), event_dim=1)),
        (ed.ComposeTransform([ed.AffineTransform(0.1, 0.5), ed.TanhTransform()]),
         tt.ComposeTransform([tt.AffineTransform(0.1, 0.5), tt.TanhTransform()])),
        (ed.ExpTransform().inv, tt.ExpTransform().inv),
    ]  # fmt: skip


@pytest.mark.parametrize("index", range(8))
def test_transform_matches_torch(index):
    te, tt_ = _transform_pairs()[index]
    r = rng(11)
    x_e, x_t = pair(r.uniform(0.2, 1.5, size=(2, 3)), requires_grad=True)
    y_e, y_t = te(x_e), tt_(x_t)
    close(y_e, y_t, rtol=1e-5)
    close(te.inv(y_e), tt_.inv(y_t), rtol=1e-4, atol=1e-5)
    j_e, j_t = te.log_abs_det_jacobian(x_e, y_e), tt_.log_abs_det_jacobian(x_t, y_t)
    close(j_e, j_t, rtol=1e-4, atol=1e-5)
    (y_e.sum() + j_e.sum()).backward()
    (y_t.sum() + j_t.sum()).backward()
    close(x_e.grad, x_t.grad, rtol=1e-4, atol=1e-5)
    assert te.bijective == tt_.bijective
    assert repr(te.domain) == repr(tt_.domain) and repr(te.codomain) == repr(tt_.codomain)
    assert te.forward_shape((4, 3)) == tt_.forward_shape((4, 3))


def test_transform_cache_inverse_and_equality():
    t = ed.ExpTransform(cache_size=1)
    x = ember.tensor([1.0, 2.0])
    y = t(x)
    assert t.inv(y) is x and t.inv.inv is t
    assert ed.ExpTransform() == ed.ExpTransform() and ed.ExpTransform() != ed.SigmoidTransform()
    assert ed.AffineTransform(1.0, 2.0) == ed.AffineTransform(1.0, 2.0) != ed.AffineTransform(1.0, 3.0)
    assert ed.ComposeTransform([ed.ExpTransform()]).inv == ed.ComposeTransform([ed.ExpTransform().inv])
    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        ed.ExpTransform(cache_size=2)
    assert ed.AffineTransform(0.0, -2.0).sign == -1 and ed.ExpTransform().sign == 1
    assert bool((ed.identity_transform(x) == x).all())
    assert repr(ed.ComposeTransform([ed.ExpTransform()])) == repr(tt.ComposeTransform([tt.ExpTransform()]))


@pytest.mark.parametrize("shape", [(), (3,)])
def test_log_normal_matches_torch(shape):
    r = rng(12)
    loc_e, loc_t = pair(r.normal(size=shape), requires_grad=True)
    sc_e, sc_t = pair(r.uniform(0.3, 1.0, size=shape), requires_grad=True)
    de, dt = ed.LogNormal(loc_e, sc_e), td.LogNormal(loc_t, sc_t)
    assert de.batch_shape == dt.batch_shape and de.event_shape == dt.event_shape and de.has_rsample
    for name in ("mean", "mode", "variance", "stddev"):
        close(getattr(de, name), getattr(dt, name), rtol=1e-4)
    v_t = dt.sample((4,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-4)
    close(de.cdf(to_ember(v_t)), dt.cdf(v_t), rtol=1e-4, atol=1e-6)
    q_e, q_t = pair(r.uniform(0.1, 0.9, size=shape))
    close(de.icdf(q_e), dt.icdf(q_t), rtol=1e-4)
    close(de.entropy(), dt.entropy(), rtol=1e-5)
    (lp_e.sum() + de.entropy().sum()).backward()
    (lp_t.sum() + dt.entropy().sum()).backward()
    close(loc_e.grad, loc_t.grad, rtol=1e-4)
    close(sc_e.grad, sc_t.grad, rtol=1e-4)
    q2e, q2t = ed.LogNormal(0.5, 2.0).expand(shape), td.LogNormal(0.5, 2.0).expand(shape)
    close(ed.kl_divergence(de, q2e), td.kl_divergence(dt, q2t), rtol=1e-4)
    e = de.expand((2,) + tuple(shape))
    assert isinstance(e, ed.LogNormal) and e.sample().shape == (2,) + tuple(shape)


def test_log_normal_rsample_and_errors():
    loc = ember.tensor(0.2, requires_grad=True)
    ember.manual_seed(6)
    x = ed.LogNormal(loc, 0.5).rsample((2000,))
    assert bool((x > 0).all())
    x.sum().backward()
    close(loc.grad, torch.tensor(float(x.detach().sum())), rtol=1e-4)
    assert abs(float(x.detach().log().mean()) - 0.2) < 0.05
    with pytest.raises(ValueError, match="Expected parameter scale"):
        ed.LogNormal(0.0, -1.0)
    with pytest.raises(ValueError, match="Expected value argument"):
        ed.LogNormal(0.0, 1.0).log_prob(ember.tensor(-1.0))


def test_transformed_distribution_general():
    r = rng(13)
    loc_e, loc_t = pair(r.normal(size=(2, 3)), requires_grad=True)
    base_e = ed.Normal(loc_e, ember.ones(2, 3))
    base_t = td.Normal(loc_t, torch.ones(2, 3))
    scale = [0.5, 2.0, -1.0]
    de = ed.TransformedDistribution(base_e, [ed.AffineTransform(0.0, ember.tensor(scale), event_dim=1),
                                             ed.SigmoidTransform()])  # fmt: skip
    dt = td.TransformedDistribution(base_t, [tt.AffineTransform(0.0, torch.tensor(scale), event_dim=1),
                                             tt.SigmoidTransform()])  # fmt: skip
    assert de.batch_shape == dt.batch_shape == (2,) and de.event_shape == dt.event_shape == (3,)
    assert repr(de.support) == repr(dt.support)
    v_t = dt.sample((4,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-4, atol=1e-4)
    lp_e.sum().backward()
    lp_t.sum().backward()
    close(loc_e.grad, loc_t.grad, rtol=1e-4, atol=1e-4)
    assert de.rsample((5,)).shape == (5, 2, 3)
    with pytest.raises(ValueError, match="transforms must be a Transform or list"):
        ed.TransformedDistribution(base_e, "exp")
    with pytest.raises(ValueError, match="transforms must be a Transform or a list of Transforms"):
        ed.TransformedDistribution(base_e, [math.exp])
    # A decreasing transform flips the CDF.
    d = ed.TransformedDistribution(ed.Normal(0.0, 1.0), ed.AffineTransform(0.0, -1.0))
    t = td.TransformedDistribution(td.Normal(0.0, 1.0), tt.AffineTransform(0.0, -1.0))
    close(d.cdf(ember.tensor([0.5, -1.0])), t.cdf(torch.tensor([0.5, -1.0])))
    close(d.icdf(ember.tensor([0.3])), t.icdf(torch.tensor([0.3])), rtol=1e-4)
