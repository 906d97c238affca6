"""sort / topk / selection / unique / searchsorted / histc / bincount vs PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import ember

from conftest import assert_same, make_pair, torch

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
LAYOUTS = ["contiguous", "transposed", "sliced", "expanded"]
NAN = float("nan")


def distinct_pair(shape, name="float32", seed=0):
    """Values without ties (so every index is determined)."""
    n = int(np.prod(shape))
    arr = np.random.default_rng(seed).permutation(n).reshape(shape) - n // 2
    e, t = ember.from_numpy(arr.copy()), torch.from_numpy(arr.copy())
    return e.to(getattr(ember, name)), t.to(getattr(torch, name))


@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable_dtypes(name, descending):
    e, t = make_pair((3, 40), name, low=-3, high=3)  # many ties: stable order decides indices
    assert_same(ember.sort(e, descending=descending, stable=True), torch.sort(t, descending=descending, stable=True))
    assert_same(e.argsort(dim=0, descending=descending, stable=True),
                t.argsort(dim=0, descending=descending, stable=True))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("n", [7, 600, 3000])  # below and above the radix-sort threshold
def test_sort_layouts_lengths(layout, n):
    e, t = make_pair((2, n), "float32", layout=layout)
    assert_same(e.sort(dim=1), t.sort(dim=1, stable=True))
    assert_same(e.sort(dim=0, descending=True), t.sort(dim=0, descending=True, stable=True))


@pytest.mark.parametrize("n", [5, 1000])
@pytest.mark.parametrize("name", ["float32", "float64", "float16"])
def test_sort_nan_inf_signed_zero(n, name):
    base = [NAN, 1.0, -0.0, float("inf"), 0.0, -float("inf"), NAN, -2.0]
    arr = np.array((base * (n // len(base) + 1))[:n])
    e, t = ember.tensor(arr).to(getattr(ember, name)), torch.tensor(arr).to(getattr(torch, name))
    for desc in (False, True):
        assert_same(ember.sort(e, descending=desc, stable=True), torch.sort(t, descending=desc, stable=True))


def test_sort_scalar_empty_int64_extremes_and_out():
    assert_same(ember.sort(ember.tensor(3.0)), torch.sort(torch.tensor(3.0)))
    assert_same(ember.sort(ember.ones(2, 0), 1), torch.sort(torch.ones(2, 0), 1))
    big = [2**62, -(2**63), 5, 2**63 - 1, -1] * 200
    assert_same(ember.sort(ember.tensor(big), stable=True), torch.sort(torch.tensor(big), stable=True))
    e, t = distinct_pair((4, 5))
    vals, idx = ember.empty(0), ember.empty(0, dtype=ember.int64)
    result = ember.sort(e, 0, out=(vals, idx))
    assert result.values is vals
    assert_same((vals, idx), tuple(torch.sort(t, 0)))
    assert_same(ember.msort(e), torch.msort(t))
    with pytest.raises(IndexError):
        ember.sort(e, 2)


@pytest.mark.parametrize("name", ["int32", "int64", "float16", "float32", "float64"])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("shape, k, dim", [((3, 50), 4, 1), ((3, 600), 5, 1), ((30, 4), 30, 0), ((5,), 5, 0)])
def test_topk(name, largest, shape, k, dim):
    e, t = distinct_pair(shape, name)
    assert_same(ember.topk(e, k, dim, largest), torch.topk(t, k, dim, largest))
    ev, ei = e.topk(k, dim, largest, sorted=False)
    tv, ti = t.topk(k, dim, largest, sorted=False)
    assert_same(ev.sort(dim)[0], tv.sort(dim)[0])


def test_out_pairs():
    e, t = distinct_pair((4, 5))
    for fn, args in ((ember.topk, (2,)), (ember.kthvalue, (2, 0)), (ember.median, (1,)), (ember.mode, (0,))):
        vals, idx = ember.empty(0), ember.empty(0, dtype=ember.int64)
        result = fn(e, *args, out=(vals, idx))
        assert result.values is vals and result.indices is idx
        assert_same((vals, idx), tuple(getattr(torch, fn.__name__)(t, *args)))
    scalar = ember.empty(0)
    assert ember.median(e, out=scalar) is scalar
    assert_same(scalar, torch.median(t))


def test_topk_nan_scalar_errors():
    e = ember.tensor([1.0, NAN, 3.0, -1.0] * 100)
    t = torch.tensor([1.0, NAN, 3.0, -1.0] * 100)
    assert_same(e.topk(3)[0], t.topk(3)[0])
    assert_same(ember.topk(ember.tensor(3.0), 1), torch.topk(torch.tensor(3.0), 1))
    assert_same(ember.topk(e, 0), torch.topk(t, 0))
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        ember.topk(ember.tensor([1.0, 2.0]), 3)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        ember.topk(ember.tensor([1.0, 2.0]), -1)


@pytest.mark.parametrize("name", ["int16", "int64", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_kthvalue_median_mode(name, layout):
    e, t = distinct_pair((5, 7), name)
    if layout == "transposed":
        e, t = e.t(), t.t()
    for k in (1, 3, 5):
        assert_same(ember.kthvalue(e, k, 0), torch.kthvalue(t, k, 0))
    assert_same(e.kthvalue(2, dim=1, keepdim=True), t.kthvalue(2, dim=1, keepdim=True))
    assert_same(ember.median(e), torch.median(t))
    assert_same(e.median(0), t.median(0))
    assert_same(e.median(1, keepdim=True), t.median(1, keepdim=True))
    assert_same(e.nanmedian(1), t.nanmedian(1))
    em, tm = make_pair((4, 30), name, low=0, high=4)  # repeated values
    check_mode(ember.mode(em), torch.mode(tm), em, 1)
    check_mode(em.mode(0, keepdim=True), tm.mode(0, keepdim=True), em, 0)


def check_mode(got, expected, e, dim):
    """Values equal torch's; PyTorch's index among equal values is unspecified, so check it points at the value."""
    assert_same(got.values, expected.values)
    idx = got.indices if got.indices.ndim == e.ndim else got.indices.unsqueeze(dim)
    vals = got.values if got.values.ndim == e.ndim else got.values.unsqueeze(dim)
    np.testing.assert_array_equal(e.gather(dim, idx).float().numpy(), vals.float().numpy())


def test_median_nan_rules():
    rows = [[3.0, NAN, 1.0, 2.0], [NAN, NAN, NAN, NAN], [4.0, 1.0, NAN, 2.0]]
    e, t = ember.tensor(rows), torch.tensor(rows)
    assert_same(e.median(1), t.median(1))
    got, expected = e.nanmedian(1), t.nanmedian(1)
    assert_same(got.values, expected.values)
    assert_same(got.indices[[0, 2]], expected.indices[[0, 2]])  # an all-NaN row's index is unspecified
    assert_same(ember.median(e), torch.median(t))
    assert_same(ember.nanmedian(e), torch.nanmedian(t))
    assert_same(ember.median(ember.tensor([])), torch.median(torch.tensor([])))


def test_selection_scalar_and_errors():
    s, ts = ember.tensor(3.0), torch.tensor(3.0)
    assert_same(ember.kthvalue(s, 1), torch.kthvalue(ts, 1))
    assert_same(ember.median(s, 0), torch.median(ts, 0))
    assert_same(ember.mode(s), torch.mode(ts))
    with pytest.raises(RuntimeError, match="kthvalue\\(\\): selected number k out of range for dimension 0"):
        ember.kthvalue(ember.tensor([3.0, 1.0, 2.0]), 4)
    with pytest.raises(IndexError, match="median\\(\\): Expected reduction dim 1 to have non-zero size"):
        ember.median(ember.ones(2, 0), 1)
    with pytest.raises(IndexError, match="mode\\(\\): Expected reduction dim 1 to have non-zero size"):
        ember.mode(ember.ones(2, 0), 1)


@pytest.mark.parametrize("k", [0, 1, 2])
def test_kthvalue_empty_dim_is_an_index_error_whatever_k(k):
    # Found by test_fuzz_ops: the k range check ran first and raised RuntimeError.
    for lib in (ember, torch):
        with pytest.raises(IndexError, match="kthvalue\\(\\): Expected reduction dim 0 to have non-zero size"):
            lib.kthvalue(lib.ones(0, 3), k, 0)


@pytest.mark.parametrize("name", ["bool", "int32", "int64", "float32", "float16"])
def test_unique_flat(name):
    e, t = make_pair((6, 7), name, low=-4, high=4)
    for inverse in (False, True):
        for counts in (False, True):
            assert_same(ember.unique(e, return_inverse=inverse, return_counts=counts),
                        torch.unique(t, return_inverse=inverse, return_counts=counts))
    assert_same(e.unique(sorted=False), t.unique(sorted=False))
    assert_same(ember.unique_consecutive(e, return_inverse=True, return_counts=True),
                torch.unique_consecutive(t, return_inverse=True, return_counts=True))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unique_dim(dim):
    e, t = make_pair((6, 3), "int64", low=0, high=2)  # repeated rows and columns
    assert_same(ember.unique(e, dim=dim, return_inverse=True, return_counts=True),
                torch.unique(t, dim=dim, return_inverse=True, return_counts=True))
    assert_same(ember.unique_consecutive(e, dim=dim, return_counts=True),
                torch.unique_consecutive(t, dim=dim, return_counts=True))


def test_unique_empty_scalar_and_errors():
    assert_same(ember.unique(ember.tensor([], dtype=ember.int64), return_counts=True),
                torch.unique(torch.tensor([], dtype=torch.int64), return_counts=True))
    assert_same(ember.unique(ember.tensor(5), return_inverse=True), torch.unique(torch.tensor(5), return_inverse=True))
    with pytest.raises(IndexError):
        ember.unique(ember.tensor([1, 1, 2]), dim=3)
    with pytest.raises(NotImplementedError):
        ember.unique(ember.empty(3, device="meta"))


@pytest.mark.parametrize("name", ["int32", "int64", "float32", "float64"])
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_bucketize(name, right):
    seq_e, seq_t = make_pair((40,), name, low=-10, high=10)
    seq_e, seq_t = seq_e.sort()[0], seq_t.sort()[0]
    ve, vt = make_pair((3, 5), name, low=-12, high=12, seed=2)
    assert_same(ember.searchsorted(seq_e, ve, right=right), torch.searchsorted(seq_t, vt, right=right))
    side = "right" if right else "left"
    assert_same(ember.searchsorted(seq_e, ve, side=side, out_int32=True),
                torch.searchsorted(seq_t, vt, side=side, out_int32=True))
    assert_same(ember.bucketize(ve, seq_e, right=right), torch.bucketize(vt, seq_t, right=right))
    # batched: one sorted row per row of values, values given non-contiguously
    be, bt = make_pair((3, 8), name, seed=4)
    be, bt = be.sort(1)[0], bt.sort(1)[0]
    vbe, vbt = make_pair((3, 5), name, seed=5, layout="transposed")
    assert_same(ember.searchsorted(be, vbe, right=right), torch.searchsorted(bt, vbt, right=right))


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("seq", [[1.0, 2.0, NAN], [NAN, NAN], [-np.inf, 0.0, np.inf, NAN], [NAN], [2.0, 1.0]])
def test_searchsorted_with_nan_as_torch(name, right, seq):
    # PyTorch's binary search tests "not at least" / "not above", so a NaN on either side moves
    # the search right (a NaN value goes past a NaN in the sequence too).
    values = [NAN, 1.5, 3.0, -np.inf, np.inf, 2.0, -0.0, 0.0]
    e_seq, t_seq = ember.tensor(seq, dtype=getattr(ember, name)), torch.tensor(seq, dtype=getattr(torch, name))
    e_val, t_val = ember.tensor(values, dtype=getattr(ember, name)), torch.tensor(values, dtype=getattr(torch, name))
    assert_same(ember.searchsorted(e_seq, e_val, right=right), torch.searchsorted(t_seq, t_val, right=right))
    assert_same(ember.bucketize(e_val, e_seq, right=right), torch.bucketize(t_val, t_seq, right=right))


def test_searchsorted_sorter_scalar_mixed_and_errors():
    seq_e, seq_t = ember.tensor([5, 1, 3]), torch.tensor([5, 1, 3])
    srt_e, srt_t = ember.tensor([1, 2, 0]), torch.tensor([1, 2, 0])
    ve, vt = ember.tensor([0, 3, 6, 2]), torch.tensor([0, 3, 6, 2])
    assert_same(ember.searchsorted(seq_e, ve, sorter=srt_e), torch.searchsorted(seq_t, vt, sorter=srt_t))
    assert_same(ember.searchsorted(ember.tensor([1, 3, 5]), 4), torch.searchsorted(torch.tensor([1, 3, 5]), 4))
    assert_same(ember.searchsorted(ember.tensor([1.0, 3, 5]), ember.tensor([4])),
                torch.searchsorted(torch.tensor([1.0, 3, 5]), torch.tensor([4])))
    assert_same(ember.bucketize(3, ember.tensor([1, 3, 5])), torch.bucketize(3, torch.tensor([1, 3, 5])))
    with pytest.raises(RuntimeError, match="side and right can't be set to opposites"):
        ember.searchsorted(seq_e, ve, side="left", right=True)
    with pytest.raises(RuntimeError, match="sorter index out of range"):
        ember.searchsorted(seq_e, ve, sorter=ember.tensor([0, 1, 5]))
    with pytest.raises(RuntimeError, match="boundaries tensor should be 1 dimension"):
        ember.searchsorted(ember.tensor([[1, 3, 5]]), ember.tensor([3, 4]))
    with pytest.raises(RuntimeError, match="boundaries tensor must be 1 dimension"):
        ember.bucketize(ember.tensor([3]), ember.tensor([[1, 3, 5]]))


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_histc(name):
    e, t = make_pair((50,), name, low=-3, high=3)
    assert_same(ember.histc(e), torch.histc(t))
    assert_same(ember.histc(e, bins=7, min=-1, max=2), torch.histc(t, bins=7, min=-1, max=2))
    assert_same(e.histc(4, 0, 0), t.histc(4, 0, 0))
    assert_same(ember.histc(ember.ones(3, dtype=e.dtype), 5), torch.histc(torch.ones(3, dtype=t.dtype), 5))


def test_histc_errors():
    with pytest.raises(NotImplementedError):
        ember.histc(ember.tensor([1, 2, 2]))
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        ember.histc(ember.tensor([1.0, 2.0]), bins=0)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        ember.histc(ember.tensor([1.0, 2.0]), min=3, max=1)
    with pytest.raises(RuntimeError, match="is not finite"):
        ember.histc(ember.tensor([1.0, 2.0, float("inf")]))


@pytest.mark.parametrize("name", ["uint8", "int32", "int64"])
def test_bincount(name):
    e, t = make_pair((30,), name, low=0, high=9)
    assert_same(ember.bincount(e), torch.bincount(t))
    assert_same(e.bincount(minlength=15), t.bincount(minlength=15))
    we, wt = make_pair((30,), "float32", seed=3)
    assert_same(ember.bincount(e, we), torch.bincount(t, wt))
    wie, wit = make_pair((30,), "int32", seed=3)
    assert_same(ember.bincount(e, wie), torch.bincount(t, wit))
    empty_e, empty_t = ember.tensor([], dtype=ember.int64), torch.tensor([], dtype=torch.int64)
    assert_same(ember.bincount(empty_e), torch.bincount(empty_t))


def test_bincount_errors():
    with pytest.raises(RuntimeError, match="non-negative integral"):
        ember.bincount(ember.tensor([1, -2, 2]))
    with pytest.raises(RuntimeError, match="non-negative integral"):
        ember.bincount(ember.tensor([[1, 2]]))
    with pytest.raises(NotImplementedError):
        ember.bincount(ember.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="minlength should be >= 0"):
        ember.bincount(ember.tensor([1, 2]), minlength=-1)
    with pytest.raises(RuntimeError, match="weights should be 1-d"):
        ember.bincount(ember.tensor([1, 2]), weights=ember.ones(3))


def test_meta_shapes():
    m = ember.empty(4, 6, device="meta")
    v, i = ember.sort(m, 0)
    assert v.shape == (4, 6) and i.dtype is ember.int64 and v.device.type == "meta"
    assert ember.topk(m, 2)[0].shape == (4, 2)
    assert ember.kthvalue(m, 2, 0)[0].shape == (6,)
    assert ember.median(m, 1, keepdim=True)[1].shape == (4, 1)
    assert ember.histc(m, 9).shape == (9,)


def test_histc_and_searchsorted_of_empty_strided_tensors():
    # Found by test_fuzz_ops: an empty view with odd strides passed Tensor.contiguous() unchanged,
    # then the native kernel's own contiguity check rejected it ("bad operands" ValueError).
    e, t = ember.ones(4, 2).as_strided((0, 1), (2, 2)), torch.ones(4, 2).as_strided((0, 1), (2, 2))
    assert_same(ember.histc(e, 3), torch.histc(t, 3))
    seq_e, seq_t = ember.ones(4, 2, dtype=ember.int64).as_strided((0, 1), (1, 1)), torch.ones(0, 1, dtype=torch.int64)
    assert_same(ember.searchsorted(seq_e, seq_e), torch.searchsorted(seq_t, seq_t))


def test_sort_of_complex_raises_torch_text():
    for lib in (ember, torch):
        with pytest.raises(RuntimeError) as err:
            lib.ones(2, dtype=lib.cfloat).sort()
        assert str(err.value) == " Sort does not support complex dtypes on CPU"


@pytest.mark.parametrize("name", ["int8", "int64", "float16", "float32", "float64"])
def test_kthvalue_index_among_ties_is_pytorchs(name):
    # ember picked the first position among equal values; PyTorch reports the position its
    # quickselect leaves at k (a program printing kthvalue's indices on ties differed).
    rng = np.random.default_rng(3)
    for n in (2, 3, 8, 17, 40):
        arr = rng.integers(0, 4, size=(6, n)).astype(np.float64)
        if name.startswith("float"):
            arr[rng.random(arr.shape) < 0.1] = NAN
        e, t = ember.tensor(arr).to(getattr(ember, name)), torch.tensor(arr).to(getattr(torch, name))
        for k in range(1, n + 1):
            assert_same(e.kthvalue(k, 1), t.kthvalue(k, 1))
