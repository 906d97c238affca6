"""biject_to / transform_to and the vector transforms, compared with torch.distributions."""

import pytest
import torch
import torch.distributions as td
import torch.distributions.constraints as tc
from distributions_helpers import close, pair, rng

import ember
import ember.distributions as ed
import ember.distributions.constraints as ec

CONSTRAINTS = [
    (lambda c: c.real, (2, 3)),
    (lambda c: c.positive, (2, 3)),
    (lambda c: c.nonnegative, (3,)),
    (lambda c: c.greater_than(1.5), (3,)),
    (lambda c: c.greater_than_eq(-1.0), (3,)),
    (lambda c: c.less_than(2.0), (3,)),
    (lambda c: c.unit_interval, (2, 3)),
    (lambda c: c.interval(-2.0, 3.0), (3,)),
    (lambda c: c.half_open_interval(0.5, 1.5), (3,)),
    (lambda c: c.simplex, (2, 3)),
    (lambda c: c.independent(c.positive, 1), (2, 3)),
    (lambda c: c.lower_cholesky, (2, 3, 3)),
]


@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
@pytest.mark.parametrize("index", range(len(CONSTRAINTS)))
def test_registry_matches_torch(registry, index):
    make, shape = CONSTRAINTS[index]
    ce, ct = make(ec), make(tc)
    try:
        tt = getattr(td, registry)(ct)
    except NotImplementedError:
        with pytest.raises(NotImplementedError, match="Cannot transform"):
            getattr(ed, registry)(ce)
        return
    te = getattr(ed, registry)(ce)
    x_e, x_t = pair(rng(20).normal(size=shape), requires_grad=True)
    y_e, y_t = te(x_e), tt(x_t)
    close(y_e, y_t, rtol=1e-5, atol=1e-6)
    assert bool(ce.check(y_e).all())
    close(te.inv(y_e), tt.inv(y_t), rtol=1e-4, atol=1e-4)
    assert te.bijective == tt.bijective
    assert repr(te.codomain) == repr(tt.codomain) and repr(te.domain) == repr(tt.domain)
    loss_e, loss_t = (y_e * y_e).sum(), (y_t * y_t).sum()
    if tt.bijective:
        j_e, j_t = te.log_abs_det_jacobian(x_e, y_e), tt.log_abs_det_jacobian(x_t, y_t)
        close(j_e, j_t, rtol=1e-4, atol=1e-5)
        loss_e, loss_t = loss_e + j_e.sum(), loss_t + j_t.sum()
    loss_e.backward()
    loss_t.backward()
    close(x_e.grad, x_t.grad, rtol=1e-4, atol=1e-5)


def test_stick_breaking_shapes_and_registry_errors():
    t = ed.StickBreakingTransform()
    assert t.forward_shape((2, 3)) == (2, 4) and t.inverse_shape((2, 4)) == (2, 3)
    with pytest.raises(ValueError, match="Too few dimensions on input"):
        t.forward_shape(())
    with pytest.raises(NotImplementedError, match="Cannot transform _Boolean constraints"):
        ed.biject_to(ec.boolean)
    with pytest.raises(TypeError, match="Expected constraint to be either a Constraint subclass or instance"):
        ed.biject_to.register(int, lambda c: None)
    registry = ed.constraint_registry.ConstraintRegistry()

    @registry.register(ec.boolean)
    def _factory(constraint):
        return ed.identity_transform

    assert registry(ec.boolean) is ed.identity_transform


def test_unconstrained_optimization_through_transform_to():
    # A scale parameter kept positive by optimizing its unconstrained preimage.
    raw = ember.zeros(2, requires_grad=True)
    opt = ember.optim.SGD([raw], lr=0.1)
    target = ember.tensor([0.5, 2.0])
    for _ in range(100):
        opt.zero_grad()
        scale = ed.transform_to(ed.Normal.arg_constraints["scale"])(raw)
        loss = ((scale - target) ** 2).sum()
        loss.backward()
        opt.step()
    close(ed.transform_to(ec.positive)(raw).detach(), torch.tensor([0.5, 2.0]), rtol=1e-2, atol=1e-2)


def test_independent_transform_and_pairs():
    te = ed.IndependentTransform(ed.ExpTransform(), 1)
    tt = td.IndependentTransform(td.ExpTransform(), 1)
    x_e, x_t = pair([[0.1, 0.2], [0.3, -0.4]])
    close(te.log_abs_det_jacobian(x_e, te(x_e)), tt.log_abs_det_jacobian(x_t, tt(x_t)))
    assert repr(te) == repr(tt) and te.domain.event_dim == 1
    with pytest.raises(ValueError, match="Too few dimensions on input"):
        te(ember.tensor(1.0))
