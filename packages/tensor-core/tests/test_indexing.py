"""Indexing (__getitem__/__setitem__, index_put, masks, nonzero, index_select, take) vs torch."""

import warnings

import numpy as np
import pytest

import ember

from conftest import assert_same, from_torch, make_pair, torch

# Index expressions: L is the library (ember or torch), so tensor indices exist on both sides.
# Each case: (shape, expression, whether the index has no duplicate positions for setitem).
CASES = [
    ((6,), lambda L: 2, True),
    ((6,), lambda L: -1, True),
    ((6,), lambda L: slice(1, 5, 2), True),
    ((6,), lambda L: slice(-4, None), True),
    ((6,), lambda L: slice(None, -10), True),
    ((6,), lambda L: slice(10, 20), True),
    ((6,), lambda L: slice(4, 1), True),
    ((6,), lambda L: (None, slice(None, None, 3)), True),
    ((6,), lambda L: ..., True),
    ((6,), lambda L: L.tensor([0, 5, -1, 2]), False),
    ((6,), lambda L: L.tensor([[1, 2], [3, 4]]), True),
    ((6,), lambda L: L.tensor([1, 3], dtype=L.int32), True),
    ((6,), lambda L: L.tensor([True, False, True, True, False, False]), True),
    ((6,), lambda L: [4, 0, 1], True),
    ((6,), lambda L: [], True),
    ((6,), lambda L: L.tensor(3), True),
    ((6,), lambda L: True, True),
    ((6,), lambda L: False, True),
    ((6,), lambda L: (None, L.tensor([0, 1]), None), True),
    ((4, 5), lambda L: (1, 2), True),
    ((4, 5), lambda L: (slice(None), 0), True),
    ((4, 5), lambda L: (slice(1, 3), slice(None, None, 2)), True),
    ((4, 5), lambda L: (Ellipsis, -1), True),
    ((4, 5), lambda L: (None, 1, None, slice(2, 4)), True),
    ((4, 5), lambda L: (L.tensor([0, 3]), L.tensor([4, 1])), True),
    ((4, 5), lambda L: (L.tensor([[0], [3]]), L.tensor([4, 1, 2])), True),
    ((4, 5), lambda L: (slice(None), L.tensor([4, -5])), True),
    ((4, 5), lambda L: (L.tensor([2, 1]), slice(1, None, 2)), True),
    ((4, 5), lambda L: L.tensor([[True, False, True, False, True]] * 4), True),
    ((4, 5), lambda L: (L.tensor([True, False, True, True]), 2), True),
    ((4, 5), lambda L: (L.tensor(1), L.tensor([0, 2])), True),
    ((4, 5), lambda L: ([0, 1], [1, 2]), True),
    ((4, 5), lambda L: (True, 1), True),
    ((4, 5), lambda L: [True, False, True, False], True),
    ((4, 5), lambda L: ((0, 3), slice(None, None, 2)), True),
    ((4, 5), lambda L: (L.tensor(False), 1), True),
    ((4, 5), lambda L: (slice(None), L.tensor(True)), True),
    ((4, 5), lambda L: (L.tensor(2, dtype=L.int32), L.tensor([[1, 0]])), True),
    ((4, 5), lambda L: (Ellipsis, [[0, 1], [4, 3]]), True),
    ((3, 4, 5), lambda L: (L.tensor([0, 2]), slice(None), L.tensor([1, 3])), True),
    ((3, 4, 5), lambda L: (L.tensor([0, 2]), 1, L.tensor([1, 3])), True),
    ((3, 4, 5), lambda L: (slice(None), L.tensor([0, 2]), L.tensor([1, 3])), True),
    ((3, 4, 5), lambda L: (L.tensor([0, 2]), None, L.tensor([1, 3])), True),
    ((3, 4, 5), lambda L: (Ellipsis, L.tensor([1, 3]), slice(None, 2)), True),
    ((3, 4, 5), lambda L: (L.tensor([[True, False, True, False]] * 3), slice(1, 3)), True),
    ((3, 4, 5), lambda L: (slice(None), L.tensor([[True, False, True, True, False]] * 4)), True),
    ((3, 4, 5), lambda L: (L.tensor([1, 0]), Ellipsis, L.tensor([[0], [4]])), True),
    ((2, 3, 4, 5), lambda L: (1, slice(None), L.tensor([0, 3]), slice(1, 4, 2)), True),
    ((2, 3, 4, 5), lambda L: (L.tensor([1, 0]), slice(None), slice(None), L.tensor([0, 4])), True),
    ((2, 3, 4, 5), lambda L: (slice(None), L.tensor([[0, 1]]), L.tensor([[3], [2]]), -1), True),
    ((2, 3, 4, 5), lambda L: (None, Ellipsis, None, 2, slice(None, None, 4)), True),
    ((2, 3, 4, 5), lambda L: (Ellipsis, 0, Ellipsis), True),
    ((2, 3, 4, 5), lambda L: (L.tensor([0, 1, 1]), L.tensor([2, 0, 1]), L.tensor([3, 3, 0]),
                              L.tensor([4, 0, 1])), True),
]
IDS = [f"case{i}" for i in range(len(CASES))]


def _index(L, expr):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return expr(L)


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "bfloat16"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "expanded"])
def test_getitem(case, dtype, layout):
    shape, expr, _ = case
    if layout == "transposed" and len(shape) < 2:
        layout = "sliced"
    e, t = make_pair(shape, dtype, layout=layout)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(e[_index(ember, expr)], t[_index(torch, expr)])


@pytest.mark.parametrize("case", [c for c in CASES if c[2]], ids=[i for i, c in zip(IDS, CASES) if c[2]])
@pytest.mark.parametrize("dtype", ["float32", "int32", "float16"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("value_kind", ["scalar", "tensor", "other_dtype"])
def test_setitem(case, dtype, layout, value_kind):
    shape, expr, _ = case
    if layout == "transposed" and len(shape) < 2:
        layout = "sliced"
    e, t = make_pair(shape, dtype, layout=layout)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        target_shape = t[_index(torch, expr)].shape
        if value_kind == "scalar":
            ev = tv = 7
        else:
            vname = "float64" if value_kind == "other_dtype" else dtype
            ev, tv = make_pair(tuple(target_shape), vname, seed=3)
        before = e._version
        try:
            t[_index(torch, expr)] = tv
        except RuntimeError:  # advanced indexing does not convert a tensor value's dtype
            with pytest.raises(RuntimeError, match="dtypes match"):
                e[_index(ember, expr)] = ev
            return
        e[_index(ember, expr)] = ev
    if target_shape.numel() and not (type(expr(torch)) is bool and not expr(torch)):
        assert e._version > before
    assert_same(e, t)


def test_basic_indexing_returns_views():
    x = ember.arange(24).reshape(2, 3, 4)
    for v in (x[0], x[1:2], x[:, 0], x[..., 1], x[None], x[...], x[ember.tensor(1)]):
        assert v._storage is x._storage
    v = x[:, 1]
    v.fill_(-1)
    assert x[1, 1, 3].item() == -1
    assert x[ember.tensor([0])]._storage is not x._storage


def test_setitem_value_broadcast_and_prefix_ones():
    e, t = make_pair((3, 4), "float32")
    e[0], t[0] = ember.ones(1, 1, 4), torch.ones(1, 1, 4)
    e[[1, 2]], t[[1, 2]] = ember.full((1, 4), 5.0), torch.full((1, 4), 5.0)
    e[:, 1:3], t[:, 1:3] = ember.tensor([2.0, 3.0]), torch.tensor([2.0, 3.0])
    e[e > 4], t[t > 4] = 0.5, 0.5
    assert_same(e, t)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "int8", "bool"])
def test_index_put_accumulate_duplicates(dtype):
    e, t = make_pair((5, 3), dtype)
    ev, tv = make_pair((6, 3), dtype, seed=1)
    ei, ti = ember.tensor([0, 2, 0, 4, 2, 0]), torch.tensor([0, 2, 0, 4, 2, 0])
    assert_same(e.index_put((ei,), ev, accumulate=True), t.index_put((ti,), tv, accumulate=True))
    e.index_put_((ei, ember.tensor([1])), ember.ones(6, dtype=e.dtype), accumulate=True)
    t.index_put_((ti, torch.tensor([1])), torch.ones(6, dtype=t.dtype), accumulate=True)
    assert_same(e, t)


def test_index_put_mask_and_scalar_value():
    e, t = make_pair((3, 4), "float32")
    em, tm = e > 0, t > 0
    assert_same(e.index_put((em,), ember.tensor(9.0)), t.index_put((tm,), torch.tensor(9.0)))
    assert_same(ember.index_put(e, [ember.tensor([1, 2])], ember.tensor([1.0, 2.0, 3.0, 4.0])),
                torch.index_put(t, [torch.tensor([1, 2])], torch.tensor([1.0, 2.0, 3.0, 4.0])))


def test_large_accumulate_is_exact():
    idx = ember.zeros(100000, dtype=ember.int64)
    out = ember.zeros(3, dtype=ember.int64).index_put_((idx,), ember.ones(100000, dtype=ember.int64),
                                                       accumulate=True)
    assert out.tolist() == [100000, 0, 0]


@pytest.mark.parametrize("dtype", ["float32", "int16", "bool", "bfloat16"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "expanded"])
def test_masked_ops(dtype, layout):
    e, t = make_pair((3, 4), dtype, layout=layout)
    em, tm = make_pair((4,), "bool", seed=2)
    assert_same(e.masked_fill(em, 1), t.masked_fill(tm, 1))
    assert_same(ember.masked_fill(e, em, ember.tensor(0.0)), torch.masked_fill(t, tm, torch.tensor(0.0)))
    assert_same(e.masked_select(em), t.masked_select(tm))
    assert_same(ember.masked_select(e[0], em.reshape(1, 4).expand(2, 4)),
                torch.masked_select(t[0], tm.reshape(1, 4).expand(2, 4)))
    if layout != "expanded":
        e.masked_fill_(em, 2)
        t.masked_fill_(tm, 2)
        assert_same(e, t)


@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("dtype", ["float32", "int8", "bool", "float16"])
def test_nonzero_argwhere(shape, dtype):
    e, t = make_pair(shape, dtype, low=-1, high=2) if shape else make_pair((1,), dtype, low=-1, high=2)
    if not shape:
        e, t = e[0], t[0]
    assert_same(e.nonzero(), t.nonzero())
    assert_same(ember.nonzero(e, as_tuple=True), torch.nonzero(t, as_tuple=True))
    assert_same(ember.argwhere(e), torch.argwhere(t))
    if len(shape) == 2:
        assert_same(e.t().nonzero(), t.t().nonzero())


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
def test_index_select_take(dim, dtype):
    e, t = make_pair((3, 4), dtype, layout="transposed")
    for idx in ([2, 0, 2], []):
        ei, ti = ember.tensor(idx, dtype=ember.int64), torch.tensor(idx, dtype=torch.int64)
        assert_same(ember.index_select(e, dim, ei), torch.index_select(t, dim, ti))
        assert_same(e.take(ei), t.take(ti))
    assert_same(e.take(ember.tensor([[11, -12], [0, -1]])), t.take(torch.tensor([[11, -12], [0, -1]])))
    s, ts = ember.tensor(5.0, dtype=e.dtype), torch.tensor(5.0, dtype=t.dtype)
    assert_same(s.index_select(0, ember.tensor([0])), ts.index_select(0, torch.tensor([0])))
    assert_same(s.take(ember.tensor([[0]])), ts.take(torch.tensor([[0]])))
    assert_same(e.index_select(dim, ember.tensor([1], dtype=ember.int32)),
                t.index_select(dim, torch.tensor([1], dtype=torch.int32)))


def test_meta_shapes():
    x = ember.zeros((3, 4, 5), device="meta")
    assert x[ember.tensor([0, 1]), :, ember.tensor([2, 3])].shape == (2, 4)
    assert x[:, ember.tensor([[0, 1]])].device.type == "meta"
    assert x.index_select(1, ember.tensor([0, 1, 1])).shape == (3, 3, 5)
    assert x.take(ember.tensor([[1, 2]])).shape == (1, 2)
    assert x.masked_fill(ember.tensor([True, False, True, False, True]), 1.0).shape == (3, 4, 5)
    x[ember.tensor([0, 2])] = 1.0
    x[:, ember.tensor([1])] = ember.zeros((3, 1, 5), device="meta")
    with pytest.raises(NotImplementedError):
        x.nonzero()
    with pytest.raises(NotImplementedError):
        x[ember.ones((3,), dtype=ember.bool, device="meta")]


ERRORS = [
    ((3,), lambda L: L.tensor([5]), IndexError, "index 5 is out of bounds for dimension 0 with size 3"),
    ((3,), lambda L: L.tensor([-4]), IndexError, "index -4 is out of bounds"),
    ((2, 3), lambda L: (0, 5), IndexError, "index 5 is out of bounds for dimension 1 with size 3"),
    ((2, 3), lambda L: (0, L.tensor([3])), IndexError, "out of bounds"),
    ((2, 3), lambda L: 2, IndexError, "index 2 is out of bounds for dimension 0 with size 2"),
    ((4,), lambda L: L.tensor([True, False, True]), IndexError, "The shape of the mask [3] at index 0"),
    ((2, 3), lambda L: (slice(None), L.tensor([True, False])), IndexError, "indexed tensor [2, 3] at index 1"),
    ((3,), lambda L: L.tensor([0.0]), IndexError, "tensors used as indices must be long, int, byte or bool"),
    ((3,), lambda L: L.tensor([0], dtype=L.int16), IndexError, "tensors used as indices must be"),
    ((3,), lambda L: slice(None, None, -1), ValueError, "step must be greater than zero"),
    ((3,), lambda L: slice(None, None, 0), ValueError, "slice step cannot be zero"),
    ((3,), lambda L: (0, 0), IndexError, "too many indices for tensor of dimension 1"),
    ((3,), lambda L: (Ellipsis, 0, Ellipsis, 0), IndexError, "too many indices for tensor of dimension 1"),
    ((2, 3), lambda L: (L.tensor([0, 1]), L.tensor([0, 1, 2])), IndexError, "shape mismatch"),
    ((3,), lambda L: 1.5, IndexError, "only integers, slices"),
    ((0,), lambda L: L.tensor([0]), IndexError, "out of bounds"),
]


@pytest.mark.parametrize("case", ERRORS, ids=[f"err{i}" for i in range(len(ERRORS))])
def test_index_errors(case):
    shape, expr, exc, msg = case
    e, t = make_pair(shape, "float32")
    with pytest.raises(exc):
        t[expr(torch)]
    with pytest.raises(exc) as info:
        e[expr(ember)]
    assert msg in str(info.value)
    before = e.clone()
    with pytest.raises(exc):
        e[expr(ember)] = 1.0
    assert_same(e, torch.from_numpy(before.numpy()))  # nothing written before validation


def test_setitem_and_put_errors():
    e = ember.zeros(2, 3)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        e[ember.tensor([0, 1])] = ember.ones(3, 3)
    with pytest.raises(RuntimeError):
        e[0] = ember.ones(2, 3)
    with pytest.raises(RuntimeError, match="dtypes match"):
        e.index_put_((ember.tensor([0]),), ember.tensor([1]))
    with pytest.raises(TypeError):
        e.index_put_((ember.tensor([0]),), 1.0)
    with pytest.raises(RuntimeError, match="boolean masks"):
        e.masked_fill(ember.tensor([1, 0, 1]), 1.0)
    with pytest.raises(RuntimeError, match="0-dimensional"):
        e.masked_fill(ember.tensor([True, False, True]), ember.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="BoolTensor"):
        e.masked_select(ember.tensor([1, 0, 1]))
    with pytest.raises(IndexError, match="index out of range in self"):
        e.index_select(1, ember.tensor([3]))
    with pytest.raises(IndexError, match="index out of range in self"):
        e.index_select(0, ember.tensor([-1]))
    with pytest.raises(IndexError, match="Index is supposed to be a vector"):
        e.index_select(1, ember.tensor([[0]]))
    with pytest.raises(IndexError, match="out of range: tried to access index 6 on a tensor of 6 elements"):
        e.take(ember.tensor([6]))
    assert e.tolist() == [[0.0] * 3] * 2
    wide = ember.zeros(1, 3).expand(2, 3)
    with pytest.warns(UserWarning, match="index_put_ on expanded tensors is deprecated"):
        wide[ember.tensor([0])] = ember.tensor([1.0, 2.0, 3.0])
    with pytest.warns(UserWarning, match="masked_fill_ on expanded tensors is deprecated"):
        wide.masked_fill_(ember.tensor([True, False, False]), 5.0)
    assert wide.tolist() == [[5.0, 2.0, 3.0]] * 2


def test_uint8_mask_warns_and_selects():
    e, t = make_pair((4,), "float32")
    with pytest.warns(UserWarning):
        got = e[ember.tensor([1, 0, 1, 1], dtype=ember.uint8)]
    assert_same(got, t[torch.tensor([1, 0, 1, 1], dtype=torch.bool)])


def test_numpy_indices():
    t = torch.arange(12).reshape(3, 4)
    e = from_torch(t)
    assert_same(e[np.int64(2), np.int32(1)], t[2, 1])
    idx = np.array([2, 0])
    assert_same(e[idx], t[idx])
    assert_same(e[:, np.array([True, False, True, True])], t[:, np.array([True, False, True, True])])


def test_accumulate_scalar_value_and_take_dtype():
    e, t = ember.zeros(3), torch.zeros(3)
    ei, ti = ember.tensor([[0, 0], [2, 0]]), torch.tensor([[0, 0], [2, 0]])
    assert_same(e.index_put((ei,), ember.tensor(1.5), accumulate=True),
                t.index_put((ti,), torch.tensor(1.5), accumulate=True))
    with pytest.raises(RuntimeError, match="Expected a long tensor for index, but got Int"):
        e.take(ember.tensor([0], dtype=ember.int32))


def _random_index(rng, shape):
    """A random mix of ints, slices, None, Ellipsis, bools, index tensors and masks (as NumPy data)."""
    items, d, ellipsis = [], 0, False
    while d < len(shape) and rng.random() < 0.85:
        size, r = shape[d], rng.random()
        if not ellipsis and r < 0.08:
            items.append(Ellipsis)
            ellipsis, d = True, len(shape) - int(rng.integers(0, 2))
            continue
        if r < 0.25:
            items.append(int(rng.integers(-size, size)))
        elif r < 0.5:
            start, stop = (None if rng.random() < 0.3 else int(rng.integers(-size - 2, size + 2)) for _ in "ab")
            items.append(slice(start, stop, [None, 1, 2, 3][int(rng.integers(0, 4))]))
        elif r < 0.58:
            items.append(None)
            continue
        elif r < 0.62:
            items.append(bool(rng.integers(0, 2)))
            continue
        elif r < 0.88:
            shp = [(2,), (1,), (2, 1), (3,), ()][int(rng.integers(0, 5))]
            items.append(("index", rng.integers(-size, size, size=shp)))
        else:
            items.append(("mask", rng.integers(0, 2, size=(size,)).astype(bool)))
        d += 1
    return items


def _build(L, items):
    return tuple(L.from_numpy(np.array(i[1])) if isinstance(i, tuple) else i for i in items)


@pytest.mark.parametrize("seed", range(6))
def test_random_index_expressions(seed):
    rng = np.random.default_rng(seed)
    for _ in range(60):
        shape = tuple(int(s) for s in rng.integers(1, 5, size=int(rng.integers(1, 5))))
        arr = np.arange(int(np.prod(shape))).reshape(shape)
        items = _random_index(rng, shape)
        t, e = torch.from_numpy(arr.copy()), ember.tensor(arr)
        try:
            expected = t[_build(torch, items)]
        except (IndexError, RuntimeError, ValueError) as exc:
            with pytest.raises(type(exc)):
                e[_build(ember, items)]
            continue
        assert_same(e[_build(ember, items)], expected)
        value = rng.integers(-100, 0, size=tuple(expected.shape))
        t[_build(torch, items)] = torch.from_numpy(value.copy())
        e[_build(ember, items)] = ember.tensor(value)
        assert_same(e, t)  # duplicate positions: both sides write serially here, the last write wins


@pytest.mark.parametrize("index", [
    lambda L: L.tensor([True, False, True, False]),
    lambda L: (slice(None), L.tensor([True, False, True, True, False])),
    lambda L: (0, L.tensor([True, False, True, True, False])),
    lambda L: L.ones(4, 5, dtype=L.bool),
])
@pytest.mark.parametrize("value", [lambda L: L.tensor(3), lambda L: L.tensor([[2.5]], dtype=L.float64)])
def test_mask_with_one_value_converts_dtype(index, value):
    # PyTorch turns one mask + a one-element value into masked_fill_, which converts the dtype.
    e, t = make_pair((4, 5), "float32")
    e[index(ember)] = value(ember)
    t[index(torch)] = value(torch)
    assert_same(e, t)
    em, tm = ember.tensor([True, False, True, False]), torch.tensor([True, False, True, False])
    assert_same(e.index_put((em,), value(ember)), t.index_put((tm,), value(torch)))
    assert_same(ember.index_put_(e, (ember.ones(4, 5, dtype=ember.bool),), value(ember)),
                torch.index_put_(t, (torch.ones(4, 5, dtype=torch.bool),), value(torch)))
    with pytest.raises(RuntimeError, match="boolean masks"):
        e[ember.tensor([1, 0, 1, 1], dtype=ember.uint8)] = ember.tensor(1.0)


def test_advanced_indexing_of_an_empty_tensor_with_empty_indices():
    # Found by test_fuzz_ops: the gather/put kernels got a size-1 view of the empty storage
    # ("tensor view exceeds its storage") for x[idx], x[idx] = v, take and masked_select.
    results = []
    for lib in (ember, torch):
        x, i = lib.zeros(0), lib.tensor([], dtype=lib.int64)
        y = x.clone()
        y[i] = 1.0
        y.index_put_((i,), lib.tensor(2.0), accumulate=True)
        results.append([x[i], lib.take(x, i), lib.masked_select(x, lib.tensor(True)), y])
    for e, t in zip(*results):
        assert_same(e, t)


def test_index_select_of_a_scalar_with_wrong_index_count_is_a_runtime_error():
    for lib in (ember, torch):
        for idx in ([], [0, 0]):
            with pytest.raises(RuntimeError, match="Index to scalar can have only 1 value"):
                lib.index_select(lib.tensor(1.0), 0, lib.tensor(idx, dtype=lib.int64))
        with pytest.raises(IndexError, match="Dimension out of range"):  # the dim is checked first
            lib.index_select(lib.tensor(1.0), 1, lib.tensor([], dtype=lib.int64))
        with pytest.raises(RuntimeError, match="self indexing axis dim should be positive"):
            lib.index_select(lib.ones(0, 2), 0, lib.tensor([3]))


@pytest.mark.parametrize("index", [
    lambda L: (range(3), L.tensor([0, 1, 2])),  # "What is torch.nn really": -input[range(n), target]
    lambda L: range(2),
    lambda L: (slice(None), range(1, 4, 2)),
    lambda L: range(0),
    lambda L: (range(3), range(3)),
])
def test_range_indexes_as_its_list_of_ints(index):
    def run(L):
        x = L.arange(12.0).view(3, 4)
        read = x[index(L)].tolist()
        x[index(L)] = -1.0
        return read, x.tolist()

    assert run(ember) == run(torch)


@pytest.mark.parametrize("value", [[1, 2, 3], (1, 2, 3), np.array([1.0, 2.0, 3.0]), "x", None],
                         ids=["list", "tuple", "ndarray", "str", "none"])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_setitem_refuses_what_torch_refuses(value, dtype):
    # PyTorch assigns tensors and numbers only (NumPy scalars: docs/deviations.md).
    messages = []
    for lib in (torch, ember):
        x = lib.zeros(2, 3, dtype=getattr(lib, dtype))
        with pytest.raises(TypeError) as info:
            x[0] = value
        messages.append(str(info.value))
        assert x.sum().item() == 0
    assert messages[0] == messages[1]
