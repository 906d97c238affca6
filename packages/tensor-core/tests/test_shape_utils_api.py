"""ravel, hsplit/vsplit/dsplit, split_with_sizes, the unsafe_* splits, sum_to_size,
broadcast_shapes, dim_order, type_as and is_same_size against PyTorch."""

import numpy as np
import pytest

import ember
from ember._src import plugins

from conftest import assert_same, make_pair, torch

LAYOUTS = ["contiguous", "transposed", "sliced", "expanded"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "int16", "bool"])
def test_ravel(layout, dtype):
    e, t = make_pair((3, 4), dtype, layout=layout)
    out = ember.ravel(e)
    assert_same(out, torch.ravel(t))
    assert_same(e.ravel(), t.ravel())
    # A view exactly when the input is contiguous, as PyTorch's contiguous().view(-1).
    assert (out.untyped_storage() is e.untyped_storage()) == e.is_contiguous()


def test_ravel_0d_and_empty():
    assert_same(ember.ravel(ember.tensor(3.0)), torch.ravel(torch.tensor(3.0)))
    assert_same(ember.ravel(ember.zeros(0, 3)), torch.ravel(torch.zeros(0, 3)))


@pytest.mark.parametrize("name, shape, arg", [
    ("hsplit", (6,), 3), ("hsplit", (2, 4), 2), ("hsplit", (2, 4), [1, 3]), ("hsplit", (2, 4), (1, 9)),
    ("vsplit", (4, 2), 4), ("vsplit", (4, 2), [-1]), ("dsplit", (2, 2, 6), 3), ("dsplit", (2, 2, 6), [2, 2]),
    ("hsplit", (2, 0), 1),
])
def test_directional_splits(name, shape, arg):
    e, t = make_pair(shape, "float32", layout="transposed" if len(shape) > 1 else "contiguous")
    assert_same(getattr(ember, name)(e, arg), getattr(torch, name)(t, arg))
    assert_same(getattr(e, name)(arg), getattr(t, name)(arg))


@pytest.mark.parametrize("call, exc", [
    (lambda m: m.hsplit(m.zeros(6), 4), RuntimeError),
    (lambda m: m.hsplit(m.tensor(1.0), 1), RuntimeError),
    (lambda m: m.vsplit(m.zeros(6), 2), RuntimeError),
    (lambda m: m.dsplit(m.zeros(2, 2), 2), RuntimeError),
    (lambda m: m.hsplit(m.zeros(2, 4), 0), RuntimeError),
    (lambda m: m.hsplit(m.zeros(2, 4), m.tensor([1])), TypeError),
    (lambda m: m.split_with_sizes(m.zeros(5), [1, 2]), RuntimeError),
    (lambda m: m.split_with_sizes(m.zeros(5), 5), TypeError),
    (lambda m: m.unsafe_chunk(m.zeros(5), 0), RuntimeError),
    (lambda m: m.unsafe_split(m.zeros(5), 2, 1), IndexError),
])
def test_split_errors(call, exc):
    with pytest.raises(exc):
        call(torch)
    with pytest.raises(exc):
        call(ember)


@pytest.mark.parametrize("name, args", [
    ("split_with_sizes", ([1, 3, 1], 0)), ("split_with_sizes", ((2, 2), 1)), ("unsafe_split", (2, 0)),
    ("unsafe_split", (3, -1)), ("unsafe_split_with_sizes", ([4, 1],)), ("unsafe_chunk", (3, 1)),
    ("unsafe_chunk", (2,)),
])
def test_split_variants(name, args):
    e, t = make_pair((5, 4), "int64", layout="sliced")
    assert_same(getattr(ember, name)(e, *args), getattr(torch, name)(t, *args))
    assert_same(getattr(e, name)(*args), getattr(t, name)(*args))


@pytest.mark.parametrize("size", [(1, 4), (4,), (3, 1), (1, 1), (3, 4), (2, 1, 4), ()])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_sum_to_size(size, layout):
    e, t = make_pair((2, 3, 4) if layout == "contiguous" else (2, 4, 3), "float64", layout=layout)
    if layout == "transposed":
        size = size[:-2] + size[-2:][::-1] if len(size) >= 2 else size
    try:
        expected = t.sum_to_size(size)
    except RuntimeError:
        with pytest.raises(RuntimeError, match="not expandable"):
            e.sum_to_size(size)
        return
    assert_same(e.sum_to_size(size), expected)
    if size:
        assert_same(e.sum_to_size(*size), t.sum_to_size(*size))


def test_sum_to_size_errors_and_identity():
    e = ember.zeros(2, 3)
    assert e.sum_to_size(2, 3) is e
    with pytest.raises(TypeError):
        torch.zeros(2, 3).sum_to_size()
    with pytest.raises(TypeError):
        e.sum_to_size()
    for bad in ((2,), (4, 2, 3), (3, 3)):
        with pytest.raises(RuntimeError):
            torch.zeros(2, 3).sum_to_size(bad)
        with pytest.raises(RuntimeError):
            e.sum_to_size(bad)


@pytest.mark.parametrize("shapes", [
    ((2, 1), (3,)), (2, (3, 1)), ((), (4,)), (), ([1, 4], (5, 1)), ((0,), (1,)), ((2, 0, 3), (1, 1)), (1, 1),
])
def test_broadcast_shapes(shapes):
    out = ember.broadcast_shapes(*shapes)
    assert isinstance(out, ember.Size)
    assert tuple(out) == tuple(torch.broadcast_shapes(*shapes))


@pytest.mark.parametrize("shapes, exc", [
    (((2,), (3,)), RuntimeError), (((-1,), (3,)), ValueError), (((2.0,),), TypeError),
    ((2, (3, 1), (4,)), RuntimeError),
])
def test_broadcast_shapes_errors(shapes, exc):
    with pytest.raises(exc):
        torch.broadcast_shapes(*shapes)
    with pytest.raises(exc):
        ember.broadcast_shapes(*shapes)


@pytest.mark.parametrize("make", [
    lambda m: m.zeros(2, 3, 4), lambda m: m.zeros(2, 3, 4).transpose(0, 2), lambda m: m.zeros(2, 3, 4).permute(1, 2, 0),
    lambda m: m.zeros(2, 1, 4), lambda m: m.zeros(2, 3).expand(4, 2, 3), lambda m: m.zeros(4, 6)[:, ::2],
    lambda m: m.zeros(2, 3, 4, 5).permute(0, 2, 3, 1), lambda m: m.zeros(3, 3).t(), lambda m: m.tensor(1.0),
    lambda m: m.zeros(5), lambda m: m.zeros(2, 2, 2).permute(2, 0, 1), lambda m: m.zeros(3, 1, 2).expand(3, 4, 2),
    lambda m: m.zeros(2, 3, 4, 1).permute(0, 3, 1, 2), lambda m: m.zeros(0, 3).t(),
    lambda m: m.zeros(4, 3).as_strided((3, 3), (2, 2)),
])
def test_dim_order(make):
    e, t = make(ember), make(torch)
    assert e.dim_order() == t.dim_order()
    try:
        expected = t.dim_order(ambiguity_check=True)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            e.dim_order(ambiguity_check=True)
    else:
        assert e.dim_order(ambiguity_check=True) == expected
    with pytest.raises(TypeError):
        e.dim_order(ambiguity_check="yes")


@pytest.mark.parametrize("src, dst", [("float32", "int64"), ("int32", "float16"), ("bool", "float64"),
                                      ("float64", "float64")])
def test_type_as(src, dst):
    e, t = make_pair((2, 3), src, layout="transposed")
    e_other, t_other = make_pair((1,), dst)
    out = e.type_as(e_other)
    assert_same(out, t.type_as(t_other))
    assert (out is e) == (src == dst)


def test_is_same_size():
    a, b = ember.zeros(2, 3), ember.ones(2, 3, dtype=ember.int8)
    assert ember.is_same_size(a, b) and a.is_same_size(b)
    assert not ember.is_same_size(a, a.t())
    assert torch.is_same_size(torch.zeros(2, 3), torch.ones(2, 3)) is True
    with pytest.raises(TypeError):
        ember.is_same_size(a, (2, 3))


@pytest.mark.skipif(plugins.load("autograd") is None, reason="needs ember-autograd")
@pytest.mark.parametrize("fn", [
    lambda m, x: m.ravel(x.t()) * m.arange(12.0, dtype=m.float64),
    lambda m, x: x.sum_to_size(1, 4) * m.arange(4.0, dtype=m.float64),
    lambda m, x: m.hsplit(x, [1])[1] * 3,
    lambda m, x: m.unsafe_chunk(x, 2, 0)[1] ** 2,
    lambda m, x: x.type_as(m.zeros(1, dtype=m.float32)) * 2,
])
def test_gradients(fn):
    data = np.random.default_rng(0).uniform(-1, 1, (3, 4))
    xe = ember.tensor(data.copy(), requires_grad=True)
    xt = torch.tensor(data.copy(), requires_grad=True)
    fn(ember, xe).sum().backward()
    fn(torch, xt).sum().backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-6, atol=1e-6)


# Repeated dims: each function's own PyTorch message (the dim named once, not the tuple).
REPEATED_DIMS = {
    "permute": lambda x: x.permute(1, 1, 0),
    "permute_negative": lambda x: x.permute(0, -3, 1),
    "sum": lambda x: x.sum((0, 0)),
    "mean_negative": lambda x: x.mean((1, -2)),
    "squeeze": lambda x: x.squeeze((0, 0)),
    "movedim_source": lambda x: x.movedim((0, -3), (0, 1)),
    "movedim_destination": lambda x: x.movedim((0, 1), (1, 1)),
    "movedim_lengths": lambda x: x.movedim((0, 1), (1,)),
}


@pytest.mark.parametrize("name", list(REPEATED_DIMS))
def test_repeated_dims_messages_match_torch(name):
    with pytest.raises(RuntimeError) as expected:
        REPEATED_DIMS[name](torch.ones(2, 3, 4))
    with pytest.raises(RuntimeError) as got:
        REPEATED_DIMS[name](ember.ones(2, 3, 4))
    assert str(got.value) == str(expected.value)
