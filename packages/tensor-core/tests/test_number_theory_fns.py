"""gcd, lcm and heaviside vs torch."""

from __future__ import annotations

import pytest
from mathfns_helpers import LAYOUTS, pair

import ember

from conftest import assert_same, torch

INTS = ["uint8", "int8", "int16", "int32", "int64"]


@pytest.mark.parametrize("fn", ["gcd", "lcm"])
@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_gcd_lcm(fn, dtype, layout):
    e, t = pair((3, 4), dtype, layout, low=-12, high=13)
    oe, ot = pair((4,), dtype, low=-12, high=13, seed=5)
    assert_same(getattr(ember, fn)(e, oe), getattr(torch, fn)(t, ot))
    assert_same(getattr(e, fn)(oe), getattr(t, fn)(ot))
    ec, tc = e.clone(), t.clone()
    getattr(ec, fn + "_")(oe)
    getattr(tc, fn + "_")(ot)
    assert_same(ec, tc)


def test_gcd_lcm_values_promotion_and_shapes():
    a = [0, 0, 12, -18, 7, -2**63, 2**62, 1]
    b = [0, 5, -8, -12, 21, 0, 2**61, -1]
    for fn in ("gcd", "lcm"):
        assert_same(getattr(ember, fn)(ember.tensor(a), ember.tensor(b)), getattr(torch, fn)(torch.tensor(a),
                                                                                             torch.tensor(b)))
        assert_same(getattr(ember, fn)(ember.tensor([6], dtype=ember.int32), ember.tensor(4)),
                    getattr(torch, fn)(torch.tensor([6], dtype=torch.int32), torch.tensor(4)))
        assert_same(getattr(ember, fn)(ember.ones(0, 3, dtype=ember.int64), ember.ones(3, dtype=ember.int64)),
                    getattr(torch, fn)(torch.ones(0, 3, dtype=torch.int64), torch.ones(3, dtype=torch.int64)))
        assert_same(getattr(ember, fn)(ember.tensor(9), ember.tensor(6)), getattr(torch, fn)(torch.tensor(9),
                                                                                             torch.tensor(6)))
    out = ember.empty(0, dtype=ember.int64)
    ember.gcd(ember.tensor([12]), ember.tensor([18]), out=out)
    assert out.tolist() == [6]


def test_gcd_lcm_errors():
    with pytest.raises(NotImplementedError, match="gcd_cpu"):
        ember.gcd(ember.ones(2), ember.ones(2))
    with pytest.raises(NotImplementedError, match="Bool"):
        ember.lcm(ember.ones(2, dtype=ember.bool), ember.ones(2, dtype=ember.bool))
    with pytest.raises(TypeError):
        ember.gcd(ember.ones(2, dtype=ember.int64), 2)
    narrowed = ember.full((2,), 6, dtype=ember.int32).gcd_(ember.tensor([4, 9]))  # int64 result cast back
    assert_same(narrowed, torch.full((2,), 6, dtype=torch.int32).gcd_(torch.tensor([4, 9])))
    with pytest.raises(RuntimeError, match="single memory location"):
        ember.ones(1, dtype=ember.int64).expand(3).gcd_(ember.tensor([4, 9, 2]))
    with pytest.raises(RuntimeError):
        ember.ones(2, dtype=ember.int64).gcd_(ember.ones(3, 2, dtype=ember.int64))
    with pytest.raises(RuntimeError):
        ember.gcd(ember.ones(2, dtype=ember.int64), ember.ones(3, dtype=ember.int64))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int8", "float16", "bool"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_heaviside(dtype, layout):
    e, t = pair((3, 4), dtype, layout, low=-2, high=3)
    ve, vt = pair((4,), dtype, low=-2, high=3, seed=6)
    assert_same(ember.heaviside(e, ve), torch.heaviside(t, vt))
    assert_same(e.heaviside(ve), t.heaviside(vt))


def test_heaviside_nan_errors_and_no_grad():
    x = [float("nan"), 0.0, -0.0, -float("inf"), 3.0]
    assert_same(ember.heaviside(ember.tensor(x), ember.tensor(0.5)), torch.heaviside(torch.tensor(x),
                                                                                      torch.tensor(0.5)))
    with pytest.raises(RuntimeError, match="different dtypes"):
        ember.heaviside(ember.ones(2), ember.ones(2, dtype=ember.float64))
    with pytest.raises(TypeError):
        ember.heaviside(ember.ones(2), 0.5)
    assert not ember.heaviside(ember.ones(2, requires_grad=True), ember.ones(2)).requires_grad
