"""linalg.eig/eigvals, ldl_factor(_ex)/ldl_solve, geqrf and ormqr against PyTorch: values,
batches, empty matrices, out=, and PyTorch's exception types for bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember


def _pair(shape, seed=0, dtype=np.float64):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return torch.tensor(a), ember.tensor(a)


def _close(e, t, tol=1e-10):
    np.testing.assert_allclose(np.asarray(e.numpy()), t.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (1, 1), (0, 0), (2, 0, 0)])
def test_eig_solves_the_eigenproblem(shape):
    t, e = _pair(shape)
    L, V = ember.linalg.eig(e)
    assert L.dtype is ember.complex128 and V.dtype is ember.complex128
    assert tuple(L.shape) == shape[:-1] and tuple(V.shape) == shape
    tl = torch.linalg.eigvals(t)
    np.testing.assert_allclose(np.sort_complex(L.numpy().reshape(-1)), np.sort_complex(tl.numpy().reshape(-1)),
                               atol=1e-10)
    res = e.to(ember.complex128) @ V - V * L.unsqueeze(-2)
    assert float(res.abs().max()) < 1e-10 if res.numel() else True
    # unit-norm eigenvectors, as LAPACK and PyTorch return them
    if V.numel():
        np.testing.assert_allclose(ember.linalg.vector_norm(V, dim=-2).numpy(), 1.0, atol=1e-12)


def test_eig_float32_and_eigvals_and_out():
    t, e = _pair((5, 5), seed=3, dtype=np.float32)
    assert ember.linalg.eigvals(e).dtype is ember.complex64
    _close(ember.linalg.eigvals(e).abs().sort().values, torch.linalg.eigvals(t).abs().sort().values, 1e-5)
    out = (ember.empty(0, dtype=ember.complex64), ember.empty(0, dtype=ember.complex64))
    r = ember.linalg.eig(e, out=out)
    assert r.eigenvalues is out[0] and tuple(out[1].shape) == (5, 5)


def test_eig_gradient_matches_torch():
    a = np.random.default_rng(5).standard_normal((2, 4, 4))
    w = np.random.default_rng(6).standard_normal((2, 4, 4))
    grads = []
    for lib in (torch, ember):
        A = lib.tensor(a, requires_grad=True)
        L, V = lib.linalg.eig(A)
        (L.real.sum() + L.imag.pow(2).sum() + (V.abs() ** 2 * lib.tensor(w)).sum()).backward()
        B = lib.tensor(a, requires_grad=True)
        lib.linalg.eigvals(B).abs().sum().backward()
        grads.append((A.grad.numpy(), B.grad.numpy()))
    for e, t in zip(grads[1], grads[0]):
        np.testing.assert_allclose(e, t, atol=1e-10)


@pytest.mark.parametrize("bad, exc", [
    (ember.ones(2, 3), RuntimeError), (ember.ones(3), RuntimeError),
    (ember.ones(2, 2, dtype=ember.int64), RuntimeError), (ember.ones(2, 2, dtype=ember.float16), NotImplementedError)])
def test_eig_errors(bad, exc):
    with pytest.raises(exc):
        ember.linalg.eig(bad)


@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5), (1, 1)])
def test_ldl_factor_and_solve_match_torch(shape):
    t, e = _pair(shape, seed=1)
    t, e = t + t.mT, e + e.mT
    tLD, tp = torch.linalg.ldl_factor(t)
    eLD, ep = ember.linalg.ldl_factor(e)
    _close(ep, tp)
    _close(eLD, tLD)
    tb, eb = _pair(shape[:-1] + (2,), seed=2)
    _close(ember.linalg.ldl_solve(eLD, ep, eb), torch.linalg.ldl_solve(tLD, tp, tb))
    r = ember.linalg.ldl_factor_ex(e)
    assert r.info.dtype is ember.int32 and tuple(r.info.shape) == shape[:-2] and int(r.info.abs().sum()) == 0
    # the solution solves the system
    _close(e @ ember.linalg.ldl_solve(eLD, ep, eb), tb, 1e-9)


def test_ldl_singular_and_errors():
    z = ember.zeros(3, 3)
    r = ember.linalg.ldl_factor_ex(z)
    tr = torch.linalg.ldl_factor_ex(torch.zeros(3, 3))
    assert int(r.info) == int(tr.info) > 0
    with pytest.raises(ember.linalg.LinAlgError):
        ember.linalg.ldl_factor(z)
    with pytest.raises(RuntimeError):
        ember.linalg.ldl_factor(ember.ones(2, 3))
    LD, piv = ember.linalg.ldl_factor(ember.eye(3))
    with pytest.raises(RuntimeError):
        ember.linalg.ldl_solve(LD, piv.long(), ember.ones(3, 1))
    with pytest.raises(RuntimeError):
        ember.linalg.ldl_solve(LD, ember.full((3,), 9, dtype=ember.int32), ember.ones(3, 1))
    with pytest.raises(RuntimeError):
        ember.linalg.ldl_solve(LD, piv, ember.ones(4, 1))
    A = ember.eye(3, requires_grad=True)
    LD2, _ = ember.linalg.ldl_factor(A * 2)
    with pytest.raises(RuntimeError, match="not implemented"):
        LD2.sum().backward()


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 3, 3), (0, 2)])
def test_geqrf_matches_torch(shape):
    t, e = _pair(shape, seed=4)
    ta, tt = torch.geqrf(t)
    ea, et = ember.geqrf(e)
    _close(ea, ta)
    _close(et, tt)
    _close(e.geqrf().tau, tt)


@pytest.mark.parametrize("left, transpose", [(True, False), (True, True), (False, False), (False, True)])
def test_ormqr_matches_torch_with_gradients(left, transpose):
    t, e = _pair((4, 3), seed=7)
    ta, tt = torch.geqrf(t)
    ea, et = ember.geqrf(e)
    tc, ec = _pair((4, 2) if left else (2, 4), seed=8)
    _close(ember.ormqr(ea, et, ec, left, transpose), torch.ormqr(ta, tt, tc, left, transpose))
    grads = []
    for lib, a, tau, c in ((torch, ta, tt, tc), (ember, ea, et, ec)):
        leaves = [x.clone().requires_grad_() for x in (a, tau, c)]
        (lib.ormqr(*leaves, left, transpose) ** 2).sum().backward()
        grads.append([x.grad.numpy() for x in leaves])
    for e_, t_ in zip(grads[1], grads[0]):
        np.testing.assert_allclose(e_, t_, atol=1e-10)


def test_ormqr_errors():
    a, tau = ember.geqrf(ember.ones(4, 3))
    with pytest.raises(RuntimeError):
        ember.ormqr(a, tau, ember.ones(3, 2))
    with pytest.raises(RuntimeError):
        ember.ormqr(a, tau.double(), ember.ones(4, 2))
    with pytest.raises(TypeError):
        ember.ormqr(a, [1.0], ember.ones(4, 2))


# -- histogramdd (another of this session's top-level names) ------------------------------------

@pytest.mark.parametrize("kw", [{"bins": 4}, {"bins": [2, 3, 4], "density": True},
                                {"bins": [3, 3, 2], "range": [-1.0, 1.0, -2.0, 2.0, 0.0, 1.0]}, {"bins": 3, "w": 1}])
def test_histogramdd_matches_torch(kw):
    x = np.random.default_rng(0).standard_normal((50, 3))
    w = np.random.default_rng(1).random(50)
    res = []
    for lib in (torch, ember):
        k = {key: v for key, v in kw.items() if key != "w"}
        if "w" in kw:
            k["weight"] = lib.tensor(w)
        h = lib.histogramdd(lib.tensor(x), **k)
        res.append((h.hist.numpy(), [e.numpy() for e in h.bin_edges]))
    np.testing.assert_allclose(res[1][0], res[0][0], atol=1e-12)
    for e, t in zip(res[1][1], res[0][1]):
        np.testing.assert_allclose(e, t, atol=1e-12)


def test_histogramdd_tensor_bins_and_errors():
    x = np.random.default_rng(2).standard_normal((40, 2)).astype(np.float32)
    tb = [torch.tensor([-3.0, 0, 3]), torch.tensor([-1.0, 0, 0.5, 1])]
    t = torch.histogramdd(torch.tensor(x), tb)
    e = ember.histogramdd(ember.tensor(x), [ember.tensor(b.numpy()) for b in tb])
    np.testing.assert_array_equal(e.hist.numpy(), t.hist.numpy())
    with pytest.raises(RuntimeError):
        ember.histogramdd(ember.ones(4, 2), [2, 2, 2])
    with pytest.raises(RuntimeError):
        ember.histogramdd(ember.ones(4, 2), [ember.tensor([0.0, 1.0], dtype=ember.float64), 2])
    with pytest.raises(NotImplementedError):
        ember.histogramdd(ember.ones(4, 2, dtype=ember.int64), 2)
