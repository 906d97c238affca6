"""Cauchy, HalfNormal, Poisson and Geometric compared with torch.distributions."""

import numpy as np
import pytest
import torch
import torch.distributions as td
from distributions_helpers import close, pair, rng, to_ember

import ember
import ember.distributions as ed


def _make(family, shape, r):
    """Returns (ember dist, torch dist, [(ember param, torch param)]) with identical parameters."""
    if family == "Cauchy":
        (le, lt), (se, st) = pair(r.normal(size=shape), True), pair(r.uniform(0.5, 2, size=shape), True)
        return ed.Cauchy(le, se), td.Cauchy(lt, st), [(le, lt), (se, st)]
    if family == "HalfNormal":
        se, st = pair(r.uniform(0.5, 2, size=shape), True)
        return ed.HalfNormal(se), td.HalfNormal(st), [(se, st)]
    if family == "Poisson":
        re, rt = pair(r.uniform(0.5, 4, size=shape), True)
        return ed.Poisson(re), td.Poisson(rt), [(re, rt)]
    if family == "GeometricProbs":
        pe, pt = pair(r.uniform(0.1, 0.9, size=shape), True)
        return ed.Geometric(probs=pe), td.Geometric(probs=pt), [(pe, pt)]
    le, lt = pair(r.normal(size=shape), True)
    return ed.Geometric(logits=le), td.Geometric(logits=lt), [(le, lt)]


FAMILIES = ["Cauchy", "HalfNormal", "Poisson", "GeometricProbs", "GeometricLogits"]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("shape", [(), (3,), (2, 2)])
def test_family_matches_torch(family, shape):
    r = rng(14)
    de, dt, params = _make(family, shape, r)
    assert de.batch_shape == dt.batch_shape and de.event_shape == dt.event_shape
    assert de.has_rsample == dt.has_rsample
    for name in ("mean", "mode", "variance", "stddev"):
        close(getattr(de, name), getattr(dt, name), rtol=1e-5)
    v_t = dt.sample((4,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-4, atol=1e-5)
    loss_e, loss_t = lp_e.sum(), lp_t.sum()
    if family != "Poisson":  # torch's Poisson has no entropy
        close(de.entropy(), dt.entropy(), rtol=1e-4)
        loss_e, loss_t = loss_e + de.entropy().sum(), loss_t + dt.entropy().sum()
    if family in ("Cauchy", "HalfNormal"):
        close(de.cdf(to_ember(v_t)), dt.cdf(v_t), rtol=1e-4, atol=1e-6)
        q_e, q_t = pair(r.uniform(0.1, 0.9, size=shape))
        close(de.icdf(q_e), dt.icdf(q_t), rtol=1e-4)
    loss_e.backward()
    loss_t.backward()
    for pe, pt in params:
        close(pe.grad, pt.grad, rtol=1e-4, atol=1e-5)
    # KL between two members of the family, parameters and gradients (fresh graphs: lazy
    # probs/logits cached above belong to the graph that backward just freed).
    de, dt, params = _make(family, shape, rng(14))
    de2, dt2, _ = _make(family, shape, rng(15))
    ke, kt = ed.kl_divergence(de, de2), td.kl_divergence(dt, dt2)
    close(ke, kt, rtol=1e-4, atol=1e-5)
    ke.sum().backward()
    kt.sum().backward()
    for pe, pt in params:
        close(pe.grad, pt.grad, rtol=1e-4, atol=1e-5)
    e = de.expand((2,) + tuple(shape))
    assert type(e) is type(de) and e.batch_shape == (2,) + tuple(shape) and e.sample().shape == e.batch_shape


@pytest.mark.parametrize("family", FAMILIES)
def test_sampling_moments_and_seed(family):
    de, _, _ = _make(family, (), rng(16))
    ember.manual_seed(7)
    x = de.sample((20000,))
    ember.manual_seed(7)
    assert bool((x == de.sample((20000,))).all())
    x = x.numpy()
    if family == "Cauchy":  # no moments: compare the median and the interquartile range
        q1, med, q3 = np.quantile(x, [0.25, 0.5, 0.75])
        assert abs(med - float(de.loc)) < 0.1 and abs((q3 - q1) / 2 - float(de.scale)) < 0.1
        return
    assert abs(x.mean() - float(de.mean)) < 0.05 * max(1.0, float(de.mean))
    assert abs(x.var() - float(de.variance)) < 0.1 * max(1.0, float(de.variance))
    if family != "HalfNormal":
        assert (x == np.floor(x)).all() and (x >= 0).all()


def test_rsample_grads():
    loc = ember.tensor(0.5, requires_grad=True)
    scale = ember.tensor(2.0, requires_grad=True)
    x = ed.Cauchy(loc, scale).rsample((50,))
    x.sum().backward()
    close(loc.grad, torch.tensor(50.0))
    close(scale.grad, torch.tensor(float(((x.detach() - 0.5) / 2.0).sum())), rtol=1e-4, atol=1e-3)
    s = ember.tensor(1.5, requires_grad=True)
    y = ed.HalfNormal(s).rsample((50,))
    assert bool((y >= 0).all())
    y.sum().backward()
    close(s.grad, torch.tensor(float((y.detach() / 1.5).sum())), rtol=1e-4)
    assert not ed.Poisson(1.0).has_rsample and not ed.Geometric(0.5).has_rsample


def test_errors_and_edge_values():
    with pytest.raises(ValueError, match="to be positive but found invalid values"):
        ed.Geometric(probs=ember.tensor([0.5, 0.0]))
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        ed.Geometric()
    with pytest.raises(ValueError, match="Expected parameter rate"):
        ed.Poisson(ember.tensor([-1.0]))
    with pytest.raises(ValueError, match="Expected value argument"):
        ed.Poisson(2.0).log_prob(ember.tensor(1.5))
    with pytest.raises(ValueError, match="Expected value argument"):
        ed.HalfNormal(1.0).log_prob(ember.tensor(-1.0))
    with pytest.raises(ValueError, match="Expected parameter scale"):
        ed.Cauchy(0.0, 0.0)
    close(ed.Geometric(probs=ember.tensor([1.0, 0.5])).log_prob(ember.tensor([0.0, 2.0])),
          td.Geometric(probs=torch.tensor([1.0, 0.5])).log_prob(torch.tensor([0.0, 2.0])))  # fmt: skip
    close(ed.Poisson(ember.tensor([0.0, 2.0])).log_prob(ember.tensor([0.0, 0.0])),
          td.Poisson(torch.tensor([0.0, 2.0])).log_prob(torch.tensor([0.0, 0.0])))  # fmt: skip
    close(ed.HalfNormal(1.0, validate_args=False).log_prob(ember.tensor([-1.0, 1.0])),
          td.HalfNormal(1.0, validate_args=False).log_prob(torch.tensor([-1.0, 1.0])))  # fmt: skip


@pytest.mark.parametrize("family", ["HalfNormal", "HalfCauchy", "RelaxedBernoulli", "RelaxedOneHotCategorical"])
def test_wrapped_families_expand_to_themselves_and_guard_custom_init(family):
    def make(lib, cls):
        if family.startswith("Half"):
            return cls(lib.tensor([0.5, 2.0]))
        if family == "RelaxedBernoulli":
            return cls(lib.tensor([0.5]), probs=lib.tensor([0.2, 0.9]))
        return cls(lib.tensor([0.5]), logits=lib.tensor([[0.1, 0.2], [0.3, 0.4]]))

    for lib in (torch, ember):
        base = getattr(lib.distributions, family)
        plain = type("Plain", (base,), {})
        expanded = make(lib, plain).expand((3, 2))
        assert type(expanded) is plain and tuple(expanded.batch_shape) == (3, 2)

        def custom_init(self, *args, _base=base, **kwargs):
            _base.__init__(self, *args, **kwargs)

        custom = type("Custom", (base,), {"__init__": custom_init})
        with pytest.raises(NotImplementedError, match="must also define a custom .expand"):
            make(lib, custom).expand((3, 2))
