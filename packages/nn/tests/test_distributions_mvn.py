"""MultivariateNormal compared with torch.distributions.MultivariateNormal."""

import numpy as np
import pytest
import torch
import torch.distributions as td
from distributions_helpers import close, pair, rng, to_ember

import ember
import ember.distributions as ed


def _spd(r, batch, n):
    a = r.normal(size=batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("param", ["covariance_matrix", "precision_matrix", "scale_tril"])
@pytest.mark.parametrize(("loc_batch", "mat_batch"), [((), ()), ((2,), ()), ((), (3,)), ((2, 1), (3,))])
def test_mvn_matches_torch(param, loc_batch, mat_batch):
    r = rng(8)
    n = 3
    mat = _spd(r, mat_batch, n)
    if param == "scale_tril":
        mat = np.linalg.cholesky(mat)
    loc_e, loc_t = pair(r.normal(size=loc_batch + (n,)), requires_grad=True)
    m_e, m_t = pair(mat, requires_grad=True)
    de = ed.MultivariateNormal(loc_e, **{param: m_e})
    dt = td.MultivariateNormal(loc_t, **{param: m_t})
    assert de.batch_shape == dt.batch_shape and de.event_shape == dt.event_shape
    for name in ("mean", "mode", "variance", "stddev", "scale_tril", "covariance_matrix", "precision_matrix"):
        close(getattr(de, name), getattr(dt, name), rtol=1e-4, atol=1e-5)
    v_t = dt.sample((2,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-4, atol=1e-5)
    close(de.entropy(), dt.entropy(), rtol=1e-4)
    (lp_e.sum() + de.entropy().sum()).backward()
    (lp_t.sum() + dt.entropy().sum()).backward()
    close(loc_e.grad, loc_t.grad, rtol=1e-4, atol=1e-5)
    grad_t = m_t.grad
    if param != "scale_tril":
        # torch's factorization gives an asymmetric gradient; compare the symmetric part that matters.
        grad_t = (grad_t + grad_t.mT) / 2
        close((m_e.grad + m_e.grad.mT) / 2, grad_t, rtol=1e-3, atol=1e-4)
    else:
        close(m_e.grad, grad_t.tril(), rtol=1e-3, atol=1e-4)


def test_mvn_rsample_shape_grad_and_moments():
    loc = ember.tensor([1.0, -1.0], requires_grad=True)
    L = ember.tensor([[1.0, 0.0], [0.5, 2.0]], requires_grad=True)
    d = ed.MultivariateNormal(loc, scale_tril=L)
    ember.manual_seed(2)
    x = d.rsample((4000,))
    assert x.shape == (4000, 2) and x.requires_grad
    cov = np.cov(x.detach().numpy().T)
    np.testing.assert_allclose(cov, [[1.0, 0.5], [0.5, 4.25]], atol=0.2)
    x.sum().backward()
    close(loc.grad, torch.tensor([4000.0, 4000.0]))
    eps = ember.linalg.solve_triangular(L.detach(), (x.detach() - loc.detach()).unsqueeze(-1), upper=False)
    close(
        L.grad, torch.tensor((eps.squeeze(-1).sum(0).unsqueeze(0).expand(2, 2)).numpy()), rtol=1e-3, atol=1e-2
    )
    ember.manual_seed(2)
    assert bool((d.sample((4000,)) == x.detach()).all())


def test_mvn_expand_and_errors():
    d = ed.MultivariateNormal(ember.zeros(2), covariance_matrix=ember.eye(2))
    e = d.expand((3,))
    assert e.batch_shape == (3,) and e.covariance_matrix.shape == (3, 2, 2) and e.sample().shape == (3, 2)
    close(
        e.log_prob(ember.ones(3, 2)),
        td.MultivariateNormal(torch.zeros(2), torch.eye(2)).expand((3,)).log_prob(torch.ones(3, 2)),
    )
    with pytest.raises(ValueError, match="loc must be at least one-dimensional."):
        ed.MultivariateNormal(ember.tensor(0.0), ember.eye(1))
    with pytest.raises(ValueError, match="Exactly one of covariance_matrix"):
        ed.MultivariateNormal(ember.zeros(2))
    with pytest.raises(ValueError, match="Exactly one of covariance_matrix"):
        ed.MultivariateNormal(ember.zeros(2), ember.eye(2), scale_tril=ember.eye(2))
    with pytest.raises(ValueError, match="covariance_matrix matrix must be at least two-dimensional"):
        ed.MultivariateNormal(ember.zeros(2), ember.ones(2))
    with pytest.raises(ValueError, match="Expected parameter covariance_matrix"):
        ed.MultivariateNormal(ember.zeros(2), ember.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="Expected parameter scale_tril"):
        ed.MultivariateNormal(ember.zeros(2), scale_tril=ember.tensor([[1.0, 1.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="The right-most size of value must match event_shape"):
        d.log_prob(ember.zeros(3))
