"""gather / scatter family vs PyTorch: dtypes, dims, layouts, duplicates, empty, errors."""

from __future__ import annotations

import numpy as np
import pytest

import ember

from conftest import assert_same, from_torch, make_pair, torch

DTYPES = ["bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
LAYOUTS = ["contiguous", "transposed", "sliced", "expanded"]


def index_pair(shape, high, seed=1, dtype=np.int64):
    arr = np.random.default_rng(seed).integers(0, high, size=shape).astype(dtype)
    return ember.from_numpy(arr.copy()), torch.from_numpy(arr.copy())


@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_dtypes_dims(name, dim):
    e, t = make_pair((4, 5), name)
    ei, ti = index_pair((3, 4), 4 if dim == 0 else 5)
    assert_same(ember.gather(e, dim, ei), torch.gather(t, dim, ti))
    assert_same(e.gather(dim, ei), t.gather(dim, ti))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_gather_layouts(layout):
    e, t = make_pair((4, 6), "float32", layout=layout)
    ei, ti = index_pair((4, 6), 4)
    ei, ti = ei.t().contiguous().t(), ti.t().contiguous().t()  # a non-contiguous index too
    assert_same(ember.gather(e, 0, ei), torch.gather(t, 0, ti))


def test_gather_int32_index_zero_dim_and_empty():
    e, t = make_pair((3, 4), "float64")
    ei, ti = index_pair((2, 4), 3, dtype=np.int32)
    assert_same(ember.gather(e, 0, ei), torch.gather(t, 0, ti))
    s = ember.tensor(2.5)
    assert_same(ember.gather(s, 0, ember.tensor(0)), torch.gather(torch.tensor(2.5), 0, torch.tensor(0)))
    ei, ti = index_pair((0, 4), 3)
    assert_same(ember.gather(e, 0, ei), torch.gather(t, 0, ti))


def test_gather_out_and_meta():
    e, t = make_pair((3, 4), "float32")
    ei, ti = index_pair((3, 2), 4)
    out = ember.empty(0)
    ember.gather(e, 1, ei, out=out)
    assert_same(out, torch.gather(t, 1, ti))
    m = ember.gather(ember.empty(3, 4, device="meta"), 1, ember.empty(3, 2, dtype=ember.int64, device="meta"))
    assert m.shape == (3, 2) and m.device.type == "meta"


@pytest.mark.parametrize(
    "index, exc, msg",
    [
        ([[5]], RuntimeError, "index 5 is out of bounds for dimension 1 with size 3"),
        ([[-1]], RuntimeError, "index -1 is out of bounds for dimension 1 with size 3"),
        ([[1], [1], [1]], RuntimeError, "Size does not match at dimension 0"),
        ([1], RuntimeError, "same number of dimensions"),
    ],
)
def test_gather_errors(index, exc, msg):
    x = ember.arange(6.0).view(2, 3)
    with pytest.raises(exc, match=msg):
        ember.gather(x, 1, ember.tensor(index))


def test_gather_bad_dim_and_dtype():
    x = ember.arange(6.0).view(2, 3)
    with pytest.raises(IndexError):
        ember.gather(x, 2, ember.tensor([[1]]))
    with pytest.raises(RuntimeError, match="int32/int64"):
        ember.gather(x, 1, ember.tensor([[1.0]]))


def test_take_along_dim():
    e, t = make_pair((3, 4), "float32")
    ei, ti = index_pair((3, 1), 4)
    assert_same(ember.take_along_dim(e, ei, 1), torch.take_along_dim(t, ti, 1))
    ei, ti = index_pair((2, 1), 3)
    assert_same(ember.take_along_dim(e, ei, 0), torch.take_along_dim(t, ti, 0))  # broadcasts dim 1
    ei, ti = index_pair((5,), 12)
    assert_same(ember.take_along_dim(e, ei), torch.take_along_dim(t, ti))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        ember.take_along_dim(e, ember.tensor([[[1]]]), 1)
    with pytest.raises(RuntimeError, match="should be Long"):
        ember.take_along_dim(e, ember.tensor([[1]], dtype=ember.int32), 1)


@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_src_and_value(name, dim):
    e, t = make_pair((4, 5), name)
    es, ts = make_pair((4, 5), name, seed=3)
    # A permutation along dim keeps the written positions unique (deterministic result).
    perm = np.argsort(np.random.default_rng(2).random((4, 5)), axis=dim)[:3] if dim == 0 else \
        np.argsort(np.random.default_rng(2).random((4, 5)), axis=1)[:, :3]
    ei, ti = ember.from_numpy(perm.copy()), torch.from_numpy(perm.copy())
    assert_same(ember.scatter(e, dim, ei, es), torch.scatter(t, dim, ti, ts))
    assert_same(e.scatter(dim, ei, 1), t.scatter(dim, ti, 1))
    e2, t2 = e.clone(), t.clone()
    e2.scatter_(dim, ei, es)
    t2.scatter_(dim, ti, ts)
    assert_same(e2, t2)


@pytest.mark.parametrize("name", ["uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_add_duplicates(name, dim):
    e, t = make_pair((3, 4), name)
    es, ts = make_pair((6, 4) if dim == 0 else (3, 8), name, seed=4, low=0, high=3)
    ei, ti = index_pair(es.shape, 3 if dim == 0 else 4)  # many repeated indices
    assert_same(ember.scatter_add(e, dim, ei, es), torch.scatter_add(t, dim, ti, ts))
    assert_same(e.scatter_add(dim, ei, es), t.scatter_add(dim, ti, ts))


def test_scatter_add_large_exact_and_threads():
    n = 100_000
    ei, ti = index_pair((n,), 7)
    e_src, t_src = ember.ones(n, dtype=ember.int64), torch.ones(n, dtype=torch.int64)
    for threads in (1, 2):
        ember.set_num_threads(threads)
        try:
            assert_same(ember.zeros(7, dtype=ember.int64).scatter_add_(0, ei, e_src),
                        torch.zeros(7, dtype=torch.int64).scatter_add_(0, ti, t_src))
            e2, t2 = make_pair((300, 200), "float64")
            ei2, ti2 = index_pair((300, 200), 5)
            assert_same(ember.zeros(5, 200, dtype=ember.float64).scatter_add_(0, ei2, e2),
                        torch.zeros(5, 200, dtype=torch.float64).scatter_add_(0, ti2, t2))
        finally:
            ember.set_num_threads(1)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("name", ["int32", "int64", "float32", "float64", "bfloat16"])
def test_scatter_reduce(reduce, include_self, name):
    e, t = make_pair((4, 3), name, low=-3, high=4)
    es, ts = make_pair((6, 3), name, seed=5, low=-3, high=4)
    ei, ti = index_pair((6, 3), 3)  # row 3 is never written
    assert_same(ember.scatter_reduce(e, 0, ei, es, reduce, include_self=include_self),
                torch.scatter_reduce(t, 0, ti, ts, reduce, include_self=include_self))


def test_scatter_reduce_nan_and_legacy_reduce():
    e = ember.tensor([1.0, 2.0, 3.0])
    t = torch.tensor([1.0, 2.0, 3.0])
    es, ts = ember.tensor([float("nan"), 5.0, 0.5]), torch.tensor([float("nan"), 5.0, 0.5])
    ei, ti = ember.tensor([0, 1, 1]), torch.tensor([0, 1, 1])
    for reduce in ("amax", "amin"):
        assert_same(e.scatter_reduce(0, ei, es, reduce), t.scatter_reduce(0, ti, ts, reduce))
    with pytest.warns(UserWarning):
        got = e.scatter(0, ei, es, reduce="multiply")
    assert_same(got, t.scatter(0, ti, ts, reduce="multiply"))
    assert_same(e.scatter(0, ei, 2.0, reduce="add"), t.scatter(0, ti, 2.0, reduce="add"))


def test_scatter_empty_and_meta():
    e, t = make_pair((3, 4), "float32")
    ei, ti = index_pair((0, 4), 3)
    assert_same(ember.scatter_add(e, 0, ei, e), torch.scatter_add(t, 0, ti, t))
    m = ember.empty(3, 4, device="meta")
    assert m.scatter_add_(0, ember.empty(2, 4, dtype=ember.int64, device="meta"), m) is m


def test_scatter_errors():
    x = ember.arange(6.0).view(2, 3)
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 1 with size 3"):
        x.clone().scatter_(1, ember.tensor([[5]]), 1.0)
    with pytest.raises(RuntimeError, match="index 5 is out of bounds"):
        x.clone().scatter_add_(1, ember.tensor([[5]]), ember.ones(1, 1))
    with pytest.raises(RuntimeError, match="Expected self.dtype to be equal to src.dtype"):
        x.clone().scatter_(1, ember.tensor([[1]]), ember.ones(1, 1, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="to be no larger size than src"):
        x.clone().scatter_(1, ember.tensor([[1, 2]]), ember.ones(1, 1))
    with pytest.raises(RuntimeError, match="sum, prod, mean, amax or amin"):
        x.clone().scatter_reduce_(1, ember.tensor([[1]]), ember.ones(1, 1), "foo")
    with pytest.raises(RuntimeError, match="add or multiply"):
        x.clone().scatter_(1, ember.tensor([[1]]), 1.0, reduce="foo")
    with pytest.raises(IndexError):
        x.clone().scatter_(3, ember.tensor([[1]]), 1.0)
    y = x.clone()
    with pytest.raises(RuntimeError):
        y.scatter_add_(1, ember.tensor([[0, 7]]), ember.ones(1, 2))
    assert y.tolist() == x.tolist()  # validated before the row was written


@pytest.mark.parametrize("name", ["int64", "float32", "float64", "float16"])
@pytest.mark.parametrize("dim", [0, 1])
def test_index_add_copy_fill(name, dim):
    e, t = make_pair((4, 5), name)
    n = 6
    src_shape = (n, 5) if dim == 0 else (4, n)
    es, ts = make_pair(src_shape, name, seed=7)
    ei, ti = index_pair((n,), 4 if dim == 0 else 5)  # duplicates accumulate
    assert_same(ember.index_add(e, dim, ei, es), torch.index_add(t, dim, ti, ts))
    assert_same(e.index_add(dim, ei, es, alpha=2), t.index_add(dim, ti, ts, alpha=2))
    perm = np.random.default_rng(3).permutation(4 if dim == 0 else 5)[:3]
    ep, tp = ember.from_numpy(perm.copy()), torch.from_numpy(perm.copy())
    es3, ts3 = es.narrow(dim, 0, 3), ts.narrow(dim, 0, 3)
    assert_same(ember.index_copy(e, dim, ep, es3), torch.index_copy(t, dim, tp, ts3))
    assert_same(e.index_fill(dim, ep, 3), t.index_fill(dim, tp, 3))
    assert_same(e.index_fill(dim, -ep - 1, ember.tensor(2)), t.index_fill(dim, -tp - 1, torch.tensor(2)))
    e2, t2 = e.clone(), t.clone()
    e2.index_add_(dim, ei, es)
    t2.index_add_(dim, ti, ts)
    assert_same(e2, t2)


def test_index_ops_errors():
    x = ember.arange(6.0).view(2, 3)
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 1 with size 3"):
        x.clone().index_add_(1, ember.tensor([5]), ember.ones(2, 1))
    with pytest.raises(RuntimeError, match=r"Number of indices \(1\) should be equal to source.size"):
        x.clone().index_add_(1, ember.tensor([1]), ember.ones(2, 2))
    with pytest.raises(RuntimeError, match="int32/int64 for index but got: Float"):
        x.clone().index_add_(1, ember.tensor([1.0]), ember.ones(2, 1))
    with pytest.raises(RuntimeError, match="must have the same scalar type"):
        x.clone().index_add_(1, ember.tensor([1]), ember.ones(2, 1, dtype=ember.float64))
    with pytest.raises(IndexError, match="index_copy_\\(\\): index 5 is out of bounds"):
        x.clone().index_copy_(1, ember.tensor([5]), ember.ones(2, 1))
    with pytest.raises(RuntimeError, match="Expected a long tensor for index, but got Int"):
        x.clone().index_copy_(1, ember.tensor([1], dtype=ember.int32), ember.ones(2, 1))
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 1 with size 3"):
        x.clone().index_fill_(1, ember.tensor([5]), 2.0)
    with pytest.raises(IndexError, match="index -4 is out of bounds for dimension 1 with size 3"):
        x.clone().index_fill_(1, ember.tensor([-4]), 2.0)
    with pytest.raises(IndexError, match="Index is supposed to be a vector"):
        x.clone().index_add_(1, ember.tensor([[1]]), ember.ones(2, 1))


@pytest.mark.parametrize("name", ["bool", "int32", "float32", "bfloat16"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_masked_scatter(name, layout):
    e, t = make_pair((4, 5), name, layout=layout)
    es, ts = make_pair((25,), name, seed=9)
    em, tm = make_pair((4, 5), "bool", seed=11)
    assert_same(e.masked_scatter(em, es), t.masked_scatter(tm, ts))
    assert_same(ember.masked_scatter(e, em[0], es), torch.masked_scatter(t, tm[0], ts))  # broadcast mask
    e2, t2 = e.clone(), t.clone()
    e2.masked_scatter_(em, es.view(5, 5))
    t2.masked_scatter_(tm, ts.view(5, 5))
    assert_same(e2, t2)


def test_masked_scatter_errors():
    x = ember.arange(6.0).view(2, 3)
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones in mask"):
        x.clone().masked_scatter_(x > 2, ember.ones(1))
    with pytest.raises(RuntimeError, match="same dtypes"):
        x.clone().masked_scatter_(x > 2, ember.ones(10, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        x.clone().masked_scatter_(ember.tensor([1, 0, 1]), ember.ones(10))


def test_from_torch_roundtrip_helper():
    # The oracle helpers themselves: a guard against a silently broken comparison.
    t = torch.tensor([[1.0, 2.0]])
    with pytest.raises(AssertionError):
        assert_same(from_torch(t) + 1, t)


ZERO_DIM_CALLS = [
    lambda L: L.zeros(10).scatter_(0, L.tensor(3), value=1),  # the data tutorial's one-hot target_transform
    lambda L: L.zeros(10).scatter(0, L.tensor(3), 1.0),
    lambda L: L.zeros(10).scatter(0, L.tensor(3), L.tensor(5.0)),
    lambda L: L.zeros(10).scatter(0, L.tensor([3]), L.tensor(5.0)),
    lambda L: L.zeros(10).scatter(0, L.tensor(3), L.tensor([5.0, 6.0])),
    lambda L: L.zeros(10).scatter_add(0, L.tensor(3), L.tensor(5.0)),
    lambda L: L.zeros(10).scatter_reduce(0, L.tensor(3), L.tensor(5.0), "sum"),
    lambda L: L.gather(L.arange(5.0), 0, L.tensor(2)),
    lambda L: L.zeros(2, 3).scatter(0, L.tensor(1), 1.0),
    lambda L: L.zeros(10).index_add(0, L.tensor(3), L.tensor(2.0)),
    lambda L: L.zeros(10).index_add(0, L.tensor(3), L.tensor([2.0])),
    lambda L: L.tensor(1.0).index_add(0, L.tensor([0]), L.tensor([2.0])),
    lambda L: L.zeros(10).index_copy(0, L.tensor(3), L.tensor(2.0)),
    lambda L: L.arange(5.0).index_select(0, L.tensor(2)),
    lambda L: L.arange(6.0).view(2, 3).index_select(1, L.tensor(2)),
    lambda L: L.tensor(5.0).index_select(0, L.tensor(0)),
]


@pytest.mark.parametrize("call", ZERO_DIM_CALLS)
def test_zero_dim_index_and_src_read_as_one_element_as_torch(call):
    def outcome(L):
        try:
            r = call(L)
        except RuntimeError:
            return "RuntimeError"
        return tuple(r.shape), r.tolist()

    assert outcome(ember) == outcome(torch)


def test_scatter_reduce_max_min_aliases_forward_only():
    # PyTorch's forward kernel reads "max"/"min" as amax/amin; its backward refuses them.
    idx = np.array([[0, 0], [1, 1], [0, 0], [2, 2]])
    src = (np.arange(8.0).reshape(4, 2) - 3).astype(np.float32)
    for alias, name in (("max", "amax"), ("min", "amin")):
        for include_self in (True, False):
            outs = [lib.zeros(3, 2).scatter_reduce(0, lib.tensor(idx), lib.tensor(src), alias,
                                                   include_self=include_self) for lib in (ember, torch)]
            np.testing.assert_array_equal(outs[0].numpy(), outs[1].numpy())
            np.testing.assert_array_equal(outs[0].numpy(), ember.zeros(3, 2).scatter_reduce(
                0, ember.tensor(idx), ember.tensor(src), name, include_self=include_self).numpy())
    for lib in (ember, torch):
        x = lib.zeros(3, 2, requires_grad=True)
        out = x.scatter_reduce(0, lib.tensor(idx), lib.tensor(src), "max")
        with pytest.raises(RuntimeError, match="Expected 'reduce' to be one of 'sum', 'prod', 'mean', 'amax', "
                                               "'amin' but got max."):
            out.sum().backward()
