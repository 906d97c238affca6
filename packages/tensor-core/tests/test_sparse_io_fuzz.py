"""Sparse tensors in and out (ember.save/load both ways with torch, pickle, SciPy) and fuzzing of
malformed sparse inputs: they must raise, never crash (issue 19)."""

from __future__ import annotations

import copy
import io
import pickle

import numpy as np
import pytest
import torch

import ember
from ember import _C
from ember.serialization import UnpicklingError


def _samples(mod):
    coo = mod.sparse_coo_tensor([[0, 1, 1], [2, 0, 0]], [3.0, 4.0, 5.0], (2, 3))
    eye = mod.eye(4, dtype=mod.float64)
    return {"coo": coo, "coalesced": coo.coalesce(), "csr": coo.to_sparse_csr(), "csc": eye.to_sparse_csc(),
            "bsr": eye.to_sparse_bsr((2, 2)), "bsc": eye.to_sparse_bsc((2, 2)),
            "hybrid": mod.ones(3, 2, 2).to_sparse(2), "int": mod.eye(3, dtype=mod.int64).to_sparse()}


def _dense(x):
    return x.to_dense().numpy()


def test_ember_save_torch_load(tmp_path):
    saved = _samples(ember)
    ember.save(saved, tmp_path / "e.pt")
    loaded = torch.load(tmp_path / "e.pt", weights_only=True)
    for name, e in saved.items():
        t = loaded[name]
        assert str(t.layout) == str(e.layout)
        np.testing.assert_array_equal(_dense(t), _dense(e))
    assert loaded["coalesced"].is_coalesced() and not loaded["coo"].is_coalesced()


def test_torch_save_ember_load(tmp_path):
    saved = _samples(torch)
    torch.save(saved, tmp_path / "t.pt")
    for kwargs in ({}, {"weights_only": True}):
        loaded = ember.load(tmp_path / "t.pt", **kwargs)
        for name, t in saved.items():
            e = loaded[name]
            assert str(e.layout) == str(t.layout)
            np.testing.assert_array_equal(_dense(e), _dense(t))
        assert loaded["coalesced"].is_coalesced()


def test_malformed_checkpoint_is_rejected(tmp_path):
    bad = torch.sparse_coo_tensor([[0, 7]], [1.0, 2.0], (3,))  # torch builds it unchecked
    buffer = io.BytesIO()
    torch.save(bad, buffer)
    buffer.seek(0)
    with pytest.raises(UnpicklingError, match="size is inconsistent with indices"):
        ember.load(buffer)


def test_pickle_and_deepcopy():
    for name, e in _samples(ember).items():
        for clone in (pickle.loads(pickle.dumps(e)), copy.deepcopy(e)):
            assert clone.layout is e.layout, name
            np.testing.assert_array_equal(_dense(clone), _dense(e))


def test_scipy_round_trip():
    sp = pytest.importorskip("scipy.sparse")
    m = sp.random(5, 6, density=0.4, format="csr", random_state=0)
    for fmt, layout in (("csr", ember.sparse_csr), ("csc", ember.sparse_csc), ("coo", ember.sparse_coo),
                        ("bsr", ember.sparse_bsr), ("lil", ember.sparse_coo)):
        e = ember.sparse.from_scipy(m.asformat(fmt))
        assert e.layout is layout
        np.testing.assert_allclose(e.to_dense().numpy(), m.toarray())
        np.testing.assert_allclose(ember.sparse.to_scipy(e).toarray(), m.toarray())
    dup = sp.coo_array(([1.0, 2.0], ([0, 0], [1, 1])), shape=(2, 2))
    np.testing.assert_allclose(ember.sparse.from_scipy(dup).to_dense().numpy(), [[0, 3], [0, 0]])
    with pytest.raises(ValueError):
        ember.sparse.to_scipy(ember.ones(2, 2, 2).to_sparse(2))


# -- fuzzing: random malformed inputs must raise a Python exception --------------------------------

_ERRORS = (RuntimeError, ValueError, IndexError, TypeError)


def _malformed_csr(rng):
    rows, cols = int(rng.integers(1, 6)), int(rng.integers(1, 6))
    nnz = int(rng.integers(0, 8))
    crow = np.sort(rng.integers(0, nnz + 1, rows + 1))
    crow[0], crow[-1] = 0, nnz
    col = rng.integers(0, cols, nnz)
    kind = rng.integers(0, 6)
    if kind == 0:
        crow = crow[:-1] if len(crow) > 1 else np.append(crow, 0)  # wrong crow length
    elif kind == 1 and nnz:
        col[rng.integers(0, nnz)] = cols + int(rng.integers(0, 3))  # column out of range
    elif kind == 2 and nnz:
        col[rng.integers(0, nnz)] = -1 - int(rng.integers(0, 3))
    elif kind == 3:
        crow[-1] = nnz + 1  # last pointer past nnz
    elif kind == 4 and rows > 1:
        crow[1] = crow[-1] + 1  # decreasing pointers
    else:  # unsorted or repeated columns inside a row
        crow = np.array([0, nnz] + [nnz] * (rows - 1))
        col = np.full(nnz, cols - 1)
        if nnz < 2:
            col = np.array([cols])
            nnz = 1
            crow = np.array([0, 1] + [1] * (rows - 1))
    return crow, col, rng.standard_normal(nnz), (rows, cols)


def test_fuzz_malformed_compressed():
    rng = np.random.default_rng(0)
    for _ in range(300):
        crow, col, values, shape = _malformed_csr(rng)
        with pytest.raises(_ERRORS):
            ember.sparse_csr_tensor(ember.tensor(crow), ember.tensor(col), ember.tensor(values), shape)
        dense = ember.ones(shape[1], 3, dtype=ember.float64)
        out = ember.empty(shape[0], 3, dtype=ember.float64)
        # The kernel itself re-checks what it reads: garbage members raise there too.
        if len(crow) == shape[0] + 1 and (crow[-1] != len(col) or (col >= shape[1]).any() or (col < 0).any()
                                          or (np.diff(crow) < 0).any()):
            with pytest.raises(_ERRORS):
                _C.sparse_csr_mm(ember.tensor(crow), ember.tensor(col), ember.tensor(values), dense, out)


def test_fuzz_malformed_coo():
    rng = np.random.default_rng(1)
    for _ in range(300):
        ndim = int(rng.integers(1, 4))
        shape = tuple(int(s) for s in rng.integers(1, 5, ndim))
        nnz = int(rng.integers(1, 6))
        idx = np.stack([rng.integers(0, s, nnz) for s in shape])
        d, j = int(rng.integers(0, ndim)), int(rng.integers(0, nnz))
        idx[d, j] = shape[d] + int(rng.integers(0, 4)) if rng.random() < 0.5 else -1 - int(rng.integers(0, 4))
        with pytest.raises(_ERRORS):
            ember.sparse_coo_tensor(ember.tensor(idx), ember.ones(nnz), shape)
        with pytest.raises(_ERRORS):  # the coalesce kernel checks bounds itself
            out_i, out_v = ember.empty(idx.shape, dtype=ember.int64), ember.empty(nnz, 1)
            _C.sparse_coalesce(ember.tensor(idx), ember.ones(nnz, 1), list(shape), out_i, out_v)
    for bad in ([[0.5, 1.0]], [[[0, 1]]], "x"):
        with pytest.raises(_ERRORS):
            ember.sparse_coo_tensor(bad, [1.0, 2.0], (3, 3))
    with pytest.raises(_ERRORS):
        ember.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (-1,))
    with pytest.raises(_ERRORS):
        ember.sparse_bsr_tensor([0, 1], [0], ember.ones(1, 2, 2), (3, 4))  # not divisible by the block
