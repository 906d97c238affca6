"""Gamma and Chi2 compared with torch.distributions (sampler checked by moments and reparam gradients)."""

import numpy as np
import pytest
import torch
import torch.distributions as td
from distributions_helpers import close, pair, rng, to_ember

import ember
import ember.distributions as ed


@pytest.mark.parametrize("shape", [(), (3,), (2, 2)])
def test_gamma_matches_torch(shape):
    r = rng(21)
    c_e, c_t = pair(r.uniform(0.3, 4.0, size=shape), requires_grad=True)
    r_e, r_t = pair(r.uniform(0.5, 2.0, size=shape), requires_grad=True)
    de, dt = ed.Gamma(c_e, r_e), td.Gamma(c_t, r_t)
    assert de.batch_shape == dt.batch_shape and de.has_rsample
    for name in ("mean", "mode", "variance", "stddev"):
        close(getattr(de, name), getattr(dt, name), rtol=1e-5)
    v_t = dt.sample((4,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-4, atol=1e-5)
    close(de.cdf(to_ember(v_t)), dt.cdf(v_t), rtol=1e-4, atol=1e-6)
    close(de.entropy(), dt.entropy(), rtol=1e-4, atol=1e-6)
    q_e, q_t = ed.Gamma(1.5, 0.7).expand(shape), td.Gamma(1.5, 0.7).expand(shape)
    ke, kt = ed.kl_divergence(de, q_e), td.kl_divergence(dt, q_t)
    close(ke, kt, rtol=1e-4, atol=1e-5)
    (lp_e.sum() + de.entropy().sum() + ke.sum()).backward()
    (lp_t.sum() + dt.entropy().sum() + kt.sum()).backward()
    close(c_e.grad, c_t.grad, rtol=1e-4, atol=1e-4)
    close(r_e.grad, r_t.grad, rtol=1e-4, atol=1e-4)
    e = de.expand((2,) + tuple(shape))
    assert e.rsample().shape == (2,) + tuple(shape)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gamma_sampler_moments_and_seed(dtype):
    conc = ember.tensor([0.2, 1.0, 3.5, 20.0], dtype=getattr(ember, dtype))
    d = ed.Gamma(conc, 2.0)
    ember.manual_seed(11)
    x = d.sample((10000,))
    ember.manual_seed(11)
    assert bool((x == d.sample((10000,))).all())
    assert x.dtype == conc.dtype and bool((x > 0).all())
    # Tolerances are ~4 standard errors (the alpha = 0.2 column is heavy-tailed).
    np.testing.assert_allclose(x.numpy().mean(0), (conc / 2).numpy(), rtol=0.08)
    np.testing.assert_allclose(x.numpy().var(0), (conc / 4).numpy(), rtol=0.25)


def test_gamma_rsample_gradient_matches_torch_formula():
    alpha = [0.3, 1.0, 2.5, 10.0]
    c = ember.tensor(alpha, requires_grad=True)
    rate = ember.tensor(2.0, requires_grad=True)
    ember.manual_seed(12)
    x = ed.Gamma(c, rate).rsample((200,))
    (x * ember.arange(1, 201).unsqueeze(-1)).sum().backward()
    # torch's d(standard gamma)/d(alpha), evaluated at ember's samples z = x * rate.
    z = torch.tensor(x.detach().numpy()) * 2.0
    weights = torch.arange(1, 201).unsqueeze(-1).float()
    dz = torch._standard_gamma_grad(torch.tensor(alpha).expand(200, 4), z)
    close(c.grad, (weights * dz / 2.0).sum(0), rtol=2e-3)
    close(rate.grad, (-(weights * z) / 4.0).sum(), rtol=1e-4)


def test_chi2_matches_torch():
    df_e, df_t = pair([1.0, 2.5, 7.0], requires_grad=True)
    de, dt = ed.Chi2(df_e), td.Chi2(df_t)
    close(de.df, dt.df)
    for name in ("mean", "mode", "variance"):
        close(getattr(de, name), getattr(dt, name))
    v_t = dt.sample((3,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-4)
    close(de.entropy(), dt.entropy(), rtol=1e-4)
    (lp_e.sum() + de.entropy().sum()).backward()
    (lp_t.sum() + dt.entropy().sum()).backward()
    close(df_e.grad, df_t.grad, rtol=1e-4, atol=1e-5)
    e = de.expand((2, 3))
    assert isinstance(e, ed.Chi2) and e.sample().shape == (2, 3)
    assert ed.Chi2(3.0).batch_shape == ()


def test_gamma_errors():
    with pytest.raises(ValueError, match="Expected parameter concentration"):
        ed.Gamma(ember.tensor([0.0]), ember.tensor([1.0]))
    with pytest.raises(ValueError, match="Expected parameter rate"):
        ed.Gamma(1.0, -1.0)
    with pytest.raises(ValueError, match="Expected value argument"):
        ed.Gamma(1.0, 1.0).log_prob(ember.tensor(-0.5))
    with pytest.raises(ValueError, match="Expected parameter df"):
        ed.Chi2(ember.tensor([-1.0]))


@pytest.mark.parametrize("family", ["Gamma", "Chi2", "StudentT", "Beta", "Dirichlet"])
def test_seeded_cpu_samples_match_torch(family):
    # On CPU the gamma family draws with PyTorch's sampler and stream (Dirichlet/Beta in float64,
    # as PyTorch's kernel), so seeded samples are torch's.
    def make(m):
        d = m.distributions
        return {
            "Gamma": lambda: d.Gamma(m.linspace(0.05, 20, 60), m.linspace(0.5, 3, 60)),
            "Chi2": lambda: d.Chi2(m.linspace(0.5, 9, 60)),
            "StudentT": lambda: d.StudentT(m.linspace(1, 9, 60)),
            "Beta": lambda: d.Beta(m.linspace(0.1, 5, 60), m.linspace(5, 0.2, 60)),
            "Dirichlet": lambda: d.Dirichlet(m.linspace(0.1, 5, 6)),
        }[family]()
    torch.manual_seed(2)
    t = make(torch).sample((4,))
    ember.manual_seed(2)
    e = make(ember).sample((4,))
    np.testing.assert_array_equal(e.numpy(), t.numpy())


def test_standard_gamma_op_differentiates_like_torch():
    # ember._standard_gamma records StandardGammaBackward0 with the implicit reparameterization gradient.
    results = []
    for lib in (torch, ember):
        lib.manual_seed(0)
        a = lib.tensor([0.5, 1.0, 2.5, 7.0], dtype=lib.float64, requires_grad=True)
        x = lib._standard_gamma(a)
        x.sum().backward()
        results.append((type(x.grad_fn).__name__, x.detach().numpy(), a.grad.numpy()))
    (tname, tx, tg), (ename, ex, eg) = results
    assert ename == tname == "StandardGammaBackward0"
    np.testing.assert_array_equal(ex, tx)
    np.testing.assert_allclose(eg, tg, rtol=1e-4)
