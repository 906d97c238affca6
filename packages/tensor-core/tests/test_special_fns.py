"""i0 / special.i1, igamma / igammac, frexp, sinc and ldexp vs torch."""

from __future__ import annotations

import numpy as np
import pytest
from mathfns_helpers import LAYOUTS, grads_match, pair

import ember

from conftest import assert_same, torch

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "bool"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_bessel(dtype, layout):
    e, t = pair((3, 4), dtype, layout, low=-30, high=30)
    assert_same(ember.i0(e), torch.i0(t), rtol=1e-5 if dtype == "float32" else None,
                atol=1e-5 if dtype == "float32" else None)
    assert_same(e.i0(), t.i0(), rtol=1e-5 if dtype == "float32" else None, atol=1e-5 if dtype == "float32" else None)
    assert_same(ember.special.i0(e), torch.special.i0(t), rtol=1e-5 if dtype == "float32" else None,
                atol=1e-5 if dtype == "float32" else None)
    assert_same(ember.special.i1(e), torch.special.i1(t), rtol=1e-5 if dtype == "float32" else None,
                atol=1e-5 if dtype == "float32" else None)


def test_bessel_special_values_inplace_and_out():
    x = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 700.0, -720.0, 1e-300]
    for fn in ("i0", "i1"):
        assert_same(getattr(ember.special, fn)(ember.tensor(x, dtype=ember.float64)),
                    getattr(torch.special, fn)(torch.tensor(x, dtype=torch.float64)))
    e, t = pair((2, 3), "float64")
    assert_same(e.clone().i0_(), t.clone().i0_())
    out = ember.empty(0, dtype=ember.float64)
    ember.i0(e, out=out)
    assert_same(out, torch.i0(t))
    with pytest.raises(RuntimeError, match="can't be cast"):
        ember.ones(2, dtype=ember.int64).i0_()
    with pytest.raises(NotImplementedError):
        ember.i0(ember.ones(2, dtype=ember.complex64))
    assert_same(ember.i0(ember.ones(0)), torch.i0(torch.ones(0)))


def test_bessel_grads():
    x = np.array([-3.0, -0.5, 0.0, 1e-20, 0.7, 4.0])
    grads_match(lambda m, a: m.i0(a), [x])
    grads_match(lambda m, a: m.special.i1(a), [x])


@pytest.mark.parametrize("fn", ["igamma", "igammac"])
@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("float64", "float64"), ("float32", "float64"),
                                    ("float16", "float16"), ("bfloat16", "bfloat16")])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_igamma(fn, dtypes, layout):
    a_e, a_t = pair((3, 4), dtypes[0], layout, low=0.1, high=12)
    x_e, x_t = pair((4,), dtypes[1], low=0.0, high=20, seed=2)
    tol = {"rtol": 1e-4, "atol": 1e-6} if "float32" in dtypes else {}
    assert_same(getattr(ember, fn)(a_e, x_e), getattr(torch, fn)(a_t, x_t), **tol)
    assert_same(getattr(a_e, fn)(x_e), getattr(a_t, fn)(x_t), **tol)
    special = {"igamma": "gammainc", "igammac": "gammaincc"}[fn]
    assert_same(getattr(ember.special, special)(a_e, x_e), getattr(torch.special, special)(a_t, x_t), **tol)


def test_igamma_special_values_and_errors():
    inf, nan = float("inf"), float("nan")
    a = [0.0, 0.0, 1.0, -1.0, 1.0, inf, inf, 2.0, nan, 1.0, 0.5, 50.0, 200.0, 1e-3]
    x = [0.0, 1.0, -1.0, 1.0, 0.0, 1.0, inf, inf, 1.0, nan, 1e-8, 45.0, 230.0, 1e3]
    for fn in ("igamma", "igammac"):
        assert_same(getattr(ember, fn)(ember.tensor(a, dtype=ember.float64), ember.tensor(x, dtype=ember.float64)),
                    getattr(torch, fn)(torch.tensor(a, dtype=torch.float64), torch.tensor(x, dtype=torch.float64)),
                    rtol=1e-8, atol=1e-12)
    with pytest.raises(NotImplementedError):
        ember.igamma(ember.ones(2, dtype=ember.int64), ember.ones(2, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="can't be cast"):
        ember.ones(2, dtype=ember.int64).igamma_(ember.ones(2, dtype=ember.float64))
    narrow = ember.ones(2, dtype=ember.float32).igamma_(ember.full((2,), 0.5, dtype=ember.float64))
    assert_same(narrow, torch.ones(2).igamma_(torch.full((2,), 0.5, dtype=torch.float64)))
    e = ember.tensor([1.0, 2.0])
    e.igammac_(ember.tensor([0.5, 0.5]))
    assert_same(e, torch.igammac(torch.tensor([1.0, 2.0]), torch.tensor([0.5, 0.5])))


def test_igamma_grads():
    a, x = np.array([0.5, 1.5, 4.0]), np.array([0.3, 2.0, 5.5])
    es = [ember.tensor(a), ember.tensor(x, requires_grad=True)]
    ts = [torch.tensor(a), torch.tensor(x, requires_grad=True)]
    for fn in ("igamma", "igammac"):
        (ge,) = ember.autograd.grad(getattr(ember, fn)(*es).sum(), es[1])
        (gt,) = torch.autograd.grad(getattr(torch, fn)(*ts).sum(), ts[1])
        np.testing.assert_allclose(ge.numpy(), gt.numpy(), rtol=1e-10)
    with pytest.raises(RuntimeError, match="not implemented"):
        ember.igamma(ember.tensor(a, requires_grad=True), es[1]).sum().backward()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_frexp(dtype, layout):
    e, t = pair((3, 4), dtype, layout, low=-1000, high=1000)
    assert_same(ember.frexp(e), torch.frexp(t))
    assert_same(e.frexp(), t.frexp())


def test_frexp_special_values_out_grad_and_errors():
    x = [0.0, -0.0, 1.0, -0.75, float("inf"), -float("inf"), float("nan"), 5e-324, 1e308]
    res = ember.frexp(ember.tensor(x, dtype=ember.float64))
    assert_same(res, torch.frexp(torch.tensor(x, dtype=torch.float64)))
    assert res._fields == ("mantissa", "exponent")
    m, ex = ember.empty(0), ember.empty(0, dtype=ember.int32)
    ember.frexp(ember.tensor([8.0]), out=(m, ex))
    assert m.tolist() == [0.5] and ex.tolist() == [4]
    with pytest.raises(RuntimeError, match="floating-point"):
        ember.frexp(ember.tensor([1, 2]))
    grads_match(lambda mod, a: mod.frexp(a).mantissa, [np.array([3.0, -0.1, 100.0])])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_sinc(dtype, layout):
    e, t = pair((3, 4), dtype, layout, low=-3, high=3)
    assert_same(ember.sinc(e), torch.sinc(t))
    assert_same(ember.special.sinc(e), torch.special.sinc(t))
    assert_same(ember.sinc(ember.tensor(0.0)), torch.sinc(torch.tensor(0.0)))


def test_sinc_grad_at_zero_and_inplace():
    grads_match(lambda m, a: m.sinc(a), [np.array([0.0, 0.25, -1.5, 2.0])])
    e, t = pair((4,), "float64")
    assert_same(e.clone().sinc_(), t.clone().sinc_())


@pytest.mark.parametrize("dtypes", [("float32", "int64"), ("float64", "int32"), ("int64", "int64"),
                                    ("float16", "int8"), ("float32", "float32")])
def test_ldexp(dtypes):
    e, t = pair((3, 4), dtypes[0], "transposed")
    oe, ot = pair((4,), dtypes[1], low=-4, high=5, seed=3)
    assert_same(ember.ldexp(e, oe), torch.ldexp(t, ot))
    assert_same(e.ldexp(oe), t.ldexp(ot))
    if dtypes[0] == "float32":
        assert_same(e.clone().ldexp_(oe), t.clone().ldexp_(ot))
    grads_match(lambda m, a, b: m.ldexp(a, b), [np.array([1.5, -2.0]), np.array([2.0, -1.0])])
