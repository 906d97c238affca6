"""Distribution base behaviour and Normal, compared with torch.distributions."""

import subprocess
import sys

import pytest
import torch
import torch.distributions as td
from distributions_helpers import close, pair, rng, to_ember

import ember
import ember.distributions as ed


def test_module_is_reachable_as_attribute():
    # A fresh interpreter: `ember.distributions` must resolve without importing it first.
    code = "import ember; print(type(ember.distributions.Normal(0.0, 1.0).sample((2,))).__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "Tensor"
    assert ember.distributions is ed and ed.Normal is ember.distributions.normal.Normal


@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
def test_normal_stats_and_log_prob(shape):
    r = rng(1)
    loc_e, loc_t = pair(r.normal(size=shape))
    scale_e, scale_t = pair(r.uniform(0.5, 2.0, size=shape))
    de, dt = ed.Normal(loc_e, scale_e), td.Normal(loc_t, scale_t)
    assert de.batch_shape == dt.batch_shape and de.event_shape == dt.event_shape
    for name in ("mean", "mode", "variance", "stddev"):
        close(getattr(de, name), getattr(dt, name))
    close(de.entropy(), dt.entropy())
    close(de.perplexity(), dt.perplexity())
    value_t = dt.sample((4,))
    close(de.log_prob(to_ember(value_t)), dt.log_prob(value_t))
    close(de.cdf(to_ember(value_t)), dt.cdf(value_t))
    q_e, q_t = pair(r.uniform(0.1, 0.9, size=shape))
    close(de.icdf(q_e), dt.icdf(q_t), rtol=1e-4)


def test_normal_python_number_params():
    de, dt = ed.Normal(0.5, 2.0), td.Normal(0.5, 2.0)
    assert de.batch_shape == dt.batch_shape == ()
    close(de.entropy(), dt.entropy())
    close(de.log_prob(ember.tensor([1.0, -1.0])), dt.log_prob(torch.tensor([1.0, -1.0])))
    assert de.sample((5,)).shape == (5,)


def test_normal_broadcasts_params():
    de = ed.Normal(ember.zeros(3, 1), ember.ones(4))
    assert de.batch_shape == (3, 4)
    assert de.sample((2,)).shape == (2, 3, 4)
    assert de.rsample().shape == (3, 4)


def test_normal_rsample_grad_matches_reparameterization():
    loc_e, loc_t = pair([0.5, -1.0], requires_grad=True)
    scale_e, scale_t = pair([1.5, 0.3], requires_grad=True)
    ember.manual_seed(0)
    x = ed.Normal(loc_e, scale_e).rsample((3,))
    eps = to_ember((torch.tensor(x.detach().numpy()) - loc_t.detach()) / scale_t.detach())
    (x**2).sum().backward()
    xt = loc_t + torch.tensor(eps.numpy()) * scale_t
    (xt**2).sum().backward()
    close(loc_e.grad, loc_t.grad, rtol=1e-4)
    close(scale_e.grad, scale_t.grad, rtol=1e-4)


def test_normal_log_prob_and_entropy_grads():
    loc_e, loc_t = pair([0.5, -1.0], requires_grad=True)
    scale_e, scale_t = pair([1.5, 0.3], requires_grad=True)
    v_e, v_t = pair([[0.1, 0.2], [1.0, -3.0]])
    lp = ed.Normal(loc_e, scale_e).log_prob(v_e).sum() + ed.Normal(loc_e, scale_e).entropy().sum()
    lt = td.Normal(loc_t, scale_t).log_prob(v_t).sum() + td.Normal(loc_t, scale_t).entropy().sum()
    lp.backward()
    lt.backward()
    close(loc_e.grad, loc_t.grad)
    close(scale_e.grad, scale_t.grad)


def test_sample_is_reproducible_with_manual_seed_and_has_no_grad():
    loc = ember.zeros(4, requires_grad=True)
    d = ed.Normal(loc, ember.ones(4))
    ember.manual_seed(3)
    a = d.sample((2,))
    ember.manual_seed(3)
    b = d.sample((2,))
    assert bool((a == b).all())
    assert not a.requires_grad
    assert d.rsample().requires_grad


def test_sample_moments():
    ember.manual_seed(0)
    x = ed.Normal(ember.tensor(2.0), ember.tensor(3.0)).sample((20000,))
    assert abs(float(x.mean()) - 2.0) < 0.1
    assert abs(float(x.std()) - 3.0) < 0.1


def test_expand():
    d = ed.Normal(ember.tensor([0.0, 1.0]), ember.tensor([1.0, 2.0]))
    e = d.expand((3, 2))
    assert e.batch_shape == (3, 2) and e.sample().shape == (3, 2)
    close(
        e.log_prob(ember.zeros(3, 2)),
        td.Normal(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 2.0]))
        .expand((3, 2))
        .log_prob(torch.zeros(3, 2)),
    )
    assert e._validate_args == d._validate_args


def test_validate_args_errors():
    with pytest.raises(ValueError, match="Expected parameter scale"):
        ed.Normal(ember.zeros(2), ember.tensor([1.0, -1.0]))
    ed.Normal(ember.zeros(2), ember.tensor([1.0, -1.0]), validate_args=False)  # no check
    d = ed.Normal(ember.zeros(3), ember.ones(3))
    with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
        d.log_prob(1.0)
    with pytest.raises(ValueError, match="Value is not broadcastable"):
        d.log_prob(ember.zeros(4))
    with pytest.raises(ValueError, match="Expected value argument"):
        d.log_prob(ember.tensor([0.0, float("nan"), 1.0]))
    with pytest.raises(ValueError, match="must all be instances"):
        ed.Normal("a", 1.0)


def test_set_default_validate_args():
    ed.Distribution.set_default_validate_args(False)
    try:
        ed.Normal(ember.zeros(1), -ember.ones(1))
    finally:
        ed.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        ed.Distribution.set_default_validate_args(2)


def test_base_not_implemented_and_repr():
    d = ed.Normal(ember.tensor(0.0), ember.tensor(1.0))
    assert repr(d) == "Normal(loc: 0.0, scale: 1.0)"
    assert (
        repr(ed.Normal(ember.zeros(2), ember.ones(2)))
        == "Normal(loc: ember.Size([2]), scale: ember.Size([2]))"
    )
    with pytest.raises(NotImplementedError):
        d.enumerate_support()
    assert d.has_rsample and not d.has_enumerate_support
    assert repr(d.support) == repr(td.Normal(0.0, 1.0).support)
    assert repr(d.arg_constraints["scale"]) == repr(td.Normal.arg_constraints["scale"])
    with pytest.raises(NotImplementedError):
        _ = ed.Distribution(validate_args=False).mean
