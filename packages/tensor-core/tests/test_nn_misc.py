"""embedding (+ dense backward), dropout variants, cosine_similarity, pairwise_distance, normalize."""

from __future__ import annotations

import numpy as np
import pytest
import torch.nn.functional as F

import ember
from ember._src.ops.nn import embedding_dropout as nn_misc

from conftest import assert_same, from_torch, make_pair, torch


def _indices(shape, high, seed=0, dtype=np.int64):
    arr = np.random.default_rng(seed).integers(0, high, size=shape).astype(dtype)
    return ember.tensor(arr), torch.from_numpy(arr.copy())


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "int64"])
@pytest.mark.parametrize("shape", [(5,), (2, 3), (0,), ()])
@pytest.mark.parametrize("idx_dtype", [np.int64, np.int32])
def test_embedding(name, shape, idx_dtype):
    ew, tw = make_pair((7, 4), name)
    ei, ti = _indices(shape, 7, dtype=idx_dtype)
    assert_same(nn_misc.embedding(ei, ew), F.embedding(ti, tw))
    assert_same(ember.embedding(ew, ei), torch.embedding(tw, ti))


@pytest.mark.parametrize("layout", ["transposed", "sliced"])
def test_embedding_strided_weight(layout):
    ew, tw = make_pair((6, 6), "float32", layout=layout)
    ei, ti = _indices((4,), 6)
    assert_same(nn_misc.embedding(ei, ew, padding_idx=-2), F.embedding(ti, tw, padding_idx=-2))


def test_embedding_max_norm_renorms_in_place():
    ew, tw = make_pair((5, 3), "float64")
    ei, ti = _indices((4,), 5)
    assert_same(nn_misc.embedding(ei, ew, max_norm=1.0), F.embedding(ti, tw, max_norm=1.0))
    assert_same(ew, tw)


def test_embedding_errors():
    w = ember.ones(4, 2)
    with pytest.raises(IndexError, match="index out of range in self"):
        nn_misc.embedding(ember.tensor([0, 4]), w)
    with pytest.raises(IndexError, match="index out of range in self"):
        nn_misc.embedding(ember.tensor([-1]), w)
    with pytest.raises(RuntimeError, match="Long, Int"):
        nn_misc.embedding(ember.tensor([0.0]), w)
    with pytest.raises(AssertionError):
        nn_misc.embedding(ember.tensor([0]), w, padding_idx=4)


@pytest.mark.parametrize("name", ["float32", "float64"])
@pytest.mark.parametrize("scale_grad", [True, False])
@pytest.mark.parametrize("padding_idx", [-1, 2])
def test_embedding_dense_backward(name, scale_grad, padding_idx):
    ei, ti = _indices((3, 4), 6)
    eg, tg = make_pair((3, 4, 5), name)
    out = nn_misc.embedding_dense_backward(eg, ei, 6, padding_idx, scale_grad)
    ref = torch.ops.aten.embedding_dense_backward(tg, ti, 6, padding_idx, scale_grad)
    assert_same(out, ref)


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_dropout_values(p):
    x = ember.ones(2000, dtype=ember.float64) * 3
    ember.manual_seed(0)
    out = nn_misc.dropout(x, p)
    vals = set(np.unique(out.numpy()).tolist())
    assert vals <= {0.0, 3.0 / (1 - p) if p < 1 else 0.0}
    kept = float((out != 0).sum().item()) / 2000
    assert abs(kept - (1 - p)) < 0.05
    ember.manual_seed(0)
    assert ember.equal(nn_misc.dropout(x, p), out)


def test_dropout_modes_and_errors():
    x = ember.ones(4, 3)
    assert nn_misc.dropout(x, 0.5, training=False) is x
    y = x.clone()
    out = nn_misc.dropout(y, 0.5, inplace=True)
    assert out is y and set(np.unique(y.numpy()).tolist()) <= {0.0, 2.0}
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn_misc.dropout(x, 1.5)
    with pytest.raises(ValueError, match="between 0 and 1"):
        ember.dropout(x, -0.1, True)
    f = nn_misc.feature_dropout(ember.ones(8, 50, 3), 0.5)
    planes = f.numpy()
    assert all(len(set(planes[i, j].tolist())) == 1 for i in range(8) for j in range(50))
    out, mask = ember.native_dropout(x, 0.5, True)
    assert mask.dtype is ember.bool and ember.equal(out, mask.to(ember.float32) * 2)


@pytest.mark.parametrize("name", ["float32", "float64"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cosine_similarity(name, dim):
    a, ta = make_pair((3, 4), name)
    b, tb = make_pair((1, 4), name, seed=1)
    assert_same(nn_misc.cosine_similarity(a, b, dim), F.cosine_similarity(ta, tb, dim))
    z = ember.zeros(3, 4, dtype=a.dtype)
    assert_same(ember.cosine_similarity(a, z, dim), torch.cosine_similarity(ta, torch.zeros(3, 4, dtype=ta.dtype), dim))


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0])
@pytest.mark.parametrize("keepdim", [True, False])
def test_pairwise_distance(p, keepdim):
    a, ta = make_pair((3, 4), "float64")
    b, tb = make_pair((3, 4), "float64", seed=1)
    assert_same(nn_misc.pairwise_distance(a, b, p, keepdim=keepdim), F.pairwise_distance(ta, tb, p, keepdim=keepdim))
    assert_same(ember.pairwise_distance(a[0], b[0], p), torch.pairwise_distance(ta[0], tb[0], p))


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1)])
def test_normalize(p, dim):
    a, ta = make_pair((3, 4), "float32")
    assert_same(nn_misc.normalize(a, p, dim), F.normalize(ta, p, dim))
    z = from_torch(torch.zeros(2, 3))
    assert_same(nn_misc.normalize(z), F.normalize(torch.zeros(2, 3)))


@pytest.mark.parametrize("name", ["float32", "float64"])
@pytest.mark.parametrize("dim", [0, -1])
def test_softmax_backward_data(name, dim):
    e, t = make_pair((3, 5), name)
    eg, tg = make_pair((3, 5), name, seed=1)
    ey, ty = ember.softmax(e, dim), torch.softmax(t, dim)
    assert_same(nn_misc._softmax_backward_data(eg, ey, dim, e.dtype),
                torch._softmax_backward_data(tg, ty, dim, t.dtype))
    ey, ty = ember.log_softmax(e, dim), torch.log_softmax(t, dim)
    assert_same(nn_misc._log_softmax_backward_data(eg, ey, dim, e.dtype),
                torch._log_softmax_backward_data(tg, ty, dim, t.dtype))


def test_embedding_with_zero_width_rows_still_checks_indices():
    # Found by test_fuzz_ops: with an empty output (weight of shape (n, 0)) the kernel was skipped,
    # so out-of-range indices went unreported. (PyTorch raises RuntimeError from another code path
    # here, IndexError otherwise; ember raises IndexError for both.)
    with pytest.raises(IndexError, match="index out of range in self"):
        ember.embedding(ember.ones(1, 0), ember.tensor([3]))
    with pytest.raises(RuntimeError):
        torch.embedding(torch.ones(1, 0), torch.tensor([3]))
    assert ember.embedding(ember.ones(2, 0), ember.tensor([1, 0])).shape == (2, 0)
