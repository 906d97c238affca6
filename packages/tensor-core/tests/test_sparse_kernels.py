"""Sparse kernels against torch: products, pointwise ops, reductions, shape ops (issue 19)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sparse_helpers import assert_same, random_coo, to_numpy

import ember

LAYOUTS = ["sparse_coo", "sparse_csr", "sparse_csc"]


def _pair(layout, shape=(6, 5), nnz=12, dtype="float64", seed=0, dense_dims=0, duplicates=True):
    e, t = random_coo(np.random.default_rng(seed), shape, nnz, dtype, dense_dims, duplicates)
    if layout != "sparse_coo":
        e, t = e.to_sparse(layout=getattr(ember, layout)), t.to_sparse(layout=getattr(torch, layout))
    return e, t


def _dense(shape, dtype="float64", seed=1):
    x = np.random.default_rng(seed).standard_normal(shape)
    if dtype == "complex64":
        x = x + 1j * np.random.default_rng(seed + 1).standard_normal(shape)
    x = x.astype(dtype) if not dtype.startswith("int") else np.round(x * 3).astype(dtype)
    return ember.tensor(x), torch.tensor(x)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "int64"])
@pytest.mark.parametrize("layout", LAYOUTS + ["sparse_bsr"])
@pytest.mark.parametrize("nnz", [0, 12])
def test_sparse_dense_mm(layout, dtype, nnz):
    if layout == "sparse_bsr":
        e, t = _pair("sparse_coo", nnz=nnz, dtype=dtype)
        e, t = e.to_dense().to_sparse_bsr((2, 5)), t.to_dense().to_sparse_bsr((2, 5))
    else:
        e, t = _pair(layout, nnz=nnz, dtype=dtype)
    de, dt_ = _dense((5, 4), dtype)
    rtol = 1e-4 if dtype in ("float32", "complex64") else 1e-10
    # torch's CPU build has no integer CSR/CSC product nor non-square BSR blocks: the dense product
    # of the same matrix is the oracle there.
    oracle = torch.mm(t.to_dense(), dt_) if dtype == "int64" or layout == "sparse_bsr" else torch.mm(t, dt_)
    np.testing.assert_allclose(ember.mm(e, de).numpy(), oracle.numpy(), rtol=rtol, atol=1e-5)
    np.testing.assert_allclose((e @ de).numpy(), oracle.numpy(), rtol=rtol, atol=1e-5)
    if layout == "sparse_coo" or (layout != "sparse_bsr" and dtype != "int64"):
        np.testing.assert_allclose(ember.sparse.mm(e, de).numpy(), torch.sparse.mm(t, dt_).numpy(), rtol=rtol,
                                   atol=1e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_addmm_spmm_mv_dense_sparse(layout):
    e, t = _pair(layout)
    de, dt_ = _dense((5, 3))
    ce, ct = _dense((6, 3), seed=4)
    np.testing.assert_allclose(ember.addmm(ce, e, de, beta=0.5, alpha=2.0).numpy(),
                               torch.addmm(ct, t, dt_, beta=0.5, alpha=2.0).numpy(), rtol=1e-10)
    np.testing.assert_allclose(ember.sparse.addmm(ce, e, de).numpy(), torch.sparse.addmm(ct, t, dt_).numpy(),
                               rtol=1e-10)
    np.testing.assert_allclose(ember.spmm(e, de).numpy(), torch.spmm(t, dt_).numpy(), rtol=1e-10)
    ve, vt = _dense((5,))
    np.testing.assert_allclose((e @ ve).numpy(), (t @ vt).numpy(), rtol=1e-10)
    le, lt = _dense((2, 6))
    np.testing.assert_allclose(ember.mm(le, e).numpy(), torch.mm(lt, t).numpy(), rtol=1e-10)


@pytest.mark.parametrize("layout", ["sparse_coo", "sparse_csr"])
def test_sparse_sparse_mm(layout):
    a, ta = _pair(layout, (6, 5), 10, seed=2)
    b, tb = _pair(layout, (5, 7), 9, seed=3)
    r, tr = ember.mm(a, b), torch.mm(ta, tb)
    assert_same(r, tr, rtol=1e-10)
    if layout == "sparse_coo":
        assert r.is_coalesced()


def test_bmm_sparse_dense():
    e, t = random_coo(np.random.default_rng(5), (3, 4, 5), 20, duplicates=True)
    de, dt_ = _dense((3, 5, 2))
    np.testing.assert_allclose(ember.bmm(e, de).numpy(), torch.bmm(t, dt_).numpy(), rtol=1e-10)


def test_sampled_addmm():
    e, t = _pair("sparse_csr", (4, 6), 10, duplicates=False)
    m1e, m1t = _dense((4, 3))
    m2e, m2t = _dense((3, 6), seed=7)
    r = ember.sparse.sampled_addmm(e, m1e, m2e, beta=0.5, alpha=2.0)
    assert_same(r, torch.sparse.sampled_addmm(t, m1t, m2t, beta=0.5, alpha=2.0), rtol=1e-10)


@pytest.mark.parametrize("op", ["neg", "abs", "relu", "sqrt", "sin", "tanh", "square", "sign", "floor", "expm1"])
@pytest.mark.parametrize("layout", ["sparse_coo", "sparse_csr"])
def test_unary_keeps_pattern(op, layout):
    e, t = _pair(layout, dense_dims=0)
    if op == "sqrt":
        e, t = e.abs(), t.abs()
    re = getattr(ember, op)(e)
    try:
        rt = getattr(torch, op)(t)
    except RuntimeError:  # torch lacks this kernel for the layout: the dense op is the oracle
        rt = getattr(torch, op)(t.to_dense()).to_sparse(layout=t.layout)
    assert_same(re, rt, rtol=1e-10)
    assert re._nnz() == rt._nnz()
    if layout == "sparse_coo":
        assert re.is_coalesced() == rt.is_coalesced()


@pytest.mark.parametrize("layout", ["sparse_coo", "sparse_csr"])
def test_binary_ops(layout):
    a, ta = _pair(layout, seed=1)
    b, tb = _pair(layout, seed=2)
    de, dt_ = _dense((6, 5))
    if layout != "sparse_coo":  # torch lacks most CSR arithmetic: its COO results are the oracle
        ta, tb = ta.to_sparse(), tb.to_sparse()

    def same(e, t):
        np.testing.assert_allclose(to_numpy(e), to_numpy(t), rtol=1e-10, atol=1e-12)
        assert (e.layout is ember.strided) == (t.layout == torch.strided)
        if e.layout is not ember.strided:
            assert e.layout is a.layout

    same(a + b, ta + tb)
    same(a - b, ta - tb)
    same(ember.add(a, b, alpha=2.0), torch.add(ta, tb, alpha=2.0))
    same(a * 3.0, ta * 3.0)
    same(2 * a, 2 * ta)
    same(a / 4.0, ta / 4.0)
    same(a * b, ta * tb)
    same(a * de, ta * dt_)
    same(de + a, dt_ + ta)
    same(a + de, dt_ + ta)  # torch only adds dense + sparse
    same(a.pow(2), ta.pow(2))
    with pytest.raises(RuntimeError, match="same size"):
        _ = ember.zeros(2, 3) + a
    c = a.clone()
    c.mul_(2.0)
    same(c, ta * 2)
    c.add_(b)
    same(c, ta * 2 + tb)
    d = de.clone()
    d.add_(a)
    same(d, dt_ + ta)


def test_coo_coalesced_flags_follow_torch():
    a, ta = _pair("sparse_coo", seed=1)
    assert (a + a).is_coalesced() == (ta + ta).is_coalesced()
    ac, tac = a.coalesce(), ta.coalesce()
    assert (ac + ac).is_coalesced() == (tac + tac).is_coalesced()
    assert (a * 2).is_coalesced() == (ta * 2).is_coalesced()
    assert a.abs().is_coalesced() == ta.abs().is_coalesced()


def _entries(x):
    """A COO tensor's stored entries as they are held (not coalesced) and its flag."""
    return x._indices().tolist(), x._values().tolist(), x.is_coalesced(), tuple(x.shape)


@pytest.mark.parametrize("seeds", [(1, 1), (1, 2), (3, 4)])
@pytest.mark.parametrize("coalesce", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("dense_dims", [0, 1])
def test_coo_add_entries_follow_torch(seeds, coalesce, dense_dims):
    """sparse + sparse holds PyTorch's entries: one merge pass over both entry lists in their
    stored order (sorted or not, with duplicates), equal positions summed; not a concatenation."""
    shape = (4, 3, 2) if dense_dims else (4, 3)
    a, ta = _pair("sparse_coo", shape=shape, nnz=7, seed=seeds[0], dense_dims=dense_dims)
    b, tb = _pair("sparse_coo", shape=shape, nnz=5, seed=seeds[1], dense_dims=dense_dims)
    if coalesce[0]:
        a, ta = a.coalesce(), ta.coalesce()
    if coalesce[1]:
        b, tb = b.coalesce(), tb.coalesce()
    assert _entries(a + b) == _entries(ta + tb)
    assert _entries(a - b) == _entries(ta - tb)
    assert _entries(ember.add(a, b, alpha=2.0)) == _entries(torch.add(ta, tb, alpha=2.0))
    # sorted indices with duplicates (a constructor's usual input): the merge pairs copies in order
    idx = [[0, 1, 1, 1, 3], [2, 0, 2, 2, 1]]
    e = ember.sparse_coo_tensor(ember.tensor(idx), ember.arange(5.0), (4, 3))
    t = torch.sparse_coo_tensor(torch.tensor(idx), torch.arange(5.0), (4, 3))
    assert _entries(e + e) == _entries(t + t)
    assert _entries(e + e.coalesce()) == _entries(t + t.coalesce())


def test_smm_sspaddmm_hspmm():
    """torch.smm / sspaddmm / hspmm: COO results with PyTorch's entries, flags and errors."""
    idx = [[1, 0, 1, 1], [2, 2, 0, 2]]
    s, ts = (lib.sparse_coo_tensor(lib.tensor(idx), lib.tensor([3.0, 4.0, 5.0, 6.0]), (3, 3)) for lib in (ember, torch))
    d, td = ember.arange(6.0).reshape(3, 2), torch.arange(6.0).reshape(3, 2)
    into = [[2, 0], [1, 1]]
    i, ti = (lib.sparse_coo_tensor(lib.tensor(into), lib.tensor([1.0, 7.0]), (3, 2)) for lib in (ember, torch))
    assert _entries(ember.smm(s, d)) == _entries(torch.smm(ts, td))
    assert _entries(s.smm(d)) == _entries(ts.smm(td))
    assert _entries(ember.sspaddmm(i, s, d)) == _entries(torch.sspaddmm(ti, ts, td))
    assert _entries(i.sspaddmm(s, d, beta=2, alpha=3)) == _entries(ti.sspaddmm(ts, td, beta=2, alpha=3))
    h, th = ember.hspmm(s, d), torch.hspmm(ts, td)
    assert _entries(h) == _entries(th) and (h.sparse_dim(), h.dense_dim()) == (th.sparse_dim(), th.dense_dim())
    for call in (lambda L, s, d, i: L.smm(s, L.ones(4, 2)),
                 lambda L, s, d, i: L.smm(d, d),
                 lambda L, s, d, i: L.smm(s, L.ones(3, 2, dtype=L.float64)),
                 lambda L, s, d, i: L.hspmm(s, L.ones(4, 2)),
                 lambda L, s, d, i: L.sspaddmm(i, s, L.ones(3, 3))):
        with pytest.raises(RuntimeError) as expected:
            call(torch, ts, td, ti)
        with pytest.raises(RuntimeError) as got:
            call(ember, s, d, i)
        assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("dtype", ["float64", "int64", "complex64"])
@pytest.mark.parametrize("dims", [None, 0, 1, (0, 1), 2, (1, 2)])
def test_sum(dims, dtype):
    e, t = _pair("sparse_coo", (4, 5, 3), 15, dtype=dtype, dense_dims=1)
    if dims is None:
        np.testing.assert_allclose(e.sum().numpy(), t.sum().numpy(), rtol=1e-5)
        np.testing.assert_allclose(ember.sparse.sum(e).numpy(), torch.sparse.sum(t).numpy(), rtol=1e-5)
        return
    assert_same(ember.sparse.sum(e, dims), torch.sparse.sum(t, dims), rtol=1e-5)


def test_sum_compressed():
    e, t = _pair("sparse_csr")
    np.testing.assert_allclose(e.sum().numpy(), t.sum().numpy(), rtol=1e-10)
    np.testing.assert_allclose(to_numpy(e.sum(1)), t.to_dense().sum(1).numpy(), rtol=1e-10)


@pytest.mark.parametrize("dim", [0, 1, -1, 2])
@pytest.mark.parametrize("log", [False, True])
def test_softmax(dim, log):
    e, t = _pair("sparse_coo", (4, 5, 3), 14, dense_dims=1 if dim == 2 else 0) if dim == 2 else \
        random_coo(np.random.default_rng(9), (4, 5, 3), 14, duplicates=True)
    fe = ember.sparse.log_softmax if log else ember.sparse.softmax
    ft = torch.sparse.log_softmax if log else torch.sparse.softmax
    assert_same(fe(e, dim), ft(t, dim), rtol=1e-10)


@pytest.mark.parametrize("layout", ["sparse_coo", "sparse_csr"])
def test_shape_ops(layout):
    e, t = _pair(layout, (6, 5), 14)
    idx = [4, 0, 4, 2]
    tc = t.to_sparse()  # torch has no CSR index_select: the COO result is the oracle
    for dim in (0, 1):
        np.testing.assert_allclose(to_numpy(e.index_select(dim, ember.tensor(idx))),
                                   to_numpy(tc.index_select(dim, torch.tensor(idx))), rtol=1e-10)
        np.testing.assert_allclose(to_numpy(e.narrow(dim, 1, 3)), to_numpy(tc.narrow_copy(dim, 1, 3)), rtol=1e-10)
        np.testing.assert_allclose(to_numpy(ember.cat([e, e], dim)), to_numpy(torch.cat([tc, tc], dim)), rtol=1e-10)
        assert e.narrow(dim, 1, 3).layout is e.layout and ember.cat([e, e], dim).layout is e.layout
    assert_same(e.t(), t.t(), rtol=1e-10)
    assert_same(e.transpose(0, 1), t.transpose(0, 1), rtol=1e-10)


def test_hybrid_shape_ops():
    e, t = _pair("sparse_coo", (4, 5, 3), 10, dense_dims=1)
    assert_same(e.index_select(2, ember.tensor([2, 0])), t.index_select(2, torch.tensor([2, 0])), rtol=1e-10)
    assert_same(e.transpose(0, 1), t.transpose(0, 1), rtol=1e-10)
    assert_same(ember.cat([e, e], 2), torch.cat([t, t], 2), rtol=1e-10)
    assert_same(e.permute(1, 0, 2), t.permute(1, 0, 2), rtol=1e-10)
    with pytest.raises(RuntimeError):
        e.transpose(0, 2)


def test_to_dtype_clone_copy_detach():
    e, t = _pair("sparse_coo")
    assert_same(e.to(ember.float32), t.to(torch.float32))
    assert e.double().dtype is ember.float64
    c = e.clone()
    assert c._values() is not e._values()
    assert_same(c, t)
    d = e.detach()
    assert d.layout is ember.sparse_coo and d._nnz() == e._nnz()
    z = ember.sparse_coo_tensor(ember.zeros((2, 0), dtype=ember.int64), ember.zeros(0, dtype=ember.float64), (6, 5))
    z.copy_(e)
    assert_same(z, t)
    np.testing.assert_allclose(to_numpy(e.to_sparse_csr().clone()), to_numpy(t), rtol=1e-10)


def test_zero_drops_stored_elements():
    e, t = _pair("sparse_coo")
    e.zero_()
    t.zero_()
    assert e._nnz() == t._nnz() == 0
    assert_same(e, t)
    c = ember.eye(3).to_sparse_csr()
    c.zero_()
    assert c._nnz() == 0 and c.to_dense().abs().sum().item() == 0
    with pytest.raises(RuntimeError):
        _pair("sparse_coo")[0].fill_(1.0)


def test_layout_is_a_dispatch_key():
    from ember._src import dispatch

    e, _ = _pair("sparse_coo")
    assert dispatch._LAYOUT_DISPATCH[0]
    op = ember.ops.neg
    seen = []
    original = op.kernels["sparse_cpu"]
    op.kernels["sparse_cpu"] = lambda x: seen.append(x) or original(x)
    try:
        ember.neg(e)
        ember.neg(ember.ones(2))  # a strided argument still reaches the device kernel
    finally:
        op.kernels["sparse_cpu"] = original
    assert len(seen) == 1 and seen[0] is e


def test_sparse_dense_product_errors_match_torch():
    # a GCN program's shape mistakes: PyTorch's COO kernel words them as addmm's dense argument, CSR as
    # mm's, the 1-D product as mv's; dtype mismatches name the sparse operand's type first
    def cases(lib):
        adj = lib.eye(6).to_sparse()
        return [lambda: lib.sparse.mm(adj, lib.ones(4, 2)), lambda: adj @ lib.ones(4, 2),
                lambda: lib.mm(lib.ones(2, 5), adj), lambda: lib.sparse.addmm(lib.ones(6, 2), adj, lib.ones(4, 2)),
                lambda: adj.to_sparse_csr() @ lib.ones(4, 2), lambda: lib.ones(2, 5) @ adj.to_sparse_csr(),
                lambda: adj @ lib.ones(4), lambda: adj.to_sparse_csr() @ lib.ones(4),
                lambda: lib.mm(adj, lib.eye(5).to_sparse()),
                lambda: lib.mm(adj, lib.ones(6, 2, dtype=lib.double)),
                lambda: lib.mm(lib.ones(2, 6, dtype=lib.double), adj),
                lambda: adj.to_sparse_csr() @ lib.ones(6, 2, dtype=lib.double)]

    for ours, theirs in zip(cases(ember), cases(torch)):
        with pytest.raises(RuntimeError) as expected:
            theirs()
        with pytest.raises(RuntimeError) as got:
            ours()
        assert str(got.value) == str(expected.value)
