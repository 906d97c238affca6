"""The scattering ops on CUDA against the CPU kernels: scatter/scatter_add/scatter_reduce,
index_add/index_copy/index_fill, index_put (accumulate), masked_scatter, nonzero, boolean-mask
indexing, and the gradients that write through them (GPU only)."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import assert_same, needs_gpu, rand

import ember

pytestmark = [pytest.mark.gpu, needs_gpu]

DTYPES = [ember.float32, ember.float16, ember.bfloat16, ember.float64, ember.int64, ember.int32]


def _index(shape, high, seed=0):
    return ember.tensor(np.random.default_rng(seed).integers(0, high, size=shape))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_and_reduce(dtype, dim):
    base = rand((4, 5, 6), dtype, seed=1)
    ishape = [3, 4, 5]
    ishape[dim] = 9
    index = _index(ishape, base.shape[dim], seed=2)
    src = rand((9, 9, 9), dtype, seed=3).transpose(0, 2)
    # Plain scatter with duplicate indices: CUDA keeps the CPU's order (the last entry wins).
    assert_same(base.cuda().scatter(dim, index.cuda(), src.cuda()), base.scatter(dim, index, src))
    assert_same(base.cuda().scatter(dim, index.cuda(), 2), base.scatter(dim, index, 2))
    assert_same(ember.scatter_add(base.cuda(), dim, index.cuda(), src.cuda()), ember.scatter_add(base, dim, index, src),
                dtype)
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            got = base.cuda().scatter_reduce(dim, index.cuda(), src.cuda(), reduce, include_self=include_self)
            want = base.scatter_reduce(dim, index, src, reduce, include_self=include_self)
            assert_same(got, want, dtype)


def test_scatter_legacy_reduce_int32_index_and_errors():
    base, src = rand((5, 7)), rand((5, 7), seed=1)
    index = _index((5, 7), 5).to(ember.int32)
    for reduce in ("add", "multiply"):
        assert_same(base.cuda().scatter(0, index.cuda(), src.cuda(), reduce=reduce),
                    base.scatter(0, index, src, reduce=reduce))
    with pytest.raises(RuntimeError, match="Expected self.dtype to be equal to src.dtype"):
        base.cuda().scatter_(0, index.cuda(), src.cuda().double())
    # An out-of-range index is reported at the next synchronization (PyTorch's device-side assert).
    bad = ember.tensor([[0, 9]]).cuda()
    base.cuda().scatter_add_(0, bad, src.cuda()[:1, :2])
    with pytest.raises(RuntimeError, match="out of bounds"):
        ember.cuda.synchronize()


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16, ember.int64, ember.bool], ids=str)
def test_index_add_copy_fill(dtype):
    base = rand((6, 8), dtype, seed=4)
    idx = ember.tensor([5, 0, 5, 2])
    src0, src1 = rand((4, 8), dtype, seed=5), rand((6, 4), dtype, seed=6)
    if dtype is not ember.bool:
        assert_same(base.cuda().index_add(0, idx.cuda(), src0.cuda()), base.index_add(0, idx, src0), dtype)
        assert_same(base.cuda().index_add(1, idx.cuda(), src1.cuda(), alpha=2), base.index_add(1, idx, src1, alpha=2),
                    dtype)
    uniq = ember.tensor([5, 0, 2])
    assert_same(base.cuda().index_copy(0, uniq.cuda(), src0[:3].cuda()), base.index_copy(0, uniq, src0[:3]))
    value = True if dtype is ember.bool else 3
    assert_same(base.cuda().index_fill(1, ember.tensor([-1, 2]).cuda(), value),
                base.index_fill(1, ember.tensor([-1, 2]), value))


def test_index_add_many_rows_takes_the_atomic_path():
    table = rand((100, 16), seed=7)
    idx = _index((5000,), 100, seed=8)
    src = rand((5000, 16), seed=9)
    assert_same(table.cuda().index_add(0, idx.cuda(), src.cuda()), table.index_add(0, idx, src), rtol=1e-4,
                atol=1e-4)
    ints = rand((100, 16), ember.int64)
    assert_same(ints.cuda().index_add(0, idx.cuda(), ints[idx].cuda()), ints.index_add(0, idx, ints[idx]))


@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.int64, ember.bool], ids=str)
def test_index_put_masks_and_nonzero(dtype):
    x = rand((7, 5), dtype, seed=10)
    rows = ember.tensor([6, 0, 6, -1])
    vals = rand((4, 5), dtype, seed=11)
    uniq = ember.tensor([6, 0, -3])  # duplicates leave the order of plain writes undefined on CUDA, as in PyTorch
    assert_same(x.cuda().index_put((uniq.cuda(),), vals[:3].cuda()), x.index_put((uniq,), vals[:3]))
    assert_same(x.cuda().index_put((rows.cuda(),), vals.cuda(), accumulate=True),
                x.index_put((rows,), vals, accumulate=True), dtype)
    cols = ember.tensor([1, 3])
    g = x.cuda()
    g[rows[:2].cuda(), cols.cuda()] = vals[0, :2].cuda()
    c = x.clone()
    c[rows[:2], cols] = vals[0, :2]
    assert_same(g, c)
    mask = rand((7, 5), ember.bool, seed=12)
    assert_same(ember.nonzero(x.cuda()), ember.nonzero(x))
    assert_same(x.cuda()[mask.cuda()], x[mask])
    assert_same(x.cuda()[mask[:, 0].cuda(), 1:], x[mask[:, 0], 1:])
    g, c = x.cuda(), x.clone()
    g[mask.cuda()] = vals[0, 0].cuda()
    c[mask] = vals[0, 0]
    assert_same(g, c)
    src = rand((40,), dtype, seed=13)
    assert_same(x.cuda().masked_scatter(mask.cuda(), src.cuda()), x.masked_scatter(mask, src))
    assert_same(x.cuda().masked_scatter(mask[0].cuda(), src.cuda()), x.masked_scatter(mask[0], src))
    assert ember.nonzero(ember.zeros(0, 3).cuda()).shape == (0, 2)


def test_gradients_through_scatter():
    x = rand((6, 9), seed=14)
    idx = _index((6, 4), 9, seed=15)
    grads = []
    for dev in ("cpu", "cuda"):
        xs = x.to(dev).clone().requires_grad_()  # a leaf of its own on each device
        out = (ember.gather(xs, 1, idx.to(dev)) * 2).sum() + (xs[(idx[:, 0] % 6).to(dev)] ** 2).sum()
        out = out + ember.take_along_dim(xs, idx.to(dev), 1).sum() + xs.cummax(1)[0].sum()
        out.backward()
        grads.append(xs.grad)
    assert_same(grads[1], grads[0], rtol=1e-5, atol=1e-5)
