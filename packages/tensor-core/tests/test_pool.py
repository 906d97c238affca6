"""Pooling (max/avg/adaptive, 1-d and 2-d) and its backward ops against torch."""

from __future__ import annotations

import pytest

import ember
from ember._src.ops.nn import pool as nn_pool

from conftest import assert_same, from_torch, make_pair

torch = pytest.importorskip("torch")
F = torch.nn.functional

MAX_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), ceil_mode=True),
    dict(kernel_size=3, stride=2, ceil_mode=True),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("kw", MAX_CASES)
def test_max_pool2d(kw, dtype):
    ex, tx = make_pair((2, 3, 7, 8), dtype)
    assert_same(nn_pool.max_pool2d(ex, **kw), F.max_pool2d(tx, **kw))
    eo, ei = nn_pool.max_pool2d(ex, return_indices=True, **kw)
    to, ti = F.max_pool2d(tx, return_indices=True, **kw)
    assert_same((eo, ei), (to, ti))
    assert_same(nn_pool.max_pool2d(ex[0], **kw), F.max_pool2d(tx[0], **kw))  # unbatched


@pytest.mark.parametrize("layout", ["transposed", "sliced"])
def test_pool_noncontiguous(layout):
    ex, tx = make_pair((2, 3, 6, 7), "float32", layout=layout)
    assert_same(nn_pool.max_pool2d(ex, 3, 2, 1), F.max_pool2d(tx, 3, 2, 1))
    assert_same(nn_pool.avg_pool2d(ex, 3, 2, 1), F.avg_pool2d(tx, 3, 2, 1))


def test_max_pool_nan():
    t = torch.tensor([[[[1.0, float("nan"), 3.0], [4.0, 5.0, -float("inf")]]]])
    e = from_torch(t)
    assert_same(nn_pool.max_pool2d(e, 2, 1, return_indices=True), F.max_pool2d(t, 2, 1, return_indices=True))
    assert_same(nn_pool.max_pool2d(e, 2, 1), F.max_pool2d(t, 2, 1))


@pytest.mark.parametrize("kw", MAX_CASES)
def test_max_pool2d_backward(kw):
    ex, tx = make_pair((2, 3, 7, 8), "float64")
    to, ti = F.max_pool2d(tx, return_indices=True, **kw)
    eg, tg = make_pair(tuple(to.shape), "float64", seed=4)
    full = {"stride": kw.get("kernel_size"), "padding": 0, "dilation": 1, "ceil_mode": False} | kw
    args = [full[k] for k in ("kernel_size", "stride", "padding", "dilation", "ceil_mode")]
    args = [a if isinstance(a, (tuple, bool)) else (a, a) for a in args]
    expected = torch.ops.aten.max_pool2d_with_indices_backward(tg, tx, *args, ti)
    got = nn_pool.max_pool2d_with_indices_backward_op(eg, ex, *args, from_torch(ti))
    assert_same(got, expected)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("kw", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False, ceil_mode=True),
    dict(kernel_size=(3, 2), stride=1, padding=(1, 1), divisor_override=5),
])
def test_avg_pool2d_and_backward(kw, dtype):
    ex, tx = make_pair((2, 3, 7, 8), dtype)
    assert_same(nn_pool.avg_pool2d(ex, **kw), F.avg_pool2d(tx, **kw))
    if dtype != "float64":
        return
    to = F.avg_pool2d(tx, **kw)
    eg, tg = make_pair(tuple(to.shape), dtype, seed=4)
    k = kw["kernel_size"]
    full = {"stride": k, "padding": 0, "ceil_mode": False, "count_include_pad": True, "divisor_override": None} | kw
    pair = lambda v: v if isinstance(v, tuple) else (v, v)  # noqa: E731
    args = [pair(k), pair(full["stride"]), pair(full["padding"]), full["ceil_mode"], full["count_include_pad"],
            full["divisor_override"]]
    expected = torch.ops.aten.avg_pool2d_backward(tg, tx, *args)
    assert_same(nn_pool.avg_pool2d_backward_op(eg, ex, *args), expected)


@pytest.mark.parametrize("kw", [dict(kernel_size=3), dict(kernel_size=2, stride=1, padding=1, ceil_mode=True)])
def test_pool1d(kw):
    ex, tx = make_pair((2, 3, 9), "float32")
    assert_same(ember.max_pool1d(ex, **kw), F.max_pool1d(tx, **kw))
    assert_same(nn_pool.max_pool1d(ex, return_indices=True, **kw), F.max_pool1d(tx, return_indices=True, **kw))
    assert_same(ember.avg_pool1d(ex, **kw), F.avg_pool1d(tx, **kw))
    assert_same(ember.max_pool1d(ex[0], **kw), F.max_pool1d(tx[0], **kw))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("size", [(3, 4), 1, (5, None), (9, 11)])
def test_adaptive_pool2d(size, dtype):
    ex, tx = make_pair((2, 3, 7, 9), dtype)
    assert_same(nn_pool.adaptive_avg_pool2d(ex, size), F.adaptive_avg_pool2d(tx, size))
    assert_same(nn_pool.adaptive_max_pool2d(ex, size, return_indices=True),
                F.adaptive_max_pool2d(tx, size, return_indices=True))


def test_adaptive_backward_and_1d():
    ex, tx = make_pair((2, 3, 7, 9), "float64")
    eg, tg = make_pair((2, 3, 3, 4), "float64", seed=5)
    assert_same(nn_pool._adaptive_avg_pool2d_backward_op(eg, ex), torch.ops.aten._adaptive_avg_pool2d_backward(tg, tx))
    _, ti = F.adaptive_max_pool2d(tx, (3, 4), return_indices=True)
    assert_same(nn_pool.adaptive_max_pool2d_backward_op(eg, ex, from_torch(ti)),
                torch.ops.aten.adaptive_max_pool2d_backward(tg, tx, ti))
    ex, tx = make_pair((2, 3, 10), "float32")
    assert_same(ember.adaptive_avg_pool1d(ex, 4), F.adaptive_avg_pool1d(tx, 4))
    assert_same(nn_pool.adaptive_max_pool1d(ex, 4, return_indices=True),
                F.adaptive_max_pool1d(tx, 4, return_indices=True))


ERRORS = [
    lambda m, x: m.max_pool2d(x, 3, padding=2),
    lambda m, x: m.max_pool2d(x[..., :2, :2], 3),
    lambda m, x: m.max_pool2d(x[0, 0], 3),
    lambda m, x: m.max_pool2d(x, 2, stride=0),
    lambda m, x: m.max_pool2d(x, 2, dilation=0),
    lambda m, x: m.avg_pool2d(x, 3, padding=2),
    lambda m, x: m.avg_pool2d(x, 3, divisor_override=0),
    lambda m, x: m.adaptive_avg_pool2d(x[0, 0], 2),
    lambda m, x: m.adaptive_max_pool2d(x[:, :, :0], 2),
    lambda m, x: m.adaptive_max_pool2d(x[:, :0], 2),  # a 4D input's channels may not be empty for max
    lambda m, x: m.adaptive_max_pool1d(x[0, :, :0], 2),
    lambda m, x: m.adaptive_avg_pool2d(x, (1, 2, 3)),
    lambda m, x: m.adaptive_avg_pool2d(x, (2,)),
    lambda m, x: m.adaptive_avg_pool1d(x[0], (1, 2)),
    lambda m, x: m.max_pool1d(x, 2),
]


def test_adaptive_pools_of_empty_channels_or_batch():
    for shape in [(2, 0, 8, 8), (0, 3, 8, 8), (0, 8, 8)]:
        tx = torch.randn(shape)
        assert_same(nn_pool.adaptive_avg_pool2d(from_torch(tx), 3), F.adaptive_avg_pool2d(tx, 3))
        assert_same(ember.adaptive_avg_pool1d(from_torch(tx[..., 0]), 3), F.adaptive_avg_pool1d(tx[..., 0], 3))
        if shape[1] != 0:
            assert_same(nn_pool.adaptive_max_pool2d(from_torch(tx), 3), F.adaptive_max_pool2d(tx, 3))


@pytest.mark.parametrize("fn", ERRORS)
def test_pool_errors(fn):
    tx = torch.randn(2, 3, 8, 8)
    with pytest.raises(RuntimeError) as expected:
        fn(F, tx)
    with pytest.raises(RuntimeError) as got:
        fn(nn_pool, from_torch(tx))
    assert str(got.value) == str(expected.value)



@pytest.mark.parametrize("dtype", ["int64", "uint8", "int32"])
def test_max_pool2d_integer(dtype):
    ex, tx = make_pair((2, 3, 7, 8), dtype)
    assert_same(nn_pool.max_pool2d(ex, 3, 2, 1), F.max_pool2d(tx, 3, 2, 1))
    assert_same(nn_pool.max_pool2d(ex, 2, return_indices=True), F.max_pool2d(tx, 2, return_indices=True))
    with pytest.raises(NotImplementedError):
        nn_pool.adaptive_avg_pool2d(ex, 2)
