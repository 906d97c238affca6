"""ember.distributions.constraints compared with torch.distributions.constraints, plus float64 families."""

import numpy as np
import pytest
import torch
import torch.distributions as td
import torch.distributions.constraints as tc
from distributions_helpers import close, pair

import ember
import ember.distributions as ed
import ember.distributions.constraints as ec

VALUES = [
    [0.0, 1.0, -1.0, 0.5],
    [[1.0, 0.0], [0.0, 1.0]],
    [[2.0, 0.0], [1.0, 3.0]],
    [[1.0, 2.0], [2.0, 1.0]],
    [[0.25, 0.75], [0.5, 0.6]],
    [[0.0, 1.0], [1.0, 1.0]],
    [float("nan"), 2.0, 3.0, 1.0],
]

NAMES = [
    "real", "positive", "nonnegative", "unit_interval", "boolean", "nonnegative_integer", "positive_integer",
    "simplex", "one_hot", "lower_triangular", "lower_cholesky", "positive_definite", "symmetric", "square",
    "real_vector", "positive_semidefinite",
]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("index", range(len(VALUES)))
def test_named_constraints_match_torch(name, index):
    value = np.asarray(VALUES[index], dtype="float32")
    ce, ct = getattr(ec, name), getattr(tc, name)
    if ce.event_dim > value.ndim or (ce.event_dim == 2 and value.ndim < 2):
        return
    e, t = pair(value)
    np.testing.assert_array_equal(ce.check(e).numpy(), ct.check(t).numpy())
    assert (ce.event_dim, ce.is_discrete, repr(ce)) == (ct.event_dim, ct.is_discrete, repr(ct))


@pytest.mark.parametrize(
    "make",
    [
        lambda c: c.interval(-0.5, 0.75),
        lambda c: c.half_open_interval(0.0, 1.0),
        lambda c: c.greater_than(0.5),
        lambda c: c.greater_than_eq(0.5),
        lambda c: c.less_than(0.5),
        lambda c: c.integer_interval(0, 1),
        lambda c: c.independent(c.positive, 1),
    ],
)
def test_parameterized_constraints_match_torch(make):
    e, t = pair([[0.0, 1.0, -1.0, 0.5], [0.75, 2.0, -0.5, 0.25]])
    ce, ct = make(ec), make(tc)
    np.testing.assert_array_equal(ce.check(e).numpy(), ct.check(t).numpy())
    assert repr(ce) == repr(ct) and ce.event_dim == ct.event_dim


def test_dependent_constraints():
    assert ec.is_dependent(ec.dependent) and not ec.is_dependent(ec.real)
    with pytest.raises(ValueError, match="Cannot determine validity of dependent constraint"):
        ec.dependent.check(ember.zeros(1))
    with pytest.raises(NotImplementedError):
        _ = ec.dependent.event_dim
    assert ec.dependent(is_discrete=True, event_dim=1).event_dim == 1
    assert ec.is_dependent(ed.Categorical.support)
    with pytest.raises(ValueError, match="Expected value.dim\\(\\) >= 1"):
        ec.independent(ec.real, 1).check(ember.tensor(1.0))


@pytest.mark.parametrize(
    "make",
    [
        lambda m, x: m.distributions.Normal(x, 2.0),
        lambda m, x: m.distributions.Laplace(x, 2.0),
        lambda m, x: m.distributions.Bernoulli(logits=x),
        lambda m, x: m.distributions.Categorical(logits=x),
        lambda m, x: m.distributions.Exponential(x.exp()),
        lambda m, x: m.distributions.LogNormal(x, 0.5),
        lambda m, x: m.distributions.MultivariateNormal(x, m.eye(3, dtype=m.float64)),
    ],
)
def test_float64_parameters(make):
    e, t = pair([0.1, -0.3, 0.7], dtype="float64")
    de, dt = make(ember, e), make(torch, t)
    value = dt.sample((2,))
    close(de.log_prob(ember.tensor(value.numpy())), dt.log_prob(value), rtol=1e-10, atol=1e-12)
    close(de.entropy(), dt.entropy(), rtol=1e-10)
    expected = ember.int64 if isinstance(dt, td.Categorical) else ember.float64
    assert de.sample().dtype == expected
