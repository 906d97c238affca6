"""``ember.quasirandom.SobolEngine`` against torch 2.13: the same points, scrambled or not."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember

pytest.importorskip("scipy")


def _same(a, b) -> None:
    a, b = a.numpy(), b.numpy()
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dimension, scramble, seed", [
    (d, s, seed) for d in (1, 3, 40, 1111) for s, seed in ((False, None), (True, 0), (True, 123))
] + [(21201, False, None), (21201, True, 0)])
def test_sobol_points_equal_torch(dimension, scramble, seed):
    mine = ember.quasirandom.SobolEngine(dimension, scramble=scramble, seed=seed)
    ref = torch.quasirandom.SobolEngine(dimension, scramble=scramble, seed=seed)
    _same(mine.sobolstate, ref.sobolstate)
    _same(mine.shift, ref.shift)
    for n, dtype in ((1, None), (5, "float64"), (7, None), (0, None), (33, "float64")):
        _same(mine.draw(n, dtype=dtype and getattr(ember, dtype)), ref.draw(n, dtype=dtype and getattr(torch, dtype)))
    assert mine.num_generated == ref.num_generated == 46
    mine.fast_forward(13)
    ref.fast_forward(13)
    _same(mine.draw(10), ref.draw(10))
    _same(mine.quasi, ref.quasi)
    mine.reset().fast_forward(4)
    ref.reset().fast_forward(4)
    _same(mine.draw_base2(2), ref.draw_base2(2))


def test_first_point_of_a_float64_draw_is_rounded_to_the_default_dtype_as_torch():
    mine = ember.quasirandom.SobolEngine(4, scramble=True, seed=3).draw(3, dtype=ember.float64)
    ref = torch.quasirandom.SobolEngine(4, scramble=True, seed=3).draw(3, dtype=torch.float64)
    _same(mine, ref)
    first = mine[0].numpy()
    np.testing.assert_array_equal(first, first.astype(np.float32).astype(np.float64))


def test_fast_forward_from_the_start_and_by_zero():
    for skip in (0, 1, 2, 9):
        mine = ember.quasirandom.SobolEngine(6).fast_forward(skip)
        ref = torch.quasirandom.SobolEngine(6).fast_forward(skip)
        assert mine.num_generated == ref.num_generated
        _same(mine.draw(5), ref.draw(5))


def test_scramble_without_seed_uses_the_global_generator():
    ember.manual_seed(5)
    torch.manual_seed(5)
    mine = ember.quasirandom.SobolEngine(7, scramble=True)
    ref = torch.quasirandom.SobolEngine(7, scramble=True)
    _same(mine.draw(9), ref.draw(9))
    a = ember.quasirandom.SobolEngine(7, scramble=True, seed=11).draw(16)
    b = ember.quasirandom.SobolEngine(7, scramble=True, seed=11).draw(16)
    c = ember.quasirandom.SobolEngine(7, scramble=True, seed=12).draw(16)
    _same(a, b)
    assert not np.array_equal(a.numpy(), c.numpy())


@pytest.mark.parametrize("scramble", [False, True])
def test_balance_property_one_point_per_elementary_interval(scramble):
    m = 6
    points = ember.quasirandom.SobolEngine(12, scramble=scramble, seed=1).draw_base2(m, dtype=ember.float64).numpy()
    assert points.min() >= 0 and points.max() < 1
    for d in range(12):  # every coordinate puts one point in each [k/2**m, (k+1)/2**m)
        assert sorted(np.floor(points[:, d] * 2**m).astype(int)) == list(range(2**m))
    if scramble:
        assert abs(points.mean() - 0.5) < 0.02


def test_out_reset_and_repr():
    out = ember.empty(0, dtype=ember.float64)
    engine = ember.quasirandom.SobolEngine(2)
    got = engine.draw(3, out=out)
    assert got is out and out.shape == (3, 2) and out.dtype == ember.float64
    _same(out, torch.quasirandom.SobolEngine(2).draw(3, out=torch.empty(0, dtype=torch.float64)))
    first = engine.reset().draw(4)
    _same(first, torch.quasirandom.SobolEngine(2).draw(4))
    for args in ((3,), (3, True, 4), (3, False, 4), (3, True)):
        assert repr(ember.quasirandom.SobolEngine(*args)) == repr(torch.quasirandom.SobolEngine(*args))


def _error(fn_ember, fn_torch):
    with pytest.raises(Exception) as want:
        fn_torch()
    with pytest.raises(type(want.value)) as got:
        fn_ember()
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("case", ["dim0", "dim_big", "draw0_fresh", "draw_neg", "long", "half", "bfloat16", "base2"])
def test_errors_as_torch(case):
    def run(lib):
        engine_cls = lib.quasirandom.SobolEngine
        if case == "dim0":
            return engine_cls(0)
        if case == "dim_big":
            return engine_cls(21202)
        if case == "draw0_fresh":
            return engine_cls(2).draw(0)
        if case == "draw_neg":
            return engine_cls(2).draw(-1)
        if case in ("long", "half", "bfloat16"):
            return engine_cls(2).draw(2, dtype=getattr(lib, "int64" if case == "long" else case))
        engine = engine_cls(2)
        engine.draw(3)
        return engine.draw_base2(2)

    _error(lambda: run(ember), lambda: run(torch))
