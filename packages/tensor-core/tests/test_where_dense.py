"""where() on dense operands and single-element ones (the vectorized path), against torch."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import ember

from conftest import assert_same, make_pair


@pytest.mark.parametrize("name", ["float32", "float64", "int64", "int32", "int16", "bool", "float16", "bfloat16"])
@pytest.mark.parametrize("single", list(itertools.product([False, True], repeat=3)),
                         ids=lambda s: "".join("1" if x else "n" for x in s))
def test_where_dense_and_single(name, single):
    shape = (5, 7)
    rng = np.random.default_rng(0)
    cond = rng.integers(0, 2, (1,) if single[0] else shape).astype(bool)
    a_e, a_t = make_pair(() if single[1] else shape, name, seed=1)
    b_e, b_t = make_pair((1, 1) if single[2] else shape, name, seed=2)
    assert_same(ember.where(ember.tensor(cond), a_e, b_e), torch.where(torch.tensor(cond), a_t, b_t))


def test_where_keeps_special_values_bit_exact():
    x = np.array([np.nan, -0.0, np.inf, -np.inf, 1e-45, -1.5], dtype=np.float32)
    cond = np.array([True, True, True, False, True, False])
    got = ember.where(ember.tensor(cond), ember.tensor(x), ember.zeros(())).numpy()
    want = np.where(cond, x, np.float32(0))
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("layout", ["transposed", "sliced", "expanded"])
def test_where_strided_operands_take_the_general_path(layout):
    a_e, a_t = make_pair((4, 6), "float64", layout=layout)
    c = np.random.default_rng(3).integers(0, 2, (4, 6)).astype(bool)
    assert_same(ember.where(ember.tensor(c), a_e, 0.5), torch.where(torch.tensor(c), a_t, 0.5))
