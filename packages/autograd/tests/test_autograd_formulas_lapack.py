"""Derivatives of the LAPACK-backed linalg ops (run once the ops exist in tensor-core)."""

from __future__ import annotations

import numpy as np
import pytest
from ag_helpers import grads_match_torch, leaves

import ember
from ember._src.dispatch import OPS
from ember.autograd.gradcheck import gradcheck, gradgradcheck


def _well_conditioned(n, batch=(), seed=0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-0.5, 0.5, batch + (n, n))
    return a + 2 * np.eye(n)


def _spd(m, a):
    return a @ a.mT + m.eye(a.shape[-1], dtype=a.dtype)


CASES = [
    ("det", lambda m, a, b: m.linalg.det(a), "linalg_det"),
    ("slogdet", lambda m, a, b: m.linalg.slogdet(a)[1], "linalg_slogdet"),
    ("inv", lambda m, a, b: m.linalg.inv(a), "linalg_inv_ex"),
    ("solve", lambda m, a, b: m.linalg.solve(a, b), "linalg_solve_ex"),
    ("solve_vector", lambda m, a, b: m.linalg.solve(a, b[..., 0]), "linalg_solve_ex"),
    ("solve_right", lambda m, a, b: m.linalg.solve(a, b.mT, left=False), "linalg_solve_ex"),
    ("cholesky", lambda m, a, b: m.linalg.cholesky(_spd(m, a)), "linalg_cholesky_ex"),
    ("cholesky_upper", lambda m, a, b: m.linalg.cholesky(_spd(m, a), upper=True), "linalg_cholesky_ex"),
    ("eigvalsh", lambda m, a, b: m.linalg.eigvalsh(_spd(m, a)), "linalg_eigh"),
]


@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("name, fn, op_name", CASES, ids=[c[0] for c in CASES])
def test_lapack(name, fn, op_name, batch):
    if op_name not in OPS:
        pytest.skip(f"ember.ops.{op_name} is not in this tensor-core yet")
    arrays = [_well_conditioned(3, batch), np.random.default_rng(1).uniform(-1, 1, batch + (3, 2))]
    grads_match_torch(fn, arrays, rtol=1e-6, atol=1e-8)
    es, _ = leaves(arrays)
    assert gradcheck(lambda *xs: fn(ember, *xs), tuple(es))


@pytest.mark.parametrize("name, fn, op_name", CASES[:4], ids=[c[0] for c in CASES[:4]])
def test_lapack_second_order(name, fn, op_name):
    if op_name not in OPS:
        pytest.skip(f"ember.ops.{op_name} is not in this tensor-core yet")
    arrays = [_well_conditioned(2), np.random.default_rng(1).uniform(-1, 1, (2, 2))]
    es, _ = leaves(arrays)
    assert gradgradcheck(lambda *xs: fn(ember, *xs), tuple(es))
