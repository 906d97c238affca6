"""Sparse layouts against torch: construction, validation, conversions, accessors (issue 19)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from sparse_helpers import EMBER_DTYPES, TORCH_DTYPES, assert_same, random_coo, random_values, to_numpy

import ember

from conftest import raises_like

DTYPES = ["float32", "float64", "complex64", "int64", "bool"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dense_dims", [0, 1])
@pytest.mark.parametrize("nnz", [0, 1, 7])
def test_coo_to_dense_and_coalesce(dtype, dense_dims, nnz):
    rng = np.random.default_rng(nnz * 10 + dense_dims)
    shape = (4, 5) + ((3,) if dense_dims else ())
    e, t = random_coo(rng, shape, nnz, dtype, dense_dims, duplicates=True)
    assert e.is_coalesced() == t.is_coalesced()
    assert e._nnz() == t._nnz() and e.sparse_dim() == t.sparse_dim() and e.dense_dim() == t.dense_dim()
    assert_same(e, t)
    ec, tc = e.coalesce(), t.coalesce()
    assert ec.is_coalesced() and ec._nnz() == tc._nnz()
    np.testing.assert_array_equal(ec.indices().numpy(), tc.indices().numpy())
    np.testing.assert_allclose(ec.values().numpy(), tc.values().numpy(), rtol=1e-6, atol=1e-6)
    assert e.dtype is EMBER_DTYPES[dtype] and t.dtype is TORCH_DTYPES[dtype]


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "int64"])
@pytest.mark.parametrize("layout", ["sparse_coo", "sparse_csr", "sparse_csc"])
def test_dense_round_trip(dtype, layout):
    rng = np.random.default_rng(1)
    x = random_values(rng, (5, 6), dtype) * (rng.random((5, 6)) < 0.4)
    e = ember.tensor(x).to_sparse(layout=getattr(ember, layout))
    t = torch.tensor(x).to_sparse(layout=getattr(torch, layout))
    assert_same(e, t)
    if layout == "sparse_csr":
        np.testing.assert_array_equal(e.crow_indices().numpy(), t.crow_indices().numpy())
        np.testing.assert_array_equal(e.col_indices().numpy(), t.col_indices().numpy())
    if layout == "sparse_csc":
        np.testing.assert_array_equal(e.ccol_indices().numpy(), t.ccol_indices().numpy())
        np.testing.assert_array_equal(e.row_indices().numpy(), t.row_indices().numpy())
    np.testing.assert_array_equal(e.values().numpy(), t.values().numpy())


@pytest.mark.parametrize("blocksize", [(1, 1), (2, 3), (3, 2)])
@pytest.mark.parametrize("layout", ["sparse_bsr", "sparse_bsc"])
def test_blocked_round_trip(blocksize, layout):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 6)) * (rng.random((6, 6)) < 0.3)
    e = ember.tensor(x).to_sparse(layout=getattr(ember, layout), blocksize=blocksize)
    t = torch.tensor(x).to_sparse(layout=getattr(torch, layout), blocksize=blocksize)
    assert_same(e, t)
    np.testing.assert_array_equal(e.values().numpy(), t.values().numpy())
    comp = "crow_indices" if layout == "sparse_bsr" else "ccol_indices"
    np.testing.assert_array_equal(getattr(e, comp)().numpy(), getattr(t, comp)().numpy())


def test_conversions_between_layouts():
    rng = np.random.default_rng(3)
    e, t = random_coo(rng, (6, 7), 15, duplicates=True)
    for name in ("to_sparse_csr", "to_sparse_csc"):
        assert_same(getattr(e, name)(), getattr(t, name)())
        assert_same(getattr(e, name)().to_sparse(), getattr(t, name)().to_sparse())
    assert_same(e.to_sparse_csr().to_sparse_csc(), t.to_sparse_csr().to_sparse_csc())
    assert_same(e.to_dense().to_sparse_bsr((3, 7)),
                t.to_dense().to_sparse_bsr((3, 7)))
    assert_same(e.to_dense().to_sparse(1), t.to_dense().to_sparse(1))


def test_hybrid_dense_to_sparse():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 5, 2)) * (rng.random((4, 5, 1)) < 0.5)
    for kw in ({"layout": None, "dense_dim": 1},):
        e = ember.tensor(x).to_sparse(**{**kw, "layout": ember.sparse_coo})
        t = torch.tensor(x).to_sparse(**{**kw, "layout": torch.sparse_coo})
        assert_same(e, t)
        assert e.dense_dim() == t.dense_dim() == 1
    assert_same(ember.tensor(x).to_sparse_csr(dense_dim=1), torch.tensor(x).to_sparse_csr(dense_dim=1))


def test_constructors_match_torch():
    i = [[0, 1, 1], [2, 0, 2]]
    v = [3.0, 4.0, 5.0]
    assert_same(ember.sparse_coo_tensor(i, v), torch.sparse_coo_tensor(i, v))
    assert_same(ember.sparse_coo_tensor(i, v, (3, 4)), torch.sparse_coo_tensor(i, v, (3, 4)))
    e = ember.sparse_coo_tensor(i, v, (2, 3), dtype=ember.float64)
    assert e.dtype is ember.float64 and e.layout is ember.sparse_coo and e.is_sparse
    assert_same(ember.sparse_csr_tensor([0, 1, 3], [2, 0, 2], v), torch.sparse_csr_tensor([0, 1, 3], [2, 0, 2], v))
    assert_same(ember.sparse_csc_tensor([0, 1, 2, 3], [1, 0, 1], v, (2, 3)),
                torch.sparse_csc_tensor([0, 1, 2, 3], [1, 0, 1], v, (2, 3)))
    bv = np.arange(8.0).reshape(2, 2, 2)
    assert_same(ember.sparse_bsr_tensor([0, 1, 2], [1, 0], ember.tensor(bv), (4, 4)),
                torch.sparse_bsr_tensor([0, 1, 2], [1, 0], torch.tensor(bv), (4, 4)))
    assert_same(ember.sparse_compressed_tensor([0, 1, 2], [1, 0], ember.tensor(bv), (4, 4), layout=ember.sparse_bsc),
                torch.sparse_compressed_tensor([0, 1, 2], [1, 0], torch.tensor(bv), (4, 4), layout=torch.sparse_bsc))
    assert ember.sparse_csr_tensor([0, 1, 3], [2, 0, 2], v).is_sparse_csr
    empty = ember.sparse_coo_tensor(ember.zeros((2, 0), dtype=ember.int64), ember.zeros(0), (3, 3))
    assert empty._nnz() == 0 and empty.to_dense().abs().sum().item() == 0


@pytest.mark.parametrize("case", [
    lambda m: m.sparse_coo_tensor([[0, 5]], [1.0, 2.0], (3,), check_invariants=True),
    lambda m: m.sparse_coo_tensor([[0, -1]], [1.0, 2.0], (3,), check_invariants=True),
    lambda m: m.sparse_coo_tensor([0, 1], [1.0, 2.0], (3,)),
    lambda m: m.sparse_coo_tensor([[0, 1]], [1.0, 2.0, 3.0], (3,)),
    lambda m: m.sparse_coo_tensor([[0, 1]], [[1.0, 2.0], [3.0, 4.0]], (3, 3)),
    lambda m: m.sparse_csr_tensor([0, 1, 2], [0, 5], [1.0, 2.0], (2, 3), check_invariants=True),
    lambda m: m.sparse_csr_tensor([0, 2, 2], [1, 0], [1.0, 2.0], (2, 3), check_invariants=True),
    lambda m: m.sparse_csr_tensor([0, 1, 2, 2], [1, 0], [1.0, 2.0], (2, 3), check_invariants=True),
    lambda m: m.sparse_csr_tensor([1, 1, 2], [1, 0], [1.0, 2.0], (2, 3), check_invariants=True),
    lambda m: m.sparse_csr_tensor([0, 1, 3], [1, 0], [1.0, 2.0], (2, 3), check_invariants=True),
])
def test_invalid_inputs_raise_like_torch(case):
    msg_e, msg_t = raises_like(lambda: case(ember), lambda: case(torch))
    assert msg_e == msg_t


def test_accessor_errors():
    d = ember.zeros(2)
    u = ember.sparse_coo_tensor([[1, 0, 1]], [1.0, 2.0, 3.0])
    for fn in (lambda: d.indices(), lambda: d.coalesce(), lambda: d.is_coalesced(), lambda: d.crow_indices(),
               lambda: u.indices(), lambda: u.values(), lambda: u.crow_indices()):
        with pytest.raises(RuntimeError):
            fn()
    with pytest.raises(RuntimeError, match="do not have strides"):
        ember.eye(2).to_sparse_csr().stride()
    assert d.layout is ember.strided and not d.is_sparse and repr(ember.sparse_csr) == "torch.sparse_csr"


def test_unsupported_op_raises_not_implemented():
    u = ember.sparse_coo_tensor([[1, 0]], [1.0, 2.0])
    with pytest.raises(NotImplementedError, match="Could not run 'aten::cumsum' with arguments from the "
                                                  "'SparseCPU' backend"):
        ember.cumsum(u, 0)
    with pytest.raises(NotImplementedError, match="SparseCsrCPU"):
        ember.exp(ember.eye(2).to_sparse_csr())


def test_repr_mentions_members():
    text = repr(ember.sparse_coo_tensor([[0, 1]], [1.0, 2.0]))
    assert "indices=tensor(" in text and "layout=torch.sparse_coo" in text and "nnz=2" in text
    assert "crow_indices" in repr(ember.eye(2).to_sparse_csr())
    assert to_numpy(ember.eye(2).to_sparse()).shape == (2, 2)


@pytest.mark.parametrize("build", [
    lambda L: L.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3)),
    lambda L: L.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3)).to_sparse_csr(),
    lambda L: L.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3)).to_sparse_csc(),
    lambda L: L.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3)).double().to_sparse_csr(),
    lambda L: L.sparse_coo_tensor([[0, 1], [2, 0]], [3, 4], (2, 3)).to_sparse_csr(),
    lambda L: L.sparse_coo_tensor([[0, 1, 1, 2], [2, 0, 2, 5]], L.arange(4.0) * 1000.123, (300, 6)).to_sparse_csr(),
    lambda L: L.eye(3).to_sparse_bsr((1, 1)),
    lambda L: L.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (3,), dtype=L.float16),
])
def test_sparse_repr_matches_torch(build):
    """Members printed without their own dtype, wrapped under their bracket; COO's suffixes start a
    line, compressed layouts' follow the values until the line is full."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = repr(build(torch))
    assert repr(build(ember)).replace("ember.", "torch.") == expected


def test_is_contiguous_on_sparse_layouts_matches_torch():
    dense = [[0.0, 1.0], [2.0, 0.0]]
    e, t = ember.tensor(dense).to_sparse(), torch.tensor(dense).to_sparse()
    # COO answers False (coalesced or not, any memory format), as PyTorch.
    assert e.is_contiguous() is t.is_contiguous() is False
    assert e.coalesce().is_contiguous() is t.coalesce().is_contiguous() is False
    assert e.is_contiguous(memory_format=ember.channels_last) is False
    for conv, args in [("to_sparse_csr", ()), ("to_sparse_csc", ()), ("to_sparse_bsr", ((1, 1),)),
                       ("to_sparse_bsc", ((1, 1),))]:
        te = getattr(ember.tensor(dense), conv)(*args)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's beta-state note for compressed layouts
            tt = getattr(torch.tensor(dense), conv)(*args)
        with pytest.raises(RuntimeError) as ee:
            te.is_contiguous()
        with pytest.raises(RuntimeError) as et:
            tt.is_contiguous()
        assert str(ee.value) == str(et.value)
