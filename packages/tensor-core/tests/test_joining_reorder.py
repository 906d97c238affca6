"""cat/stack family and the reordering ops, against PyTorch."""

import pytest

import ember

from conftest import assert_same, make_pair, torch

NAMES = ["bool", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
LAYOUTS = ["contiguous", "transposed", "sliced", "expanded"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_and_stack(name, layout, dim):
    a, ta = make_pair((3, 4), name, layout=layout)
    b, tb = make_pair((3, 4), name, seed=1)
    assert_same(ember.cat([a, b], dim), torch.cat([ta, tb], dim))
    assert_same(ember.stack([a, b], dim), torch.stack([ta, tb], dim))


def test_cat_promotes_and_skips_legacy_empty():
    a, ta = make_pair((2, 3), "int32")
    b, tb = make_pair((2, 2), "float32")
    assert_same(ember.cat([a, b], 1), torch.cat([ta, tb], 1))
    assert_same(ember.cat([ember.ones(0), a]), torch.cat([torch.ones(0), ta]))
    assert ember.cat([ember.zeros(0, 3), ember.ones(2, 3)]).shape == (2, 3)


def test_cat_errors_match_torch():
    a = ember.ones(2, 3)
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        ember.cat([a, ember.ones(3, 3)], 1)
    with pytest.raises(ValueError, match="non-empty"):  # PyTorch's type for cat, RuntimeError for stack
        ember.cat([])
    with pytest.raises(RuntimeError, match="non-empty"):
        ember.stack([])
    with pytest.raises(RuntimeError, match="zero-dimensional"):
        ember.cat([ember.tensor(1.0)])
    with pytest.raises(IndexError):
        ember.cat([a, a], 2)
    with pytest.raises(TypeError):
        ember.cat(a)
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        ember.stack([a, ember.ones(3, 2)])


@pytest.mark.parametrize("fn", ["hstack", "vstack", "dstack", "column_stack"])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
def test_hvd_stack(fn, shape):
    a, ta = make_pair(shape, "float32")
    b, tb = make_pair(shape, "float32", seed=2)
    assert_same(getattr(ember, fn)([a, b]), getattr(torch, fn)([ta, tb]))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dims", [(0,), (1,), (0, 2), (-1,)])
def test_flip(layout, dims):
    a, ta = make_pair((2, 3, 4), "float32", layout=layout)
    assert_same(ember.flip(a, dims), torch.flip(ta, dims))


@pytest.mark.parametrize("shifts,dims", [(1, 0), (-2, 1), ((1, 3), (0, 2)), (5, None), (0, 1)])
def test_roll(shifts, dims):
    a, ta = make_pair((2, 3, 4), "int64")
    assert_same(ember.roll(a, shifts, dims), torch.roll(ta, shifts, dims))


@pytest.mark.parametrize("k", [0, 1, 2, 3, -1, 5])
def test_rot90(k):
    a, ta = make_pair((2, 3, 4), "float64")
    assert_same(ember.rot90(a, k, (1, 2)), torch.rot90(ta, k, (1, 2)))


@pytest.mark.parametrize("sizes", [(2, 1), (1, 3), (2, 2, 2), (0, 1)])
def test_repeat_and_tile(sizes):
    a, ta = make_pair((2, 3), "float32", layout="transposed")
    assert_same(a.repeat(*sizes), ta.repeat(*sizes))
    assert_same(ember.tile(a, sizes), torch.tile(ta, sizes))
    with pytest.raises(RuntimeError):
        a.repeat(2)


@pytest.mark.parametrize("diagonal", [-2, -1, 0, 1, 3])
@pytest.mark.parametrize("name", ["bool", "int64", "float32"])
def test_tril_triu(diagonal, name):
    a, ta = make_pair((2, 3, 4), name)
    assert_same(ember.tril(a, diagonal), torch.tril(ta, diagonal))
    assert_same(ember.triu(a, diagonal), torch.triu(ta, diagonal))
    with pytest.raises(RuntimeError):
        ember.tril(ember.ones(3))


@pytest.mark.parametrize("offset", [-1, 0, 2])
def test_diag_family(offset):
    v, tv = make_pair((4,), "float32")
    m, tm = make_pair((3, 4), "float32")
    assert_same(ember.diag(v, offset), torch.diag(tv, offset))
    assert_same(ember.diag(m, offset), torch.diag(tm, offset))
    assert_same(ember.diag_embed(m, offset), torch.diag_embed(tm, offset))
    assert_same(ember.diag_embed(m, offset, 0, 2), torch.diag_embed(tm, offset, 0, 2))
    assert_same(ember.diagflat(m, offset), torch.diagflat(tm, offset))


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid(indexing):
    a, ta = make_pair((3,), "float32")
    b, tb = make_pair((4,), "float32", seed=3)
    assert_same(ember.meshgrid(a, b, indexing=indexing), torch.meshgrid(ta, tb, indexing=indexing))


def test_kron_cross_block_diag_cartesian():
    a, ta = make_pair((2, 3), "float32")
    b, tb = make_pair((3, 2), "float32", seed=4)
    assert_same(ember.kron(a, b), torch.kron(ta, tb))
    c, tc = make_pair((4, 3), "float64")
    d, td = make_pair((4, 3), "float64", seed=5)
    assert_same(ember.cross(c, d, dim=1), torch.linalg.cross(tc, td, dim=1))
    assert_same(ember.block_diag(a, b), torch.block_diag(ta, tb))
    v, tv = make_pair((3,), "int64")
    w, tw = make_pair((2,), "int64", seed=6)
    assert_same(ember.cartesian_prod(v, w), torch.cartesian_prod(tv, tw))


def test_meta_device_runs_joining_and_flip():
    a = ember.empty(2, 3, device="meta")
    assert ember.cat([a, a], 1).shape == (2, 6)
    assert ember.flip(a, (0,)).device.type == "meta"


@pytest.mark.parametrize("repeats", [0, 1, 3])
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_repeat_interleave_scalar(repeats, dim):
    a, ta = make_pair((2, 3), "float32", layout="transposed")
    assert_same(ember.repeat_interleave(a, repeats, dim), torch.repeat_interleave(ta, repeats, dim))
    assert_same(a.repeat_interleave(repeats, dim=dim), ta.repeat_interleave(repeats, dim=dim))


def test_repeat_interleave_tensor_repeats_and_counts():
    a, ta = make_pair((3, 4), "int64")
    reps = [2, 0, 3]
    assert_same(ember.repeat_interleave(a, ember.tensor(reps), 0), torch.repeat_interleave(ta, torch.tensor(reps), 0))
    assert_same(ember.repeat_interleave(ember.tensor(reps)), torch.repeat_interleave(torch.tensor(reps)))
    with pytest.raises(RuntimeError):
        ember.repeat_interleave(a, ember.tensor([1, 2]), 0)
    with pytest.raises(RuntimeError):
        ember.repeat_interleave(a, -1)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, float("inf")])
@pytest.mark.parametrize("rows", [(4, 5), (30, 7)])
@pytest.mark.parametrize("name", ["float32", "float64"])
def test_cdist(p, rows, name):
    a, ta = make_pair((2, rows[0], 3), name)
    b, tb = make_pair((2, rows[1], 3), name, seed=9)
    tol = {"rtol": 1e-4, "atol": 1e-4} if name == "float32" else {}
    assert_same(ember.cdist(a, b, p), torch.cdist(ta, tb, p), **tol)
    with pytest.raises(RuntimeError):
        ember.cdist(a, ember.ones(2, 4, 5))


def test_cross_without_dim_warns_as_torch():
    # tensors_deeper tutorial: torch.cross(v2, v1) without dim warns (once per process) that the
    # default dim is deprecated; ember gave no warning. Its result is the first size-3 dim's.
    import warnings

    import ember._src.ops.shape.reorder as reorder

    reorder._CROSS_DIM_WARNED[0] = False
    messages = []
    for lib in (torch, ember):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            out = lib.cross(lib.tensor([0.0, 1.0, 0.0]), lib.tensor([1.0, 0.0, 0.0]))
            lib.linalg.cross(lib.tensor([0.0, 1.0, 0.0]), lib.tensor([1.0, 0.0, 0.0]))
        messages.append(([str(w.message).split(" (Triggered")[0] for w in seen], out.tolist()))
    assert len(messages[1][0]) == 1 and messages[1][0][0].startswith("Using torch.cross without specifying the dim")
    assert messages[1][1] == messages[0][1] == [0.0, 0.0, -1.0]
    if messages[0][0]:  # torch's once-per-process warning may have been given already
        assert messages[1][0] == messages[0][0]


@pytest.mark.parametrize("call", [
    lambda L, x: L.tril(x, 2.5), lambda L, x: L.triu(x, 2.5), lambda L, x: x.tril(1.0),
    lambda L, x: x.triu_(1.0), lambda L, x: x.tril_(True), lambda L, x: L.tril(x, diagonal=True),
])
def test_tril_triu_refuse_float_and_bool_diagonals_as_torch(call):
    for L in (ember, torch):
        with pytest.raises(TypeError, match="argument 'diagonal'.* must be int, not"):
            call(L, L.ones(3, 3))


def test_tril_takes_integer_tensors_and_numpy_ints_as_torch():
    import numpy as np

    for diag in (1, np.int64(-1)):
        e = ember.tril(ember.ones(3, 3), diag).tolist()
        assert e == torch.tril(torch.ones(3, 3), diag).tolist()
    e = ember.triu(ember.ones(3, 3), ember.tensor(1)).tolist()
    assert e == torch.triu(torch.ones(3, 3), torch.tensor(1)).tolist()
    e = ember.ones(3, 3)
    t = torch.ones(3, 3)
    assert e.tril_(ember.tensor(0)).tolist() == t.tril_(torch.tensor(0)).tolist()


@pytest.mark.parametrize("call", [
    lambda lib: lib.meshgrid(lib.ones(2), lib.ones(3), indexing="yx"),  # ember raised ValueError
    lambda lib: lib.cartesian_prod(lib.ones(2, 2)),  # ember returned the tensor itself
    lambda lib: lib.cartesian_prod(lib.ones(2), lib.ones(2, 1)),
], ids=["meshgrid indexing", "cartesian_prod 2-d alone", "cartesian_prod 2-d second"])
def test_meshgrid_cartesian_prod_refusals_as_pytorch(call):
    raised = []
    for lib in (torch, ember):
        with pytest.raises(Exception) as info:
            call(lib)
        raised.append((info.type.__name__, str(info.value)))
    assert raised[1] == raised[0]
