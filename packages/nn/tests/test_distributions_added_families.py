"""The families added for API parity, compared with torch.distributions: moments, entropy,
log_prob/cdf/icdf on torch's samples, gradients, expand, and sampling statistics."""

import math

import numpy as np
import pytest
import torch
import torch.distributions as td
from distributions_helpers import close, pair, rng, to_ember

import ember
import ember.distributions as ed


def _pos(r, shape, lo=0.5, hi=3.0):
    return r.uniform(lo, hi, size=shape)


def _make(family, shape, r):
    """(ember dist, torch dist, [(ember param, torch param)]) with identical parameters."""
    if family == "Pareto":
        ps = [pair(_pos(r, shape), True), pair(_pos(r, shape, 2.5, 5.0), True)]
    elif family in ("Weibull", "InverseGamma", "FisherSnedecor", "Kumaraswamy"):
        ps = [pair(_pos(r, shape, 1.2, 5.0), True), pair(_pos(r, shape, 1.2, 5.0), True)]
    elif family == "HalfCauchy":
        ps = [pair(_pos(r, shape), True)]
    elif family in ("NegativeBinomialProbs", "NegativeBinomialLogits"):
        probs = family.endswith("Probs")
        ps = [pair(_pos(r, shape, 1.0, 6.0), True),
              pair(r.uniform(0.1, 0.8, size=shape) if probs else r.normal(size=shape), True)]
    elif family in ("ContinuousBernoulli", "ContinuousBernoulliHalf"):
        p = r.uniform(0.05, 0.95, size=shape) if family == "ContinuousBernoulli" else np.full(shape, 0.5004)
        ps = [pair(p, True)]
    elif family == "GeneralizedPareto":
        ps = [pair(r.normal(size=shape), True), pair(_pos(r, shape), True),
              pair(r.uniform(-0.3, 0.4, size=shape), True)]
    elif family == "VonMises":
        ps = [pair(r.uniform(-2, 2, size=shape), True), pair(_pos(r, shape, 0.3, 8.0), True)]
    elif family == "LogisticNormal":
        ps = [pair(r.normal(size=tuple(shape) + (3,)), True), pair(_pos(r, tuple(shape) + (3,)), True)]
    else:
        raise AssertionError(family)
    name = {"ContinuousBernoulliHalf": "ContinuousBernoulli"}.get(family, family.replace("Probs", "").replace(
        "Logits", ""))
    if name == "NegativeBinomial":
        key = "probs" if family.endswith("Probs") else "logits"
        de = ed.NegativeBinomial(ps[0][0], **{key: ps[1][0]})
        dt = td.NegativeBinomial(ps[0][1], **{key: ps[1][1]})
    else:
        de = getattr(ed, name)(*[p[0] for p in ps])
        dt = getattr(td, name)(*[p[1] for p in ps])
    return de, dt, ps


FAMILIES = ["Pareto", "Weibull", "InverseGamma", "FisherSnedecor", "Kumaraswamy", "HalfCauchy",
            "NegativeBinomialProbs", "NegativeBinomialLogits", "ContinuousBernoulli", "ContinuousBernoulliHalf",
            "GeneralizedPareto", "VonMises", "LogisticNormal"]
NO_ENTROPY = {"FisherSnedecor", "NegativeBinomialProbs", "NegativeBinomialLogits", "VonMises", "LogisticNormal"}
HAS_CDF = {"HalfCauchy", "ContinuousBernoulli", "ContinuousBernoulliHalf", "GeneralizedPareto"}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("shape", [(), (3,)])
def test_family_matches_torch(family, shape):
    r = rng(21)
    de, dt, params = _make(family, shape, r)
    assert de.batch_shape == dt.batch_shape and de.event_shape == dt.event_shape
    assert de.has_rsample == dt.has_rsample
    for name in ("mean", "variance", "stddev", "mode"):
        if family == "Kumaraswamy" and name == "mode":
            continue  # torch's mode is wrong (test_kumaraswamy_mode_is_the_true_mode)
        if family in ("LogisticNormal",) and name != "mean":
            continue
        try:
            want = getattr(dt, name)
        except NotImplementedError:
            continue
        close(getattr(de, name), want, rtol=2e-4, atol=1e-5)
    torch.manual_seed(3)
    v_t = dt.sample((5,))
    v_e = to_ember(v_t)
    lp_e, lp_t = de.log_prob(v_e), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=2e-4, atol=2e-5)
    loss_e, loss_t = lp_e.sum(), lp_t.sum()
    if family not in NO_ENTROPY:
        close(de.entropy(), dt.entropy(), rtol=2e-4, atol=1e-5)
        loss_e, loss_t = loss_e + de.entropy().sum(), loss_t + dt.entropy().sum()
    if family in HAS_CDF:
        close(de.cdf(v_e), dt.cdf(v_t), rtol=2e-4, atol=1e-6)
        q_e, q_t = pair(r.uniform(0.1, 0.9, size=shape))
        close(de.icdf(q_e), dt.icdf(q_t), rtol=2e-4, atol=1e-6)
    loss_e.backward()
    loss_t.backward()
    for pe, pt in params:
        close(pe.grad, pt.grad, rtol=5e-4, atol=5e-5)
    e = de.expand((2,) + tuple(shape))
    assert type(e) is type(de) and e.batch_shape == (2,) + tuple(shape)
    assert e.sample().shape == e.batch_shape + e.event_shape
    if de.has_rsample:
        x = de.rsample((4,))
        assert x.shape == (4,) + tuple(shape) + tuple(de.event_shape) and x.requires_grad


@pytest.mark.parametrize("family", ["Pareto", "Weibull", "InverseGamma", "Kumaraswamy", "NegativeBinomialLogits",
                                    "ContinuousBernoulli", "GeneralizedPareto", "VonMises", "FisherSnedecor"])
def test_sampling_matches_the_distribution(family):
    de, dt, _ = _make(family, (), rng(5))
    ember.manual_seed(11)
    x = de.sample((20000,))
    ember.manual_seed(11)
    assert bool((x == de.sample((20000,))).all())
    xs = np.sort(x.numpy().astype(np.float64))
    # Kolmogorov-Smirnov distance against torch's CDF where it has one, else the first two moments.
    if family in ("GeneralizedPareto", "ContinuousBernoulli"):
        cdf = dt.cdf(torch.tensor(xs, dtype=torch.float32)).detach().double().numpy()
        ks = np.max(np.abs(cdf - np.arange(1, xs.size + 1) / xs.size))
        assert ks < 0.02, ks
    elif family == "VonMises":
        circ_mean = math.atan2(np.sin(xs).mean(), np.cos(xs).mean())
        assert abs(circ_mean - float(dt.loc)) < 0.05
    else:
        assert abs(xs.mean() - float(dt.mean)) < 0.06 * (1 + float(dt.stddev)), (xs.mean(), float(dt.mean))


def test_kumaraswamy_mode_is_the_true_mode():
    a, b = ember.tensor([2.0, 3.0, 0.5, 1.0]), ember.tensor([2.0, 1.5, 2.0, 1.0])
    got = ed.Kumaraswamy(a, b).mode.numpy()
    an, bn = a.numpy(), b.numpy()
    want = ((an - 1) / (an * bn - 1)) ** (1 / an)
    np.testing.assert_allclose(got[:2], want[:2], rtol=1e-6, atol=1e-6)
    assert np.isnan(got[2:]).all()
    # The density peaks there.
    grid = ember.linspace(0.01, 0.99, 9801)
    lp = ed.Kumaraswamy(a[:2].unsqueeze(-1), b[:2].unsqueeze(-1)).log_prob(grid)
    np.testing.assert_allclose(grid[lp.argmax(-1)].numpy(), want[:2], atol=2e-4)


def test_mixture_same_family_matches_torch():
    r = rng(8)
    (le, lt), (me, mt), (se, st) = (pair(r.normal(size=(2, 3)), True), pair(r.normal(size=(2, 3, 4)), True),
                                    pair(r.uniform(0.5, 2, size=(2, 3, 4)), True))
    de = ed.MixtureSameFamily(ed.Categorical(logits=le), ed.Independent(ed.Normal(me, se), 1))
    dt = td.MixtureSameFamily(td.Categorical(logits=lt), td.Independent(td.Normal(mt, st), 1))
    assert de.batch_shape == dt.batch_shape == (2,) and de.event_shape == dt.event_shape == (4,)
    close(de.mean, dt.mean)
    close(de.variance, dt.variance, rtol=1e-4)
    v_t = dt.sample((6,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-4, atol=1e-5)
    lp_e.sum().backward()
    lp_t.sum().backward()
    for pe, pt in ((le, lt), (me, mt), (se, st)):
        close(pe.grad, pt.grad, rtol=1e-4, atol=1e-5)
    assert de.sample((5,)).shape == (5, 2, 4)
    assert bool(de.support.check(de.sample((3,))).all())
    e1 = ed.MixtureSameFamily(ed.Categorical(logits=le.detach()), ed.Normal(me.detach()[..., 0], se.detach()[..., 0]))
    t1 = td.MixtureSameFamily(td.Categorical(logits=lt.detach()), td.Normal(mt.detach()[..., 0], st.detach()[..., 0]))
    x = torch.linspace(-2, 2, 4).reshape(4, 1)
    close(e1.cdf(to_ember(x)), t1.cdf(x), rtol=1e-5)
    assert e1.expand((5, 2)).batch_shape == (5, 2)
    with pytest.raises(ValueError):
        ed.MixtureSameFamily(ed.Categorical(logits=le), ed.Normal(me, se))  # 3 weights, 4 components


def test_lowrank_multivariate_normal_matches_torch():
    r = rng(9)
    (le, lt), (we, wt), (de_, dt_) = (pair(r.normal(size=(2, 4)), True), pair(r.normal(size=(2, 4, 2)), True),
                                      pair(r.uniform(0.5, 2, size=(4,)), True))
    de = ed.LowRankMultivariateNormal(le, we, de_)
    dt = td.LowRankMultivariateNormal(lt, wt, dt_)
    for name in ("mean", "variance", "covariance_matrix", "precision_matrix", "scale_tril"):
        close(getattr(de, name), getattr(dt, name), rtol=1e-4, atol=1e-5)
    v_t = dt.sample((3,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-4, atol=1e-4)
    close(de.entropy(), dt.entropy(), rtol=1e-5)
    (lp_e.sum() + de.entropy().sum()).backward()
    (lp_t.sum() + dt.entropy().sum()).backward()
    for pe, pt in ((le, lt), (we, wt), (de_, dt_)):
        close(pe.grad, pt.grad, rtol=1e-3, atol=1e-4)
    x = de.rsample((7,))
    assert x.shape == (7, 2, 4) and x.requires_grad
    with pytest.raises(ValueError):
        ed.LowRankMultivariateNormal(le, we[..., :3, :], de_)


@pytest.mark.parametrize("cls", ["RelaxedBernoulli", "RelaxedOneHotCategorical"])
def test_relaxed_distributions_match_torch(cls):
    r = rng(10)
    shape = (3,) if cls == "RelaxedBernoulli" else (2, 4)
    (pe, pt), (te, tt) = pair(r.normal(size=shape), True), pair([0.7], True)
    de = getattr(ed, cls)(te, logits=pe)
    dt = getattr(td, cls)(tt, logits=pt)
    assert de.batch_shape == dt.batch_shape and de.event_shape == dt.event_shape
    v_t = dt.sample((4,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-3, atol=1e-4)
    lp_e.sum().backward()
    lp_t.sum().backward()
    close(pe.grad, pt.grad, rtol=1e-3, atol=1e-3)
    close(te.grad, tt.grad, rtol=1e-3, atol=1e-3)
    x = de.rsample((5,))
    assert x.shape == (5,) + shape and x.requires_grad
    assert bool(((x > 0) & (x < 1)).all())
    if cls == "RelaxedOneHotCategorical":
        np.testing.assert_allclose(x.sum(-1).detach().numpy(), 1.0, rtol=1e-5)
    close(de.probs, dt.probs)


@pytest.mark.parametrize("name", ["ReshapeTransform", "SoftplusTransform", "CorrCholeskyTransform",
                                  "PositiveDefiniteTransform", "CatTransform", "StackTransform",
                                  "CumulativeDistributionTransform"])
def test_transforms_match_torch(name):
    r = rng(12)
    build = {
        "ReshapeTransform": (lambda m: m.ReshapeTransform((2, 3), (6,)), (4, 2, 3)),
        "SoftplusTransform": (lambda m: m.SoftplusTransform(), (4, 3)),
        "CorrCholeskyTransform": (lambda m: m.CorrCholeskyTransform(), (2, 6)),
        "PositiveDefiniteTransform": (lambda m: m.PositiveDefiniteTransform(), (2, 3, 3)),
        "CatTransform": (lambda m: m.CatTransform([m.ExpTransform(), m.SoftplusTransform()], dim=1,
                                                  lengths=[2, 3]), (4, 5)),
        "StackTransform": (lambda m: m.StackTransform([m.ExpTransform(), m.SigmoidTransform()], dim=1), (4, 2)),
        "CumulativeDistributionTransform": (lambda m: m.CumulativeDistributionTransform(
            (ed if m is ed.transforms else td).Normal(0.0, 2.0)), (5,)),
    }
    make, shape = build[name]
    te, tt = make(ed.transforms), make(td.transforms)
    xe, xt = pair(r.normal(size=shape), True)
    ye, yt = te(xe), tt(xt)
    close(ye, yt, rtol=1e-5, atol=1e-6)
    if name != "PositiveDefiniteTransform":  # torch defines no log-Jacobian for it
        close(te.log_abs_det_jacobian(xe, ye), tt.log_abs_det_jacobian(xt, yt), rtol=1e-4, atol=1e-5)
    close(te.inv(ye.detach()), tt.inv(yt.detach()), rtol=1e-4, atol=1e-5)
    ye.sum().backward()
    yt.sum().backward()
    close(xe.grad, xt.grad, rtol=1e-4, atol=1e-5)
    assert te.forward_shape(ember.Size(shape)) == tt.forward_shape(torch.Size(shape))


def test_corr_cholesky_is_a_correlation_factor_and_biject_to_finds_it():
    y = ed.CorrCholeskyTransform()(ember.randn(3, 10))
    assert y.shape == (3, 5, 5)
    corr = y @ y.mT
    np.testing.assert_allclose(ember.diagonal(corr, dim1=-2, dim2=-1).numpy(), 1.0, rtol=1e-5)
    assert bool(ed.constraints.corr_cholesky.check(y).all())
    with pytest.raises(ValueError):
        ed.transforms.ReshapeTransform((2, 3), (5,))


def test_exponential_family_entropy_from_the_log_normalizer():
    p, pt = pair([0.2, 0.45, 0.8])
    de = ed.ContinuousBernoulli(p)
    assert isinstance(de, ed.ExponentialFamily)
    generic = ed.ExponentialFamily.entropy(de)
    close(generic, td.ContinuousBernoulli(pt).entropy(), rtol=1e-4, atol=1e-5)


def test_lkj_cholesky_matches_torch():
    (ce, ct) = pair([0.7, 2.0], True)
    de, dt = ed.LKJCholesky(4, ce), td.LKJCholesky(4, ct)
    assert de.batch_shape == dt.batch_shape and de.event_shape == dt.event_shape
    torch.manual_seed(0)
    v = dt.sample((3,))
    lp_e, lp_t = de.log_prob(to_ember(v)), dt.log_prob(v)
    close(lp_e, lp_t, rtol=1e-4, atol=1e-4)
    lp_e.sum().backward()
    lp_t.sum().backward()
    close(ce.grad, ct.grad, rtol=1e-4, atol=1e-4)
    x = de.sample((50,))
    assert x.shape == (50, 2, 4, 4) and bool(ed.constraints.corr_cholesky.check(x).all())
    assert de.expand((3, 2)).sample().shape == (3, 2, 4, 4)
    with pytest.raises(ValueError, match="dim"):
        ed.LKJCholesky(1)


@pytest.mark.parametrize("param", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_wishart_matches_torch(param):
    r = rng(30)
    a = r.normal(size=(2, 3, 3))
    spd = a @ np.swapaxes(a, -1, -2) + 3 * np.eye(3)
    m = np.linalg.cholesky(spd) if param == "scale_tril" else spd
    (me, mt), (dfe, dft) = pair(m, True, dtype="float64"), pair([4.5, 6.0], True, dtype="float64")
    de, dt = ed.Wishart(dfe, **{param: me}), td.Wishart(dft, **{param: mt})
    for name in ("mean", "mode", "variance", "covariance_matrix", "precision_matrix", "scale_tril"):
        close(getattr(de, name), getattr(dt, name), rtol=1e-8, atol=1e-8)
    torch.manual_seed(1)
    v = dt.sample((2,))
    lp_e, lp_t = de.log_prob(to_ember(v)), dt.log_prob(v)
    close(lp_e, lp_t, rtol=1e-8, atol=1e-8)
    close(de.entropy(), dt.entropy(), rtol=1e-8, atol=1e-8)
    (lp_e.sum() + de.entropy().sum()).backward()
    (lp_t.sum() + dt.entropy().sum()).backward()
    close(me.grad, mt.grad, rtol=1e-6, atol=1e-8)
    close(dfe.grad, dft.grad, rtol=1e-6, atol=1e-8)
    x = de.rsample((4,))
    assert x.shape == (4, 2, 3, 3) and x.requires_grad and bool(ed.constraints.positive_definite.check(x).all())
    # The mean of many draws approaches df * covariance.
    draws = ed.Wishart(dfe.detach(), **{param: me.detach()}).sample((4000,)).mean(0)
    np.testing.assert_allclose(draws.numpy(), de.mean.detach().numpy(), rtol=0.1, atol=0.5)
    close(ed.ExponentialFamily.entropy(de), dt.entropy(), rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="df"):
        ed.Wishart(1.0, covariance_matrix=me.detach())
