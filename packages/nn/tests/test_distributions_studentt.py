"""StudentT compared with torch.distributions.StudentT."""

import numpy as np
import pytest
import torch
import torch.distributions as td
from distributions_helpers import close, pair, rng, to_ember

import ember
import ember.distributions as ed


@pytest.mark.parametrize("shape", [(), (3,)])
def test_studentt_matches_torch(shape):
    r = rng(24)
    df_e, df_t = pair(r.uniform(2.5, 8.0, size=shape), requires_grad=True)
    loc_e, loc_t = pair(r.normal(size=shape), requires_grad=True)
    sc_e, sc_t = pair(r.uniform(0.5, 2.0, size=shape), requires_grad=True)
    de, dt = ed.StudentT(df_e, loc_e, sc_e), td.StudentT(df_t, loc_t, sc_t)
    assert de.batch_shape == dt.batch_shape and de.has_rsample
    for name in ("mean", "mode", "variance", "stddev"):
        close(getattr(de, name), getattr(dt, name), rtol=1e-5)
    v_t = dt.sample((4,))
    lp_e, lp_t = de.log_prob(to_ember(v_t)), dt.log_prob(v_t)
    close(lp_e, lp_t, rtol=1e-4, atol=1e-5)
    close(de.entropy(), dt.entropy(), rtol=1e-4, atol=1e-5)
    (lp_e.sum() + de.entropy().sum()).backward()
    (lp_t.sum() + dt.entropy().sum()).backward()
    for pe, pt in ((df_e, df_t), (loc_e, loc_t), (sc_e, sc_t)):
        close(pe.grad, pt.grad, rtol=1e-4, atol=1e-5)
    e = de.expand((2,) + tuple(shape))
    assert e.rsample().shape == (2,) + tuple(shape)


def test_studentt_undefined_moments_sampling_and_errors():
    df = [0.5, 1.5, 4.0]
    de, dt = ed.StudentT(ember.tensor(df)), td.StudentT(torch.tensor(df))
    close(de.mean, dt.mean)
    close(de.variance, dt.variance)
    ember.manual_seed(15)
    x = ed.StudentT(ember.tensor(5.0), 1.0, 2.0).sample((20000,)).numpy()
    assert abs(np.median(x) - 1.0) < 0.1 and abs(x.var() - 4.0 * 5.0 / 3.0) < 0.8
    loc = ember.tensor(0.0, requires_grad=True)
    ed.StudentT(3.0, loc, 1.0).rsample((10,)).sum().backward()
    close(loc.grad, torch.tensor(10.0))
    with pytest.raises(ValueError, match="Expected parameter df"):
        ed.StudentT(ember.tensor([-1.0]))
