"""``ember.autograd.Variable`` behaves like PyTorch's legacy wrapper."""

import warnings

import pytest
import torch

import ember
from ember.autograd import Variable


@pytest.mark.parametrize("requires_grad", [False, True])
def test_variable_returns_detached_tensor(requires_grad):
    src = ember.ones(3, requires_grad=True) * 2
    v = Variable(src, requires_grad=requires_grad)
    tv = torch.autograd.Variable(torch.ones(3, requires_grad=True) * 2, requires_grad=requires_grad)
    assert type(v) is ember.Tensor
    assert (v.requires_grad, v.is_leaf, v.grad_fn) == (tv.requires_grad, tv.is_leaf, tv.grad_fn)
    v.data.fill_(5.0)  # shares storage with the source, as detach() does
    assert src.tolist() == [5.0, 5.0, 5.0]


def test_variable_isinstance_and_empty():
    assert isinstance(ember.zeros(2), Variable) and isinstance(ember.nn.Parameter(ember.zeros(2)), Variable)
    assert not isinstance([1.0], Variable)
    assert Variable().shape == torch.autograd.Variable().shape == (0,)


def test_variable_errors_and_volatile():
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got int"):
        Variable(3)
    with pytest.raises(RuntimeError):
        Variable(ember.ones(2, dtype=ember.int64), requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Variable(ember.ones(2), volatile=True)
    assert any("volatile was removed" in str(w.message) for w in caught)
