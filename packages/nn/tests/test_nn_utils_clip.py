"""nn.utils: gradient clipping and parameter vectors against torch.nn.utils."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from layer_helpers import assert_close

import ember
import ember.nn as nn

SHAPES = [(3, 4), (4,), (2, 1, 3), ()]


def _params_with_grads(dtype="float32", scale=1.0, shapes=SHAPES, seed=0):
    """Matching ember / torch parameter lists whose .grad are set to the same random values."""
    rng = np.random.default_rng(seed)
    es, ts = [], []
    for shape in shapes:
        data = rng.uniform(-1, 1, shape).astype(dtype)
        grad = (rng.uniform(-1, 1, shape) * scale).astype(dtype)
        pe, pt = nn.Parameter(ember.tensor(data.copy())), torch.nn.Parameter(torch.tensor(data.copy()))
        pe.grad, pt.grad = ember.tensor(grad.copy()), torch.tensor(grad.copy())
        es.append(pe)
        ts.append(pt)
    return es, ts


@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, math.inf, -math.inf, 0])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_clip_grad_norm_matches_torch(norm_type, max_norm, dtype):
    es, ts = _params_with_grads(dtype)
    total_e = nn.utils.clip_grad_norm_(es, max_norm, norm_type)
    total_t = torch.nn.utils.clip_grad_norm_(ts, max_norm, norm_type)
    assert_close(total_e, total_t)
    for pe, pt in zip(es, ts):
        assert_close(pe.grad, pt.grad)


def test_clip_grad_norm_single_tensor_generator_and_missing_grads():
    es, ts = _params_with_grads(scale=5.0)
    es[1].grad = ts[1].grad = None  # parameters without a gradient are skipped
    assert_close(nn.utils.clip_grad_norm_(es[0], 1.0), torch.nn.utils.clip_grad_norm_(ts[0], 1.0))
    assert_close(nn.utils.clip_grad_norm_((p for p in es), 1.0), torch.nn.utils.clip_grad_norm_((p for p in ts), 1.0))
    for pe, pt in zip(es, ts):
        assert (pe.grad is None) == (pt.grad is None)
        if pt.grad is not None:
            assert_close(pe.grad, pt.grad)


def test_clip_grad_norm_of_nothing():
    for utils, lib in ((torch.nn.utils, torch), (nn.utils, ember)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            total = utils.clip_grad_norm_((p for p in []), 1.0)
        assert [str(w.message) for w in caught] == ["`parameters` is an empty generator, no gradient clipping "
                                                    "will occur."]
        assert total.item() == 0.0 and total.dtype == lib.float32
        assert utils.clip_grad_norm_([lib.zeros(2, requires_grad=True)], 1.0).item() == 0.0


@pytest.mark.parametrize("bad", [math.inf, math.nan])
def test_error_if_nonfinite(bad):
    es, ts = _params_with_grads()
    with torch.no_grad():
        ts[0].grad[0, 0] = bad
    with ember.no_grad():
        es[0].grad[0, 0] = bad
    for utils, params in ((torch.nn.utils, ts), (nn.utils, es)):
        with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from `parameters` is "
                                               "non-finite, so it cannot be clipped"):
            utils.clip_grad_norm_(params, 1.0, error_if_nonfinite=True)
    # Without the check the gradients are scaled by the non-finite norm, as PyTorch does.
    total_e, total_t = nn.utils.clip_grad_norm_(es, 1.0), torch.nn.utils.clip_grad_norm_(ts, 1.0)
    assert_close(total_e, total_t)
    for pe, pt in zip(es, ts):
        assert_close(pe.grad, pt.grad)


def test_foreach_is_accepted_and_clipping_is_not_recorded():
    es, _ = _params_with_grads(scale=10.0)
    total = nn.utils.clip_grad_norm_(es, 1.0, foreach=True)
    assert not total.requires_grad
    assert nn.utils.get_total_norm([p.grad for p in es]).item() == pytest.approx(1.0, rel=1e-5)


def test_deprecated_clip_grad_norm_warns():
    es, ts = _params_with_grads(scale=3.0)
    with pytest.warns(FutureWarning, match="clip_grad_norm_"):
        total_e = nn.utils.clip_grad_norm(es, 1.0)
    with pytest.warns(FutureWarning):
        total_t = torch.nn.utils.clip_grad_norm(ts, 1.0)
    assert_close(total_e, total_t)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_get_total_norm_and_clip_grads_with_norm(norm_type):
    es, ts = _params_with_grads("float64", scale=4.0)
    total_e = nn.utils.get_total_norm([p.grad for p in es], norm_type)
    total_t = torch.nn.utils.get_total_norm([p.grad for p in ts], norm_type)
    assert_close(total_e, total_t)
    assert nn.utils.clip_grads_with_norm_(es, 2.0, total_e) is None
    torch.nn.utils.clip_grads_with_norm_(ts, 2.0, total_t)
    for pe, pt in zip(es, ts):
        assert_close(pe.grad, pt.grad)
    assert_close(nn.utils.get_total_norm(es[0].grad), torch.nn.utils.get_total_norm(ts[0].grad))
    assert_close(nn.utils.get_total_norm([]), torch.nn.utils.get_total_norm([]))


@pytest.mark.parametrize("clip_value", [0.3, 2, 0.0])
def test_clip_grad_value(clip_value):
    es, ts = _params_with_grads(scale=2.0)
    es[2].grad = ts[2].grad = None
    assert nn.utils.clip_grad_value_(es, clip_value) is None
    torch.nn.utils.clip_grad_value_(ts, clip_value)
    for pe, pt in zip(es, ts):
        if pt.grad is not None:
            assert_close(pe.grad, pt.grad)
    nn.utils.clip_grad_value_(es[0], 0.1)  # a single tensor
    assert float(es[0].grad.abs().max()) <= 0.1 + 1e-7


def test_clip_inside_a_training_step():
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    em = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    x = np.random.default_rng(0).uniform(-3, 3, (5, 3)).astype("float32")
    (em(ember.tensor(x)) ** 2).sum().backward()
    (tm(torch.tensor(x)) ** 2).sum().backward()
    assert_close(nn.utils.clip_grad_norm_(em.parameters(), 0.1), torch.nn.utils.clip_grad_norm_(tm.parameters(),
                                                                                                   0.1))
    for pe, pt in zip(em.parameters(), tm.parameters()):
        assert_close(pe.grad, pt.grad)


# -- parameters_to_vector / vector_to_parameters ------------------------------------------------

def test_parameters_to_vector_matches_torch():
    es, ts = _params_with_grads("float64")
    assert_close(nn.utils.parameters_to_vector(es), torch.nn.utils.parameters_to_vector(ts))


def test_parameters_to_vector_gradient_values():
    a, b = nn.Parameter(ember.ones(2, 2)), nn.Parameter(ember.ones(3))
    v = nn.utils.parameters_to_vector([a, b])
    (v * ember.arange(7, dtype=ember.float32)).sum().backward()
    assert a.grad.numpy().tolist() == [[0.0, 1.0], [2.0, 3.0]]
    assert b.grad.numpy().tolist() == [4.0, 5.0, 6.0]


def test_vector_to_parameters_views_the_vector():
    tm = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    em = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    vec = np.arange(11, dtype="float32")
    ve, vt = ember.tensor(vec.copy()), torch.tensor(vec.copy())
    nn.utils.vector_to_parameters(ve, em.parameters())
    torch.nn.utils.vector_to_parameters(vt, tm.parameters())
    for (name, pe), pt in zip(em.named_parameters(), tm.parameters()):
        assert_close(pe.detach(), pt.detach())
        assert isinstance(pe, nn.Parameter) and pe.requires_grad, name
    ve[0] = 100.0  # the parameters are views of the vector, as in PyTorch
    vt[0] = 100.0
    assert em[0].weight[0, 0].item() == tm[0].weight[0, 0].item() == 100.0


def test_vector_to_parameters_rejects_non_tensor():
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: "):
        torch.nn.utils.vector_to_parameters([1.0], [])
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: "):
        nn.utils.vector_to_parameters([1.0], [])
