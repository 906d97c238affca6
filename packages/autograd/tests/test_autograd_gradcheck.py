"""gradcheck / gradgradcheck: they pass correct gradients, and catch wrong ones the way
PyTorch's do (GradcheckError, or False with raise_exception=False)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from ember.autograd import Function
from ember.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck


def _x(shape=(2, 3), seed=0, requires_grad=True):
    data = np.random.default_rng(seed).uniform(0.5, 1.5, shape)
    return ember.tensor(data, requires_grad=requires_grad)


class WrongGrad(Function):
    """x**2 with a backward off by a factor of 2."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x


class WrongSecondOrder(Function):
    """sin(x) with a correct first derivative whose own derivative is wrong (cos is detached)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ember.sin(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ember.cos(x).detach()


def test_passes_on_correct_gradients():
    assert gradcheck(lambda a, b: (a * b).sin(), (_x(), _x(seed=1)))
    assert gradcheck(ember.exp, _x())  # a bare tensor is accepted
    assert gradgradcheck(lambda a: (a ** 3).sum(1), (_x(),))


def test_multiple_outputs_and_non_tensor_args():
    assert gradcheck(lambda a, k: (a * k, a.sum()), (_x(), 3.0))


def test_wrong_gradient_raises_gradcheck_error():
    with pytest.raises(GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"):
        gradcheck(WrongGrad.apply, (_x(),))
    assert issubclass(GradcheckError, RuntimeError)


def test_raise_exception_false_returns_false():
    assert gradcheck(WrongGrad.apply, (_x(),), raise_exception=False) is False


def test_gradgradcheck_catches_wrong_second_derivative():
    assert gradcheck(WrongSecondOrder.apply, (_x(),))
    with pytest.raises(GradcheckError):
        gradgradcheck(WrongSecondOrder.apply, (_x(),))
    assert gradgradcheck(WrongSecondOrder.apply, (_x(),), raise_exception=False) is False


def test_no_input_requires_grad():
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        gradcheck(ember.exp, (_x(requires_grad=False),))


def test_low_precision_warns():
    x = ember.tensor([0.5, 1.0], dtype=ember.float32, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gradcheck(lambda a: a * 2, (x,), atol=1e-2, rtol=1e-2, eps=1e-3)
    assert any("double precision" in str(w.message) for w in caught)


def test_exported_from_ember_autograd():
    # Whichever of the module or the function the name resolves to, calling it runs gradcheck.
    assert ember.autograd.gradcheck(ember.exp, (_x(),))
    assert ember.autograd.gradgradcheck(ember.exp, (_x(),))
    assert ember.autograd.gradcheck(WrongGrad.apply, (_x(),), raise_exception=False) is False
