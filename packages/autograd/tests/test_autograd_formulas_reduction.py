"""Derivatives of reductions, scans and softmaxes; PyTorch's conventions at special points
(ties, zeros, kinks, bounds); second derivatives of the ops used in higher-order code."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ag_helpers import grads_match_torch, leaves, make_arrays

import ember
from ember.autograd.gradcheck import gradcheck, gradgradcheck

REDUCTIONS = [
    ("sum_all", lambda m, x: x.sum()),
    ("sum_dim", lambda m, x: x.sum(1)),
    ("sum_dims_keepdim", lambda m, x: m.sum(x, (0, 1), keepdim=True)),
    ("sum_dtype", lambda m, x: m.sum(x, 0, dtype=m.float64)),
    ("nansum", lambda m, x: m.nansum(x, 0)),
    ("mean_all", lambda m, x: x.mean()),
    ("mean_dim", lambda m, x: x.mean(-1, keepdim=True)),
    ("nanmean", lambda m, x: m.nanmean(x, 1)),
    ("prod_all", lambda m, x: x.prod()),
    ("prod_dim", lambda m, x: x.prod(0)),
    ("amax", lambda m, x: m.amax(x, 1)),
    ("amin_all", lambda m, x: m.amin(x)),
    ("max_all", lambda m, x: x.max()),
    ("min_all", lambda m, x: x.min()),
    ("max_dim", lambda m, x: x.max(1)[0]),
    ("min_dim_keepdim", lambda m, x: x.min(0, keepdim=True)[0]),
    ("var", lambda m, x: x.var(1)),
    ("var_correction", lambda m, x: m.var(x, 0, correction=0, keepdim=True)),
    ("std", lambda m, x: x.std()),
    ("std_dim", lambda m, x: x.std(1, keepdim=True)),
    ("var_mean", lambda m, x: m.var_mean(x, 1)),
    ("std_mean", lambda m, x: m.std_mean(x, 0)),
    ("var_mean_only_mean", lambda m, x: m.var_mean(x, 1)[1] * 1),
    ("norm2", lambda m, x: x.norm()),
    ("norm1_dim", lambda m, x: m.norm(x, 1, 1)),
    ("norm3", lambda m, x: m.norm(x, 3, 0)),
    ("norm_inf", lambda m, x: m.norm(x, float("inf"))),
    ("logsumexp", lambda m, x: m.logsumexp(x, 1)),
    ("cumsum", lambda m, x: m.cumsum(x, 1)),
    ("cumprod", lambda m, x: m.cumprod(x, 0)),
    ("cummax", lambda m, x: m.cummax(x, 1)[0]),
    ("cummin", lambda m, x: m.cummin(x, 0)[0]),
    ("softmax", lambda m, x: m.softmax(x, 1)),
    ("log_softmax", lambda m, x: m.log_softmax(x, 0)),
]


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("name, fn", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
def test_reduction(name, fn, layout):
    arrays = make_arrays([(3, 4)], 0, 0.2, 1.5)
    arrays[0] *= np.where(np.arange(12).reshape(3, 4) % 3 == 0, -1, 1)  # mixed signs
    es, _ = leaves(arrays, layout)
    assert gradcheck(lambda x: fn(ember, x), (es[0],))
    grads_match_torch(fn, arrays, layout)


@pytest.mark.parametrize(
    "fn",
    [
        lambda m, x: x.sum(),
        lambda m, x: x.mean(),
        lambda m, x: x.prod(),
        lambda m, x: m.amax(x),
        lambda m, x: m.cumsum(x, 0),
        lambda m, x: m.softmax(x, 0),
        lambda m, x: m.logsumexp(x, 0),
    ],
)
def test_reduction_0d(fn):
    arrays = make_arrays([()], 3, 0.5, 1.5)
    es, _ = leaves(arrays)
    assert gradcheck(lambda x: fn(ember, x), (es[0],))
    grads_match_torch(fn, arrays)


# -- PyTorch's values at special points ------------------------------------------------------------


SPECIAL = [
    ("abs_at_0", lambda m, x: m.abs(x), [0.0, -1.0, 2.0]),
    ("relu_at_0", lambda m, x: m.relu(x), [0.0, -1.0, 2.0]),
    ("sqrt_at_0", lambda m, x: m.sqrt(x), [0.0, 4.0]),
    ("amax_ties", lambda m, x: m.amax(x), [3.0, 1.0, 3.0, 3.0]),
    ("max_all_ties", lambda m, x: x.max(), [3.0, 1.0, 3.0]),
    ("max_dim_ties", lambda m, x: x.max(0)[0], [3.0, 1.0, 3.0]),
    ("cummax_ties", lambda m, x: m.cummax(x, 0)[0], [1.0, 1.0, 0.0, 2.0]),
    ("maximum_tie", lambda m, x: m.maximum(x, m.ones_like(x)), [1.0, 0.0, 2.0]),
    ("pow_base_0", lambda m, x: m.pow(x, 2.0), [0.0, 1.0]),
    ("pow_exp_0", lambda m, x: m.pow(x, 0.0), [0.0, 2.0]),
    ("hardtanh_bounds", lambda m, x: m.nn.functional.hardtanh(x) if m is torch else m.hardtanh(x), [-1.0, 1.0]),
    ("relu6_bounds", lambda m, x: m.nn.functional.relu6(x) if m is torch else m.relu6(x), [0.0, 6.0, 3.0]),
    ("leaky_relu_at_0", lambda m, x: (m.nn.functional if m is torch else m).leaky_relu(x, 0.1), [0.0]),
    ("threshold_at", lambda m, x: m.threshold(x, 1.0, 0.0), [1.0, 2.0]),
    ("prod_one_zero", lambda m, x: x.prod(), [2.0, 0.0, 3.0]),
    ("prod_two_zeros", lambda m, x: x.prod(), [0.0, 0.0, 3.0]),
    ("cumprod_zero", lambda m, x: m.cumprod(x, 0), [2.0, 0.0, 3.0, 0.0]),
    ("norm_at_0", lambda m, x: x.norm(), [0.0, 0.0]),
    ("std_constant", lambda m, x: x.std(), [1.0, 1.0, 1.0]),
    ("copysign_at_0", lambda m, x: m.copysign(x, -m.ones_like(x)), [0.0, 2.0]),
    ("where_nan_branch", lambda m, x: m.where(x > 0, x, m.zeros_like(x)), [1.0, -1.0]),
    ("xlogy_x0", lambda m, x: m.xlogy(x, x + 1), [0.0, 1.0]),
    ("logit_outside", lambda m, x: m.logit(x, 0.25), [0.1, 0.5]),
    ("hardswish_at_3", lambda m, x: m.nn.functional.hardswish(x) if m is torch else m.hardswish(x), [-3.0, 3.0]),
]


@pytest.mark.parametrize("name, fn, values", SPECIAL, ids=[s[0] for s in SPECIAL])
def test_special_points_match_torch(name, fn, values):
    grads_match_torch(fn, [np.array(values)])


def test_pow_exponent_gradient_at_zero_base():
    arrays = [np.array([0.0, 2.0]), np.array([2.0, 0.5])]
    grads_match_torch(lambda m, x, y: m.pow(x, y), arrays)


def test_clamp_bounds_composite():
    # clamp is a composite of maximum/minimum in ember's core: at a bound the gradient is
    # split like a maximum tie. Away from the bounds it matches PyTorch.
    grads_match_torch(lambda m, x: m.clamp(x, -0.5, 0.5), [np.array([-1.0, 0.2, 0.9])])


# -- second derivatives -------------------------------------------------------------------------------

GRADGRAD = [
    ("mul_div", lambda x, y: x * y / (y * y + 1), [(2, 3), (3,)]),
    ("pow", lambda x, y: ember.pow(x.abs() + 0.5, y), [(2, 3), (2, 3)]),
    ("unary_chain", lambda x: ember.tanh(ember.sin(x) * ember.exp(x)).sqrt(), [(2, 3)]),
    ("log_sigmoid", lambda x: ember.log(ember.sigmoid(x)) + ember.atan(x) + ember.erf(x), [(2, 3)]),
    ("activations", lambda x: ember.gelu(x) + ember.silu(x) + ember.softplus(x) + ember.elu(x) + ember.mish(x),
     [(2, 3)]),
    ("mm", lambda a, b: ember.mm(a, b).tanh(), [(2, 3), (3, 2)]),
    ("matmul", lambda a, b: ember.matmul(a, b) ** 2, [(2, 2, 3), (3, 2)]),
    ("addmm", lambda c, a, b: ember.addmm(c, a, b, alpha=0.5) ** 2, [(2,), (2, 3), (3, 2)]),
    ("sum_mean", lambda x: (x.sum(1) ** 2).mean() + (x * x).mean(0).sum(), [(2, 3)]),
    ("prod", lambda x: x.prod(1), [(2, 3)]),
    ("var_std", lambda x: x.var(1) + x.std(0).sum(), [(3, 3)]),
    ("amax", lambda x: ember.amax(x * x, 1), [(2, 3)]),
    ("softmax", lambda x: ember.softmax(x, 1) * x, [(2, 3)]),
    ("log_softmax", lambda x: ember.log_softmax(x, 0) ** 2, [(2, 3)]),
    ("logsumexp", lambda x: ember.logsumexp(x, 1), [(2, 3)]),
    ("norm", lambda x: x.norm() + ember.norm(x, 3, 1).sum(), [(2, 3)]),
    ("views", lambda x: x.t().reshape(6)[1:4].unsqueeze(0).expand(2, 3) * x, [(2, 3)]),
    ("cat_index", lambda x: ember.cat([x, x[ember.tensor([1, 0])] ** 2], 0), [(2, 3)]),
    ("cumsum_cumprod", lambda x: ember.cumsum(x * x, 1) + ember.cumprod(x + 2, 0), [(2, 3)]),
]


@pytest.mark.parametrize("name, fn, shapes", GRADGRAD, ids=[g[0] for g in GRADGRAD])
def test_gradgradcheck(name, fn, shapes):
    es, _ = leaves(make_arrays(shapes, 5, 0.3, 1.2))
    assert gradgradcheck(fn, tuple(es))


def test_hessian_of_cube_matches_torch():
    arrays = make_arrays([(3,)], 2)
    (ex,), (tx,) = leaves(arrays)
    (eg,) = ember.autograd.grad((ex ** 3).sum(), [ex], create_graph=True)
    (tg,) = torch.autograd.grad((tx ** 3).sum(), [tx], create_graph=True)
    (egg,) = ember.autograd.grad(eg.sum(), [ex])
    (tgg,) = torch.autograd.grad(tg.sum(), [tx])
    np.testing.assert_allclose(egg.numpy(), tgg.numpy())
