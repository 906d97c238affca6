"""nn.AdaptiveLogSoftmaxWithLoss against PyTorch with the same weights: output, loss and
gradients, log_prob, predict, unbatched input and the argument errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember


def _pair(cutoffs=(4, 10, 15), head_bias=True, div_value=2.0):
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 20, list(cutoffs), div_value=div_value, head_bias=head_bias).double()
    em = ember.nn.AdaptiveLogSoftmaxWithLoss(16, 20, list(cutoffs), div_value=div_value,
                                             head_bias=head_bias).double()
    assert list(tm.state_dict()) == list(em.state_dict())
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    return tm, em


@pytest.mark.parametrize("cutoffs, head_bias", [((4, 10, 15), True), ((8,), False)])
def test_matches_torch(cutoffs, head_bias):
    tm, em = _pair(cutoffs, head_bias)
    x = np.random.default_rng(0).standard_normal((9, 16))
    t = np.array([0, 3, 4, 9, 10, 14, 15, 19, 2])
    res = []
    for lib, m in ((torch, tm), (ember, em)):
        xx = lib.tensor(x, requires_grad=True)
        out = m(xx, lib.tensor(t))
        out.loss.backward()
        res.append([out.output.detach().numpy(), out.loss.detach().numpy(), xx.grad.numpy(),
                    m.head.weight.grad.numpy(), m.tail[0][1].weight.grad.numpy(), m.log_prob(xx).detach().numpy(),
                    m.predict(xx).numpy(), m(xx[1], lib.tensor(t[1])).output.detach().numpy()])
    for e, t_ in zip(res[1], res[0]):
        np.testing.assert_allclose(e, t_, rtol=1e-10, atol=1e-12)


def test_errors():
    with pytest.raises(ValueError):
        ember.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [5, 3])
    with pytest.raises(ValueError):
        ember.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [10])
    m = ember.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3])
    with pytest.raises(RuntimeError):
        m(ember.randn(4, 8), ember.tensor([0, 1, 2]))
    with pytest.raises(RuntimeError):
        m(ember.randn(4, 8), ember.tensor([0, 1, 2, 10]))
    with pytest.raises(RuntimeError):
        m(ember.randn(4, 8), ember.zeros(4, 2, dtype=ember.int64))
