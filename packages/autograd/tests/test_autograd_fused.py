"""Gradients of the fused pointwise updates (addcmul, addcdiv, lerp, add/sub with alpha): gradcheck in
float64, gradients equal to torch's, their in-place forms, and forward mode against torch's."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfwAD
from ag_helpers import grads_match_torch, leaves, make_arrays

import ember
import ember.autograd.forward_ad as fwAD
from ember.autograd.formulas import FORMULAS
from ember.autograd.gradcheck import gradcheck

CASES = [
    ("addcmul", lambda m, x, a, b: m.addcmul(x, a, b, value=-0.7)),
    ("addcmul_default", lambda m, x, a, b: m.addcmul(x, a, b)),
    ("addcdiv", lambda m, x, a, b: m.addcdiv(x, a, b + 2, value=1.5)),
    ("lerp_tensor", lambda m, x, a, b: m.lerp(x, a, b)),
    ("lerp_scalar_large", lambda m, x, a, b: m.lerp(x, a, 0.8) * b),
    ("add_alpha", lambda m, x, a, b: m.add(x, a, alpha=-2.5) * b),
    ("sub_alpha", lambda m, x, a, b: m.sub(x, a * b, alpha=3)),
    ("method_chain", lambda m, x, a, b: x.addcmul(a, b, value=2).addcdiv(a, b + 2).lerp(a, 0.25)),
]
SHAPES = {
    "same": [(2, 3), (2, 3), (2, 3)],
    "broadcast": [(2, 3), (3,), (2, 1)],
    "0d": [(), (), ()],
    "transposed": [(3, 2), (3, 2), (3, 2)],
}


@pytest.mark.parametrize("shape_class", list(SHAPES))
@pytest.mark.parametrize("name, fn", CASES, ids=[c[0] for c in CASES])
def test_gradcheck_and_torch(name, fn, shape_class):
    arrays = make_arrays(SHAPES[shape_class], 0, 0.1, 1.0)
    layout = "transposed" if shape_class == "transposed" else "contiguous"
    es, _ = leaves(arrays, layout)
    assert gradcheck(lambda *xs: fn(ember, *xs), tuple(es))
    grads_match_torch(fn, arrays, layout)


def _inplace_cases():
    # The leaf is cloned first (a leaf that requires grad cannot be written in place).
    return [
        ("addcmul_", lambda m, x, a, b: x.clone().addcmul_(a, b, value=0.5)),
        ("addcdiv_", lambda m, x, a, b: x.clone().addcdiv_(a, b + 2, value=-1.5)),
        ("lerp_scalar_", lambda m, x, a, b: (x * 1).lerp_(a, 0.3)),
        ("lerp_tensor_", lambda m, x, a, b: (x * 1).lerp_(a, b)),
        ("add_alpha_", lambda m, x, a, b: x.clone().add_(a, alpha=0.75).mul(b)),
        ("sub_alpha_", lambda m, x, a, b: x.clone().sub_(a * b, alpha=2)),
    ]


@pytest.mark.parametrize("name, fn", _inplace_cases(), ids=[c[0] for c in _inplace_cases()])
@pytest.mark.parametrize("shape_class", ["same", "broadcast"])
def test_inplace_forms(name, fn, shape_class):
    arrays = make_arrays(SHAPES[shape_class], 3, 0.1, 1.0)
    es, _ = leaves(arrays)
    assert gradcheck(lambda *xs: fn(ember, *xs), tuple(es))
    grads_match_torch(fn, arrays)


def test_scalar_value_gets_no_gradient_and_mixed_dtypes_cast_back():
    x = ember.tensor([1.0, 2.0], dtype=ember.float64, requires_grad=True)
    a = ember.tensor([0.5, 0.25], requires_grad=True)  # float32 next to float64: result float64
    b = ember.tensor([3.0, 4.0], requires_grad=True)
    out = ember.addcmul(x, a, b, value=2)
    assert out.dtype is ember.float64
    out.sum().backward()
    assert a.grad.dtype is ember.float32 and b.grad.dtype is ember.float32
    np.testing.assert_allclose(a.grad.numpy(), [6.0, 8.0])
    np.testing.assert_allclose(b.grad.numpy(), [1.0, 0.5])
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0])


def test_integer_operands_need_no_gradient():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    i = ember.tensor([2, 3])
    out = ember.addcdiv(x, x, i, value=0.5)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.25, 1 + 0.5 / 3], rtol=1e-6, atol=1e-6)


def test_formulas_registered_with_forward_rules():
    for name in ("addcmul", "addcdiv", "lerp", "add_scaled"):
        assert name in FORMULAS and FORMULAS[name].jvp is not None, name


FORWARD = [
    ("addcmul", lambda m, x, a, b: m.addcmul(x, a, b, value=0.3)),
    ("addcdiv", lambda m, x, a, b: m.addcdiv(x, a, b + 1, value=2)),
    ("lerp", lambda m, x, a, b: m.lerp(x, a, b) + m.lerp(a, x, 0.9)),
    ("add_sub_alpha", lambda m, x, a, b: m.add(x, a, alpha=2) - m.sub(b, x, alpha=-0.5)),
    ("inplace", lambda m, x, a, b: (x * 1).addcmul_(a, b).addcdiv_(b, a + 1).lerp_(a, 0.7).add_(b, alpha=3)),
]


def _dual_run(fn, arrays, tangents, module, fw):
    with fw.dual_level():
        duals = [fw.make_dual(module.tensor(a), module.tensor(t)) for a, t in zip(arrays, tangents)]
        primal, tangent = fw.unpack_dual(fn(module, *duals))
        return primal.detach().numpy().copy(), tangent.detach().numpy().copy()


@pytest.mark.parametrize("name, fn", FORWARD, ids=[c[0] for c in FORWARD])
def test_forward_mode_matches_torch(name, fn):
    shapes = [(2, 3), (3,), (2, 1)]
    arrays, tangents = make_arrays(shapes, 0, 0.1, 1.0), make_arrays(shapes, 1)
    ep, et = _dual_run(fn, arrays, tangents, ember, fwAD)
    tp, tt = _dual_run(fn, arrays, tangents, torch, tfwAD)
    np.testing.assert_allclose(ep, tp, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(et, tt, rtol=1e-6, atol=1e-9)


def test_second_order():
    x = ember.tensor([0.5, 1.5], dtype=ember.float64, requires_grad=True)
    a = ember.tensor([2.0, -1.0], dtype=ember.float64, requires_grad=True)
    (g,) = ember.autograd.grad(ember.addcdiv(x, a, x, value=2).sum(), (x,), create_graph=True)
    (gg,) = ember.autograd.grad(g.sum(), (x,))
    # d/dx of (1 - 2a/x^2) is 4a/x^3
    np.testing.assert_allclose(gg.numpy(), 4 * np.array([2.0, -1.0]) / np.array([0.5, 1.5]) ** 3)
