"""diff, quantile/nanquantile, cov/corrcoef, histogram, dist, pdist and logcumsumexp vs torch."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from mathfns_helpers import LAYOUTS, grads_match, pair

import ember

from conftest import assert_same, torch

# -- diff ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int8", "bool", "float16"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_diff_dtypes_layouts(dtype, layout):
    e, t = pair((4, 5), dtype, layout)
    assert_same(ember.diff(e), torch.diff(t))
    assert_same(ember.diff(e, n=2, dim=0), torch.diff(t, n=2, dim=0))
    assert_same(e.diff(dim=-2), t.diff(dim=-2))


@pytest.mark.parametrize("n", [0, 1, 3, 7])
def test_diff_prepend_append_and_large_n(n):
    e, t = pair((3, 4))
    ep, tp = pair((3, 2), seed=1)
    ea, ta = pair((3, 1), seed=2)
    assert_same(ember.diff(e, n, 1, ep, ea), torch.diff(t, n, 1, tp, ta))
    assert_same(ember.diff(e, n, 0, prepend=e[:1]), torch.diff(t, n, 0, prepend=t[:1]))


def test_diff_empty_and_out():
    e, t = pair((0, 3))
    assert_same(ember.diff(e, dim=0), torch.diff(t, dim=0))
    out = ember.empty(0)
    ember.diff(ember.tensor([1.0, 4.0, 9.0]), out=out)
    assert out.tolist() == [3.0, 5.0]


def test_diff_errors():
    with pytest.raises(RuntimeError, match="at least one-dimensional"):
        ember.diff(ember.tensor(1.0))
    with pytest.raises(RuntimeError, match="non-negative"):
        ember.diff(ember.ones(3), n=-1)
    with pytest.raises(TypeError):
        ember.diff(ember.ones(3), prepend=1)
    with pytest.raises(RuntimeError, match="same dimension"):
        ember.diff(ember.ones(2, 2), prepend=ember.ones(2))
    with pytest.raises(IndexError):
        ember.diff(ember.ones(2), dim=1)


def test_diff_grad():
    grads_match(lambda m, x, p: m.diff(x, n=2, dim=1, prepend=p), [np.random.rand(3, 4), np.random.rand(3, 1)])


# -- quantile ------------------------------------------------------------------------------------------

MODES = ["linear", "lower", "higher", "midpoint", "nearest"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dim, keepdim", [(None, False), (None, True), (0, False), (1, True), (-1, False)])
def test_quantile_modes_dims(mode, dim, keepdim):
    e, t = pair((4, 7), "float64", "transposed")
    for q in (0.0, 0.35, 1.0):
        assert_same(ember.quantile(e, q, dim, keepdim, interpolation=mode),
                    torch.quantile(t, q, dim, keepdim, interpolation=mode))
    qs = [0.1, 0.5, 0.9, 0.25]
    assert_same(e.quantile(ember.tensor(qs, dtype=ember.float64), dim, keepdim, interpolation=mode),
                t.quantile(torch.tensor(qs, dtype=torch.float64), dim, keepdim, interpolation=mode))


@pytest.mark.parametrize("mode", MODES)
def test_quantile_nan_rows(mode):
    x = np.array([[1.0, np.nan, 3.0, 2.0], [np.nan] * 4, [4.0, 1.0, 2.0, 0.5]], dtype=np.float32)
    e, t = ember.tensor(x), torch.tensor(x)
    for fn in ("quantile", "nanquantile"):
        assert_same(getattr(ember, fn)(e, 0.4, 1, interpolation=mode),
                    getattr(torch, fn)(t, 0.4, 1, interpolation=mode))
        assert_same(getattr(ember, fn)(e, ember.tensor([0.3, 0.8]), interpolation=mode),
                    getattr(torch, fn)(t, torch.tensor([0.3, 0.8]), interpolation=mode))


def test_quantile_0d_and_0d_q():
    assert_same(ember.quantile(ember.tensor(2.5), 0.3), torch.quantile(torch.tensor(2.5), 0.3))
    assert_same(ember.quantile(ember.tensor(2.5), 0.3, dim=0, keepdim=True),
                torch.quantile(torch.tensor(2.5), 0.3, dim=0, keepdim=True))
    e, t = pair((5,))
    assert_same(ember.quantile(e, ember.tensor(0.7)), torch.quantile(t, torch.tensor(0.7)))


def test_quantile_errors():
    x = ember.ones(3)
    with pytest.raises(RuntimeError, match="float or double"):
        ember.quantile(ember.ones(3, dtype=ember.int64), 0.5)
    with pytest.raises(RuntimeError, match="range"):
        ember.quantile(x, 1.5)
    with pytest.raises(RuntimeError, match="range"):
        ember.quantile(x, ember.tensor([0.5, -0.1]))
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.quantile(x, ember.tensor([0.5], dtype=ember.float64))
    with pytest.raises(RuntimeError, match="scalar or 1D"):
        ember.quantile(x, ember.tensor([[0.5]]))
    with pytest.raises(RuntimeError, match="interpolation"):
        ember.quantile(x, 0.5, interpolation="cubic")
    with pytest.raises(RuntimeError, match="non-empty"):
        ember.quantile(ember.ones(0), 0.5)
    with pytest.raises(IndexError):
        ember.quantile(x, 0.5, dim=1)


def test_quantile_grad():
    grads_match(lambda m, x: m.quantile(x, m.tensor([0.2, 0.75], dtype=m.float64), dim=1),
                [np.random.default_rng(0).random((3, 6))])
    grads_match(lambda m, x: m.nanquantile(x, 0.4, interpolation="midpoint"), [np.random.default_rng(1).random(7)])


# -- cov / corrcoef ------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, 6), (6,), (1, 4), (2, 1)])
@pytest.mark.parametrize("correction", [0, 1, 2])
def test_cov_shapes(shape, correction):
    e, t = pair(shape, "float64", "sliced" if len(shape) == 2 else "contiguous")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(ember.cov(e, correction=correction), torch.cov(t, correction=correction))
        assert_same(e.corrcoef(), t.corrcoef())


def test_cov_weights_and_int_input():
    e, t = pair((3, 5), "float32", "transposed")
    fw, aw = [2, 1, 0, 3, 1], [0.5, 1.0, 2.0, 0.25, 1.0]
    for kwargs in ({"fweights": fw}, {"aweights": aw}, {"fweights": fw, "aweights": aw, "correction": 0}):
        ek = {k: ember.tensor(v) for k, v in kwargs.items() if k != "correction"}
        tk = {k: torch.tensor(v) for k, v in kwargs.items() if k != "correction"}
        c = kwargs.get("correction", 1)
        assert_same(ember.cov(e, correction=c, **ek), torch.cov(t, correction=c, **tk))
    ei, ti = pair((2, 4), "int64")
    assert_same(ember.cov(ei), torch.cov(ti))
    assert_same(ember.corrcoef(ei), torch.corrcoef(ti))


def test_cov_errors_and_warning():
    x = ember.ones(2, 3)
    with pytest.raises(RuntimeError, match="two or fewer"):
        ember.cov(ember.ones(2, 2, 2))
    with pytest.raises(RuntimeError, match="integral"):
        ember.cov(x, fweights=ember.ones(3))
    with pytest.raises(RuntimeError, match="negative"):
        ember.cov(x, fweights=ember.tensor([1, -1, 1]))
    with pytest.raises(RuntimeError, match="same numel"):
        ember.cov(x, fweights=ember.tensor([1, 1]))
    with pytest.raises(RuntimeError, match="floating point"):
        ember.cov(x, aweights=ember.tensor([1, 1, 1]))
    with pytest.raises(RuntimeError, match="one or fewer"):
        ember.cov(x, aweights=ember.ones(1, 3))
    with pytest.warns(UserWarning, match="degrees of freedom"):
        ember.cov(ember.ones(1), correction=1)


def test_cov_corrcoef_grad():
    rng = np.random.default_rng(2)
    grads_match(lambda m, x, w: m.cov(x, aweights=w, correction=1), [rng.random((3, 5)), rng.random(5) + 0.5])
    grads_match(lambda m, x: m.corrcoef(x), [rng.random((3, 5))])


# -- dist / pdist --------------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [0, 1, 2, 3.5, float("inf"), -float("inf")])
def test_dist(p):
    e, t = pair((3, 4), "float64", "transposed")
    e2, t2 = pair((4,), "float64", seed=3)
    assert_same(ember.dist(e, e2, p), torch.dist(t, t2, p))
    assert_same(e.dist(e2, p), t.dist(t2, p))


@pytest.mark.parametrize("p", [0, 1, 2, 3.0, float("inf")])
@pytest.mark.parametrize("rows", [0, 1, 2, 5])
def test_pdist(p, rows):
    e, t = pair((rows, 3), "float64")
    assert_same(ember.pdist(e, p), torch.pdist(t, p))


def test_pdist_dist_errors_and_grad():
    with pytest.raises(RuntimeError, match="2D"):
        ember.pdist(ember.ones(3))
    with pytest.raises(RuntimeError, match="floating"):
        ember.pdist(ember.ones(2, 2, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="non-negative"):
        ember.pdist(ember.ones(2, 2), -1)
    with pytest.raises(RuntimeError):
        ember.dist(ember.ones(2, dtype=ember.int64), ember.ones(2, dtype=ember.int64))
    rng = np.random.default_rng(3)
    grads_match(lambda m, x: m.pdist(x), [rng.random((4, 3))])
    grads_match(lambda m, x, y: m.dist(x, y, 3), [rng.random((2, 3)), rng.random(3)])


# -- histogram -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("density", [False, True])
def test_histogram_int_bins(dtype, density):
    e, t = pair((4, 6), dtype, "transposed")
    for bins, rng in ((5, None), (3, (-1.0, 2.0)), (1, None), (4, (0.0, 0.0))):
        assert_same(ember.histogram(e, bins, range=rng, density=density),
                    torch.histogram(t, bins, range=rng, density=density))
    w_e, w_t = pair((4, 6), dtype, seed=5, low=0, high=2)
    assert_same(e.histogram(3, weight=w_e, density=density), t.histogram(3, weight=w_t, density=density))


def test_histogram_tensor_bins_edges_and_empty():
    x = [0.0, 1.0, 1.0, 2.5, 3.0, -1.0, 7.0]
    edges = [0.0, 1.0, 2.5, 3.0]
    assert_same(ember.histogram(ember.tensor(x), ember.tensor(edges)),
                torch.histogram(torch.tensor(x), torch.tensor(edges)))
    assert_same(ember.histogram(ember.tensor([]), 3), torch.histogram(torch.tensor([]), 3))
    assert_same(ember.histogram(ember.tensor(2.0), 2), torch.histogram(torch.tensor(2.0), 2))


def test_histogram_errors():
    with pytest.raises(NotImplementedError):
        ember.histogram(ember.tensor([1, 2]), 3)
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.histogram(ember.tensor([1.0]), ember.tensor([0.0, 1.0], dtype=ember.float64))
    with pytest.raises(RuntimeError, match="min should not exceed max"):
        ember.histogram(ember.tensor([1.0]), 3, range=(2.0, 1.0))
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        ember.histogram(ember.tensor([1.0]), 0)
    with pytest.raises(RuntimeError, match="not finite"):
        ember.histogram(ember.tensor([1.0, float("inf")]), 3)
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.histogram(ember.tensor([1.0]), 3, weight=ember.tensor([1]))


# -- logcumsumexp ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_logcumsumexp(dtype, layout, dim):
    e, t = pair((4, 5), dtype, layout, low=-40, high=40)
    assert_same(ember.logcumsumexp(e, dim), torch.logcumsumexp(t, dim))
    assert_same(e.logcumsumexp(dim), t.logcumsumexp(dim))


def test_logcumsumexp_special_values_and_shapes():
    x = [-float("inf"), -1000.0, 0.0, float("inf"), 3.0, float("nan"), 1.0]
    assert_same(ember.logcumsumexp(ember.tensor(x), 0), torch.logcumsumexp(torch.tensor(x), 0))
    assert_same(ember.logcumsumexp(ember.tensor(1.5), 0), torch.logcumsumexp(torch.tensor(1.5), 0))
    assert_same(ember.logcumsumexp(ember.ones(0, 3), 0), torch.logcumsumexp(torch.ones(0, 3), 0))
    out = ember.empty(2)
    ember.logcumsumexp(ember.tensor([0.0, 0.0]), 0, out=out)
    assert_same(out, torch.logcumsumexp(torch.tensor([0.0, 0.0]), 0))


def test_logcumsumexp_errors_and_grad():
    with pytest.raises(NotImplementedError):
        ember.logcumsumexp(ember.tensor([1, 2]), 0)
    with pytest.raises(IndexError):
        ember.logcumsumexp(ember.tensor(1.0), 1)
    rng = np.random.default_rng(4)
    grads_match(lambda m, x: m.logcumsumexp(x, 1), [rng.normal(size=(3, 5)) * 5])
    grads_match(lambda m, x: m.logcumsumexp(x, 0), [np.array([-50.0, 0.0, 40.0, 1.0])])


@pytest.mark.parametrize("call", [
    lambda lib: lib.tensor([1, 2]).nanquantile(0.5),
    lambda lib: lib.tensor([]).nanquantile(0.5),
    lambda lib: lib.tensor([1.0]).nanquantile(2.0),
    lambda lib: lib.tensor([1.0]).nanquantile(lib.ones(2, 2)),
])
def test_nanquantile_checks_say_quantile_as_pytorch(call):
    # PyTorch's checks are shared and always name quantile(); ember named nanquantile()
    raised = []
    for lib in (torch, ember):
        with pytest.raises(RuntimeError) as info:
            call(lib)
        raised.append(str(info.value))
    assert raised[1] == raised[0]
