"""kl_divergence / register_kl compared with torch.distributions.kl."""

import numpy as np
import pytest
import torch
import torch.distributions as td
from distributions_helpers import close, pair, rng

import ember
import ember.distributions as ed


def _build(name, r, shape, grads):
    """Returns (ember dist, torch dist, [(ember param, torch param)]) with identical parameters."""

    def p(values):
        e, t = pair(values, requires_grad=True)
        grads.append((e, t))
        return e, t

    if name == "Normal":
        (le, lt), (se, st) = p(r.normal(size=shape)), p(r.uniform(0.5, 2, size=shape))
        return ed.Normal(le, se), td.Normal(lt, st)
    if name == "Laplace":
        (le, lt), (se, st) = p(r.normal(size=shape)), p(r.uniform(0.5, 2, size=shape))
        return ed.Laplace(le, se), td.Laplace(lt, st)
    if name == "Exponential":
        re, rt = p(r.uniform(0.5, 2, size=shape))
        return ed.Exponential(re), td.Exponential(rt)
    if name == "Uniform":
        lo = r.uniform(-0.5, 0.5, size=shape)
        (le, lt), (he, ht) = p(lo), p(lo + r.uniform(1, 2, size=shape))
        return ed.Uniform(le, he), td.Uniform(lt, ht)
    if name == "Bernoulli":
        pe, pt = p(r.uniform(0.1, 0.9, size=shape))
        return ed.Bernoulli(probs=pe), td.Bernoulli(probs=pt)
    if name in ("Categorical", "OneHotCategorical"):
        le, lt = p(r.normal(size=shape + (4,)))
        return getattr(ed, name)(logits=le), getattr(td, name)(logits=lt)
    if name == "Independent":
        (le, lt), (se, st) = p(r.normal(size=shape + (3,))), p(r.uniform(0.5, 2, size=shape + (3,)))
        return ed.Independent(ed.Normal(le, se), 1), td.Independent(td.Normal(lt, st), 1)
    if name == "MultivariateNormal":
        a = r.normal(size=shape + (3, 3))
        le, lt = p(r.normal(size=shape + (3,)))
        ce, ct = p(a @ np.swapaxes(a, -1, -2) + 3 * np.eye(3))
        return ed.MultivariateNormal(le, ce), td.MultivariateNormal(lt, ct)
    if name in ("Beta", "Gamma"):
        (ae, at), (be, bt) = p(r.uniform(0.5, 3, size=shape)), p(r.uniform(0.5, 3, size=shape))
        return getattr(ed, name)(ae, be), getattr(td, name)(at, bt)
    if name == "ContinuousBernoulli":
        pe, pt = p(r.uniform(0.1, 0.9, size=shape))
        return ed.ContinuousBernoulli(pe), td.ContinuousBernoulli(pt)
    if name == "Gumbel":
        (le, lt), (se, st) = p(r.normal(size=shape)), p(r.uniform(0.5, 2, size=shape))
        return ed.Gumbel(le, se), td.Gumbel(lt, st)
    if name == "Pareto":  # alpha on both sides of 1 and 2 (the infinite moments)
        (se, st), (ae, at) = p(r.uniform(0.2, 1.5, size=shape)), p(r.uniform(0.5, 4, size=shape))
        return ed.Pareto(se, ae), td.Pareto(st, at)
    if name == "Poisson":
        re, rt = p(r.uniform(0.5, 3, size=shape))
        return ed.Poisson(re), td.Poisson(rt)
    if name == "Binomial":
        pe, pt = p(r.uniform(0.1, 0.9, size=shape))
        return ed.Binomial(4, probs=pe), td.Binomial(4, probs=pt)
    if name == "LowRankMultivariateNormal":
        (le, lt), (fe, ft) = p(r.normal(size=shape + (3,))), p(r.normal(size=shape + (3, 2)))
        de, dt = p(r.uniform(0.5, 2, size=shape + (3,)))
        return ed.LowRankMultivariateNormal(le, fe, de), td.LowRankMultivariateNormal(lt, ft, dt)
    raise AssertionError(name)


PAIRS = [
    ("Normal", "Normal"), ("Laplace", "Laplace"), ("Exponential", "Exponential"), ("Uniform", "Uniform"),
    ("Bernoulli", "Bernoulli"), ("Categorical", "Categorical"), ("OneHotCategorical", "OneHotCategorical"),
    ("Independent", "Independent"), ("MultivariateNormal", "MultivariateNormal"), ("Exponential", "Normal"),
    ("Laplace", "Normal"), ("Normal", "Laplace"), ("Uniform", "Normal"), ("Uniform", "Exponential"),
    ("Exponential", "Uniform"), ("Laplace", "Uniform"), ("Laplace", "Exponential"), ("Normal", "Uniform"),
    ("Normal", "Exponential"),
    # across families: closed forms, infinite where p's support is not inside q's
    ("Bernoulli", "Poisson"), ("Beta", "ContinuousBernoulli"), ("Beta", "Exponential"), ("Beta", "Gamma"),
    ("Beta", "Normal"), ("Beta", "Uniform"), ("Beta", "Pareto"), ("ContinuousBernoulli", "ContinuousBernoulli"),
    ("ContinuousBernoulli", "Exponential"), ("ContinuousBernoulli", "Normal"), ("ContinuousBernoulli", "Uniform"),
    ("ContinuousBernoulli", "Pareto"), ("Exponential", "Beta"), ("Exponential", "Gamma"), ("Exponential", "Gumbel"),
    ("Exponential", "Pareto"), ("Gamma", "Exponential"), ("Gamma", "Gumbel"), ("Gamma", "Normal"),
    ("Gamma", "Uniform"), ("Gamma", "Beta"), ("Gumbel", "Normal"), ("Gumbel", "Gamma"), ("Laplace", "Beta"),
    ("Normal", "Gumbel"), ("Normal", "Gamma"), ("Pareto", "Exponential"), ("Pareto", "Gamma"),
    ("Pareto", "Normal"), ("Pareto", "Pareto"), ("Pareto", "Uniform"), ("Poisson", "Bernoulli"),
    ("Poisson", "Binomial"), ("Uniform", "Beta"), ("Uniform", "ContinuousBernoulli"), ("Uniform", "Gamma"),
    ("Uniform", "Gumbel"), ("Uniform", "Pareto"),
    # one exponential family against itself: the Bregman divergence of its log-normalizer
    ("Poisson", "Poisson"), ("Beta", "Beta"), ("Gamma", "Gamma"),
    ("LowRankMultivariateNormal", "LowRankMultivariateNormal"), ("LowRankMultivariateNormal", "MultivariateNormal"),
    ("MultivariateNormal", "LowRankMultivariateNormal"),
]  # fmt: skip


@pytest.mark.parametrize(("name_p", "name_q"), PAIRS)
@pytest.mark.parametrize(("shape_p", "shape_q"), [((), ()), ((3,), (3,)), ((2, 1), (3,))])
def test_kl_matches_torch(name_p, name_q, shape_p, shape_q):
    r = rng(10)
    grads = []
    pe, pt = _build(name_p, r, shape_p, grads)
    qe, qt = _build(name_q, r, shape_q, grads)
    ke = ed.kl_divergence(pe, qe)
    try:
        kt = td.kl_divergence(pt, qt)
    except IndexError:  # torch's in-place masking cannot broadcast; ember's does
        batch = torch.broadcast_shapes(pt.batch_shape, qt.batch_shape)
        kt = td.kl_divergence(pt.expand(batch), qt.expand(batch))
    close(ke, kt, rtol=1e-4, atol=1e-5)
    finite_e = ember.where(ke.isinf(), ember.zeros_like(ke), ke)
    finite_t = torch.where(kt.isinf(), torch.zeros_like(kt), kt)
    if not finite_t.requires_grad:
        return  # infinite KL: no parameter dependence
    finite_e.sum().backward()
    finite_t.sum().backward()
    for ge, gt in grads:
        if gt.grad is None:
            assert ge.grad is None or not bool(ge.grad.abs().gt(0).any())
            continue
        if name_p == name_q == "MultivariateNormal" and ge.dim() >= 2 and ge.shape[-1] == ge.shape[-2] == 3:
            close((ge.grad + ge.grad.mT) / 2, (gt.grad + gt.grad.mT) / 2, rtol=1e-3, atol=1e-4)
        else:
            close(ge.grad, gt.grad, rtol=1e-3, atol=1e-5)


def L_(values, dist_module):
    return (ember if dist_module is ed else torch).tensor(values)


def test_kl_support_edge_cases_match_torch():
    cases = [
        (ed.Bernoulli(probs=ember.tensor([0.0, 1.0, 0.3, 0.3])),
         ed.Bernoulli(probs=ember.tensor([0.5, 0.5, 0.0, 1.0])),
         td.Bernoulli(probs=torch.tensor([0.0, 1.0, 0.3, 0.3])),
         td.Bernoulli(probs=torch.tensor([0.5, 0.5, 0.0, 1.0]))),
        (ed.Categorical(probs=ember.tensor([[0.0, 0.5, 0.5], [0.5, 0.5, 0.0]])),
         ed.Categorical(probs=ember.tensor([[0.2, 0.8, 0.0], [0.5, 0.25, 0.25]])),
         td.Categorical(probs=torch.tensor([[0.0, 0.5, 0.5], [0.5, 0.5, 0.0]])),
         td.Categorical(probs=torch.tensor([[0.2, 0.8, 0.0], [0.5, 0.25, 0.25]]))),
        (ed.Uniform(ember.tensor([0.0, 0.0]), ember.tensor([1.0, 1.0])),
         ed.Uniform(ember.tensor([0.5, -1.0]), ember.tensor([2.0, 2.0])),
         td.Uniform(torch.tensor([0.0, 0.0]), torch.tensor([1.0, 1.0])),
         td.Uniform(torch.tensor([0.5, -1.0]), torch.tensor([2.0, 2.0]))),
        (ed.Uniform(ember.tensor([-1.0, 0.5]), ember.tensor([1.0, 1.0])), ed.Exponential(ember.tensor([1.0, 2.0])),
         td.Uniform(torch.tensor([-1.0, 0.5]), torch.tensor([1.0, 1.0])), td.Exponential(torch.tensor([1.0, 2.0]))),
    ]  # fmt: skip
    # Cross-family pairs at the edges of the supports (x log x at 0; PyTorch's bounds tests).
    for build_p, build_q in (
        (lambda L: L.Uniform(L_([0.0, 0.1], L), L_([1.0, 0.9], L)),
         lambda L: L.Beta(L_([2.0, 0.7], L), L_([3.0, 1.5], L))),
        (lambda L: L.ContinuousBernoulli(L_([0.3, 0.8, 0.5], L)),
         lambda L: L.Uniform(L_([0.0, -0.5, -1.0], L), L_([1.0, 1.0, 2.0], L))),
        (lambda L: L.Uniform(L_([0.0, 0.1], L), L_([1.0, 0.9], L)),
         lambda L: L.Gamma(L_([2.0, 0.7], L), L_([3.0, 1.5], L))),
        (lambda L: L.Uniform(L_([0.0, 1.1], L), L_([1.0, 1.9], L)),
         lambda L: L.Pareto(L_([0.5, 1.0], L), L_([3.0, 1.5], L))),
    ):
        cases.append((build_p(ed), build_q(ed), build_p(td), build_q(td)))
    for pe, qe, pt, qt in cases:
        close(ed.kl_divergence(pe, qe), td.kl_divergence(pt, qt), rtol=1e-5)


def test_kl_errors():
    with pytest.raises(
        NotImplementedError, match="No KL\\(p \\|\\| q\\) is implemented for p type Bernoulli"
    ):
        ed.kl_divergence(ed.Bernoulli(0.3), ed.Normal(0.0, 1.0))
    with pytest.raises(ValueError, match="different event shapes"):
        ed.kl_divergence(ed.MultivariateNormal(ember.zeros(2), ember.eye(2)),
                         ed.MultivariateNormal(ember.zeros(3), ember.eye(3)))  # fmt: skip
    with pytest.raises(NotImplementedError):
        base = ed.Normal(ember.zeros(2, 2), ember.ones(2, 2))
        ed.kl_divergence(ed.Independent(base, 1), ed.Independent(base, 2))
    with pytest.raises(TypeError, match="Expected type_p to be a Distribution subclass"):
        ed.register_kl(int, ed.Normal)
    with pytest.raises(TypeError, match="Expected type_q to be a Distribution subclass"):
        ed.register_kl(ed.Normal, "Normal")


def test_register_kl_dispatch_and_ambiguity():
    class MyNormal(ed.Normal):
        pass

    class MyLaplace(ed.Laplace):
        pass

    d = MyNormal(ember.tensor(0.0), ember.tensor(1.0))
    # Subclasses fall back to the parent's rule.
    close(
        ed.kl_divergence(d, ed.Normal(1.0, 2.0)), td.kl_divergence(td.Normal(0.0, 1.0), td.Normal(1.0, 2.0))
    )

    @ed.register_kl(MyNormal, ed.Distribution)
    def _kl_mine_any(p, q):
        return ember.tensor(-1.0)

    @ed.register_kl(ed.Distribution, MyLaplace)
    def _kl_any_mine(p, q):
        return ember.tensor(-2.0)

    # A more specific registration replaces the memoized choice (p-first order wins, as in torch).
    with pytest.warns(RuntimeWarning, match="Ambiguous kl_divergence\\(MyNormal, Normal\\)"):
        assert float(ed.kl_divergence(d, ed.Normal(1.0, 2.0))) == -1.0
    with pytest.warns(RuntimeWarning, match="Ambiguous kl_divergence\\(MyNormal, MyLaplace\\)"):
        assert float(ed.kl_divergence(d, MyLaplace(0.0, 1.0))) == -1.0
    from ember.distributions import kl

    for key in [(MyNormal, ed.Distribution), (ed.Distribution, MyLaplace)]:
        del kl._KL_REGISTRY[key]
    kl._KL_MEMOIZE.clear()
