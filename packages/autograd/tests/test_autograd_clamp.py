"""clamp is one op, so its gradient at a bound matches PyTorch's (1 to the input, not 0.5)."""

import pytest
import torch

import ember

VALUES = [-1.0, 0.0, 0.25, 1.0, 2.0]


@pytest.mark.parametrize("low,high", [(0.0, 1.0), (None, 0.25), (0.0, None), (1.0, 1.0)])
def test_clamp_gradient_at_and_between_bounds(low, high):
    x = ember.tensor(VALUES, dtype=ember.float64, requires_grad=True)
    tx = torch.tensor(VALUES, dtype=torch.float64, requires_grad=True)
    ember.clamp(x, low, high).pow(2).sum().backward()
    torch.clamp(tx, low, high).pow(2).sum().backward()
    assert x.grad.tolist() == tx.grad.tolist()


def test_clamp_tensor_bounds_get_gradient_where_selected():
    x = ember.tensor(VALUES, dtype=ember.float64, requires_grad=True)
    low = ember.zeros(5, dtype=ember.float64, requires_grad=True)
    high = ember.full((5,), 1.0, dtype=ember.float64, requires_grad=True)
    tx = torch.tensor(VALUES, dtype=torch.float64, requires_grad=True)
    tlow = torch.zeros(5, dtype=torch.float64, requires_grad=True)
    thigh = torch.full((5,), 1.0, dtype=torch.float64, requires_grad=True)
    ember.clamp(x, low, high).sum().backward()
    torch.clamp(tx, tlow, thigh).sum().backward()
    assert x.grad.tolist() == tx.grad.tolist()
    assert low.grad.tolist() == tlow.grad.tolist()
    assert high.grad.tolist() == thigh.grad.tolist()
    point = ember.tensor([-0.9, 0.1, 0.7], dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(lambda a: ember.clamp(a, -0.5, 0.5), (point,))
