"""nn.init: gains, fan rules, errors, and the statistics of every initializer (not PyTorch's exact numbers)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from nn_layer_helpers import to_np

import ember
import ember.nn as enn
from ember.nn import init

N = 20000  # samples for the statistical checks: sampling error of a std is ~0.5%


@pytest.mark.parametrize("nonlinearity,param", [
    ("linear", None), ("conv1d", None), ("conv2d", None), ("conv3d", None), ("conv_transpose1d", None),
    ("conv_transpose2d", None), ("conv_transpose3d", None), ("sigmoid", None), ("tanh", None), ("relu", None),
    ("leaky_relu", None), ("leaky_relu", 0.2), ("leaky_relu", 3), ("leaky_relu", math.sqrt(5)), ("selu", None),
])
def test_calculate_gain_matches_torch(nonlinearity, param):
    assert init.calculate_gain(nonlinearity, param) == torch.nn.init.calculate_gain(nonlinearity, param)


@pytest.mark.parametrize("nonlinearity,param", [("softmax", None), ("leaky_relu", True), ("leaky_relu", "0.1"),
                                                ("leaky_relu", [0.1])])
def test_calculate_gain_errors(nonlinearity, param):
    with pytest.raises(ValueError):
        torch.nn.init.calculate_gain(nonlinearity, param)
    with pytest.raises(ValueError):
        init.calculate_gain(nonlinearity, param)


@pytest.mark.parametrize("shape", [(3, 5), (4, 3, 2), (6, 2, 3, 3), (2, 4, 1, 2, 3), (0, 3)])
def test_fans_match_torch(shape):
    expected = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    assert init._calculate_fan_in_and_fan_out(ember.empty(shape)) == expected
    for mode in ("fan_in", "fan_out", "FAN_IN"):
        assert init._calculate_correct_fan(ember.empty(shape), mode) == \
            torch.nn.init._calculate_correct_fan(torch.empty(shape), mode)


def _both_raise(exc, fn):
    with pytest.raises(exc):
        fn(torch.nn.init, torch)
    with pytest.raises(exc):
        fn(init, ember)


@pytest.mark.parametrize("fn", [
    lambda i, m: i._calculate_fan_in_and_fan_out(m.empty(3)),
    lambda i, m: i.xavier_uniform_(m.empty(3)),
    lambda i, m: i.kaiming_normal_(m.empty(())),
    lambda i, m: i.kaiming_uniform_(m.empty(3, 4), mode="fan_avg"),
    lambda i, m: i.kaiming_uniform_(m.empty(3, 4), nonlinearity="softmax"),
    lambda i, m: i.eye_(m.empty(2, 2, 2)),
    lambda i, m: i.dirac_(m.empty(3, 3)),
    lambda i, m: i.dirac_(m.empty(3, 2, 3), groups=2),
    lambda i, m: i.orthogonal_(m.empty(4)),
    lambda i, m: i.sparse_(m.empty(2, 3, 4), 0.5),
], ids=["fan-1d", "xavier-1d", "kaiming-0d", "kaiming-mode", "kaiming-nonlin", "eye-3d", "dirac-2d",
        "dirac-groups", "orthogonal-1d", "sparse-3d"])
def test_init_errors(fn):
    _both_raise(ValueError, fn)


def _stats(t):
    a = to_np(t).astype(np.float64).ravel()
    return a.mean(), a.std(), a.min(), a.max()


def _uniform_check(t, low, high):
    mean, std, lo, hi = _stats(t)
    assert low <= lo and hi <= high
    width = high - low
    assert abs(mean - (low + high) / 2) < 0.03 * width
    assert abs(std - width / math.sqrt(12)) < 0.02 * width / math.sqrt(12)
    # The whole range is used.
    assert lo < low + 0.01 * width and hi > high - 0.01 * width


def _normal_check(t, mu, sigma):
    mean, std, _, _ = _stats(t)
    assert abs(mean - mu) < 0.03 * sigma
    assert abs(std - sigma) < 0.03 * sigma


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_uniform_and_normal(dtype):
    t = ember.empty(N, dtype=getattr(ember, dtype))
    assert init.uniform_(t, -2.0, 5.0) is t
    _uniform_check(t, -2.0, 5.0)
    _uniform_check(init.uniform_(t), 0.0, 1.0)
    assert init.normal_(t, 3.0, 0.5) is t
    _normal_check(t, 3.0, 0.5)
    _normal_check(init.normal_(t), 0.0, 1.0)


@pytest.mark.parametrize("mean,std,a,b", [(0.0, 1.0, -2.0, 2.0), (1.0, 2.0, 0.0, 2.0), (0.0, 0.02, -0.04, 0.04)])
def test_trunc_normal_statistics(mean, std, a, b):
    t = init.trunc_normal_(ember.empty(N, dtype=ember.float64), mean, std, a, b)
    m, s, lo, hi = _stats(t)
    assert a <= lo and hi <= b
    # Moments of the truncated normal.
    alpha, beta = (a - mean) / std, (b - mean) / std
    pdf = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda x: (1 + math.erf(x / math.sqrt(2))) / 2  # noqa: E731
    z = cdf(beta) - cdf(alpha)
    tm = mean + std * (pdf(alpha) - pdf(beta)) / z
    tv = std ** 2 * (1 + (alpha * pdf(alpha) - beta * pdf(beta)) / z - ((pdf(alpha) - pdf(beta)) / z) ** 2)
    assert abs(m - tm) < 0.03 * std
    assert abs(s - math.sqrt(tv)) < 0.03 * math.sqrt(tv)


def test_trunc_normal_far_mean_warns():
    with pytest.warns(UserWarning, match="more than 2 std"):
        init.trunc_normal_(ember.empty(10), mean=10.0, std=1.0, a=-2.0, b=2.0)


@pytest.mark.parametrize("shape", [(200, 100), (50, 40, 2, 3)])
@pytest.mark.parametrize("gain", [1.0, 2.5])
def test_xavier_statistics(shape, gain):
    t = ember.empty(shape)
    fan_in, fan_out = init._calculate_fan_in_and_fan_out(t)
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    _uniform_check(init.xavier_uniform_(t, gain), -math.sqrt(3) * std, math.sqrt(3) * std)
    _normal_check(init.xavier_normal_(t, gain=gain), 0.0, std)


@pytest.mark.parametrize("shape", [(200, 100), (60, 30, 3, 3)])
@pytest.mark.parametrize("a,mode,nonlinearity", [(0, "fan_in", "leaky_relu"), (math.sqrt(5), "fan_in", "leaky_relu"),
                                                 (0, "fan_out", "relu"), (0.2, "fan_out", "leaky_relu"),
                                                 (0, "fan_in", "tanh")])
def test_kaiming_statistics(shape, a, mode, nonlinearity):
    t = ember.empty(shape)
    fan = init._calculate_correct_fan(t, mode)
    std = init.calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    _uniform_check(init.kaiming_uniform_(t, a, mode, nonlinearity), -bound, bound)
    _normal_check(init.kaiming_normal_(t, a, mode, nonlinearity), 0.0, std)


def test_kaiming_zero_element_warns():
    for fn in (init.kaiming_uniform_, init.kaiming_normal_):
        t = ember.empty(0, 3)
        with pytest.warns(UserWarning, match="zero-element"):
            assert fn(t) is t


def test_linear_default_init_bounds():
    m = enn.Linear(400, 50)
    bound = 1 / math.sqrt(400)
    _uniform_check(m.weight, -bound, bound)
    assert float(m.bias.abs().max()) <= bound


@pytest.mark.parametrize("fn,val", [(init.ones_, 1.0), (init.zeros_, 0.0), (lambda t: init.constant_(t, 2.5), 2.5)])
def test_constant_initializers(fn, val):
    t = ember.empty(3, 4)
    assert fn(t) is t
    np.testing.assert_array_equal(to_np(t), np.full((3, 4), val, np.float32))


@pytest.mark.parametrize("shape", [(3, 3), (2, 5), (5, 2)])
def test_eye_matches_torch(shape):
    t = init.eye_(ember.empty(shape))
    np.testing.assert_array_equal(to_np(t), torch.nn.init.eye_(torch.empty(shape)).numpy())


@pytest.mark.parametrize("shape,groups", [((4, 3, 3), 1), ((4, 2, 3, 3), 2), ((6, 2, 3, 2, 3), 3), ((2, 4, 5), 1),
                                          ((6, 3, 2, 2), 3)])
def test_dirac_matches_torch(shape, groups):
    t = init.dirac_(ember.empty(shape), groups)
    np.testing.assert_array_equal(to_np(t), torch.nn.init.dirac_(torch.empty(shape), groups).numpy())


@pytest.mark.parametrize("shape", [(6, 6), (4, 9), (9, 4), (3, 2, 2, 2)])
@pytest.mark.parametrize("gain", [1.0, 0.5])
def test_orthogonal(shape, gain):
    t = init.orthogonal_(ember.empty(shape, dtype=ember.float64), gain)
    a = to_np(t).reshape(shape[0], -1)
    gram = a @ a.T if a.shape[0] <= a.shape[1] else a.T @ a
    np.testing.assert_allclose(gram, gain ** 2 * np.eye(gram.shape[0]), atol=1e-10)


def test_orthogonal_is_random_and_uses_the_generator():
    g1, g2 = ember.Generator().manual_seed(5), ember.Generator().manual_seed(5)
    a = init.orthogonal_(ember.empty(4, 4), generator=g1)
    b = init.orthogonal_(ember.empty(4, 4), generator=g2)
    np.testing.assert_array_equal(to_np(a), to_np(b))
    c = init.orthogonal_(ember.empty(4, 4), generator=g1)
    assert not np.array_equal(to_np(a), to_np(c))


@pytest.mark.parametrize("sparsity", [0.1, 0.5])
def test_sparse(sparsity):
    rows, cols, std = 40, 300, 0.05
    t = init.sparse_(ember.empty(rows, cols), sparsity, std)
    a = to_np(t)
    zeros_per_col = (a == 0).sum(0)
    assert np.all(zeros_per_col == math.ceil(sparsity * rows))
    nonzero = a[a != 0]
    assert abs(nonzero.std() - std) < 0.03 * std and abs(nonzero.mean()) < 0.03 * std


@pytest.mark.parametrize("name,args", [("uniform_", (-1.0, 1.0)), ("normal_", (0.0, 1.0)), ("xavier_uniform_", ()),
                                       ("xavier_normal_", ()), ("kaiming_uniform_", ()), ("kaiming_normal_", ()),
                                       ("trunc_normal_", ()), ("orthogonal_", ())])
def test_generator_reproducible(name, args):
    fn = getattr(init, name)
    a = fn(ember.empty(8, 6), *args, generator=ember.Generator().manual_seed(3))
    b = fn(ember.empty(8, 6), *args, generator=ember.Generator().manual_seed(3))
    np.testing.assert_array_equal(to_np(a), to_np(b))


def test_init_of_parameters_records_no_graph():
    p = enn.Parameter(ember.empty(5, 4))
    for fn in (init.uniform_, init.normal_, init.xavier_uniform_, init.kaiming_normal_, init.trunc_normal_,
               init.orthogonal_, init.ones_, init.zeros_, init.eye_, lambda t: init.constant_(t, 1.0)):
        assert fn(p) is p
        assert p.requires_grad and p.grad_fn is None and p.is_leaf


@pytest.mark.parametrize("old,new", [("uniform", "uniform_"), ("normal", "normal_"), ("constant", "constant_"),
                                     ("eye", "eye_"), ("dirac", "dirac_"), ("xavier_uniform", "xavier_uniform_"),
                                     ("xavier_normal", "xavier_normal_"), ("kaiming_uniform", "kaiming_uniform_"),
                                     ("kaiming_normal", "kaiming_normal_"), ("orthogonal", "orthogonal_"),
                                     ("sparse", "sparse_")])
def test_deprecated_aliases_warn(old, new):
    args = {"constant": (1.0,), "sparse": (0.5,)}.get(old, ())
    shape = (3, 3, 3) if old == "dirac" else (3, 3)
    with pytest.warns(FutureWarning, match=f"nn.init.{old}` is now deprecated"):
        t = getattr(init, old)(ember.empty(shape), *args)
    assert tuple(t.shape) == shape
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        getattr(init, new)(ember.empty(shape), *args)


@pytest.mark.parametrize("args", [(), (0.0, 1.0, -2.0, 2.0), (0.0, 1.0, 1.0, 3.0), (0.5, 0.02, -0.04, 0.04)])
def test_seeded_init_matches_torch(args):
    # The CPU generator is PyTorch's: seeded initializers give torch's exact values, and
    # trunc_normal_ follows PyTorch's rejection sampler (both of its regimes).
    torch.manual_seed(0)
    ember.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = torch.nn.init.trunc_normal_(torch.empty(30, 40), *args)
        e = init.trunc_normal_(ember.empty(30, 40), *args)
    np.testing.assert_array_equal(to_np(e), t.numpy())
    torch.manual_seed(1)
    ember.manual_seed(1)
    tm, em = torch.nn.Linear(10, 5), enn.Linear(10, 5)
    np.testing.assert_array_equal(to_np(em.weight), tm.weight.detach().numpy())
    np.testing.assert_array_equal(to_np(em.bias), tm.bias.detach().numpy())
