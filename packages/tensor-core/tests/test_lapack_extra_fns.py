"""LU family, triangular and Cholesky solves, matrix_exp and bilinear vs torch."""

from __future__ import annotations

import numpy as np
import pytest
from mathfns_helpers import grads_match, pair

import ember

from conftest import assert_same, torch

TOL = {"rtol": 1e-5, "atol": 1e-5}


def _well_conditioned(shape, dtype="float64", seed=0, layout="contiguous"):
    e, t = pair(shape, dtype, layout, seed=seed)
    n = shape[-1]
    return e + 4 * ember.eye(n, dtype=e.dtype), t + 4 * torch.eye(n, dtype=t.dtype)


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (4, 2), (2, 5), (0, 0), (2, 0, 3), (1, 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_lu_factor_and_unpack(shape, dtype, layout):
    e, t = pair(shape, dtype, layout)
    assert_same(ember.linalg.lu_factor(e) if shape[-1] == shape[-2] and 0 not in shape else
                ember.linalg.lu_factor_ex(e)[:2],
                torch.linalg.lu_factor(t) if shape[-1] == shape[-2] and 0 not in shape else
                torch.linalg.lu_factor_ex(t)[:2], **TOL)
    assert_same(ember.linalg.lu_factor_ex(e), torch.linalg.lu_factor_ex(t), **TOL)
    assert_same(ember.linalg.lu(e), torch.linalg.lu(t), **TOL)
    LU, piv = torch.linalg.lu_factor_ex(t)[:2]
    assert_same(ember.lu_unpack(ember.from_numpy(LU.numpy()), ember.from_numpy(piv.numpy())),
                torch.lu_unpack(LU, piv), **TOL)
    assert_same(e.lu(get_infos=True), t.lu(get_infos=True), **TOL)


def test_lu_singular_and_errors():
    a = ember.tensor([[1.0, 2.0], [2.0, 4.0]])
    assert_same(ember.linalg.lu_factor_ex(a), torch.linalg.lu_factor_ex(torch.tensor([[1.0, 2.0], [2.0, 4.0]])))
    with pytest.raises(ember.linalg.LinAlgError, match="U\\[2,2\\] is zero"):
        ember.linalg.lu_factor(a)
    with pytest.raises(ember.linalg.LinAlgError):
        ember.linalg.lu_factor_ex(a, check_errors=True)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        ember.linalg.lu_factor(ember.ones(3))
    with pytest.raises(RuntimeError):
        ember.linalg.lu_factor(ember.ones(2, 2, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="pivots must be in the range"):
        ember.lu_unpack(ember.ones(2, 2), ember.tensor([3, 2], dtype=ember.int32))
    with pytest.raises(RuntimeError, match="int32"):
        ember.lu_unpack(ember.ones(2, 2), ember.tensor([1, 2]))


@pytest.mark.parametrize("left, adjoint", [(True, False), (True, True), (False, False), (False, True)])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_lu_solve(left, adjoint, batch):
    e, t = _well_conditioned(batch + (3, 3))
    be, bt = pair(batch + ((3, 2) if left else (2, 3)), "float64", seed=4)
    LU_e, piv_e = ember.linalg.lu_factor(e)
    LU_t, piv_t = torch.linalg.lu_factor(t)
    assert_same(ember.linalg.lu_solve(LU_e, piv_e, be, left=left, adjoint=adjoint),
                torch.linalg.lu_solve(LU_t, piv_t, bt, left=left, adjoint=adjoint), **TOL)
    if left and not adjoint:
        assert_same(ember.lu_solve(be, LU_e, piv_e), torch.lu_solve(bt, LU_t, piv_t), **TOL)
        assert_same(be.lu_solve(LU_e, piv_e), bt.lu_solve(LU_t, piv_t), **TOL)


def test_lu_grads():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(2, 3, 3)) + 3 * np.eye(3)
    grads_match(lambda m, x: m.linalg.lu_factor(x).LU, [a], rtol=1e-6, atol=1e-8)
    for shape in ((2, 3, 5), (5, 3)):  # wide and tall
        grads_match(lambda m, x: m.linalg.lu_factor_ex(x).LU, [rng.normal(size=shape)], rtol=1e-6, atol=1e-8)
        grads_match(lambda m, x: m.linalg.lu(x)[1:], [rng.normal(size=shape)], rtol=1e-6, atol=1e-8)
    grads_match(lambda m, x: m.linalg.lu(x)[1:], [a], rtol=1e-6, atol=1e-8)
    grads_match(lambda m, x, b: m.linalg.lu_solve(*m.linalg.lu_factor(x), b), [a, rng.normal(size=(3, 2))])


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("unitriangular", [True, False])
def test_triangular_solve(upper, transpose, unitriangular):
    e, t = _well_conditioned((2, 3, 3), layout="transposed")
    be, bt = pair((3, 2), "float64", seed=2)
    assert_same(ember.triangular_solve(be, e, upper, transpose, unitriangular),
                torch.triangular_solve(bt, t, upper, transpose, unitriangular), **TOL)
    assert_same(be.triangular_solve(e, upper), bt.triangular_solve(t, upper), **TOL)


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unitriangular", [True, False])
def test_solve_triangular(upper, left, unitriangular):
    e, t = _well_conditioned((3, 3))
    be, bt = pair((3, 3), "float32", seed=2)
    e, t = e.float(), t.float()
    assert_same(ember.linalg.solve_triangular(e, be, upper=upper, left=left, unitriangular=unitriangular),
                torch.linalg.solve_triangular(t, bt, upper=upper, left=left, unitriangular=unitriangular), **TOL)


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_cholesky_solve_inverse(upper, batch):
    rng = np.random.default_rng(1)
    m = rng.normal(size=batch + (3, 3))
    spd = m @ np.swapaxes(m, -1, -2) + 3 * np.eye(3)
    factor_t = torch.linalg.cholesky(torch.tensor(spd), upper=upper)
    factor_e = ember.from_numpy(factor_t.numpy().copy())
    be, bt = pair(batch + (3, 2), "float64", seed=3)
    assert_same(ember.cholesky_solve(be, factor_e, upper), torch.cholesky_solve(bt, factor_t, upper), **TOL)
    assert_same(be.cholesky_solve(factor_e, upper), bt.cholesky_solve(factor_t, upper), **TOL)
    if not batch:
        assert_same(ember.cholesky_inverse(factor_e, upper), torch.cholesky_inverse(factor_t, upper), **TOL)
        assert_same(factor_e.cholesky_inverse(upper), factor_t.cholesky_inverse(upper), **TOL)


def test_solve_grads_and_errors():
    rng = np.random.default_rng(2)
    a = np.tril(rng.normal(size=(3, 3))) + 3 * np.eye(3)
    b = rng.normal(size=(3, 2))
    grads_match(lambda m, x, y: m.triangular_solve(y, x, upper=False).solution, [a, b])
    grads_match(lambda m, x, y: m.cholesky_solve(y, x), [a, b])
    grads_match(lambda m, x: m.cholesky_inverse(x), [a])
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.cholesky_solve(ember.ones(3, 2), ember.eye(3, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        ember.triangular_solve(ember.ones(3), ember.eye(3))


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (4, 4), (3, 5, 5), (0, 0)])
@pytest.mark.parametrize("scale", [0.01, 1.0, 20.0])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matrix_exp(shape, scale, dtype):
    e, t = pair(shape, dtype, "transposed", low=-1, high=1)
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-10, "atol": 1e-10}
    assert_same(ember.matrix_exp(e * scale), torch.matrix_exp(t * scale), **tol)
    assert_same(ember.linalg.matrix_exp(e * scale), torch.linalg.matrix_exp(t * scale), **tol)
    assert_same((e * scale).matrix_exp(), (t * scale).matrix_exp(), **tol)


def test_matrix_exp_mixed_norms_errors_and_grad():
    a = np.stack([np.eye(3) * 0.01, np.eye(3) * 30 + np.triu(np.ones((3, 3)))])
    assert_same(ember.matrix_exp(ember.tensor(a)), torch.matrix_exp(torch.tensor(a)), rtol=1e-10, atol=1e-10)
    with pytest.raises(RuntimeError, match="square"):
        ember.matrix_exp(ember.ones(2, 3))
    with pytest.raises(RuntimeError):
        ember.matrix_exp(ember.ones(2, 2, dtype=ember.int64))
    rng = np.random.default_rng(3)
    grads_match(lambda m, x: m.matrix_exp(x), [rng.normal(size=(2, 3, 3))], rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("batch", [(4,), (2, 3), ()])
@pytest.mark.parametrize("with_bias", [True, False])
def test_bilinear(batch, with_bias):
    x1e, x1t = pair(batch + (3,), "float64", seed=1)
    x2e, x2t = pair(batch + (2,), "float64", seed=2)
    we, wt = pair((5, 3, 2), "float64", seed=3)
    be, bt = pair((5,), "float64", seed=4) if with_bias else (None, None)
    assert_same(ember.bilinear(x1e, x2e, we, be), torch.bilinear(x1t, x2t, wt, bt))


def test_bilinear_errors_and_grad():
    with pytest.raises(RuntimeError):
        ember.bilinear(ember.ones(2, 3), ember.ones(3, 2), ember.ones(4, 3, 2))
    with pytest.raises(RuntimeError):
        ember.bilinear(ember.ones(2, 3), ember.ones(2, 2), ember.ones(4, 2, 2))
    rng = np.random.default_rng(5)
    grads_match(lambda m, a, b, w, c: m.bilinear(a, b, w, c),
                [rng.normal(size=(4, 3)), rng.normal(size=(4, 2)), rng.normal(size=(5, 3, 2)), rng.normal(size=5)])


def test_batched_factor_with_an_unbatched_matrix_rhs():
    # B shaped A.shape[:-1] is a matrix here (linalg.solve would read it as a batch of vectors).
    a = np.tril(np.random.default_rng(3).random((3, 3, 3))) + 2 * np.eye(3)
    e_a, t_a = ember.tensor(a), torch.tensor(a)
    e_b, t_b = ember.eye(3, dtype=ember.float64), torch.eye(3, dtype=torch.float64)
    assert_same(ember.linalg.solve_triangular(e_a, e_b, upper=False),
                torch.linalg.solve_triangular(t_a, t_b, upper=False))
    assert_same(ember.linalg.solve_triangular(e_a, e_b, upper=False, left=False),
                torch.linalg.solve_triangular(t_a, t_b, upper=False, left=False))
    assert_same(ember.cholesky_solve(e_b, e_a), torch.cholesky_solve(t_b, t_a))
    lu, piv = ember.linalg.lu_factor(e_a)
    t_lu, t_piv = torch.linalg.lu_factor(t_a)
    assert_same(ember.linalg.lu_solve(lu, piv, e_b), torch.linalg.lu_solve(t_lu, t_piv, t_b))
